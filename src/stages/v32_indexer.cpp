// Registry entries of the DeepSeek-V3.2 lightning-indexer stages. Tensor names follow the engines'
// own (DeepGEMM / sglang / vLLM) so users recognise them. Spec: ../shared/specs/v32_indexer_deepgemm_flashmla.md.
#include <limits>

#include "reference/v32_indexer.hpp"
#include "stages/registry.hpp"

namespace dsa {
namespace {

using D = DType;
const std::vector<DType> kFP8{D::fp8_e4m3fn};
const std::vector<DType> kF32{D::f32};
const std::vector<DType> kIdx{D::i32, D::i64};

AttrSpec int_attr(std::string n, std::int64_t def, std::string doc) {
  return {std::move(n), AttrType::integer, false, AttrValue{def}, {}, std::move(doc)};
}
AttrSpec num_attr(std::string n, double def, std::string doc) {
  return {std::move(n), AttrType::number, false, AttrValue{def}, {}, std::move(doc)};
}
AttrSpec bool_attr(std::string n, bool def, std::string doc) {
  return {std::move(n), AttrType::boolean, false, AttrValue{std::int64_t{def ? 1 : 0}}, {}, std::move(doc)};
}
AttrSpec str_attr(std::string n, std::string def, std::vector<std::string> choices, std::string doc) {
  return {std::move(n), AttrType::string, false, AttrValue{std::move(def)}, std::move(choices), std::move(doc)};
}
AttrSpec opt_str_attr(std::string n, std::vector<std::string> choices, std::string doc) {
  return {std::move(n), AttrType::string, false, std::nullopt, std::move(choices), std::move(doc)};
}

AttrSpec scale_fmt_attr() {
  return str_attr("scale_fmt", "ue8m0", {"ue8m0", "fp32_div", "fp32_mul"},
                  "ue8m0: 2^ceil(log2(max(amax,eps)*fl32(1/448))) (demo, sglang, vLLM); fp32_div: fl32(max(amax,eps)/448) "
                  "(DeepGEMM tests); fp32_mul: fl32(max(amax,eps)*fl32(1/448)) (demo scale_fmt=None)");
}
AttrSpec scale_apply_attr() {
  return str_attr("scale_apply", "div", {"div", "mul_inv"},
                  "div: e4m3(clamp(x/s)) (demo, vLLM); mul_inv: e4m3(clamp(x*fl32(1/s))) (DeepGEMM tests, sglang Triton). "
                  "Identical for ue8m0 scales");
}
AttrSpec amax_eps_attr() { return num_attr("amax_eps", 1e-4, "amax clamp before the scale (demo 1e-4; vLLM fused 1e-10)"); }
AttrSpec kernel_attr() {
  return opt_str_attr("kernel", {},
                      "producing kernel, e.g. deepgemm-sm90: selects the emulation profile and default tolerance");
}
AttrSpec logits_dtype_attr() {
  return str_attr("logits_dtype", "float32", {"float32", "bf16"}, "dtype of the logits output (DeepGEMM @HEAD logits_dtype)");
}

Stage indexer_quant() {
  Stage s;
  s.name = "indexer.quant";
  s.summary = "act_quant: per 1x128 block fp8 e4m3fn quantization with ue8m0 or fp32 scales";
  s.spec = "v32 §2.5, §3.4, §3.6";
  s.pipeline_order = 10;
  s.attrs = {int_attr("block_size", 128, "quantization block along the last dim"), scale_fmt_attr(), scale_apply_attr(),
             amax_eps_attr(), bool_attr("clamp", true, "clamp x/s to [-448, 448] before the cast")};
  s.inputs = {{"x", {D::bf16, D::f32}, {"T,K"}, false, "activations, rows of K values (K a multiple of block_size)"}};
  s.outputs = {{{"y", kFP8, {"T,K"}, false, "fp8 e4m3fn codes"}, CompareKind::bytes},
               {{"scale", kF32, {"T,NB"}, false, "fp32 scale per row and block (NB = K / block_size)"}, CompareKind::bytes}};
  s.extra_check = [](const Case& c, std::vector<Problem>& p) {
    const auto bs = c.attr_int("block_size", 128);
    const auto K = c.input("x").dim(1);
    if (bs <= 0 || K % bs != 0)
      p.push_back({c.file, c.name, "attr block_size", "a positive divisor of K = " + std::to_string(K), std::to_string(bs)});
  };
  s.reference = ref::indexer_quant;
  return s;
}

Stage indexer_prolog() {
  Stage s;
  s.name = "indexer.prolog";
  s.summary = "q/k prolog: k LayerNorm, RoPE (NeoX|interleaved), Hadamard-128, act_quant, head-gate weights";
  s.spec = "v32 §2.1-§2.6";
  s.pipeline_order = 20;
  s.attrs = {str_attr("rope_layout", "neox", {"neox", "interleaved"}, "indexer RoPE pairing: neox (x[i], x[i+rope_dim/2]) or interleaved (x[2i], x[2i+1])"),
             int_attr("rope_dim", 64, "leading dims of each head that are rotated"),
             bool_attr("hadamard", true, "apply rotate_activation (Hadamard-128, scale 128^-0.5); vLLM and fused sglang skip it"),
             num_attr("ln_eps", 1e-6, "k LayerNorm epsilon"),
             scale_fmt_attr(), scale_apply_attr(), amax_eps_attr(),
             num_attr("rope_theta", 10000.0, "RoPE base (computed tables only)"),
             num_attr("rope_factor", 40.0, "YaRN factor (computed tables only)"),
             int_attr("original_seq_len", 4096, "YaRN original context (computed tables only)"),
             int_attr("max_seq_len", 16384, "YaRN active when > original_seq_len (computed tables only)"),
             num_attr("beta_fast", 32.0, "YaRN beta_fast"), num_attr("beta_slow", 1.0, "YaRN beta_slow")};
  s.inputs = {{"q", {D::bf16}, {"T,H,Dh"}, false, "q after wq_b, bf16 [tokens, heads, head_dim]"},
              {"k", {D::bf16}, {"T,Dh"}, false, "k after wk, bf16 [tokens, head_dim]"},
              {"w", kF32, {"T,H"}, false, "head gates weights_proj(x)*n_heads^-0.5, fp32"},
              {"ln_weight", kF32, {"Dh"}, false, "k_norm LayerNorm weight (fp32)"},
              {"ln_bias", kF32, {"Dh"}, false, "k_norm LayerNorm bias (fp32)"},
              {"cos", kF32, {"T,R2"}, true, "RoPE cos table per token (R2 = rope_dim/2); preferred for bit-exactness"},
              {"sin", kF32, {"T,R2"}, true, "RoPE sin table per token"},
              {"positions", kIdx, {"T"}, true, "token positions (used when cos/sin are not given: YaRN tables computed)"}};
  s.outputs = {{{"q_fp8", kFP8, {"T,H,Dh"}, false, "quantized q"}, CompareKind::bytes},
               {{"q_scale", kF32, {"T,H"}, false, "q scale per head"}, CompareKind::bytes},
               {{"k_fp8", kFP8, {"T,Dh"}, false, "quantized k"}, CompareKind::bytes},
               {{"k_scale", kF32, {"T"}, false, "k scale per token"}, CompareKind::bytes},
               {{"weights", kF32, {"T,H"}, false, "W = fl32(fl32(w*q_scale)*fl32(Dh^-0.5)) (128^-0.5 for V3.2)"}, CompareKind::bytes},
               // Optional intermediates (bf16), to locate the diverging sub-step.
               {{"k_norm", {D::bf16}, {"T,Dh"}, true, "k after LayerNorm (bf16)"}, CompareKind::bytes},
               {{"q_rope", {D::bf16}, {"T,H,Dh"}, true, "q after RoPE (bf16, nope dims unchanged)"}, CompareKind::bytes},
               {{"k_rope", {D::bf16}, {"T,Dh"}, true, "k after LayerNorm and RoPE (bf16)"}, CompareKind::bytes},
               {{"q_rot", {D::bf16}, {"T,H,Dh"}, true, "q after RoPE and Hadamard = the act_quant input (bf16)"}, CompareKind::bytes},
               {{"k_rot", {D::bf16}, {"T,Dh"}, true, "k after LayerNorm, RoPE and Hadamard = the act_quant input (bf16)"}, CompareKind::bytes}};
  s.extra_check = [](const Case& c, std::vector<Problem>& p) {
    const bool has_cs = c.input_opt("cos") && c.input_opt("sin");
    if (!has_cs && !c.input_opt("positions"))
      p.push_back({c.file, c.name, "inputs/cos, inputs/sin or inputs/positions", "a RoPE table (cos+sin) or positions", "neither"});
    if ((c.input_opt("cos") != nullptr) != (c.input_opt("sin") != nullptr))
      p.push_back({c.file, c.name, c.input_opt("cos") ? "inputs/sin" : "inputs/cos", "cos and sin together", "only one of them"});
    const auto rd = c.attr_int("rope_dim", 64);
    const auto Dh = c.input("k").dim(1);
    if (rd <= 0 || rd % 2 != 0 || rd > Dh)
      p.push_back({c.file, c.name, "attr rope_dim", "an even number in [2, " + std::to_string(Dh) + "]", std::to_string(rd)});
    if (const Tensor* cs = c.input_opt("cos"); cs && cs->dim(1) * 2 != rd)
      p.push_back({c.file, c.name, "inputs/cos", "dim 1 = rope_dim/2 = " + std::to_string(rd / 2), std::to_string(cs->dim(1))});
    if (c.attr_bool("hadamard", true) && Dh != 128)
      p.push_back({c.file, c.name, "inputs/k", "head_dim 128 when hadamard=1", std::to_string(Dh)});
    if (Dh != 128 && Dh != 64 && Dh != 32)  // one act_quant block per head: q_scale is [T,H]
      p.push_back({c.file, c.name, "inputs/k", "head_dim 32, 64 or 128 (one quantization block per head)", std::to_string(Dh)});
  };
  s.reference = ref::indexer_prolog;
  return s;
}

Stage indexer_kcache_store() {
  Stage s;
  s.name = "indexer.kcache_store";
  s.summary = "write k_fp8 + k_scale into the paged indexer K cache (64-token pages, planar 132 B/token)";
  s.spec = "v32 §3.4";
  s.pipeline_order = 30;
  s.attrs = {int_attr("page_size", 64, "tokens per page")};
  s.inputs = {{"k_fp8", kFP8, {"T,Dh"}, false, "quantized k per token"},
              {"k_scale", kF32, {"T"}, false, "k scale per token"},
              {"slot_mapping", kIdx, {"T"}, false, "cache slot page*page_size+offset per token; -1 = padded token, skipped"},
              {"kv_cache_in", {D::u8}, {"P,page_size,1,?"}, false, "cache bytes before the store"}};
  s.outputs = {{{"kv_cache", {D::u8}, {"P,page_size,1,?"}, false, "cache bytes after the store"}, CompareKind::bytes}};
  s.extra_check = [](const Case& c, std::vector<Problem>& p) {
    const auto Dh = c.input("k_fp8").dim(1);
    const auto rec = c.input("kv_cache_in").dim(3);
    if (rec != Dh + 4)
      p.push_back({c.file, c.name, "inputs/kv_cache_in", "dim 3 = head_dim + 4 = " + std::to_string(Dh + 4), std::to_string(rec)});
    // Slots: -1 (padded token) or in [0, P*page_size), and distinct (two tokens storing into one slot make the
    // kernel's result depend on write order).
    const Tensor& sm = c.input("slot_mapping");
    const std::int64_t cap = c.input("kv_cache_in").dim(0) * c.input("kv_cache_in").dim(1);
    std::map<std::int64_t, std::int64_t> seen;
    for (std::int64_t t = 0; t < sm.numel(); ++t) {
      const std::int64_t v = sm.int_at(t);
      if (v == -1) continue;
      if (v < 0 || v >= cap) {
        p.push_back({c.file, c.name, "inputs/slot_mapping", "-1 or a slot in [0, num_pages*page_size = " + std::to_string(cap) + ")",
                     "token " + std::to_string(t) + ": " + std::to_string(v)});
        return;
      }
      if (auto [it, fresh] = seen.emplace(v, t); !fresh) {
        p.push_back({c.file, c.name, "inputs/slot_mapping", "distinct slots",
                     "tokens " + std::to_string(it->second) + " and " + std::to_string(t) + " both store into slot " + std::to_string(v)});
        return;
      }
    }
  };
  s.reference = ref::indexer_kcache_store;
  return s;
}

Stage indexer_logits_ragged() {
  Stage s;
  s.name = "indexer.logits_ragged";
  s.summary = "DeepGEMM fp8_mqa_logits: ragged prefill MQA logits over [ks, ke) per query row";
  s.spec = "v32 §3.2, §3.5";
  s.pipeline_order = 40;
  s.default_tolerance = "sm90-fp8";
  s.emulation_profiles = {"deepgemm-sm90"};
  s.attrs = {bool_attr("clean_logits", true, "columns outside [ks, ke) are -inf (true) or undefined (false)"),
             int_attr("max_seqlen_k", 0, "> 0: compressed logits [S, max_seqlen_k], column t = key ks+t"),
             logits_dtype_attr(), kernel_attr()};
  s.inputs = {{"q", kFP8, {"S,H,Dh"}, false, "fp8 queries (q scale folded into weights)"},
              {"kv", kFP8, {"N,Dh"}, false, "fp8 keys"},
              {"kv_scale", kF32, {"N"}, false, "per-key fp32 scale"},
              {"weights", kF32, {"S,H"}, false, "head gates W"},
              {"ks", {D::i32}, {"S"}, false, "cu_seq_len_k_start: first valid key per row"},
              {"ke", {D::i32}, {"S"}, false, "cu_seq_len_k_end: one past the last valid key per row"}};
  s.outputs = {{{"logits", {D::f32, D::bf16}, {"S,?"}, false, "logits [S, N] (or [S, max_seqlen_k])"}, CompareKind::bounded}};
  s.extra_check = [](const Case& c, std::vector<Problem>& p) {
    const auto Dh = c.input("q").dim(2);
    if (Dh != 32 && Dh != 64 && Dh != 128)
      p.push_back({c.file, c.name, "inputs/q", "head_dim 32, 64 or 128", std::to_string(Dh)});
    const auto H = c.input("q").dim(1);
    if (H <= 0 || H % 8 != 0)
      p.push_back({c.file, c.name, "inputs/q", "heads H a positive multiple of 8 (DeepGEMM head reduction)", std::to_string(H)});
    const auto N = c.input("kv").dim(0);
    const auto msk = c.attr_int("max_seqlen_k", 0);
    if (msk < 0) p.push_back({c.file, c.name, "attr max_seqlen_k", ">= 0", std::to_string(msk)});
    if (msk > 0 && c.attr_bool("clean_logits", true))
      p.push_back({c.file, c.name, "attr clean_logits", "0 when max_seqlen_k > 0 (DeepGEMM requires it)", "1"});
    const Tensor& ks = c.input("ks");
    const Tensor& ke = c.input("ke");
    for (std::int64_t i = 0; i < ks.numel(); ++i) {
      const auto a = ks.data<std::int32_t>()[i], b = ke.data<std::int32_t>()[i];
      if (a < 0 || b < a || b > N) {
        p.push_back({c.file, c.name, "inputs/ks, inputs/ke", "0 <= ks <= ke <= N = " + std::to_string(N),
                     "row " + std::to_string(i) + ": ks=" + std::to_string(a) + " ke=" + std::to_string(b)});
        break;
      }
    }
    for (const auto* g : {&c.outputs, &c.expected}) {
      auto it = g->find("logits");
      if (it == g->end()) continue;
      const auto want = msk > 0 ? msk : N;
      if (it->second.dim(1) != want)
        p.push_back({c.file, c.name, std::string(g == &c.outputs ? "outputs" : "expected") + "/logits",
                     "dim 1 = " + std::string(msk > 0 ? "max_seqlen_k" : "N") + " = " + std::to_string(want),
                     std::to_string(it->second.dim(1))});
    }
  };
  s.reference = ref::indexer_logits_ragged;
  return s;
}

Stage indexer_logits_paged() {
  Stage s;
  s.name = "indexer.logits_paged";
  s.summary = "DeepGEMM fp8_paged_mqa_logits: decode/MTP logits over the paged fp8 K cache";
  s.spec = "v32 §3.3, §3.4, §3.5";
  s.pipeline_order = 41;
  s.default_tolerance = "sm90-fp8";
  s.emulation_profiles = {"deepgemm-sm90"};
  s.attrs = {bool_attr("clean_logits", false, "columns past the row's causal length are -inf (1-D context_lens only)"),
             {"max_context_len", AttrType::integer, true, std::nullopt, {}, "number of logits columns"},
             int_attr("page_size", 64, "tokens per page"), logits_dtype_attr(), kernel_attr()};
  s.inputs = {{"q", kFP8, {"B,next_n,H,Dh"}, false, "fp8 queries"},
              {"kv_cache", {D::u8}, {"P,page_size,1,?"}, false, "fused paged cache, planar page layout (§3.4)"},
              {"weights", kF32, {"B*next_n,H"}, false, "head gates, row b*next_n+t"},
              {"context_lens", {D::i32}, {"B", "B,next_n"}, false, "1-D: causal MTP rows see j <= L-next_n+t; 2-D: row (b,t) sees j < L[b,t]"},
              {"block_table", {D::i32}, {"B,?"}, false, "physical page ids per request"}};
  s.outputs = {{{"logits", {D::f32, D::bf16}, {"B*next_n,max_context_len"}, false, "logits"}, CompareKind::bounded}};
  s.extra_check = [](const Case& c, std::vector<Problem>& p) {
    const Tensor& kc = c.input("kv_cache");
    const auto Dh = c.input("q").dim(3);
    if (Dh != 32 && Dh != 64 && Dh != 128)
      p.push_back({c.file, c.name, "inputs/q", "head_dim 32, 64 or 128", std::to_string(Dh)});
    const auto H = c.input("q").dim(2);
    if (H <= 0 || H % 8 != 0)
      p.push_back({c.file, c.name, "inputs/q", "heads H a positive multiple of 8 (DeepGEMM head reduction)", std::to_string(H)});
    if (kc.dim(3) != Dh + 4)
      p.push_back({c.file, c.name, "inputs/kv_cache", "dim 3 = head_dim + 4 = " + std::to_string(Dh + 4), std::to_string(kc.dim(3))});
    const Tensor& cl = c.input("context_lens");
    if (cl.rank() == 2 && c.attr_bool("clean_logits", false))
      p.push_back({c.file, c.name, "attr clean_logits", "0 with 2-D context_lens (DeepGEMM)", "1"});
    const Tensor& bt = c.input("block_table");
    const auto P = kc.dim(0), ps = c.attr_int("page_size", 64), next_n = c.input("q").dim(1);
    for (std::int64_t b = 0; b < bt.dim(0); ++b) {
      std::int64_t L = 0;
      for (std::int64_t t = 0; t < (cl.rank() == 2 ? cl.dim(1) : 1); ++t) L = std::max<std::int64_t>(L, cl.data<std::int32_t>()[b * (cl.rank() == 2 ? cl.dim(1) : 1) + t]);
      if (L < 0 || (cl.rank() == 1 && L > 0 && L < next_n)) {
        p.push_back({c.file, c.name, "inputs/context_lens", cl.rank() == 1 ? ">= next_n (or 0)" : ">= 0", "request " + std::to_string(b) + ": " + std::to_string(L)});
        return;
      }
      const auto pages = (L + ps - 1) / ps;
      if (pages > bt.dim(1)) {
        p.push_back({c.file, c.name, "inputs/block_table", "at least ceil(L/page_size) = " + std::to_string(pages) + " columns for request " + std::to_string(b), std::to_string(bt.dim(1))});
        return;
      }
      for (std::int64_t j = 0; j < pages; ++j) {
        const auto pg = bt.data<std::int32_t>()[b * bt.dim(1) + j];
        if (pg < 0 || pg >= P) {
          p.push_back({c.file, c.name, "inputs/block_table", "page ids in [0, " + std::to_string(P) + ")",
                       "request " + std::to_string(b) + " block " + std::to_string(j) + ": " + std::to_string(pg)});
          return;
        }
      }
    }
  };
  s.reference = ref::indexer_logits_paged;
  return s;
}

Stage indexer_topk() {
  Stage s;
  s.name = "indexer.topk";
  s.summary = "top-k over each row's valid range with -1 padding and engine index bases";
  s.spec = "v32 §5";
  s.pipeline_order = 50;
  s.attrs = {int_attr("k", 2048, "top-k width"),
             str_attr("index_base", "relative", {"relative", "ragged_offset", "page_slot", "absolute"},
                      "relative: position in [0,len) (vLLM, sglang v2); ragged_offset: idx + offsets[row] (sglang ragged); "
                      "page_slot: page_table[r/rows_per_request][p/page_size]*page_size + p%page_size with p the relative position "
                      "(sglang paged with page_size 1 = token table, FlashMLA slots); absolute: row_start + p (demo). -1 = no token"),
             bool_attr("sorted", false, "output in descending score order (demo torch.topk)"),
             bool_attr("fast_path", true, "rows with len <= k emit [0..len-1] then -1 regardless of scores"),
             int_attr("num_init_tokens", 0, "sglang forced init tokens (+inf), §5.4"),
             int_attr("num_local_tokens", 0, "sglang forced local tokens (+inf), §5.4"),
             int_attr("page_size", 64, "tokens per page (page_slot)"),
             int_attr("rows_per_request", 1, "rows sharing one page_table row (next_n), page_slot only")};
  s.inputs = {{"logits", kF32, {"R,C"}, false, "scores; row r candidates are logits[r, row_starts[r] : row_starts[r]+lengths[r]]"},
              {"lengths", {D::i32}, {"R"}, false, "valid candidates per row"},
              {"row_starts", {D::i32}, {"R"}, true, "first candidate column per row (default 0)"},
              {"offsets", {D::i32}, {"R"}, true, "ragged_offset: added to relative indices"},
              {"page_table", {D::i32}, {"Q,?"}, true, "page_slot: physical page ids per request"}};
  s.outputs = {{{"indices", kIdx, {"R,?"}, false, "selected indices, -1 padded"}, CompareKind::topk_set}};
  s.extra_check = [](const Case& c, std::vector<Problem>& p) {
    const auto base = c.attr_str("index_base", "relative");
    if (base == "ragged_offset" && !c.input_opt("offsets"))
      p.push_back({c.file, c.name, "inputs/offsets", "a tensor when index_base=ragged_offset", "none"});
    if (base == "page_slot" && !c.input_opt("page_table"))
      p.push_back({c.file, c.name, "inputs/page_table", "a tensor when index_base=page_slot", "none"});
    if (c.attr_int("k", 2048) <= 0) p.push_back({c.file, c.name, "attr k", "> 0", std::to_string(c.attr_int("k", 2048))});
    const Tensor& lg = c.input("logits");
    const Tensor& len = c.input("lengths");
    const Tensor* rs = c.input_opt("row_starts");
    for (std::int64_t r = 0; r < len.numel(); ++r) {
      const auto L = len.data<std::int32_t>()[r];
      const auto s0 = rs ? rs->data<std::int32_t>()[r] : 0;
      if (L < 0 || s0 < 0 || s0 + static_cast<std::int64_t>(L) > lg.dim(1)) {
        p.push_back({c.file, c.name, "inputs/lengths, inputs/row_starts", "0 <= row_start, row_start + length <= C = " + std::to_string(lg.dim(1)),
                     "row " + std::to_string(r) + ": start " + std::to_string(s0) + " length " + std::to_string(L)});
        return;
      }
    }
    // Emitted indices are int32 (the engines' dtype): every mapped index must be in [0, 2^31).
    if (const Tensor* off = c.input_opt("offsets"); off && base == "ragged_offset")
      for (std::int64_t r = 0; r < len.numel(); ++r) {
        const std::int64_t o = off->int_at(r);
        if (o < 0 || o + len.int_at(r) > std::numeric_limits<std::int32_t>::max()) {
          p.push_back({c.file, c.name, "inputs/offsets", "offsets[r] >= 0 and offsets[r] + lengths[r] < 2^31",
                       "row " + std::to_string(r) + ": offset " + std::to_string(o) + " length " + std::to_string(len.int_at(r))});
          return;
        }
      }
    if (const Tensor* pt = c.input_opt("page_table"); pt && base == "page_slot") {
      const std::int64_t ps = c.attr_int("page_size", 64);
      for (std::int64_t i = 0; i < pt->numel(); ++i)
        if (ps <= 0 || (pt->int_at(i) + 1) * ps > std::numeric_limits<std::int32_t>::max()) {
          p.push_back({c.file, c.name, "inputs/page_table", "page ids with (page + 1) * page_size < 2^31 (page_size > 0)",
                       "page id " + std::to_string(pt->int_at(i)) + ", page_size " + std::to_string(ps)});
          return;
        }
    }
    for (const char* a : {"num_init_tokens", "num_local_tokens"})
      if (c.attr_int(a, 0) < 0) p.push_back({c.file, c.name, std::string("attr ") + a, ">= 0", std::to_string(c.attr_int(a, 0))});
    // The index tensor must hold k columns (extra columns are -1 padding).
    const auto k = c.attr_int("k", 2048);
    for (const auto* g : {&c.outputs, &c.expected})
      if (auto it = g->find("indices"); it != g->end() && it->second.rank() == 2 && it->second.dim(1) < k)
        p.push_back({c.file, c.name, std::string(g == &c.outputs ? "outputs" : "expected") + "/indices",
                     "dim 1 >= k = " + std::to_string(k), std::to_string(it->second.dim(1))});
    if (base == "page_slot") {
      const Tensor* pt = c.input_opt("page_table");
      const auto ps = c.attr_int("page_size", 64), rpr = c.attr_int("rows_per_request", 1);
      if (ps <= 0 || rpr <= 0) {
        p.push_back({c.file, c.name, ps <= 0 ? "attr page_size" : "attr rows_per_request", "> 0", std::to_string(ps <= 0 ? ps : rpr)});
        return;
      }
      if (!pt) return;
      const auto nq = pt->dim(0), nb = pt->dim(1);
      if ((len.numel() + rpr - 1) / rpr > nq) {
        p.push_back({c.file, c.name, "inputs/page_table", "ceil(R / rows_per_request) = " + std::to_string((len.numel() + rpr - 1) / rpr) + " rows",
                     std::to_string(nq)});
        return;
      }
      // Every page a valid candidate maps to must exist, and a request's pages must be distinct (else an
      // emitted slot would stand for two candidates).
      for (std::int64_t q = 0; q < nq; ++q) {
        std::int64_t L = 0;
        for (std::int64_t r = q * rpr; r < std::min((q + 1) * rpr, len.numel()); ++r) L = std::max<std::int64_t>(L, len.data<std::int32_t>()[r]);
        const auto blocks = (L + ps - 1) / ps;
        if (blocks > nb) {
          p.push_back({c.file, c.name, "inputs/page_table", "at least ceil(length/page_size) = " + std::to_string(blocks) + " columns for request " + std::to_string(q),
                       std::to_string(nb)});
          return;
        }
        std::map<std::int64_t, std::int64_t> seen;
        for (std::int64_t b = 0; b < blocks; ++b) {
          const std::int64_t pg = pt->int_at(q * nb + b);
          if (pg < 0) {
            p.push_back({c.file, c.name, "inputs/page_table", "page ids >= 0 in the blocks rows use", "request " + std::to_string(q) + " block " + std::to_string(b) + ": " + std::to_string(pg)});
            return;
          }
          if (auto [it, fresh] = seen.emplace(pg, b); !fresh) {
            p.push_back({c.file, c.name, "inputs/page_table", "distinct pages per request", "request " + std::to_string(q) + ": page " + std::to_string(pg) +
                         " in blocks " + std::to_string(it->second) + " and " + std::to_string(b)});
            return;
          }
        }
      }
    }
  };
  s.reference = ref::indexer_topk;
  return s;
}

}  // namespace

// The registry itself. Add a stage: write its entry function above (or in its own file) and list it here.
const std::vector<Stage>& stages() {
  static const std::vector<Stage> all{indexer_quant(),         indexer_prolog(),       indexer_kcache_store(),
                                      indexer_logits_ragged(), indexer_logits_paged(), indexer_topk()};
  return all;
}

}  // namespace dsa
