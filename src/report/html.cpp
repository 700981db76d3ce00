#include "report/html.hpp"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <sstream>
#include <vector>

#include "compare/detail.hpp"
#include "io/base64.hpp"

namespace dsa::report {

namespace {

using cmp::CheckResult;
using cmp::Verdict;

std::string esc(const std::string& s) {
  std::string o;
  for (char c : printable(s)) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

// Severity for sorting: ERROR first, then the failing verdicts, WITHIN_BOUND, BITEXACT; informational last.
int severity(const CheckResult& r) {
  if (r.informational) return cmp::verdict_pass(r.verdict) ? 6 : 5;
  switch (r.verdict) {
    case Verdict::ERROR: return 0;
    case Verdict::FAIL: case Verdict::NONFINITE: case Verdict::MASK_MISMATCH: return 1;
    case Verdict::STRUCTURE: case Verdict::SHAPE: case Verdict::DTYPE: return 2;
    case Verdict::WITHIN_BOUND: return 3;
    default: return 4;
  }
}

std::string chip(const CheckResult& r) {
  const std::string v(cmp::verdict_name(r.verdict));
  const char* cls = r.informational ? (cmp::verdict_pass(r.verdict) ? "ok" : "drift") : cmp::verdict_pass(r.verdict) ? "ok" : r.verdict == Verdict::ERROR ? "err" : "bad";
  return std::string("<span class=\"chip ") + cls + "\">" + (r.informational ? "e2e " : "") + v + "</span>";
}

std::string num(double x) { return esc(cmp::detail::fmt(x)); }

// ---- PNG (RGB, 8 bit) for the heatmaps ----
void be32(std::string& s, std::uint32_t v) {
  for (int i = 3; i >= 0; --i) s += static_cast<char>((v >> (8 * i)) & 0xFF);
}
void chunk(std::string& png, const char* type, const std::string& data) {
  be32(png, static_cast<std::uint32_t>(data.size()));
  std::string td = std::string(type, 4) + data;
  png += td;
  be32(png, static_cast<std::uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(td.data()), static_cast<uInt>(td.size()))));
}
std::string png_rgb(std::int64_t w, std::int64_t h, const std::vector<std::uint8_t>& rgb) {
  std::string raw;
  raw.reserve(static_cast<std::size_t>(h * (3 * w + 1)));
  for (std::int64_t y = 0; y < h; ++y) {
    raw += '\0';
    raw.append(reinterpret_cast<const char*>(rgb.data() + y * w * 3), static_cast<std::size_t>(w * 3));
  }
  uLongf n = compressBound(static_cast<uLong>(raw.size()));
  std::string z(n, '\0');
  compress2(reinterpret_cast<Bytef*>(z.data()), &n, reinterpret_cast<const Bytef*>(raw.data()), static_cast<uLong>(raw.size()), 9);
  z.resize(n);
  std::string png = "\x89PNG\r\n\x1a\n";
  std::string ihdr;
  be32(ihdr, static_cast<std::uint32_t>(w));
  be32(ihdr, static_cast<std::uint32_t>(h));
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);
  chunk(png, "IHDR", ihdr);
  chunk(png, "IDAT", z);
  chunk(png, "IEND", "");
  return png;
}
// Colour of an err/M code: below the tolerance cool (grey-blue to teal, brighter = larger), above it warm (orange to
// dark red); 0 (nothing compared) light grey.
void colour(std::uint8_t code, std::uint8_t tol_code, std::uint8_t* rgb) {
  if (code == 0) {
    rgb[0] = rgb[1] = rgb[2] = 236;
    return;
  }
  if (code <= tol_code) {
    const double t = tol_code > 1 ? static_cast<double>(code - 1) / (tol_code - 1) : 1.0;
    rgb[0] = static_cast<std::uint8_t>(40 + 20 * t);
    rgb[1] = static_cast<std::uint8_t>(60 + 140 * t);
    rgb[2] = static_cast<std::uint8_t>(110 + 90 * t);
  } else {
    const double t = tol_code < 255 ? static_cast<double>(code - tol_code) / (255 - tol_code) : 1.0;
    rgb[0] = static_cast<std::uint8_t>(255 - 90 * t);
    rgb[1] = static_cast<std::uint8_t>(170 - 170 * t);
    rgb[2] = static_cast<std::uint8_t>(30 - 30 * t);
  }
}

