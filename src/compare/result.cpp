// Verdict names and the JSON form of a CheckResult (shared by the JSON report and `merge`-style readers).
#include <cmath>
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
double num_from(const nlohmann::json& j) {
  if (j.is_string()) {
    const auto s = j.get<std::string>();
    const double inf = std::numeric_limits<double>::infinity();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return inf;
    if (s == "-inf") return -inf;
    throw std::runtime_error("a number, found '" + s + "'");
  }
  return j.get<double>();
}
Location loc_from(const nlohmann::json& j) {
  Location l;
  l.flat = j.at("flat").get<std::int64_t>();
  l.where = j.at("where").get<std::string>();
  l.out = num_from(j.at("out"));
  l.ref = num_from(j.at("ref"));
  l.err = num_from(j.at("err"));
  l.bound = num_from(j.at("bound"));
  // As it was when saved (reports of older versions: no values shown; the saved message carries them).
  l.has_values = j.value("has_values", false);
  if (j.contains("ulps")) l.ulps = num_from(j.at("ulps"));
  l.out_bits = j.value("out_bits", std::string());
  l.ref_bits = j.value("ref_bits", std::string());
  return l;
}
}  // namespace

CheckResult from_json(const nlohmann::json& j) {
  CheckResult r;
  try {
    r.file = j.at("file").get<std::string>();
    r.case_name = j.at("case").get<std::string>();
    r.stage = j.at("stage").get<std::string>();
    r.group = j.at("group").get<std::string>();
    r.tensor = j.at("tensor").get<std::string>();
    r.step = j.value("step", std::string());
    r.layer = j.value("layer", std::string());
    r.layer_pos = j.value("layer_pos", std::int64_t{-1});
    r.informational = j.value("informational", false);
    if (j.contains("run_pos")) {
      const auto& p = j.at("run_pos");
      if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer() || !p[1].is_number_integer() || p[0].get<std::int64_t>() < 0 ||
          p[1].get<std::int64_t>() < 0)
        throw std::runtime_error("run_pos: expected [file index, case index] (two integers >= 0), found " + p.dump().substr(0, 80));
      r.file_pos = p[0].get<std::int64_t>();
      r.case_pos = p[1].get<std::int64_t>();
    }
    const auto kind = j.at("kind").get<std::string>();
    bool kind_ok = false;
    for (auto k : {CompareKind::bytes, CompareKind::bounded, CompareKind::topk_set})
      if (compare_kind_name(k) == kind) r.kind = k, kind_ok = true;
    if (!kind_ok) throw std::runtime_error("kind '" + kind + "' unknown");
    const auto v = j.at("verdict").get<std::string>();
    bool verdict_ok = false;
    for (auto x : {Verdict::BITEXACT, Verdict::WITHIN_BOUND, Verdict::FAIL, Verdict::NONFINITE, Verdict::MASK_MISMATCH,
                   Verdict::STRUCTURE, Verdict::SHAPE, Verdict::DTYPE, Verdict::ERROR})
      if (verdict_name(x) == v) r.verdict = x, verdict_ok = true;
    if (!verdict_ok) throw std::runtime_error("verdict '" + v + "' unknown");
    r.message = j.at("message").get<std::string>();
    r.numel = j.at("numel").get<std::int64_t>();
    r.mismatches = j.at("mismatches").get<std::int64_t>();
    const auto& t = j.at("tolerance");
    r.tol = Tolerance{t.at("profile").get<std::string>(), num_from(t.at("rtol")), num_from(t.at("atol"))};
    r.notes = j.at("notes").get<std::vector<std::string>>();
    if (j.contains("first")) r.first = loc_from(j["first"]);
    if (j.contains("worst")) r.worst = loc_from(j["worst"]);
    if (j.contains("emulation")) {
      r.emulation = j["emulation"].at("profile").get<std::string>();
      r.emulation_mismatches = j["emulation"].at("mismatches").get<std::int64_t>();
    }
    if (j.contains("bounded")) {
      const auto& b = j["bounded"];
      BoundedStats s;
      s.compared = b.at("compared").get<std::int64_t>();
      s.max_abs = num_from(b.at("max_abs"));
      s.max_rel = num_from(b.at("max_rel"));
      s.max_err_over_m = num_from(b.at("max_err_over_m"));
      s.max_ulp = num_from(b.at("max_ulp"));
      s.ulp_bits = b.at("ulp_bits").get<std::int64_t>();
      s.ulp_compared = b.value("ulp_compared", std::int64_t{0});
      s.cosine = num_from(b.at("cosine"));
      s.calc_diff = num_from(b.at("calc_diff"));
      s.ratio_rel_1e3 = num_from(b.at("ratio_rel_lt_1e-3"));
      s.ratio_rel_5e3 = num_from(b.at("ratio_rel_lt_5e-3"));
      s.min_rtol = num_from(b.at("min_rtol"));
      r.bounded = s;
    }
    if (j.contains("plot")) {
      const auto& p = j["plot"];
      auto pd = std::make_shared<PlotData>();
      if (p.contains("heatmap")) {
        const auto& h = p["heatmap"];
        HeatmapData hm;
        hm.rows = h.at("rows").get<std::int64_t>();
        hm.cols = h.at("cols").get<std::int64_t>();
        hm.gh = h.at("gh").get<std::int64_t>();
        hm.gw = h.at("gw").get<std::int64_t>();
        hm.code = io::base64_decode(h.at("code").get<std::string>());
        hm.flag = io::base64_decode(h.at("flag").get<std::string>());
        if (hm.gh < 0 || hm.gw < 0 || hm.gh > 4096 || hm.gw > 4096 || hm.code.size() != static_cast<std::size_t>(hm.gh * hm.gw) ||
            hm.flag.size() != hm.code.size())
          throw std::runtime_error("plot.heatmap: grid and data sizes disagree");
        pd->heat = std::move(hm);
      }
      if (p.contains("hist")) {
        const auto& h = p["hist"];
        HistData hd;
        hd.lo = h.at("lo").get<double>();
        hd.step = h.at("step").get<double>();
        hd.bins = h.at("bins").get<std::vector<std::int64_t>>();
        hd.zero = h.at("zero").get<std::int64_t>();
        hd.below = h.at("below").get<std::int64_t>();
        hd.over = h.at("over").get<std::int64_t>();
        if (!(hd.step > 0) || hd.bins.size() > 4096) throw std::runtime_error("plot.hist: bad bins");
        pd->hist = std::move(hd);
      }
      if (p.contains("worst"))
        for (const auto& l : p["worst"]) pd->worst.push_back(loc_from(l));
      if (p.contains("row_recall")) {
        pd->row_recall = p.at("row_recall").get<std::vector<float>>();
        pd->row_band = p.at("row_band").get<std::vector<std::int64_t>>();
        pd->row_step = p.at("row_step").get<std::int64_t>();
      }
      if (p.contains("rows"))
        for (const auto& x : p["rows"]) {
          TopkRowPlot rp;
          rp.row = x.at("row").get<std::int64_t>();
          rp.len = x.at("len").get<std::int64_t>();
          rp.k = x.at("k").get<std::int64_t>();
          rp.tau = num_from(x.at("tau"));
          rp.u_tau = num_from(x.at("u_tau"));
          rp.rank = x.at("rank").get<std::vector<std::int64_t>>();
          for (const auto& sv : x.at("score")) rp.score.push_back(num_from(sv));
          for (const auto& m : x.at("marks")) rp.marks.emplace_back(m.at(0).get<std::int64_t>(), m.at(1).get<int>());
          rp.zoom0 = x.at("zoom0").get<std::int64_t>();
          for (const auto& zv : x.at("zoom")) rp.zoom.push_back(num_from(zv));
          rp.zoom_flag = x.at("zoom_flag").get<std::vector<int>>();
          if (rp.rank.size() != rp.score.size() || rp.zoom.size() != rp.zoom_flag.size()) throw std::runtime_error("plot.rows: sizes disagree");
          pd->rows.push_back(std::move(rp));
        }
      r.plot = std::move(pd);
    }
    if (j.contains("topk")) {
      const auto& k = j["topk"];
      TopkStats s;
      s.rows = k.at("rows").get<std::int64_t>();
      s.recall = num_from(k.at("recall"));
      s.min_recall = num_from(k.at("min_recall"));
      s.jaccard = num_from(k.at("jaccard"));
      s.band = k.at("band").get<std::int64_t>();
      s.max_band = k.at("max_band").get<std::int64_t>();
      s.swaps = k.at("swaps").get<std::int64_t>();
      s.hard_misses = k.at("hard_misses").get<std::int64_t>();
      s.hard_extras = k.at("hard_extras").get<std::int64_t>();
      s.examples = k.at("examples").get<std::vector<std::string>>();
      r.topk = s;
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("a check result as `check --json` writes it: ") + e.what());
  }
  return r;
}

}  // namespace dsa::cmp
