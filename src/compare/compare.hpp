// Comparators of `dsa-check check`: one per CompareKind (bytes, bounded, topk_set), plus reference-free sanity
// findings, all producing a CheckResult (verdict + metrics) for one case x tensor. Nothing here knows a stage: the
// reference (RefTensor) and the schema carry everything a comparator needs.
//
// Verdicts: BITEXACT and WITHIN_BOUND pass; FAIL (values outside the bound / set rule), NONFINITE, MASK_MISMATCH,
// STRUCTURE, SHAPE, DTYPE fail; ERROR = the check could not run (reference error): exit code 2.
#pragma once
#include <cstdint>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tensor/expected.hpp"
#include "tensor/case.hpp"

namespace dsa::cmp {

enum class Verdict { BITEXACT, WITHIN_BOUND, FAIL, NONFINITE, MASK_MISMATCH, STRUCTURE, SHAPE, DTYPE, ERROR };
std::string_view verdict_name(Verdict v);
inline bool verdict_pass(Verdict v) { return v == Verdict::BITEXACT || v == Verdict::WITHIN_BOUND; }

// |out - ref| <= rtol * M + atol.
struct Tolerance {
  std::string profile;  // name of the profile it came from ("" = ad hoc)
  double rtol = 0.0;
  double atol = 0.0;
};

// One offending element, decoded.
struct Location {
  std::int64_t flat = -1;
  std::string where;  // from RefTensor::describe
  double out = 0, ref = 0, err = 0, bound = 0;
  std::string out_bits, ref_bits;  // hex bits of the two elements (shown when their values print alike)
  double ulps = -1;                // |out - ref| in ulps of the output format at the reference (-1: not applicable)
  bool has_values = true;          // false: a structural location (top-k), no element values to show
};

struct BoundedStats {
  std::int64_t compared = 0;                 // defined elements with a finite reference
  double max_abs = 0, max_rel = 0, max_err_over_m = 0, max_ulp = 0;
  double cosine = 1, calc_diff = 0;          // over defined finite pairs (double)
  double ratio_rel_1e3 = 1, ratio_rel_5e3 = 1;  // msprobe: fraction with rel err < 0.1 % / < 0.5 %
  double min_rtol = 0;                       // smallest rtol (with the atol in use) that passes; inf if none
  std::int64_t ulp_bits = 24;                // precision the ULPs are counted in (24 fp32, 8 bf16)
  std::int64_t ulp_compared = 0;             // elements whose |ref| exceeds their bound (max_ulp is over these only)
};

struct TopkStats {
  std::int64_t rows = 0;
  double recall = 1, jaccard = 1;            // mean over rows with >= 1 expected entry
  double min_recall = 1;
  std::int64_t band = 0, max_band = 0;       // in-band candidates (neither forced in nor forced out)
  std::int64_t swaps = 0;                    // selected in-band candidates the reference did not pick (accepted)
  std::int64_t hard_misses = 0;              // candidates that must be selected and are not
  std::int64_t hard_extras = 0;              // selected candidates that must not be
  std::vector<std::string> examples;         // first few violations, decoded with scores
};

// Pictures of one check for the HTML report (`check --html`), computed by the comparators only when asked
// (CheckOptions::plots). err/M values are stored as byte codes on a log scale (err_code / err_of_code).
inline constexpr double kPlotLogLo = -9.0, kPlotLogHi = 3.0;  // log10(err/M) of codes 1 and 255
std::uint8_t err_code(double err_over_m);  // 1..255 (err/M = 0 -> 1, >= 1e3 or inf -> 255)
double err_of_code(std::uint8_t code);     // the lower edge of a code's err/M range (code 1 -> 0)
struct HeatmapData {
  std::int64_t rows = 0, cols = 0;  // the tensor viewed as [rows, cols] (cols = its last dim)
  std::int64_t gh = 0, gw = 0;      // the grid: each cell the max over a block of rows x cols (<= 512 x 512)
  std::vector<std::uint8_t> code;   // per cell: max err/M as err_code, 0 = nothing compared in the cell
  std::vector<std::uint8_t> flag;   // per cell: bit 0 a non-finite mismatch, bit 1 a -inf mask mismatch
};
struct HistData {
  double lo = -9.0, step = 0.25;      // bins of log10(err/M): [lo + i*step, lo + (i+1)*step)
  std::vector<std::int64_t> bins;
  std::int64_t zero = 0, below = 0, over = 0;  // err = 0, err/M under the first bin, over the last (or inf)
};
struct TopkRowPlot {
  std::int64_t row = 0, len = 0, k = 0;
  double tau = 0, u_tau = 0;
  std::vector<std::int64_t> rank;    // the row's reference scores sorted descending, sampled at these ranks
  std::vector<double> score;
  std::vector<std::pair<std::int64_t, int>> marks;  // (rank, kind): 1 missed must-pick, 2 out-of-band pick, 3 accepted swap
  std::int64_t zoom0 = 0;            // ranks [zoom0, zoom0 + zoom.size()) around k, exact
  std::vector<double> zoom;
  std::vector<int> zoom_flag;        // bit 0 picked by the kernel, bits 1-2 class (0 must, 1 band, 2 must-not)
};
struct PlotData {
  std::optional<HeatmapData> heat;
  std::optional<HistData> hist;
  std::vector<Location> worst;               // up to 16 elements of largest err/M, decoded
  std::vector<Location> breaks;              // the first 16 elements that break the -inf mask or are non-finite
                                             // where the reference is not (what a MASK_MISMATCH / NONFINITE is about)
  std::vector<float> row_recall;             // top-k: recall@k per row (rows grouped by row_step: the minimum)
  std::vector<std::int64_t> row_band;        // top-k: band size per row (group maximum)
  std::int64_t row_step = 1;
  std::vector<TopkRowPlot> rows;             // top-k: the worst rows
};

struct CheckResult {
  std::string file, case_name, stage, group = "outputs", tensor;  // group: outputs | expected | determinism
  std::string step;                         // the case's attr `step` ("" when absent): first-divergence groups
  CompareKind kind = CompareKind::bytes;
  Verdict verdict = Verdict::BITEXACT;
  std::string message;                      // one line, human
  Tolerance tol;                            // bounded / topk
  std::int64_t numel = 0, mismatches = 0;   // bytes: differing elements; bounded: failing elements
  std::optional<Location> first, worst;
  std::optional<BoundedStats> bounded;
  std::optional<TopkStats> topk;
  std::string emulation;                    // emulation profile compared against ("" = none)
  std::int64_t emulation_mismatches = -1;   // elements not bit-exact vs the emulation (-1 = not compared)
  std::vector<std::string> notes;           // extra lines (-v), sanity findings
  // Layer dumps (pipeline/layer.hpp): the layer the case belongs to ("" = none) and the case's position in the
  // layer's pipeline order. End-to-end results (the reference chained from the layer's first inputs) are
  // `informational`: shown and saved with their verdict, never counted as a failure (drift through bounded stages is
  // not a kernel fault; each kernel is judged by its local result).
  std::string layer;
  std::int64_t layer_pos = -1;
  bool informational = false;
  // Where the result stands in a full run: the file's index on the command line and the index (in that file) of the
  // case, or of a layer's first case. Shards keep the full run's numbers, so `merge` restores the full run's order
  // (and its first-divergence lines) whatever the partition. -1: a run-level result (determinism, cross-checks).
  std::int64_t file_pos = -1, case_pos = -1;
  std::shared_ptr<const PlotData> plot;     // only with CheckOptions::plots
  bool pass() const { return informational || verdict_pass(verdict); }
  std::string name() const { return case_name + "/" + group + "/" + tensor; }
};
nlohmann::json to_json(const CheckResult& r);
// The inverse of to_json (merging saved shard reports); std::runtime_error naming the missing or malformed field.
CheckResult from_json(const nlohmann::json& j);
// Number to JSON: non-finite doubles become the strings "inf", "-inf", "nan".
nlohmann::json num_json(double x);

// ---- comparators (shape and dtype are checked by compare_tensor; these assume they match) ----
// NaN policy of the bytes comparator for float dtypes: by default any NaN code equals any NaN code of the same format
// (torch's CUDA casts write 0x7F / 0x7FFFFFFF where other producers write 0xFF / 0x7FC00000: both mean NaN);
// `exact` requires the reference's bits.
enum class NanPolicy { any_code, exact };
CheckResult compare_bytes(const Tensor& out, const RefTensor& ref, NanPolicy nan = NanPolicy::any_code);
// `against`: the tensor to compare with (ref.value, or an emulation); magnitude/defined/mask from `ref`.
CheckResult compare_bounded(const Tensor& out, const RefTensor& ref, const Tolerance& tol, const Tensor* against = nullptr);
// The bounded comparator over row tiles of one output (Stage::tiling), fed in order: the same result, metrics and
// message as compare_bounded over the whole tensor. Each tile's RefTensor carries its flat_offset; its describe()
// takes whole-output flat indices.
// Determinism: every sum (cosine, calc_diff, the systematic gate, the peers) runs over fixed blocks of kSumBlock
// whole-output flat indices: within a block 8 lanes (flat index mod 8) summed in increasing index, the lanes added
// ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)), the blocks added in increasing order; counts, maxima and the kept elements
// (first, worst, top) are chosen by value then by lowest index. So the blocks run on any number of threads, and any
// tiling gives the same bits.
class BoundedAccumulator {
 public:
  static constexpr std::int64_t kSumBlock = 4096;
  BoundedAccumulator(const Tolerance& tol, const RefTensor& ref, DType out_dtype);
  void set_threads(int threads) { threads_ = threads; }  // <= 0: OpenMP's default
  void add(const Tensor& out, const RefTensor& ref, const Tensor* against = nullptr);
  // Also collect the heatmap (the whole output viewed as [rows, cols]), histogram and worst elements (PlotData).
  void collect_plot(std::int64_t rows, std::int64_t cols);
  CheckResult finish() const;
  std::int64_t bound_failures() const { return bound_fail_; }  // finite elements outside the bound so far
  std::int64_t mask_mismatches() const { return mask_; }        // elements breaking the -inf mask so far
  std::int64_t nonfinite_mismatches() const { return nonfinite_; }  // NaN / inf pattern differences so far