// The err/M heatmap: the max-pooled grid as an image, a colour bar with the tolerance marked, flagged cells overlaid.
std::string heatmap_svg(const cmp::HeatmapData& h, double rtol) {
  const std::uint8_t tol_code = cmp::err_code(rtol);
  std::vector<std::uint8_t> rgb(static_cast<std::size_t>(h.gh * h.gw * 3));
  std::int64_t flagged = 0;
  for (std::int64_t i = 0; i < h.gh * h.gw; ++i) {
    const auto u = static_cast<std::size_t>(i);
    colour(h.code[u], tol_code, rgb.data() + 3 * u);
    if (h.flag[u]) {
      ++flagged;
      const bool mask = (h.flag[u] & 2) != 0;
      rgb[3 * u] = mask ? 20 : 230, rgb[3 * u + 1] = mask ? 20 : 0, rgb[3 * u + 2] = mask ? 20 : 200;
    }
  }
  const std::string png = png_rgb(h.gw, h.gh, rgb);
  const double W = 512, H = std::clamp(512.0 * static_cast<double>(h.gh) / static_cast<double>(std::max<std::int64_t>(h.gw, 1)), 48.0, 512.0);
  std::ostringstream o;
  o << "<svg class=\"plot heat\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W + 170 << "\" height=\"" << H + 40 << "\">"
    << "<image x=\"40\" y=\"10\" width=\"" << W << "\" height=\"" << H << "\" preserveAspectRatio=\"none\" style=\"image-rendering:pixelated\" href=\"data:image/png;base64,"
    << io::base64_encode(png.data(), png.size()) << "\"/>"
    << "<rect x=\"40\" y=\"10\" width=\"" << W << "\" height=\"" << H << "\" fill=\"none\" stroke=\"#555\"/>"
    << "<text x=\"36\" y=\"20\" text-anchor=\"end\">0</text><text x=\"36\" y=\"" << H + 10 << "\" text-anchor=\"end\">" << h.rows << "</text>"
    << "<text x=\"40\" y=\"" << H + 24 << "\">0</text><text x=\"" << 40 + W << "\" y=\"" << H + 24 << "\" text-anchor=\"end\">" << h.cols
    << " cols</text><text x=\"" << 40 + W / 2 << "\" y=\"" << H + 36 << "\" text-anchor=\"middle\">" << h.rows << " x " << h.cols << " as "
    << h.gh << " x " << h.gw << " cells (max-pooled err/M)" << (flagged ? ", " + std::to_string(flagged) + " cell(s) non-finite/mask" : "") << "</text>";
  // colour bar: err/M from 1e-9 (bottom) to 1e3 (top), the tolerance marked
  const double bx = 40 + W + 14, by = 10, bh = H;
  for (int i = 0; i < 64; ++i) {
    std::uint8_t c[3];
    colour(static_cast<std::uint8_t>(1 + i * 254 / 63), tol_code, c);
    o << "<rect x=\"" << bx << "\" y=\"" << by + bh - (i + 1) * bh / 64 << "\" width=\"14\" height=\"" << bh / 64 + 0.5 << "\" fill=\"rgb("
      << int(c[0]) << ',' << int(c[1]) << ',' << int(c[2]) << ")\"/>";
  }
  const double ty = by + bh - bh * (tol_code - 1) / 254.0;
  o << "<line x1=\"" << bx - 4 << "\" x2=\"" << bx + 18 << "\" y1=\"" << ty << "\" y2=\"" << ty << "\" stroke=\"#000\" stroke-width=\"2\"/>"
    << "<text x=\"" << bx + 20 << "\" y=\"" << ty + 4 << "\">rtol " << num(rtol) << "</text>"
    << "<text x=\"" << bx + 20 << "\" y=\"" << by + 10 << "\">1e3</text><text x=\"" << bx + 20 << "\" y=\"" << by + bh << "\">&#8804;1e-9</text></svg>";
  return o.str();
}

