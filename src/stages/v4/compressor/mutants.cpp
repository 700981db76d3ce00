// v4.compressor: selftest cases and mutants modelled on real bug shapes (issue list: halves swapped, ape indexed from
// the step start, RoPE at the emitting position, previous group not masked at j = 0, state written under block id 0,
// softmax over channels, cycle ring off by one), each with the verdict it must get.
#include <cmath>
#include <cstring>

#include "numerics/formats.hpp"
#include "numerics/rope.hpp"
#include "stage/mutant_kit.hpp"
#include "stages/v4/compressor/stage.hpp"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::v4::compressor {

using namespace mutant;
using cmp::Verdict;
using V = std::vector<Verdict>;
using golden::I;

std::vector<golden::GoldenSpec> selftest_cases() {
  const char* st = "v4.compressor";
  const char* g = "v4c.step";
  return {
      // every request starts at p = 1 (mod 4): an ape indexed from the step start is off by one row everywhere
      {.name = "v4c4", .stage = st, .generator = g, .seed = 31, .dims = {{"D", 128}, {"H", 32}, {"bs", 8}},
       .lists = {{"start_pos", {5, 1, 9}}, {"q_len", {7, 8, 3}}}, .params = {{"zero_blocks", 1}},
       .attrs = {{"cmp_ratio", I(4)}, {"coff", I(2)}}, .doc = "C4 mid-group steps, j = 0, block id 0 entries"},
      {.name = "v4c128_ring", .stage = st, .generator = g, .seed = 32, .dims = {{"D", 128}, {"H", 32}, {"bs", 32}},
       .lists = {{"start_pos", {120}}, {"q_len", {12}}}, .attrs = {{"cmp_ratio", I(128)}, {"coff", I(1)}, {"cache_mode", I(2)}},
       .doc = "C128 cycle ring read back over the group"},
      {.name = "v41c2", .stage = st, .generator = g, .seed = 33, .dims = {{"D", 128}, {"H", 32}, {"bs", 8}},
       .lists = {{"start_pos", {3, 0, 7}}, {"q_len", {8, 6, 5}}}, .params = {{"projections", 1}},
       .attrs = {{"cmp_ratio", I(2)}, {"coff", I(1)}, {"model", golden::S("v41")}, {"variant", golden::S("ref")}},
       .doc = "DeepSeek-V4.1 ratio 2, the reference's numerics (NVFP4 QAT), odd starts; the kernel's projections as "
              "inputs (no GEMM bound: a bf16 rounding the bound does not straddle is the reference's)"},
      {.name = "v41c2_ring", .stage = st, .generator = g, .seed = 34, .dims = {{"D", 128}, {"H", 32}, {"bs", 8}},
       .lists = {{"start_pos", {37, 65}}, {"q_len", {6, 5}}},
       .attrs = {{"cmp_ratio", I(2)}, {"coff", I(1)}, {"model", golden::S("v41")}, {"cache_mode", I(2)}, {"ring_rows", I(32)}},
       .doc = "DeepSeek-V4.1 ratio 2 on the Ascend compressor_v2's 32-row ring"},
  };
}

namespace {
// Outputs of the reference run with a bug (the reference's own code path with the bug switched on).
std::function<void(Case&, const Expected&, std::uint64_t)> with_bug(Bug bug) {
  return [bug](Case& c, const Expected&, std::uint64_t) {
    BoundCase b;
    if (auto pr = validate_case(c, false, &b); !pr.empty()) throw SchemaError(pr.front());
    StepResult s = run_step(c, dynamic_cast<const Params&>(*b.params), bug, 1);
    output(c, "cmp_kv") = s.cmp_kv;
    output(c, "state_cache") = s.state;
  };
}
}  // namespace

