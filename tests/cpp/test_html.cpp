// The HTML report (issue #19): structure on the demo files (one section per check, the plots each check's PlotData
// calls for, links that resolve), the same bytes from a saved JSON report, and a 16M-element logits tensor: max-pooled
// to 512 x 512 (one bad element stays visible), the report under 5 MB.
#include <doctest/doctest.h>

#include <cmath>
#include <regex>
#include <set>
#include <string>

#include "compare/compare.hpp"
#include "pipeline/check.hpp"
#include "report/html.hpp"

using namespace dsa;

namespace {

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

report::RunReport demo_report(bool plots) {
  pipeline::RunOptions o;
  o.files = {std::string(DSA_SOURCE_DIR) + "/golden/demo/demo_pass.h5", std::string(DSA_SOURCE_DIR) + "/golden/demo/demo_fail.h5"};
  o.check.plots = plots;
  return pipeline::run_checks(o);
}

}  // namespace

TEST_CASE("html: demo report structure - one section per check, the plots its PlotData calls for, links resolve") {
  const auto rep = demo_report(true);
  REQUIRE(rep.problems.empty());
  const std::string h = report::html_report(rep, "demo");
  std::size_t heat = 0, rows = 0, recall = 0;
  for (const auto& r : rep.results) {
    if (r.group == "consistency") continue;  // the across-call line (0 repeated rows compared): no pictures
    REQUIRE(r.plot);
    heat += r.plot->heat ? 1 : 0;
    recall += r.plot->row_recall.empty() ? 0 : 1;
    rows += r.plot->rows.size();
  }
  CHECK(heat == 4);    // logits: outputs and expected of both files
  CHECK(recall == 4);  // top-k: likewise
  CHECK(count(h, "class=\"plot heat\"") == heat);
  CHECK(count(h, "class=\"plot hist\"") == heat);
  CHECK(count(h, "class=\"plot recall\"") == recall);
  CHECK(count(h, "class=\"plot band\"") == recall);
  CHECK(count(h, "class=\"plot topkrow\"") == rows);
  CHECK(count(h, "class=\"plot zoom\"") == rows);
  CHECK(count(h, "<svg") == 2 * heat + 2 * recall + 2 * rows);
  CHECK(count(h, "<section class=\"check") == rep.results.size());
  CHECK(count(h, "<section class=\"check failing\"") == static_cast<std::size_t>(rep.failed()));
  // Every internal link has its target; ids are unique.
  std::set<std::string> ids, hrefs;
  const std::regex id_re("id=\"([^\"]+)\""), href_re("href=\"#([^\"]+)\"");
  for (std::sregex_iterator it(h.begin(), h.end(), id_re), end; it != end; ++it) CHECK(ids.insert((*it)[1]).second);
  for (std::sregex_iterator it(h.begin(), h.end(), href_re), end; it != end; ++it) hrefs.insert((*it)[1]);
  for (const auto& x : hrefs) CHECK_MESSAGE(ids.count(x), x);
  // Self-contained: no script, no external resource.
  CHECK(h.find("<script") == std::string::npos);
  CHECK(h.find("http://") == h.find("http://www.w3.org/2000/svg"));
  CHECK(h.find("https://") == std::string::npos);
  // The failing top-k plots the positional bug's missed must-picks; the failing logits' worst element is decoded.
  CHECK(h.find("missed must-pick at rank") != std::string::npos);
  CHECK(h.find("<h3>Largest err/M</h3>") != std::string::npos);
  // Deterministic, and the same bytes from the saved JSON report.
  CHECK(report::html_report(demo_report(true), "demo") == h);
  report::RunReport back;
  for (const auto& r : rep.results) back.results.push_back(cmp::from_json(cmp::to_json(r)));
  back.problems = rep.problems;
  back.divergences = rep.divergences;
  CHECK(report::html_report(back, "demo") == h);
  // Without plots (no --html) the comparators collect nothing.
  for (const auto& r : demo_report(false).results) CHECK(!r.plot);
}

TEST_CASE("html: a 16M-element logits tensor is max-pooled to 512 x 512 - one bad element visible - report under 5 MB") {
  const std::int64_t R = 4096, C = 4096;
  Tensor ref(DType::f32, {R, C}), out(DType::f32, {R, C});
  for (std::int64_t i = 0; i < R * C; ++i) {
    const float v = static_cast<float>(std::sin(0.001 * static_cast<double>(i)) * 10.0);
    ref.data<float>()[i] = v;
    out.data<float>()[i] = v * (1.0f + 1e-6f);  // inside the bound everywhere ...
  }
  out.data<float>()[1234 * C + 3001] += 50.0f;  // ... but one element
  out.data<float>()[4000 * C + 17] = std::numeric_limits<float>::quiet_NaN();
  RefTensor rt;
  rt.name = "logits";
  rt.kind = CompareKind::bounded;
  rt.value = ref;
  rt.describe = [](std::int64_t f) { return "row " + std::to_string(f / 4096) + " key " + std::to_string(f % 4096); };
  cmp::BoundedAccumulator a(cmp::Tolerance{"sm90-fp8", 1.0 / 1024, 0}, rt, DType::f32);
  a.collect_plot(R, C);
  a.add(out, rt);
  cmp::CheckResult r = a.finish();
  r.case_name = "big";
  r.file = "big.h5";
  r.stage = "indexer.logits_ragged";
  REQUIRE(r.plot);
  const auto& hm = *r.plot->heat;
  CHECK(hm.gh == 512);
  CHECK(hm.gw == 512);
  const std::size_t bad = static_cast<std::size_t>((1234 * 512 / 4096) * 512 + 3001 * 512 / 4096);
  CHECK(hm.code[bad] > cmp::err_code(1.0 / 1024));  // the pooled cell keeps the one bad element's err/M
  std::size_t over = 0;
  for (auto c : hm.code) over += c > cmp::err_code(1.0 / 1024) ? 1 : 0;
  CHECK(over == 1);
  CHECK(hm.flag[static_cast<std::size_t>((4000 * 512 / 4096) * 512 + 17 * 512 / 4096)] == 1);
  CHECK(r.plot->worst.front().where == "row 1234 key 3001");
  std::int64_t hist_total = r.plot->hist->zero + r.plot->hist->below + r.plot->hist->over;
  for (auto b : r.plot->hist->bins) hist_total += b;
  CHECK(hist_total == r.bounded->compared);
  report::RunReport rep;
  rep.results.push_back(r);
  const std::string h = report::html_report(rep, "big");
  MESSAGE("16M-element report: " << h.size() << " bytes");
  CHECK(h.size() < std::size_t{5} << 20);
}