std::string hist_svg(const cmp::HistData& h, double rtol) {
  const double W = 520, H = 140, x0 = 40;
  std::int64_t mx = std::max({h.zero, h.below, h.over, std::int64_t{1}});
  for (auto b : h.bins) mx = std::max(mx, b);
  const double lmx = std::log10(static_cast<double>(mx) + 1);
  const auto nb = static_cast<double>(h.bins.size() + 3);
  const double bw = W / nb;
  auto bar = [&](double i, std::int64_t n, const char* fill, const std::string& title) {
    const double bh = n ? (H - 20) * std::log10(static_cast<double>(n) + 1) / lmx : 0;
    std::ostringstream b;
    b << "<rect x=\"" << x0 + i * bw << "\" y=\"" << H - bh << "\" width=\"" << bw - 1 << "\" height=\"" << bh << "\" fill=\"" << fill
      << "\"><title>" << esc(title) << ": " << n << "</title></rect>";
    return b.str();
  };
  std::ostringstream o;
  o << "<svg class=\"plot hist\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W + 60 << "\" height=\"" << H + 30 << "\">";
  o << bar(0, h.zero, "#8aa", "err = 0") << bar(1, h.below, "#8aa", "err/M < 1e-9");
  for (std::size_t i = 0; i < h.bins.size(); ++i) {
    const double lo = h.lo + static_cast<double>(i) * h.step;
    o << bar(2 + static_cast<double>(i), h.bins[i], std::pow(10.0, lo) >= rtol ? "#d2691e" : "#4a8", "err/M in [1e" + cmp::detail::fmt(lo) + ", 1e" + cmp::detail::fmt(lo + h.step) + ")");
  }
  o << bar(nb - 1, h.over, "#a00", "err/M >= 1e3");
  const double lx = x0 + bw * (2 + (std::log10(std::max(rtol, 1e-300)) - h.lo) / h.step);
  if (rtol > 0 && lx > x0 && lx < x0 + W)
    o << "<line x1=\"" << lx << "\" x2=\"" << lx << "\" y1=\"10\" y2=\"" << H << "\" stroke=\"#000\" stroke-dasharray=\"4 2\"/><text x=\"" << lx + 3
      << "\" y=\"18\">bound (rtol " << num(rtol) << ")</text>";
  o << "<line x1=\"" << x0 << "\" x2=\"" << x0 + W << "\" y1=\"" << H << "\" y2=\"" << H << "\" stroke=\"#555\"/>"
    << "<text x=\"" << x0 << "\" y=\"" << H + 14 << "\">0 | &lt;1e-9</text><text x=\"" << x0 + W << "\" y=\"" << H + 14
    << "\" text-anchor=\"end\">&#8805;1e3</text><text x=\"" << x0 + W / 2 << "\" y=\"" << H + 26
    << "\" text-anchor=\"middle\">err/M (log bins of 1/4 decade; bar height log count)</text></svg>";
  return o.str();
}

// A series as an SVG polyline (x: index, y: value), with an optional horizontal reference line.
std::string series_svg(const std::vector<double>& y, double ymin, double ymax, const std::string& label, const char* cls) {
  const double W = 520, H = 120, x0 = 40;
  const double span = ymax > ymin ? ymax - ymin : 1;
  std::ostringstream o;
  o << "<svg class=\"plot " << cls << "\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W + 60 << "\" height=\"" << H + 30 << "\"><polyline fill=\"none\" stroke=\"#2a6\" points=\"";
  for (std::size_t i = 0; i < y.size(); ++i)
    o << x0 + W * (y.size() > 1 ? static_cast<double>(i) / static_cast<double>(y.size() - 1) : 0.5) << ',' << 10 + (H - 10) * (1 - (y[i] - ymin) / span) << ' ';
  o << "\"/><line x1=\"" << x0 << "\" x2=\"" << x0 + W << "\" y1=\"" << H << "\" y2=\"" << H << "\" stroke=\"#555\"/><text x=\"2\" y=\"14\">"
    << num(ymax) << "</text><text x=\"2\" y=\"" << H << "\">" << num(ymin) << "</text><text x=\"" << x0 + W / 2 << "\" y=\"" << H + 24
    << "\" text-anchor=\"middle\">" << esc(label) << "</text></svg>";
  return o.str();
}