std::vector<Mutant> mutants() {
  return {
      {"v4c_halves_swapped", "B20", "v4c4", V{Verdict::FAIL, Verdict::NONFINITE},
       "overlap halves swapped: the previous group pooled with the b-half, the current with the a-half", with_bug(Bug::halves_swapped)},
      {"v4c_prev_group_not_masked", "B17", "v4c4", V{Verdict::FAIL}, "j = 0: the missing previous group enters the softmax as kv 0, score 0",
       with_bug(Bug::prev_not_masked)},
      {"v4c_softmax_over_channels", "v4 §2.2", "v4c4", V{Verdict::FAIL, Verdict::NONFINITE},
       "the gate normalised over the channels of each token instead of over the rows per channel", with_bug(Bug::softmax_over_channels)},
      {"v4c_ape_from_step_start", "v4 §2.1", "v4c4", V{Verdict::FAIL}, "ape indexed by the position in the step, (p - start_pos) mod r",
       buggy([](Case& c) {
         edit_input(c, "ape", [](Tensor& t) {  // every request of the case starts at p = 1 mod 4
           const std::int64_t r = t.dim(0), C2 = t.dim(1);
           Tensor o = t.clone();
           for (std::int64_t k = 0; k < r; ++k)
             std::memcpy(t.data<float>() + k * C2, o.data<float>() + ((k + r - 1) % r) * C2, static_cast<std::size_t>(C2) * 4);
         });
       })},
      {"v4c_rope_at_emitting_position", "B43", "v4c4", V{Verdict::FAIL}, "RoPE at the emitting position jr + r - 1 instead of the group start jr",
       buggy([](Case& c) {
         const Tensor& cu = c.input("cu_seqlens");
         const Tensor& sp = c.input("start_pos");
         const std::int64_t r = c.input("ape").dim(0);
         Tensor cs = c.input("rope_cos").clone(), sn = c.input("rope_sin").clone();
         const std::int64_t rope = cs.dim(1);
         std::int64_t row = 0;
         for (std::int64_t b = 0; b + 1 < cu.numel(); ++b)
           for (std::int64_t j = sp.int_at(b) / r; j < (sp.int_at(b) + cu.int_at(b + 1) - cu.int_at(b)) / r; ++j, ++row)
             num::v4_rope_row(rope, j * r + r - 1, cs.data<float>() + row * rope, sn.data<float>() + row * rope);
         c.inputs["rope_cos"] = cs;
         c.inputs["rope_sin"] = sn;
       })},
      {"v4c_state_written_under_block0", "B38", "v4c4", V{Verdict::FAIL, Verdict::NONFINITE},
       "state rows of tokens whose table entry is 0 written into block 0",
       [](Case& c, const Expected&, std::uint64_t seed) {
         // The kernel writes the rows of tokens whose table entry is 0 as if block 0 were theirs: the reference with
         // those entries pointing at a block no request uses, that block's rows then moved into block 0.
         const Tensor& tab = c.input("state_block_table");
         const std::int64_t nblk = c.input("state_cache_in").dim(0);
         std::int64_t spare = -1;
         for (std::int64_t b = nblk - 1; b > 0 && spare < 0; --b) {
           bool used = false;
           for (std::int64_t i = 0; i < tab.numel(); ++i) used = used || tab.int_at(i) == b;
           if (!used) spare = b;
         }
         if (spare < 0) throw std::runtime_error("v4c_state_written_under_block0: the base case has no spare state block");
         TensorMap o = buggy_outputs(c, [spare](Case& x) {
           edit_input(x, "state_block_table", [spare](Tensor& t) {
             for (std::int64_t i = 0; i < t.numel(); ++i)
               if (t.int_at(i) == 0) iset(t, i, spare);
           });
         }, seed);
         Tensor& st = o.at("state_cache");
         const Tensor& in = c.input("state_cache_in");
         const std::size_t blk = static_cast<std::size_t>(st.dim(1) * st.dim(2)) * 4;
         std::memcpy(st.data<float>(), st.data<float>() + spare * st.dim(1) * st.dim(2), blk);                    // into block 0
         std::memcpy(st.data<float>() + spare * st.dim(1) * st.dim(2), in.data<float>() + spare * in.dim(1) * in.dim(2), blk);  // spare as it was
         c.outputs = std::move(o);
       }},
      {"v41c_ape_added", "v41 §4", "v41c2", V{Verdict::FAIL},
       "a V4 port on V4.1: a position-in-group embedding added to the ratio-2 scores (V4.1 has no APE)",
       buggy([](Case& c) {
         const std::int64_t C2 = c.input("kv_proj").dim(1);
         Tensor ape(DType::f32, {2, C2});
         for (std::int64_t i = 0; i < ape.numel(); ++i) ape.data<float>()[i] = (i % 2 ? 0.75f : -0.5f) * static_cast<float>(1 + i % 3);
         c.inputs["ape"] = ape;
       })},
      {"v41c_quant_from_fp32", "B49", "v41c2", V{Verdict::FAIL},
       "the entry quantized to NVFP4 from the unrounded fp32 norm and RoPE result instead of the reference's bf16 values",
       buggy([](Case& c) {
         set_attr(c, "variant", golden::S("vllm-cuda"));
         set_attr(c, "pooled_bf16", std::int64_t{1});
       })},
      {"v41c_ring_rows_ignored", "v41 §4", "v41c2_ring", V{Verdict::FAIL, Verdict::NONFINITE},
       "the state ring indexed p mod (coff r) = p mod 2 instead of the compressor_v2's 32 rows per request",
       buggy([](Case& c) { c.attrs.erase("ring_rows"); })},
      {"v4c_ring_off_by_one", "B37", "v4c128_ring", V{Verdict::FAIL, Verdict::NONFINITE}, "cycle ring slot (p + 1) mod (coff r)",
       with_bug(Bug::ring_off_by_one)},
  };
}

}  // namespace dsa::v4::compressor
