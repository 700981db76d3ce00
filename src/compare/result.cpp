// Verdict names and the JSON form of a CheckResult (shared by the JSON report and `merge`-style readers).
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include "compare/compare.hpp"
#include "io/base64.hpp"

namespace dsa::cmp {

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::BITEXACT: return "BITEXACT";
    case Verdict::WITHIN_BOUND: return "WITHIN_BOUND";
    case Verdict::FAIL: return "FAIL";
    case Verdict::NONFINITE: return "NONFINITE";
    case Verdict::MASK_MISMATCH: return "MASK_MISMATCH";
    case Verdict::STRUCTURE: return "STRUCTURE";
    case Verdict::SHAPE: return "SHAPE";
    case Verdict::DTYPE: return "DTYPE";
    case Verdict::ERROR: return "ERROR";
  }
  return "?";
}

nlohmann::json num_json(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

namespace {
nlohmann::json loc_json(const Location& l) {
  nlohmann::json j{{"flat", l.flat}, {"where", l.where}, {"out", num_json(l.out)}, {"ref", num_json(l.ref)},
                   {"err", num_json(l.err)}, {"bound", num_json(l.bound)}, {"has_values", l.has_values}};
  if (l.ulps >= 0) j["ulps"] = num_json(l.ulps);
  if (!l.out_bits.empty()) j["out_bits"] = l.out_bits, j["ref_bits"] = l.ref_bits;
  return j;
}

nlohmann::json plot_json(const PlotData& p) {
  nlohmann::json j = nlohmann::json::object();
  if (p.heat) {
    const auto& h = *p.heat;
    j["heatmap"] = {{"rows", h.rows}, {"cols", h.cols}, {"gh", h.gh}, {"gw", h.gw}, {"code", io::base64_encode(h.code.data(), h.code.size())}, {"flag", io::base64_encode(h.flag.data(), h.flag.size())}};
  }
  if (p.hist) {
    const auto& h = *p.hist;
    j["hist"] = {{"lo", h.lo}, {"step", h.step}, {"bins", h.bins}, {"zero", h.zero}, {"below", h.below}, {"over", h.over}};
  }
  if (!p.worst.empty()) {
    nlohmann::json w = nlohmann::json::array();
    for (const auto& l : p.worst) w.push_back(loc_json(l));
    j["worst"] = w;
  }
  if (!p.breaks.empty()) {
    nlohmann::json w = nlohmann::json::array();
    for (const auto& l : p.breaks) w.push_back(loc_json(l));
    j["breaks"] = w;
  }
  if (!p.row_recall.empty()) {
    j["row_recall"] = p.row_recall;
    j["row_band"] = p.row_band;
    j["row_step"] = p.row_step;
  }
  if (!p.rows.empty()) {
    nlohmann::json rs = nlohmann::json::array();
    for (const auto& r : p.rows) {
      nlohmann::json sc = nlohmann::json::array(), zm = nlohmann::json::array(), mk = nlohmann::json::array();
      for (double x : r.score) sc.push_back(num_json(x));
      for (double x : r.zoom) zm.push_back(num_json(x));
      for (const auto& [rk, kind] : r.marks) mk.push_back({rk, kind});
      rs.push_back({{"row", r.row}, {"len", r.len}, {"k", r.k}, {"tau", num_json(r.tau)}, {"u_tau", num_json(r.u_tau)},
                    {"rank", r.rank}, {"score", sc}, {"marks", mk}, {"zoom0", r.zoom0}, {"zoom", zm}, {"zoom_flag", r.zoom_flag}});
    }
    j["rows"] = rs;
  }
  return j;
}
}  // namespace

nlohmann::json to_json(const CheckResult& r) {
  nlohmann::json j{{"file", r.file}, {"case", r.case_name}, {"stage", r.stage}, {"group", r.group},
                   {"tensor", r.tensor}, {"kind", std::string(compare_kind_name(r.kind))},
                   {"verdict", std::string(verdict_name(r.verdict))}, {"pass", verdict_pass(r.verdict)}, {"message", r.message},
                   {"numel", r.numel}, {"mismatches", r.mismatches},
                   {"tolerance", {{"profile", r.tol.profile}, {"rtol", num_json(r.tol.rtol)}, {"atol", num_json(r.tol.atol)}}},
                   {"notes", r.notes}};
  if (!r.step.empty()) j["step"] = r.step;
  if (!r.layer.empty()) {
    j["layer"] = r.layer;
    j["layer_pos"] = r.layer_pos;
  }
  if (r.informational) j["informational"] = true;
  if (r.file_pos >= 0) j["run_pos"] = {r.file_pos, r.case_pos};
  if (r.plot) j["plot"] = plot_json(*r.plot);
  if (r.first) j["first"] = loc_json(*r.first);
  if (r.worst) j["worst"] = loc_json(*r.worst);
  if (!r.emulation.empty()) j["emulation"] = {{"profile", r.emulation}, {"mismatches", r.emulation_mismatches}};
  if (r.bounded) {
    const auto& s = *r.bounded;
    j["bounded"] = {{"compared", s.compared}, {"max_abs", num_json(s.max_abs)}, {"max_rel", num_json(s.max_rel)},
                    {"max_err_over_m", num_json(s.max_err_over_m)}, {"max_ulp", num_json(s.max_ulp)},
                    {"ulp_bits", s.ulp_bits}, {"ulp_compared", s.ulp_compared}, {"cosine", num_json(s.cosine)}, {"calc_diff", num_json(s.calc_diff)},
                    {"ratio_rel_lt_1e-3", num_json(s.ratio_rel_1e3)}, {"ratio_rel_lt_5e-3", num_json(s.ratio_rel_5e3)},
                    {"min_rtol", num_json(s.min_rtol)}};
  }
  if (r.topk) {
    const auto& s = *r.topk;
    j["topk"] = {{"rows", s.rows}, {"recall", num_json(s.recall)}, {"min_recall", num_json(s.min_recall)},
                 {"jaccard", num_json(s.jaccard)}, {"band", s.band}, {"max_band", s.max_band}, {"swaps", s.swaps},
                 {"hard_misses", s.hard_misses}, {"hard_extras", s.hard_extras}, {"examples", s.examples}};
  }
  return j;
}

namespace {
using nlohmann::json;

// Strict, type-checked reads of a saved report: every access checks the JSON type first and a failure names the
// field, what was expected and what was found ("plot.heatmap.gh: expected an integer, found a string").
[[noreturn]] void bad(const std::string& field, const std::string& expected, const json& found) {
  std::string f = std::string(found.type_name());
  if (found.is_primitive()) {
    std::string d = found.dump(-1, ' ', false, json::error_handler_t::replace);
    if (d.size() > 40) d = d.substr(0, 40) + "...";
    f += " " + d;
  } else {
    f += found.is_array() ? " of " + std::to_string(found.size()) + " element(s)" : "";
  }
  throw std::runtime_error(field + ": expected " + expected + ", found " + (found.is_null() ? std::string("null") : "a " + f));
}
const json& at(const json& o, const std::string& ctx, const char* key) {
  if (!o.is_object()) bad(ctx.empty() ? "a result" : ctx, "an object", o);
  auto it = o.find(key);
  if (it == o.end()) throw std::runtime_error((ctx.empty() ? "" : ctx + ".") + key + ": expected, found nothing (missing)");
  return *it;
}
std::string name(const std::string& ctx, const char* key) { return ctx.empty() ? std::string(key) : ctx + "." + key; }
std::string str(const json& v, const std::string& field) {
  if (!v.is_string()) bad(field, "a string", v);
  return v.get<std::string>();
}
std::int64_t integer(const json& v, const std::string& field) {
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)))
    bad(field, "an integer", v);
  return v.get<std::int64_t>();
}
int small_int(const json& v, const std::string& field) {
  const std::int64_t x = integer(v, field);
  if (x < INT32_MIN || x > INT32_MAX) bad(field, "a 32-bit integer", v);
  return static_cast<int>(x);
}
bool boolean(const json& v, const std::string& field) {
  if (!v.is_boolean()) bad(field, "true or false", v);
  return v.get<bool>();
}
double num_from(const json& j, const std::string& field) {
  if (j.is_string()) {
    const auto s = j.get<std::string>();
    const double inf = std::numeric_limits<double>::infinity();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return inf;
    if (s == "-inf") return -inf;
    bad(field, "a number (or \"nan\", \"inf\", \"-inf\")", j);
  }
  if (!j.is_number()) bad(field, "a number", j);
  return j.get<double>();
}
const json& array(const json& v, const std::string& field) {
  if (!v.is_array()) bad(field, "an array", v);
  return v;
}
std::string str_at(const json& o, const std::string& ctx, const char* k) { return str(at(o, ctx, k), name(ctx, k)); }
std::int64_t int_at(const json& o, const std::string& ctx, const char* k) { return integer(at(o, ctx, k), name(ctx, k)); }
double num_at(const json& o, const std::string& ctx, const char* k) { return num_from(at(o, ctx, k), name(ctx, k)); }
// Optional fields: the default when absent, type-checked when present.
bool has(const json& o, const char* k) { return o.is_object() && o.contains(k); }
std::string opt_str(const json& o, const std::string& ctx, const char* k) { return has(o, k) ? str_at(o, ctx, k) : std::string(); }
template <class T, class F>
std::vector<T> vec_at(const json& o, const std::string& ctx, const char* k, F elem) {
  const std::string f = name(ctx, k);
  std::vector<T> out;
  const json& a = array(at(o, ctx, k), f);
  out.reserve(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) out.push_back(elem(a[i], f + "[" + std::to_string(i) + "]"));
  return out;
}
Location loc_from(const json& j, const std::string& ctx) {
  Location l;
  l.flat = int_at(j, ctx, "flat");
  l.where = str_at(j, ctx, "where");
  l.out = num_at(j, ctx, "out");
  l.ref = num_at(j, ctx, "ref");
  l.err = num_at(j, ctx, "err");
  l.bound = num_at(j, ctx, "bound");
  // As it was when saved (reports of older versions: no values shown; the saved message carries them).
  l.has_values = has(j, "has_values") ? boolean(j["has_values"], name(ctx, "has_values")) : false;
  if (has(j, "ulps")) l.ulps = num_at(j, ctx, "ulps");
  l.out_bits = opt_str(j, ctx, "out_bits");
  l.ref_bits = opt_str(j, ctx, "ref_bits");
  return l;
}
}  // namespace