// Score vs rank of one top-k row: the sorted reference scores, tau and its band, k, and the kernel's wrong picks.
std::string topk_row_svg(const cmp::TopkRowPlot& p) {
  const double W = 520, H = 160, x0 = 50;
  double lo = p.tau, hi = p.tau;
  for (double s : p.score)
    if (std::isfinite(s)) lo = std::min(lo, s), hi = std::max(hi, s);
  if (!(hi > lo)) hi = lo + 1;
  const double n = static_cast<double>(std::max<std::int64_t>(p.len - 1, 1));
  auto X = [&](double rk) { return x0 + W * rk / n; };
  auto Y = [&](double s) { return 10 + (H - 10) * (1 - (std::clamp(s, lo, hi) - lo) / (hi - lo)); };
  std::ostringstream o;
  o << "<svg class=\"plot topkrow\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W + 70 << "\" height=\"" << H + 34 << "\">";
  if (std::isfinite(p.tau))
    o << "<rect x=\"" << x0 << "\" width=\"" << W << "\" y=\"" << Y(p.tau + p.u_tau) << "\" height=\"" << std::max(1.0, Y(p.tau - p.u_tau) - Y(p.tau + p.u_tau))
      << "\" fill=\"#fd8\" opacity=\"0.6\"><title>band tau +- u_tau</title></rect><line x1=\"" << x0 << "\" x2=\"" << x0 + W << "\" y1=\"" << Y(p.tau)
      << "\" y2=\"" << Y(p.tau) << "\" stroke=\"#b80\"/><text x=\"" << x0 + W + 2 << "\" y=\"" << Y(p.tau) + 4 << "\">tau</text>";
  o << "<line x1=\"" << X(static_cast<double>(p.k)) << "\" x2=\"" << X(static_cast<double>(p.k)) << "\" y1=\"10\" y2=\"" << H << "\" stroke=\"#999\" stroke-dasharray=\"3 2\"/>"
    << "<polyline fill=\"none\" stroke=\"#246\" points=\"";
  for (std::size_t i = 0; i < p.rank.size(); ++i) o << X(static_cast<double>(p.rank[i])) << ',' << Y(p.score[i]) << ' ';
  o << "\"/>";
  for (const auto& [rk, kind] : p.marks) {
    const char* c = kind == 1 ? "#d00" : kind == 2 ? "#f80" : "#39c";
    const char* t = kind == 1 ? "missed must-pick" : kind == 2 ? "out-of-band pick" : "accepted in-band swap";
    o << "<circle cx=\"" << X(static_cast<double>(rk)) << "\" cy=\"" << (kind == 1 ? 14 : kind == 2 ? H - 4 : H - 12) << "\" r=\"3\" fill=\"" << c
      << "\"><title>" << t << " at rank " << rk << "</title></circle>";
  }
  o << "<line x1=\"" << x0 << "\" x2=\"" << x0 + W << "\" y1=\"" << H << "\" y2=\"" << H << "\" stroke=\"#555\"/><text x=\"2\" y=\"16\">" << num(hi)
    << "</text><text x=\"2\" y=\"" << H << "\">" << num(lo) << "</text><text x=\"2\" y=\"" << H + 26
    << "\">row " << p.row << ": reference score by rank (" << p.len << " candidates, k " << p.k
    << "); red: missed must-picks, orange: out-of-band picks, blue: in-band swaps</text></svg>";
  return o.str();
}

