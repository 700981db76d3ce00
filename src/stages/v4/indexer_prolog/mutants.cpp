// v4.indexer_prolog: selftest cases and mutants (issue list: scale stored fp32 instead of fp16; plus codes truncated,
// weights without the softmax scale, padded key rows written), each with the verdict it must get.
#include "stage/mutant_kit.hpp"
#include "stages/v4/indexer_prolog/stage.hpp"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::v4::indexer_prolog {

using namespace mutant;
using cmp::Verdict;
using V = std::vector<Verdict>;

std::vector<golden::GoldenSpec> selftest_cases() {
  return {
      {.name = "v4ip", .stage = "v4.indexer_prolog", .generator = "v4ip.rows", .seed = 51,
       .dims = {{"T", 3}, {"H", 8}, {"D", 32}, {"R", 12}, {"nblk", 2}, {"bs", 16}},
       .params = {{"zero_rows", 1}, {"pad_rows", 4}},
       .doc = "q, weights and key paths; all-zero rows; padded key rows"},
      {.name = "v4ip_pre", .stage = "v4.indexer_prolog", .generator = "v4ip.rows", .seed = 52,
       .dims = {{"T", 3}, {"H", 4}, {"D", 64}, {"R", 0}}, .params = {{"pre", 1}},
       .doc = "the query path from q_pre (RoPE + Hadamard + quant)"},
      {.name = "v41ip_vq_mxfp4", .stage = "v4.indexer_prolog", .generator = "v4ip.vllm_q", .seed = 54,
       .dims = {{"T", 3}, {"H", 32}, {"P", 64}}, .attrs = {{"kernel", golden::S("vllm-cuda")}, {"q_format", golden::S("mxfp4")}},
       .doc = "kernel vllm-cuda, q_format mxfp4: the V4.1 MXFP4 indexer q path"},
      {.name = "v4ip_vq", .stage = "v4.indexer_prolog", .generator = "v4ip.vllm_q", .seed = 53,
       .dims = {{"T", 4}, {"H", 32}, {"P", 512}}, .attrs = {{"kernel", golden::S("vllm-cuda")}},
       .doc = "kernel vllm-cuda: the fp8 indexer q path (fused_indexer_q_rope_quant FP8)"},
  };
}

namespace {

std::function<void(Case&, const Expected&, std::uint64_t)> with_bug(Bug bug) { return reference_bug(&run, bug); }

}  // namespace