CheckResult from_json(const nlohmann::json& j) {
  CheckResult r;
  try {
    if (!j.is_object()) bad("a check result", "an object", j);
    r.file = str_at(j, "", "file");
    r.case_name = str_at(j, "", "case");
    r.stage = str_at(j, "", "stage");
    r.group = str_at(j, "", "group");
    r.tensor = str_at(j, "", "tensor");
    r.step = opt_str(j, "", "step");
    r.layer = opt_str(j, "", "layer");
    r.layer_pos = has(j, "layer_pos") ? int_at(j, "", "layer_pos") : -1;
    r.informational = has(j, "informational") ? boolean(j["informational"], "informational") : false;
    if (j.contains("run_pos")) {
      const auto& p = j.at("run_pos");
      if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() || !p[1].is_number_integer() ||
          integer(p[0], "run_pos[0]") < 0 || integer(p[1], "run_pos[1]") < 0)
        bad("run_pos", "[file index, case index] (two integers >= 0)", p);
      r.file_pos = p[0].get<std::int64_t>();
      r.case_pos = p[1].get<std::int64_t>();
    }
    const auto kind = str_at(j, "", "kind");
    bool kind_ok = false;
    for (auto k : {CompareKind::bytes, CompareKind::bounded, CompareKind::topk_set})
      if (compare_kind_name(k) == kind) r.kind = k, kind_ok = true;
    if (!kind_ok) throw std::runtime_error("kind: expected bytes, bounded or topk_set, found '" + kind.substr(0, 40) + "'");
    const auto v = str_at(j, "", "verdict");
    bool verdict_ok = false;
    for (auto x : {Verdict::BITEXACT, Verdict::WITHIN_BOUND, Verdict::FAIL, Verdict::NONFINITE, Verdict::MASK_MISMATCH,
                   Verdict::STRUCTURE, Verdict::SHAPE, Verdict::DTYPE, Verdict::ERROR})
      if (verdict_name(x) == v) r.verdict = x, verdict_ok = true;
    if (!verdict_ok) throw std::runtime_error("verdict: expected a verdict name (BITEXACT, WITHIN_BOUND, FAIL, ...), found '" + v.substr(0, 40) + "'");
    r.message = str_at(j, "", "message");
    r.numel = int_at(j, "", "numel");
    r.mismatches = int_at(j, "", "mismatches");
    const auto& t = at(j, "", "tolerance");
    r.tol = Tolerance{str_at(t, "tolerance", "profile"), num_at(t, "tolerance", "rtol"), num_at(t, "tolerance", "atol")};
    r.notes = vec_at<std::string>(j, "", "notes", str);
    if (j.contains("first")) r.first = loc_from(j["first"], "first");
    if (j.contains("worst")) r.worst = loc_from(j["worst"], "worst");
    if (j.contains("emulation")) {
      r.emulation = str_at(j["emulation"], "emulation", "profile");
      r.emulation_mismatches = int_at(j["emulation"], "emulation", "mismatches");
    }
    if (j.contains("bounded")) {
      const auto& b = j["bounded"];
      const std::string c = "bounded";
      BoundedStats s;
      s.compared = int_at(b, c, "compared");
      s.max_abs = num_at(b, c, "max_abs");
      s.max_rel = num_at(b, c, "max_rel");
      s.max_err_over_m = num_at(b, c, "max_err_over_m");
      s.max_ulp = num_at(b, c, "max_ulp");
      s.ulp_bits = int_at(b, c, "ulp_bits");
      s.ulp_compared = has(b, "ulp_compared") ? int_at(b, c, "ulp_compared") : 0;
      s.cosine = num_at(b, c, "cosine");
      s.calc_diff = num_at(b, c, "calc_diff");
      s.ratio_rel_1e3 = num_at(b, c, "ratio_rel_lt_1e-3");
      s.ratio_rel_5e3 = num_at(b, c, "ratio_rel_lt_5e-3");
      s.min_rtol = num_at(b, c, "min_rtol");
      r.bounded = s;
    }
    if (j.contains("plot")) {
      const auto& p = j["plot"];
      if (!p.is_object()) bad("plot", "an object", p);
      auto pd = std::make_shared<PlotData>();
      if (p.contains("heatmap")) {
        const auto& h = p["heatmap"];
        const std::string c = "plot.heatmap";
        HeatmapData hm;
        hm.rows = int_at(h, c, "rows");
        hm.cols = int_at(h, c, "cols");
        hm.gh = int_at(h, c, "gh");
        hm.gw = int_at(h, c, "gw");
        if (hm.gh < 0 || hm.gw < 0 || hm.gh > 4096 || hm.gw > 4096)
          throw std::runtime_error("plot.heatmap: expected a grid of at most 4096 x 4096, found " + std::to_string(hm.gh) + " x " + std::to_string(hm.gw));
        hm.code = io::base64_decode(str_at(h, c, "code"));
        hm.flag = io::base64_decode(str_at(h, c, "flag"));
        if (hm.code.size() != static_cast<std::size_t>(hm.gh * hm.gw) || hm.flag.size() != hm.code.size())
          throw std::runtime_error("plot.heatmap: expected " + std::to_string(hm.gh * hm.gw) + " cells (gh x gw) in code and flag, found " +
                                   std::to_string(hm.code.size()) + " and " + std::to_string(hm.flag.size()));
        pd->heat = std::move(hm);
      }
      if (p.contains("hist")) {
        const auto& h = p["hist"];
        const std::string c = "plot.hist";
        HistData hd;
        hd.lo = num_at(h, c, "lo");
        hd.step = num_at(h, c, "step");
        if (array(at(h, c, "bins"), "plot.hist.bins").size() > 4096)
          throw std::runtime_error("plot.hist.bins: expected at most 4096 bins, found " + std::to_string(h["bins"].size()));
        hd.bins = vec_at<std::int64_t>(h, c, "bins", integer);
        hd.zero = int_at(h, c, "zero");
        hd.below = int_at(h, c, "below");
        hd.over = int_at(h, c, "over");
        if (!(hd.step > 0)) throw std::runtime_error("plot.hist.step: expected a number > 0, found " + std::to_string(hd.step));
        pd->hist = std::move(hd);
      }
      if (p.contains("worst")) {
        const auto& w = array(p["worst"], "plot.worst");
        for (std::size_t i = 0; i < w.size(); ++i) pd->worst.push_back(loc_from(w[i], "plot.worst[" + std::to_string(i) + "]"));
      }
      if (p.contains("breaks")) {
        const auto& w = array(p["breaks"], "plot.breaks");
        if (w.size() > 16) bad("plot.breaks", "at most 16 locations", w);
        for (std::size_t i = 0; i < w.size(); ++i) pd->breaks.push_back(loc_from(w[i], "plot.breaks[" + std::to_string(i) + "]"));
      }
      if (p.contains("row_recall")) {
        pd->row_recall = vec_at<float>(p, "plot", "row_recall", [](const json& x, const std::string& f) {
          const double d = num_from(x, f);
          if (std::isfinite(d) && std::fabs(d) > 3.4e38) bad(f, "a recall in [0, 1]", x);
          return static_cast<float>(d);
        });
        pd->row_band = vec_at<std::int64_t>(p, "plot", "row_band", integer);
        pd->row_step = int_at(p, "plot", "row_step");
      }
      if (p.contains("rows")) {
        const auto& rows = array(p["rows"], "plot.rows");
        for (std::size_t i = 0; i < rows.size(); ++i) {
          const json& x = rows[i];
          const std::string c = "plot.rows[" + std::to_string(i) + "]";
          TopkRowPlot rp;
          rp.row = int_at(x, c, "row");
          rp.len = int_at(x, c, "len");
          rp.k = int_at(x, c, "k");
          rp.tau = num_at(x, c, "tau");
          rp.u_tau = num_at(x, c, "u_tau");
          rp.rank = vec_at<std::int64_t>(x, c, "rank", integer);
          rp.score = vec_at<double>(x, c, "score", num_from);
          rp.marks = vec_at<std::pair<std::int64_t, int>>(x, c, "marks", [](const json& m, const std::string& f) {
            if (!m.is_array() || m.size() != 2) bad(f, "[rank, kind]", m);
            return std::make_pair(integer(m[0], f + "[0]"), small_int(m[1], f + "[1]"));
          });
          rp.zoom0 = int_at(x, c, "zoom0");
          rp.zoom = vec_at<double>(x, c, "zoom", num_from);
          rp.zoom_flag = vec_at<int>(x, c, "zoom_flag", small_int);
          if (rp.rank.size() != rp.score.size() || rp.zoom.size() != rp.zoom_flag.size())
            throw std::runtime_error(c + ": expected rank/score and zoom/zoom_flag of equal lengths, found " + std::to_string(rp.rank.size()) + "/" +
                                     std::to_string(rp.score.size()) + " and " + std::to_string(rp.zoom.size()) + "/" + std::to_string(rp.zoom_flag.size()));
          pd->rows.push_back(std::move(rp));
        }
      }
      r.plot = std::move(pd);
    }
    if (j.contains("topk")) {
      const auto& k = j["topk"];
      const std::string c = "topk";
      TopkStats s;
      s.rows = int_at(k, c, "rows");
      s.recall = num_at(k, c, "recall");
      s.min_recall = num_at(k, c, "min_recall");
      s.jaccard = num_at(k, c, "jaccard");
      s.band = int_at(k, c, "band");
      s.max_band = int_at(k, c, "max_band");
      s.swaps = int_at(k, c, "swaps");
      s.hard_misses = int_at(k, c, "hard_misses");
      s.hard_extras = int_at(k, c, "hard_extras");
      s.examples = vec_at<std::string>(k, c, "examples", str);
      r.topk = s;
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("a check result as `check --json` writes it: ") + e.what());
  }
  return r;
}

}  // namespace dsa::cmp