std::string zoom_svg(const cmp::TopkRowPlot& p) {
  if (p.zoom.empty()) return "";
  const double W = 520, H = 120, x0 = 50;
  double lo = p.tau - p.u_tau, hi = p.tau + p.u_tau;
  for (double s : p.zoom)
    if (std::isfinite(s)) lo = std::min(lo, s), hi = std::max(hi, s);
  if (!(hi > lo)) hi = lo + 1;
  const double bw = W / static_cast<double>(p.zoom.size());
  auto Y = [&](double s) { return 10 + (H - 10) * (1 - (std::clamp(s, lo, hi) - lo) / (hi - lo)); };
  std::ostringstream o;
  o << "<svg class=\"plot zoom\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W + 70 << "\" height=\"" << H + 34 << "\">";
  if (std::isfinite(p.tau))
    o << "<rect x=\"" << x0 << "\" width=\"" << W << "\" y=\"" << Y(p.tau + p.u_tau) << "\" height=\"" << std::max(1.0, Y(p.tau - p.u_tau) - Y(p.tau + p.u_tau))
      << "\" fill=\"#fd8\" opacity=\"0.6\"/>";
  for (std::size_t i = 0; i < p.zoom.size(); ++i) {
    const int f = p.zoom_flag[i];
    const bool picked = f & 1;
    const int cls = (f >> 1) & 3;  // 0 must, 1 band, 2 must-not
    const char* fill = picked ? (cls == 2 ? "#f80" : "#2a6") : (cls == 0 ? "#d00" : "#bbb");
    o << "<circle cx=\"" << x0 + (static_cast<double>(i) + 0.5) * bw << "\" cy=\"" << Y(p.zoom[i]) << "\" r=\"3\" fill=\"" << fill << "\"><title>rank "
      << p.zoom0 + static_cast<std::int64_t>(i) << ": " << esc(cmp::detail::exact(p.zoom[i])) << (picked ? ", picked" : ", not picked")
      << (cls == 0 ? ", must" : cls == 1 ? ", in band" : ", must not") << "</title></circle>";
  }
  o << "<text x=\"2\" y=\"" << H + 26 << "\">ranks " << p.zoom0 << ".." << p.zoom0 + static_cast<std::int64_t>(p.zoom.size()) - 1
    << " around k: green picked, grey not picked, red missed must-pick, orange picked must-not; yellow band = tau +- u_tau</text></svg>";
  return o.str();
}

std::string metrics_table(const CheckResult& r) {
  std::ostringstream o;
  o << "<table class=\"kv\">";
  auto row = [&](const std::string& k, const std::string& v) { o << "<tr><th>" << esc(k) << "</th><td>" << v << "</td></tr>"; };
  row("file", esc(r.file));
  if (r.bounded) {
    const auto& s = *r.bounded;
    row("compared", std::to_string(s.compared));
    row("max err/M", num(s.max_err_over_m) + " (rtol " + num(r.tol.rtol) + (r.tol.profile.empty() ? "" : ", " + esc(r.tol.profile)) + ")");
    row("min passing rtol", num(s.min_rtol));
    row("max abs / max rel", num(s.max_abs) + " / " + num(s.max_rel));
    row("max ulp", num(s.max_ulp) + " (" + std::to_string(s.ulp_bits) + "-bit, " + std::to_string(s.ulp_compared) + " elements)");
    row("cosine / calc_diff", num(s.cosine) + " / " + num(s.calc_diff));
  }
  if (r.topk) {
    const auto& s = *r.topk;
    row("rows", std::to_string(s.rows));
    row("recall@k (mean / min)", num(s.recall) + " / " + num(s.min_recall));
    row("jaccard", num(s.jaccard));
    row("band (total / max per row)", std::to_string(s.band) + " / " + std::to_string(s.max_band));
    row("accepted swaps / hard misses / out-of-band", std::to_string(s.swaps) + " / " + std::to_string(s.hard_misses) + " / " + std::to_string(s.hard_extras));
  }
  if (!r.emulation.empty()) row("emulation", esc(r.emulation) + ": " + std::to_string(r.emulation_mismatches) + " element(s) differ");
  if (r.first) row("first", esc(cmp::detail::loc_str(*r.first)));
  if (r.worst) row("worst", esc(cmp::detail::loc_str(*r.worst)));
  o << "</table>";
  return o.str();
}