 private:
  struct PeerAcc {
    PeerMetric pm;
    std::int64_t beyond;
    double xy, xx, yy;
  };
  // The sums, by index: sxy, sxx, syy, then the systematic-error gate's (RefTensor::systematic_floor) over compared
  // finite pairs, d = out - ref, e = ref: d, dd, de, ee, eedd, eeed, eeee, |e|; then per peer xy, xx, yy.
  enum Sum { kSxy, kSxx, kSyy, kGd, kGdd, kGde, kGee, kGeedd, kGeeed, kGeeee, kGabs, kNSum };
  Tolerance tol_;
  std::string name_;
  int p_ = 24, emin_ = -126, threads_ = 0;
  BoundedStats s_;
  std::int64_t numel_ = 0, nonfinite_ = 0, mask_ = 0, bound_fail_ = 0, bit_diff_ = 0, n_1e3_ = 0, n_5e3_ = 0;
  double sxy_ = 0, sxx_ = 0, syy_ = 0, worst_key_ = -1;
  std::optional<Location> first_nf_, first_mask_, first_fail_, worst_;
  std::vector<PeerAcc> peers_;
  double sys_floor_ = 0, g_n_ = 0, g_d_ = 0, g_dd_ = 0, g_de_ = 0, g_ee_ = 0, g_eedd_ = 0, g_eeed_ = 0, g_eeee_ = 0, g_abs_e_ = 0;
  // The open block (a tile ended inside it): its index and lanes ([sum][lane], the peers' after kNSum).
  std::int64_t open_block_ = -1;
  std::vector<double> open_lanes_;
  void close_block(const double* lanes);  // adds one block's lane totals to the sums
  CheckResult finish_closed() const;
  // The largest err/M among passing elements (a passing result names its worst element) and, where the bound is 0,
  // the largest error in ulps of the reference.
  std::optional<Location> top_pass_;
  double top_pass_key_ = -1, zero_bound_ulp_ = 0;
  std::shared_ptr<PlotData> plot_;
  std::vector<double> cell_max_;                 // per grid cell, -1 = none
  std::vector<std::pair<double, Location>> top_;  // largest err/M, a min-heap of kWorst
};
CheckResult compare_topk(const Tensor& out, const RefTensor& ref, const Tolerance& tol, bool plots = false);

// Classification of one top-k candidate against the reference band (tie-aware rule of spec v32 §5.5).
enum class Band { must, band, must_not };
struct TopkRow {
  std::int64_t len = 0, n = 0;        // candidates, expected selections = min(k, len)
  double tau = 0, u_tau = 0;          // k-th score and its bound
  std::vector<Band> cls;              // per candidate position
  std::vector<double> score, bound;   // per candidate position (NaN mapped to +inf)
};
TopkRow topk_row(const TopkRef& t, std::int64_t row, const Tolerance& tol);

// Reference-free findings (validation_anchors B5, B6, B22) on a kernel output; with a reference, findings the
// reference itself exhibits are dropped. nullopt = nothing to say.
std::optional<std::string> finding_not_positive(const Tensor& out, const RefTensor* ref);   // B5 (scales)
std::optional<std::string> finding_constant_rows(const Tensor& out, const RefTensor* ref);  // B6 (logit rows)
// B6 pieces for row tiles: the constant rows of `out` the reference does not share (whole-output row numbers, from
// ref->flat_offset), and the finding's text.
std::vector<std::int64_t> constant_rows_unlike_ref(const Tensor& out, const RefTensor* ref);
std::string constant_rows_finding(std::size_t count, std::int64_t first_row);
std::optional<std::string> finding_positional_topk(const Tensor& out, const RefTensor& ref);  // B22

}  // namespace dsa::cmp
