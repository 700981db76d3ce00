// attn.v4_out: schema (vLLM-Ascend's tensor names), parse, table entry.
#include <omp.h>

#include <string>

#include "stages/attn/table.hpp"
#include "stages/attn/v4_out/stage.hpp"

namespace dsa::attn::v4_out {

namespace {

using i64 = std::int64_t;
const char* kName = "attn.v4_out";

Params parse(const Case& c, const AttrReader& a, std::vector<Problem>& pr) {
  Params p;
  auto bad = [&](const std::string& t, const std::string& want, const std::string& found) { pr.push_back({c.file, c.name, t, want, found}); };
  const Tensor& o = c.input("o");
  const Tensor& wa = c.input("wo_a");
  const Tensor& wb = c.input("wo_b");
  p.T = o.dim(0), p.N = o.dim(1), p.D = o.dim(2);
  p.G = a.i("o_groups");
  p.rope = a.i("rope_head_dim");
  if (p.G < 1 || p.N % p.G != 0)
    return bad("attr o_groups", "a divisor of the " + std::to_string(p.N) + " heads (8 V4-Flash, 16 V4-Pro)", std::to_string(p.G)), p;
  if (p.rope < 2 || p.rope % 2 != 0 || p.rope > p.D)
    return bad("attr rope_head_dim", "even, 2.." + std::to_string(p.D) + " (64 in DeepSeek-V4)", std::to_string(p.rope)), p;
  for (const char* n : {"cos", "sin"})
    if (c.input(n).numel() != p.T * p.rope)
      bad(std::string("inputs/") + n, "one fp32 row of rope_head_dim = " + std::to_string(p.rope) + " per token ([T, rope] or [T,1,1,rope])",
          std::to_string(c.input(n).numel()) + " elements");
  const i64 Ka = p.N * p.D / p.G;
  if (wa.dim(1) != Ka)
    bad("inputs/wo_a", "[G*o_lora_rank, N*D/G]: " + std::to_string(Ka) + " columns (one group's heads)", std::to_string(wa.dim(1)) + " columns");
  if (wa.dim(0) % p.G != 0)
    bad("inputs/wo_a", "rows a multiple of o_groups = " + std::to_string(p.G) + " (G*o_lora_rank)", std::to_string(wa.dim(0)));
  if (!pr.empty()) return p;
  p.R = wa.dim(0) / p.G;
  p.dim = wb.dim(0);
  if (wb.dim(1) != p.G * p.R)
    return bad("inputs/wo_b", "[dim, G*o_lora_rank]: " + std::to_string(p.G * p.R) + " columns", std::to_string(wb.dim(1)) + " columns"), p;
  for (const auto* g : {&c.outputs, &c.expected})
    if (auto it = g->find("o_lora"); it != g->end() && it->second.numel() != p.T * p.G * p.R)
      bad(std::string(g == &c.outputs ? "outputs" : "expected") + "/o_lora", "[T, G, o_lora_rank] = " + std::to_string(p.T * p.G * p.R) + " elements",
          std::to_string(it->second.numel()));
  const double T = static_cast<double>(p.T);
  check_reference_memory(c, T * (10.0 * static_cast<double>(p.N * p.D + p.G * p.R + p.dim)) +
                                16.0 * static_cast<double>(omp_get_max_threads()) * static_cast<double>(p.N * p.D + p.G * p.R),
                         "inputs/o, inputs/wo_a, inputs/wo_b", pr);
  check_reference_work(c, 3.0 * T * static_cast<double>(p.G * p.R * Ka + p.dim * p.G * p.R), "inputs/o, inputs/wo_a, inputs/wo_b", pr);
  return p;
}

}  // namespace

Stage stage() {
  using DT = DType;
  Stage s;
  s.name = kName;
  s.summary = "DeepSeek-V4 attention output: inverse RoPE at the query position, grouped wo_a (transpose_batchmatmul), wo_b";
  s.spec = "v4 §4.4";
  s.formula = "o_rot = inverse RoPE of the last rope_dim dims of o at the query position (bf16); o_lora[t,g,:] = o_rot[t,g,:] . wo_a[g]^T per head group g (bf16); output[t,:] = o_lora[t,:] . wo_b^T (bf16)";
  s.default_tolerance = "derived-bound";
  s.schema.attrs = {int_attr("o_groups", 8, "G: output-projection groups (8 V4-Flash, 16 V4-Pro); group g = heads [g N/G, (g+1) N/G)"),
                    int_attr("rope_head_dim", 64, "rope dims at the end of each head (the inverse rotation's partial_slice)")};
  s.schema.inputs = {
      {"o", {DT::bf16}, {"T,N,D"}, false, "sparse attention output (npu_sparse_attn_sharedkv's out)"},
      {"cos", {DT::f32}, {"T,rope", "T,1,1,rope"}, false, "per token: the interleave-duplicated cos row at its position"},
      {"sin", {DT::f32}, {"T,rope", "T,1,1,rope"}, false, "per token: the sin row (the op negates it: -sin)"},
      {"wo_a", {DT::bf16}, {"GR,K"}, false, "wo_a.weight [G*o_lora_rank, N*D/G] (viewed [G, o_lora_rank, N*D/G])"},
      {"wo_b", {DT::bf16}, {"dim,GR"}, false, "wo_b.weight [dim, G*o_lora_rank]"}};
  s.schema.outputs = {
      {{"o_rot", {DT::bf16}, {"T,N,D"}, true, "o after inplace_partial_rotary_mul(o, cos, -sin) on the last rope dims"}, CompareKind::bounded},
      {{"o_lora", {DT::bf16}, {"T,G,R", "T,?"}, true, "npu_transpose_batchmatmul output [T, G, o_lora_rank]"}, CompareKind::bounded},
      {{"output", {DT::bf16}, {"T,dim"}, true, "wo_b output [T, dim] (the layer's attention output)"}, CompareKind::bounded}};
  s.parse = typed_parse(&parse);
  s.impl[static_cast<std::size_t>(Backend::cpu)] = typed_impl(&cpu);
#ifdef DSA_CUDA_BACKEND
  s.impl[static_cast<std::size_t>(Backend::cuda)] = typed_impl(&cuda);
#endif
  s.generators = generators();
  s.goldens = goldens();
  s.selftest = selftest_cases();
  s.mutants = mutants();
  return s;
}

}  // namespace dsa::attn::v4_out