std::string worst_table(const std::vector<cmp::Location>& w) {
  if (w.empty()) return "";
  std::ostringstream o;
  o << "<table class=\"worst\"><tr><th>#</th><th>where</th><th>out</th><th>ref</th><th>err</th><th>bound</th><th>err/bound</th></tr>";
  for (std::size_t i = 0; i < w.size(); ++i) {
    const auto& l = w[i];
    o << "<tr" << (l.err > l.bound ? " class=\"over\"" : "") << "><td>" << i + 1 << "</td><td>" << esc(l.where) << "</td><td>" << esc(cmp::detail::exact(l.out))
      << "</td><td>" << esc(cmp::detail::exact(l.ref)) << "</td><td>" << num(l.err) << "</td><td>" << num(l.bound) << "</td><td>"
      << num(l.bound > 0 ? l.err / l.bound : std::numeric_limits<double>::infinity()) << "</td></tr>";
  }
  o << "</table>";
  return o.str();
}

// The elements behind a MASK_MISMATCH / NONFINITE verdict: where, the kernel's value, the reference's.
std::string breaks_table(const std::vector<cmp::Location>& w) {
  std::ostringstream o;
  o << "<table class=\"worst breaks\"><tr><th>#</th><th>where</th><th>out</th><th>ref</th></tr>";
  for (std::size_t i = 0; i < w.size(); ++i)
    o << "<tr class=\"over\"><td>" << i + 1 << "</td><td>" << esc(w[i].where) << "</td><td>" << esc(cmp::detail::exact(w[i].out))
      << "</td><td>" << esc(cmp::detail::exact(w[i].ref)) << "</td></tr>";
  o << "</table>";
  return o.str();
}

const char* kCss =
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}h1{font-size:22px}h2{font-size:18px;"
    "border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:32px}h3{font-size:15px;margin:20px 0 6px}table{border-collapse:"
    "collapse;margin:6px 0}td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}th{background:#f4f4f4}"
    ".chip{display:inline-block;padding:1px 7px;border-radius:9px;font-weight:600;font-size:12px;color:#fff}.ok{background:#2a7d46}"
    ".bad{background:#c62828}.err{background:#8e24aa}.drift{background:#d98200}.msg{font-family:ui-monospace,monospace;"
    "font-size:12px;white-space:pre-wrap;background:#fafafa;border:1px solid #eee;padding:6px}svg.plot{display:block;margin:8px 0;"
    "font:11px sans-serif}.chain{display:flex;flex-wrap:wrap;gap:8px;align-items:center}.stage{border:2px solid #bbb;border-radius:6px;"
    "padding:6px 8px;min-width:150px}.stage.first{border-color:#c62828;background:#fff3f3}.arrow{color:#888}tr.over td{background:#fff0e6}"
    "section.check{border-left:4px solid #ddd;padding-left:12px;margin:18px 0}section.check.failing{border-left-color:#c62828}"
    ".note{color:#555;font-size:12px}a{color:#1558b0;text-decoration:none}";

}  // namespace