std::vector<Mutant> mutants() {
  return {
      {"v41ip_vq_mxfp4_nibbles_swapped", "B52", "v41ip_vq_mxfp4", V{Verdict::FAIL},
       "vllm-cuda q, MXFP4: the e2m1 nibbles of every byte swapped (an AMD low-first instruction read as PTX's high-first)",
       [](Case& c, const Expected&, std::uint64_t) {
         Tensor& q = output(c, "q_fp4");
         for (std::int64_t i = 0; i < q.numel(); ++i) {
           std::uint8_t& b = q.data<std::uint8_t>()[i];
           b = static_cast<std::uint8_t>((b >> 4) | (b << 4));
         }
       }},
      {"v41ip_vq_mxfp4_scale_nearest", "v41 §3", "v41ip_vq_mxfp4", V{Verdict::FAIL},
       "vllm-cuda q, MXFP4: the exponent rounded to nearest (sglang's rule) where the V4.1 q path takes the ceiling: "
       "one byte lower wherever log2(amax / 6) rounds down",
       [](Case& c, const Expected&, std::uint64_t) {
         Tensor& s = output(c, "q_fp4_scale");
         for (std::int64_t i = 0; i < s.numel(); i += 3) s.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(s.data<std::uint8_t>()[i] - 1);
       }},
      // (amax / 127 instead of amax * fl32(1/127) is not observable on A3: the fp16 scales agree for every bf16 amax,
      // tested exhaustively in ctest "v4.indexer_prolog: ...")
      {"v4ip_scale_fp32", "v4 §3.4", "v4ip", V{Verdict::DTYPE}, "query scale stored as fp32 instead of fp16",
       [](Case& c, const Expected& E, std::uint64_t) {
         const Tensor& s = reft(E, "q_scale").value;
         Tensor f(DType::f32, s.shape());
         for (std::int64_t i = 0; i < s.numel(); ++i) f.data<float>()[i] = num::fp16_to_f32(s.data<std::uint16_t>()[i]);
         c.outputs["q_scale"] = f;
       }},
      {"v4ip_codes_trunc", "v4 §3.4", "v4ip", V{Verdict::FAIL}, "codes truncated toward zero instead of rint (CAST_TRUNC)",
       with_bug(Bug::codes_trunc)},
      {"v4ip_weights_unscaled", "v4 §3.2", "v4ip", V{Verdict::FAIL}, "head weights not multiplied by 0.0110485 (fp16(w) only)",
       with_bug(Bug::weights_unscaled)},
      {"v4ip_rope_neox", "B1", "v4ip_pre", V{Verdict::FAIL}, "RoPE pairs (i, i+32) (NeoX) instead of interleaved (2i, 2i+1)",
       with_bug(Bug::rope_neox)},
      {"v4ip_hadamard_unscaled", "B3", "v4ip_pre", V{Verdict::FAIL}, "Hadamard output not multiplied by 128^-0.5",
       with_bug(Bug::no_hadamard_scale)},
      {"v4ip_vq_no_rope", "B1", "v4ip_vq", V{Verdict::FAIL}, "vllm-cuda q: RoPE not applied to dims 64..127", with_bug(Bug::vq_no_rope)},
      {"v4ip_vq_rope_neox", "B1", "v4ip_vq", V{Verdict::FAIL}, "vllm-cuda q: NeoX pairs (i, i+32) instead of GPT-J (2i, 2i+1)",
       with_bug(Bug::rope_neox)},
      {"v4ip_vq_wrong_position", "B1", "v4ip_vq", V{Verdict::FAIL}, "vllm-cuda q: RoPE at position + 1 (an off-by-one position)",
       buggy([](Case& c) {
         const std::int64_t P = c.input("cos_sin_cache").dim(0);
         edit_input(c, "positions", [P](Tensor& t) {
           for (std::int64_t i = 0; i < t.numel(); ++i) iset(t, i, (t.int_at(i) + 1) % P);
         });
       })},
      {"v4ip_vq_hadamard", "v4 §10", "v4ip_vq", V{Verdict::FAIL}, "vllm-cuda q: the Hadamard applied (the Ascend / reference path)",
       with_bug(Bug::vq_hadamard)},
      {"v4ip_vq_scale_not_folded", "v4 §10", "v4ip_vq", V{Verdict::FAIL},
       "vllm-cuda q: the q scale stored apart, not folded into weights_out", with_bug(Bug::vq_scale_not_folded)},
      {"v4ip_vq_weights_div", "v4 §10", "v4ip_vq", V{Verdict::FAIL}, "vllm-cuda q: weights divided by the q scale", with_bug(Bug::vq_weights_div)},
      {"v4ip_vq_amax_pre_rope", "v4 §10", "v4ip_vq", V{Verdict::FAIL}, "vllm-cuda q: amax over the un-rotated rope dims",
       with_bug(Bug::vq_amax_pre_rope)},
      {"v4ip_padded_written", "B12", "v4ip", V{Verdict::FAIL},
       "padded key rows ([-1, bs-1] pairs or -1) written into the lowest free cache slots instead of skipped",
       buggy([](Case& c) {
         const std::int64_t bs = c.input("k_cache_in").dim(1);
         edit_input(c, "slot_mapping", [bs](Tensor& t) {
           if (t.shape().size() == 1) return write_padded_tokens(t);
           // pairs: the same edit on the flat slots block * bs + offset, written back as pairs
           Tensor flat(DType::i64, {t.dim(0)});
           for (std::int64_t r = 0; r < t.dim(0); ++r)
             iset(flat, r, t.int_at(2 * r) < 0 ? -1 : t.int_at(2 * r) * bs + t.int_at(2 * r + 1));
           write_padded_tokens(flat);
           for (std::int64_t r = 0; r < t.dim(0); ++r) {
             iset(t, 2 * r, flat.int_at(r) / bs);
             iset(t, 2 * r + 1, flat.int_at(r) % bs);
           }
         });
       })},
  };
}

}  // namespace dsa::v4::indexer_prolog
