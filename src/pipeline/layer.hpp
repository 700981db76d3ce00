// Layer dumps (issue #17): the cases of one file joined by Case::links (an input that is another case's output,
// through an HDF5 hard/soft link or attr from:<input>) form a layer, checked two ways per case, in pipeline order:
//   local       the stage reference on the case's own inputs, i.e. the kernels' upstream outputs: a local FAIL is a
//               fault of THIS kernel (group outputs / expected, as for any case);
//   end-to-end  the reference chained from the layer's first inputs: each linked input is replaced by what the
//               chain computed upstream (group "end-to-end" / "expected end-to-end", informational: drift through
//               bounded stages is no kernel's fault). Through a bounded upstream output the consumer gets the
//               upstream's error bound as RefOptions::input_bounds (a top-k's band widens by it); through a top-k the
//               consumer gets the kernel's own selection when it passed (it differs from the chain's only inside
//               the band: attention is then judged on the kernel's indices, and says so), else the chain's.
// first_divergence (check.hpp) names the first case in pipeline order whose local verdict fails.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "pipeline/check_case.hpp"
#include "report/run_report.hpp"

namespace dsa::pipeline {

struct Layer {
  std::string name;                // attr `layer` shared by every case of it, else its first case's name
  std::vector<std::size_t> order;  // indices into the cases, upstream first (ties: stage pipeline_order, file order)
};

// The layers among `cases` (all of one run; links never cross files): connected components of >= 2 cases.
std::vector<Layer> find_layers(const std::vector<Case>& cases);

// Every check of one layer, per case of l.order: its local results, then its end-to-end results. `params[i]` is
// case i's parsed Params (null: the case is checked alone by check_case and breaks the chain below it).
std::vector<std::vector<cmp::CheckResult>> check_layer(const Layer& l, const std::vector<Case>& cases,
                                                       const std::vector<ParamsPtr>& params, const CheckOptions& o);

}  // namespace dsa::pipeline