std::string html_report(const RunReport& r, const std::string& title) {
  std::ostringstream o;
  o << "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << esc(title) << "</title><style>" << kCss
    << "</style></head><body><h1>dsa-check report: " << esc(title) << "</h1>";
  const int rc = r.exit_code();
  o << "<p>" << r.passed() << " passed, " << r.failed() << " failed, " << r.problems.size() << " input problem(s); exit code <b>" << rc
    << "</b> (" << (rc == 0 ? "pass" : rc == 1 ? "a check failed" : "usage / input problem or a check that could not run") << ")</p>";
  // Pictures exist only where check computed them (check --html): say so when a saved report has none.
  const bool plotless = std::none_of(r.results.begin(), r.results.end(), [](const CheckResult& x) { return x.plot != nullptr; }) &&
                        std::any_of(r.results.begin(), r.results.end(), [](const CheckResult& x) { return x.kind != CompareKind::bytes; });
  if (plotless)
    o << "<p class=\"note\" id=\"noplots\">No heatmaps, histograms or top-k plots: the reports were written by <code>check --json</code> "
         "without <code>--html</code>, and the pictures are computed only when check is asked for HTML. Run each shard as "
         "<code>check --shard i/N --json r_i.json --html r_i.html</code> to have them in the merged report.</p>";
  if (!r.problems.empty()) {
    o << "<h2 id=\"problems\">Input problems (cases not checked)</h2><ul>";
    for (const auto& p : r.problems) o << "<li class=\"msg\">" << esc(p) << "</li>";
    o << "</ul>";
  }
  if (!r.divergences.empty()) {
    o << "<h2 id=\"divergence\">First divergence</h2><ul>";
    for (const auto& d : r.divergences) o << "<li>" << esc(d) << "</li>";
    o << "</ul>";
  }
  // Layers: the stages of each (file, layer) in layer_pos order, local and end-to-end verdicts.
  const std::vector<LayerView> layers = layer_views(r.results);
  auto worst_of = [&](const std::vector<std::size_t>& v) -> const CheckResult* {
    const CheckResult* w = nullptr;
    for (auto i : v)
      if (!w || severity(r.results[i]) < severity(*w)) w = &r.results[i];
    return w;
  };
  if (!layers.empty()) {
    o << "<h2 id=\"layers\">Layers</h2>";
    for (const auto& lv : layers) {
      o << "<h3>layer " << esc(lv.layer) << " <span class=\"note\">" << esc(lv.file) << "</span></h3><div class=\"chain\">";
      bool first_marked = false, arrow = false;
      for (const auto& [pos, p] : lv.stages) {
        const CheckResult* l = worst_of(p.local);
        const CheckResult* e = worst_of(p.e2e);
        const bool first = !first_marked && l && !l->pass();
        first_marked = first_marked || first;
        if (arrow) o << "<span class=\"arrow\">&#8594;</span>";
        arrow = true;
        o << "<div class=\"stage" << (first ? " first" : "") << "\"><b>" << esc(p.stage) << "</b><br><a href=\"#r" << (p.local.empty() ? 0 : p.local.front())
          << "\">" << esc(p.case_name) << "</a><br>local " << (l ? chip(*l) : std::string("-")) << "<br>" << (e ? chip(*e) : std::string("e2e -"))
          << (first ? "<br><b>first divergence</b>" : "") << "</div>";
      }
      o << "</div>";
    }
  }
  // Summary, most severe first.
  std::vector<std::size_t> idx(r.results.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return severity(r.results[a]) < severity(r.results[b]); });
  // An end-to-end result the chain did not change repeats its local one: shown in the layer view only.
  auto repeats_local = [](const CheckResult& x) {
    return x.informational && !x.notes.empty() && x.notes.front().rfind(kEndToEndIsLocal, 0) == 0;
  };
  idx.erase(std::remove_if(idx.begin(), idx.end(), [&](std::size_t i) { return repeats_local(r.results[i]); }), idx.end());
  // Per file: a table of its checks, most severe first (files in report order, the failing ones listed first above).
  std::vector<std::string> files;
  std::map<std::string, std::vector<std::size_t>> by_file;
  for (auto i : idx) {
    const auto& f = r.results[i].file;
    if (!by_file.count(f)) files.push_back(f);
    by_file[f].push_back(i);
  }
  std::vector<std::string> forder = files;  // report order of first appearance
  std::stable_sort(forder.begin(), forder.end(), [&](const std::string& a, const std::string& b) {
    return severity(r.results[by_file[a].front()]) < severity(r.results[by_file[b].front()]);
  });
  o << "<h2 id=\"summary\">Checks by file (most severe first)</h2><ul>";
  for (std::size_t fi = 0; fi < forder.size(); ++fi) {
    std::int64_t bad = 0;
    for (auto i : by_file[forder[fi]]) bad += r.results[i].pass() ? 0 : 1;
    o << "<li><a href=\"#file" << fi << "\">" << esc(forder[fi].empty() ? "(in memory)" : forder[fi]) << "</a>: " << by_file[forder[fi]].size()
      << " check(s), " << bad << " failing</li>";
  }
  o << "</ul>";
  for (std::size_t fi = 0; fi < forder.size(); ++fi) {
    o << "<h3 id=\"file" << fi << "\">" << esc(forder[fi].empty() ? "(in memory)" : forder[fi])
      << "</h3><table><tr><th>verdict</th><th>check</th><th>stage</th><th>key figure</th></tr>";
    for (auto i : by_file[forder[fi]]) {
      const auto& x = r.results[i];
      std::string key;
      if (x.bounded) key = "max err/M " + num(x.bounded->max_err_over_m) + " (rtol " + num(x.tol.rtol) + ")";
      else if (x.topk) key = "recall@k " + num(x.topk->recall) + ", misses " + std::to_string(x.topk->hard_misses) + ", extras " + std::to_string(x.topk->hard_extras);
      else if (x.mismatches) key = std::to_string(x.mismatches) + " mismatching";
      o << "<tr><td>" << chip(x) << "</td><td><a href=\"#r" << i << "\">" << esc(x.name()) << "</a></td><td>" << esc(x.stage) << "</td><td>" << key
        << "</td></tr>";
    }
    o << "</table>";
  }
  o << "<h2 id=\"checks\">Details</h2>";
  for (std::size_t i = 0; i < r.results.size(); ++i) {
    const auto& x = r.results[i];
    if (repeats_local(x)) continue;
    o << "<section class=\"check" << (x.pass() ? "" : " failing") << "\" id=\"r" << i << "\"><h3>" << chip(x) << " " << esc(x.name()) << " <span class=\"note\">["
      << esc(x.stage) << "]" << (x.layer.empty() ? "" : " layer " + esc(x.layer)) << "</span> <a href=\"#file"
      << std::distance(forder.begin(), std::find(forder.begin(), forder.end(), x.file)) << "\">&#8593;</a></h3><div class=\"msg\">"
      << esc(x.message) << "</div>" << metrics_table(x);
    if (x.plot) {
      const auto& p = *x.plot;
      // A MASK_MISMATCH / NONFINITE is about the elements that break the mask (or are non-finite): they lead, and the
      // largest err/M of the finite elements (passing ones, often) is not shown.
      const bool breaks = (x.verdict == Verdict::MASK_MISMATCH || x.verdict == Verdict::NONFINITE) && !p.breaks.empty();
      if (breaks) o << "<h3>" << (x.verdict == Verdict::MASK_MISMATCH ? "Elements that break the -inf mask" : "Non-finite where the reference is not")
                    << " (the first " << p.breaks.size() << " of " << x.mismatches << ")</h3>" << breaks_table(p.breaks);
      if (p.heat && !p.heat->code.empty()) o << heatmap_svg(*p.heat, x.tol.rtol);
      if (p.hist) o << hist_svg(*p.hist, x.tol.rtol);
      if (!p.worst.empty() && !breaks) o << "<h3>Largest err/M</h3>" << worst_table(p.worst);
      if (!p.row_recall.empty()) {
        std::vector<double> rec(p.row_recall.begin(), p.row_recall.end()), band(p.row_band.begin(), p.row_band.end());
        double bmax = 1;
        for (double b : band) bmax = std::max(bmax, b);
        const std::string grp = p.row_step > 1 ? " (groups of " + std::to_string(p.row_step) + " rows)" : "";
        o << series_svg(rec, 0, 1, "recall@k per row" + grp + " (minimum)", "recall") << series_svg(band, 0, bmax, "band size per row" + grp + " (maximum)", "band");
      }
      for (const auto& rp : p.rows) o << topk_row_svg(rp) << zoom_svg(rp);
    }
    if (!x.notes.empty()) {
      o << "<ul class=\"note\">";
      for (const auto& n : x.notes) o << "<li>" << esc(n) << "</li>";
      o << "</ul>";
    }
    o << "</section>";
  }
  o << "</body></html>\n";
  return o.str();
}

}  // namespace dsa::report
