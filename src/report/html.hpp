// The HTML report (`check --html`, `dsa-check report R.json --html`): one self-contained file — inline CSS and SVG,
// heatmaps as PNG data URIs inside the SVG, no script, no network. Sections: summary (sorted by severity), layers
// (stages in pipeline order, local and end-to-end verdicts, the first divergence highlighted), then one section per
// check with its plots (PlotData: err/M heatmap with the tolerance on the colour bar, non-finite and mask positions,
// err/M histogram with the bound line, worst elements decoded; top-k recall and band per row, score-vs-rank of the
// worst rows with tau, the band and the kernel's wrong picks). The output depends on the report only (no date).
#pragma once
#include <string>

#include "report/run_report.hpp"

namespace dsa::report {

std::string html_report(const RunReport& r, const std::string& title);

}  // namespace dsa::report
