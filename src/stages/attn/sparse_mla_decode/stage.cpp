// attn.sparse_mla_decode: schema, parse (index range = structural error of the input), findings, table entry.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "engines/sparse_attn/softmax_scale.hpp"
#include "engines/sparse_attn/structure.hpp"
#include "stage/mutant_kit.hpp"
#include "stages/attn/sparse_mla_decode/stage.hpp"
#include "stages/attn/table.hpp"

namespace dsa::attn::sparse_mla_decode {
namespace {

const char* kName = "attn.sparse_mla_decode";
using L = layouts::MlaKCache;

Params parse(const Case& c, const AttrReader& a, std::vector<Problem>& p) {
  Params r;
  r.bf16_scale = a.s("dequant") == "bf16_scale";
  r.cv.base2 = false;
  r.cv.lonely_lse_pos_inf = true;
  r.cv.lse_includes_sink = a.b("lse_includes_sink");
  r.num_sms = a.i("num_sms");
  if (r.num_sms < 1 || r.num_sms > 4096)
    p.push_back({c.file, c.name, "attr num_sms", "the GPU's streaming multiprocessors, 1 .. 4096 (132: H100 SXM / H800 / H200)",
                 std::to_string(r.num_sms)});
  const Tensor& cache = c.input("k_cache");
  r.layout.page_size = cache.dim(1);
  r.model1 = a.s("layout") == layouts::Model1KCache::kName;
  r.m1.page_size = cache.dim(1);
  std::int64_t rec = r.model1 ? layouts::Model1KCache::kRecord : L::kRecord, dqk = r.model1 ? 512 : 576, xrec_bytes = rec;
  std::string xlay = a.has("extra_layout") ? a.s("extra_layout") : a.s("layout");
  if (const layouts::RecordFormat* f = layouts::find_record(a.s("layout"))) {
    if (f->dim() == 128)
      p.push_back({c.file, c.name, "attr layout", "an attention cache layout: " + a.s("layout") + " is the V4.1 indexer's K cache "
                   "(its logits read it, not the sparse attention)", a.s("layout")});
    if (f->name == std::string("v41_nvfp4_288"))
      p.push_back({c.file, c.name, "attr layout", "a main-cache layout: v41_nvfp4_288 (FlashMLA V41_FP4) is legal only as "
                   "extra_layout next to a v41_mxfp8_528 main cache", a.s("layout")});
    const layouts::RecordFormat* xf = layouts::find_record(xlay);
    // FlashMLA's decode takes the pairs (V4, V4), (V41, V41), (V41, V41_FP4); the other records pair with themselves.
    const bool v41 = f->name == std::string("v41_mxfp8_528");
    const bool pair_ok = xf && (xf == f || (v41 && xf->name == std::string("v41_nvfp4_288")));
    if (!pair_ok)
      p.push_back({c.file, c.name, "attr extra_layout",
                   v41 ? "v41_mxfp8_528 or v41_nvfp4_288 (FlashMLA's pairs (V41, V41), (V41, V41_FP4))" : std::string(f->name) + " (the main cache's record)",
                   xlay});
    r.rec = layouts::KvRecord{f, a.has("record_order") ? *layouts::parse_record_order(a.s("record_order")) : layouts::RecordOrder::page_segregated, cache.dim(1)};
    if (const std::string why = r.rec.page_problem(); !why.empty())
      p.push_back({c.file, c.name, "inputs/k_cache", "a page the kernels take", why});
    rec = f->record_bytes();
    dqk = f->dim();
    if (pair_ok) {
      r.xrec = layouts::KvRecord{xf, r.rec.order, 1};
      xrec_bytes = xf->record_bytes();
    }
  } else if (a.has("extra_layout") && xlay != a.s("layout")) {
    p.push_back({c.file, c.name, "attr extra_layout", a.s("layout") + " (the main cache's layout; FlashMLA's pairs (V4, V4), "
                 "(V41, V41), (V41, V41_FP4))", xlay});
  }
  if (!r.rec.f && a.has("record_order"))
    p.push_back({c.file, c.name, "attr record_order", "not set: it applies to the kv record layouts, not to " + a.s("layout"), a.s("record_order")});
  const Tensor& q = c.input("q");
  // FlashMLA's flash_mla_with_kvcache: softmax_scale None -> q.shape[-1] ** -0.5 (576^-0.5 V3.2, 512^-0.5 MODEL1).
  r.softmax_scale = sparse_attn::softmax_scale(c, a, sparse_attn::inv_sqrt(q.dim(3)),
                                               "FlashMLA's default is q.shape[-1]^-0.5", p);
  if (cache.dim(3) != rec) {
    const std::string b57 = layouts::record_width_bug(cache.dim(3), a.s("layout"));
    p.push_back({c.file, c.name, "inputs/k_cache", std::to_string(rec) + "-byte records (layout " + a.s("layout") + ")",
                 std::to_string(cache.dim(3)) + (b57.empty() ? "" : "; " + b57)});
  }
  if (q.dim(3) != dqk)
    p.push_back({c.file, c.name, "inputs/q", "d_qk = " + std::to_string(dqk) + " (layout " + a.s("layout") + ")", std::to_string(q.dim(3))});
  // Extra scope (FlashMLA @HEAD): cache and indices together, the cache in the same layout.
  const Tensor* xc = c.input_opt("extra_k_cache");
  const Tensor* xi = c.input_opt("extra_indices_in_kvcache");
  if (static_cast<bool>(xc) != static_cast<bool>(xi))
    p.push_back({c.file, c.name, xc ? "inputs/extra_indices_in_kvcache" : "inputs/extra_k_cache", "present with the other extra-scope input", "absent"});
  if (!xi && c.input_opt("extra_topk_length"))
    p.push_back({c.file, c.name, "inputs/extra_topk_length", "absent without extra_indices_in_kvcache", "present"});
  if (xc && xc->dim(3) != xrec_bytes)
    p.push_back({c.file, c.name, "inputs/extra_k_cache", std::to_string(xrec_bytes) + "-byte records (layout " + xlay + ")", std::to_string(xc->dim(3))});
  if (xc && r.xrec.f) {
    r.xrec.page_size = xc->dim(1);
    if (const std::string why = r.xrec.page_problem(); !why.empty())
      p.push_back({c.file, c.name, "inputs/extra_k_cache", "a page the kernels take", why});
  }
  if (xi && (xi->dim(0) != q.dim(0) || xi->dim(1) != q.dim(1)))
    p.push_back({c.file, c.name, "inputs/extra_indices_in_kvcache", "[b, s_q, extra_topk] with q's b and s_q", shape_str(xi->shape())});
  if (!p.empty()) return r;
  r.extra = xi != nullptr;
  if (xc) r.m1_extra.page_size = xc->dim(1);
  // Only -1 is masked on SM90: any other index outside the cache is read out of bounds, so the input is invalid.
  // Positions past the batch's topk_length (extra_topk_length) are never read -- FlashMLA masks them, whatever they
  // hold (its MODEL1 kernel guards against INT_MAX there) -- so they are not checked.
  auto check_range = [&](const Tensor& idx, std::int64_t cap, const std::string& name, const Tensor* len) {
    const std::int64_t K = idx.dim(2);
    for (std::int64_t f = 0; f < idx.numel(); ++f) {
      const std::int64_t row = f / K;
      if (len && f % K >= len->int_at(row / idx.dim(1))) continue;
      const std::int64_t v = idx.int_at(f);
      if (v == -1 || (v >= 0 && v < cap)) continue;
      p.push_back({c.file, c.name, "inputs/" + name,
                   "-1 or page*page_size+offset in [0, num_blocks*page_size = " + std::to_string(cap) +
                       ") (only -1 is masked on SM90: any other value is read out of bounds, so the input is invalid)",
                   "batch " + std::to_string(row / idx.dim(1)) + " q token " + std::to_string(row % idx.dim(1)) + " position " +
                       std::to_string(f % K) + ": " + std::to_string(v)});
      return;
    }
  };
  const Tensor& idx = c.input("indices");
  const std::int64_t cap = cache.dim(0) * cache.dim(1), K = idx.dim(2);
  check_topk_length(c, K, "batch", p);
  if (!p.empty()) return r;
  check_range(idx, cap, "indices", c.input_opt("topk_length"));
  std::int64_t nmax = longest_row(idx, K, [](std::int64_t t) { return t != -1; });
  if (xi) {
    const Tensor* xl = c.input_opt("extra_topk_length");
    for (std::int64_t b = 0; xl && b < xl->numel(); ++b)
      if (xl->int_at(b) < 0 || xl->int_at(b) > xi->dim(2)) {
        p.push_back({c.file, c.name, "inputs/extra_topk_length", "entries in [0, extra_topk = " + std::to_string(xi->dim(2)) + "]",
                     "batch " + std::to_string(b) + ": " + std::to_string(xl->int_at(b))});
        return r;
      }
    check_range(*xi, xc->dim(0) * xc->dim(1), "extra_indices_in_kvcache", xl);
    nmax += longest_row(*xi, xi->dim(2), [](std::int64_t t) { return t != -1; });
  }
  const double rows = static_cast<double>(q.dim(0) * q.dim(1)), H = static_cast<double>(q.dim(2)), n8 = static_cast<double>(nmax + 8);
  const double thr = static_cast<double>(omp_get_max_threads());
  check_reference_memory(c, rows * H * (512.0 * 10 + 13) + thr * (8.0 * n8 * (2.0 * static_cast<double>(dqk) + 512 + 64) + 8.0 * (H + 4) * (576 + 1024)),
                         "inputs/q, inputs/indices", p);
  return r;
}

void sanity(const Case& c, const std::string& tensor, const Tensor&, std::vector<std::string>& f) {
  if (tensor != "out") return;
  const Tensor& idx = c.input("indices");
  const std::int64_t K = idx.dim(2);
  const auto d = duplicate_rows(idx, K, -1, "flash_mla_with_kvcache weights such a key once per occurrence (so does the reference).");
  if (!d.empty()) f.push_back(d);
  if (K % 64 != 0) f.push_back("topk = " + std::to_string(K) + " is not a multiple of 64: FlashMLA's sparse decode rejects it (pad with -1)");
  if (c.input("k_cache").dim(3) != L::kRecord) return;  // MODEL1: e8m0 scales are powers of two by construction
  if (c.input("k_cache").dim(1) != 64)
    f.push_back("page_size " + std::to_string(c.input("k_cache").dim(1)) + ": the V3.2 release (@1408756) requires 64-token pages");
  // B25: scales the SM90 reader rounds to bf16 (non-pow2) make the decode differ from the writer's quantization.
  const Tensor& cache = c.input("k_cache");
  const Tensor* tl = c.input_opt("topk_length");
  const std::int64_t cap = cache.dim(0) * cache.dim(1);
  std::int64_t nonpow2 = 0;
  for (std::int64_t f2 = 0; f2 < idx.numel(); ++f2) {
    if (tl && f2 % K >= tl->int_at(f2 / K / idx.dim(1))) continue;  // never read
    const std::int64_t v = idx.int_at(f2);
    if (v < 0 || v >= cap) continue;
    const layouts::MlaToken tok{cache.data<std::uint8_t>() + v * L::kRecord};
    for (std::int64_t j = 0; j < L::kTiles; ++j) {
      const float s = tok.scale(j);
      std::uint32_t u;
      std::memcpy(&u, &s, 4);
      nonpow2 += std::isfinite(s) && (u & 0x7FFFFFu) != 0;
    }
  }
  if (nonpow2)
    f.push_back(std::string(kNotePrefix) + std::to_string(nonpow2) + " scale(s) of selected cache tokens are not powers of "
                "two (B25): the SM90 kernel rounds them to bf16 (dequant bf16_scale models it), SM100 readers to E8M0");
}


// A reader bug that changes the whole case (a misread cache, an ignored scope): the buggy kernel's output is the
// reference of the changed case. `change` edits a copy of the case (false: the bug cannot show on it); `tweak` then
// edits the re-parsed params. Computed once per case (the last case is kept) and read per sampled element.
Hypothesis case_hypothesis(const std::string& tensor, const char* bug, const char* doc, std::function<bool(Case&)> change,
                           std::function<void(Params&)> tweak = {}) {
  struct Memo {
    std::mutex m;
    const Case* c = nullptr;
    std::string key;
    std::optional<Expected> e;
  };
  auto memo = std::make_shared<Memo>();
  Hypothesis h{tensor, bug, doc, {}, {}};
  h.value = [memo, change, tweak, tensor](const Case& c, const dsa::Params&, std::int64_t flat) -> std::optional<Hypothesis::Value> {
    std::lock_guard<std::mutex> g(memo->m);
    const std::string key = c.file + "\n" + c.name;
    if (memo->c != &c || memo->key != key) {
      memo->c = &c, memo->key = key, memo->e.reset();
      Case x = c;
      x.outputs.clear(), x.expected.clear();
      BoundCase b;
      if (change(x) && validate_case(x, false, &b).empty()) {
        Params q = dynamic_cast<const Params&>(*b.params);
        if (tweak) tweak(q);
        memo->e = run(x, q, RefOptions{}, Backend::cpu);
      }
    }
    if (!memo->e) return std::nullopt;
    const RefTensor* t = memo->e->find(tensor);
    if (!t || flat < 0 || flat >= t->value.numel()) return std::nullopt;
    if (t->defined.defined() && !t->defined.data<std::uint8_t>()[flat]) return std::nullopt;
    return Hypothesis::Value{t->value.value(flat), t->magnitude.defined() ? t->magnitude.value(flat) : 0.0};
  };
  return h;
}

bool has_layout(const Case& c, const char* name) { return c.has_attr("layout") && c.attr_str("layout") == name; }

// The readers' bugs of the KV records (spec v41 §2.3, §2.4, §8 B56; v4 §9), as whole-case hypotheses.
std::vector<Hypothesis> reader_hypotheses() {
  std::vector<Hypothesis> hs;
  for (const std::string t : {"out", "lse"}) {
    hs.push_back(case_hypothesis(t, "B56", "528-byte V41 rows decoded as the V3.2-no-RoPE record (512 e4m3 + 4 fp32 scales)",
                                 [](Case& x) { return has_layout(x, "v41_mxfp8_528"); }, [](Params& q) { q.misread_v32_no_rope = true; }));
    hs.push_back(case_hypothesis(t, "v41 §2.3 record order", "the cache read in the other record order (page_segregated <-> token_interleaved)",
                                 [](Case& x) {
                                   const layouts::RecordFormat* f = x.has_attr("layout") ? layouts::find_record(x.attr_str("layout")) : nullptr;
                                   if (!f || f->nparts() < 2) return false;
                                   const bool inter = x.has_attr("record_order") && x.attr_str("record_order") == "token_interleaved";
                                   x.attrs["record_order"] = std::string(inter ? "page_segregated" : "token_interleaved");
                                   return true;
                                 }));
    hs.push_back(case_hypothesis(t, "v4 §9 extra scope ignored", "the extra KV scope (MODEL1 / V41_FP4 compressed KV) not attended",
                                 [](Case& x) {
                                   if (!x.input_opt("extra_k_cache")) return false;
                                   drop_extra_scope(x);
                                   return true;
                                 }));
    hs.push_back(case_hypothesis(t, "v41 §2.4 352 scale order", "the 352-byte record's scales read in natural order (not 8*(s&3)+(s>>2))",
                                 [](Case& x) {
                                   if (!has_layout(x, "flashmla_nvfp4_352")) return false;
                                   mutant::edit_input(x, "k_cache", scales_352_unpermuted);  // a clone: tensors share storage
                                   return true;
                                 }));
    hs.push_back(case_hypothesis(t, "v4 §9 MODEL1 read as AoS", "the MODEL1 cache read as 584-byte AoS token records, not the per-block split",
                                 [](Case& x) {
                                   if (!has_layout(x, layouts::Model1KCache::kName)) return false;
                                   for (const char* n : {"k_cache", "extra_k_cache"})
                                     if (x.input_opt(n)) mutant::edit_input(x, n, model1_read_as_aos);
                                   return true;
                                 }));
  }
  return hs;
}
}  // namespace

Stage stage() {
  using D = DType;
  Stage s;
  s.name = kName;
  s.summary = "FlashMLA flash_mla_with_kvcache sparse decode over the V3.2 656-byte, V4 MODEL1 or a V4.1 / FP4 kv record cache, extra scope (out, natural lse)";
  s.spec = "v32 §6.2, §6.3, §7; v4 §9";
  s.formula = "z_t = softmax_scale q[b,s,h,:] . k_t, k_t dequantized from the fp8 MLA cache (valid indices, then the extra scope); out[b,s,h,:] = sum_t softmax(z)_t k_t[:512] (x 1/(1+e^(sink_h - lse))); lse[b,h,s] = ln sum_t e^z_t";
  s.default_tolerance = "derived-bound";
  s.schema.attrs = sparse_attn::softmax_scale_attrs(
      "softmax scale; absent: FlashMLA's default q.shape[-1]^-0.5 (576^-0.5 = 0.041666666666666664 for V3.2, 512^-0.5 = "
      "0.04419417382415922 for MODEL1); V3.2 serving passes the MLA scale 0.1352337788608801");
  for (auto& x : std::vector<AttrSpec>{
      str_attr("dequant", "bf16_scale", {"bf16_scale", "f32_scale"},
               "in-kernel dequant: bf16(bf16(fp8)*bf16(scale)) (FlashMLA SM90) or bf16(fl32(fp8*scale)) (the tests' "
               "dequantize_k_cache); identical for power-of-two scales"),
      int_attr("num_sms", 132,
               "the SMs of the GPU that ran FlashMLA's sm90 decode (torch.cuda.get_device_properties().multi_processor_count): "
               "its split-KV schedule, num_sm_parts = max(num_sms / s_q / (h_q/64), 1), decides where the kernel splits "
               "and combines, hence the flashmla-sm90 emulation's bits (132: H100 SXM / H800 / H200; 114: H100 PCIe; 78: H20)"),
      bool_attr("lse_includes_sink", false, "public lse = logaddexp(lse, sink) (FlashMLA's lse is sink-exclusive: false)"),
      str_attr("layout", L::kName,
               [] {
                 std::vector<std::string> v{L::kName, layouts::Model1KCache::kName};
                 for (const auto& n : layouts::record_names()) v.push_back(n);
                 return v;
               }(),
               "cache byte layout: mla_fp8_656 (V3.2, d_qk 576, values = the first 512 dims), model1_fp8_584 (DeepSeek-V4 / "
               "FlashMLA MODEL1, d_qk 512, values = keys), or a kv record (layouts/kv_records.hpp): v41_mxfp8_528 (FlashMLA "
               "V41, d_qk 512), sglang_mxfp4_368 / nvfp4_384 (d_qk 512), flashmla_nvfp4_352 / nvfp4_432 (d_qk 576)"),
      opt_str_attr("extra_layout", [] {
                     std::vector<std::string> v{L::kName, layouts::Model1KCache::kName};
                     for (const auto& n : layouts::record_names()) v.push_back(n);
                     return v;
                   }(),
                   "the extra scope's cache layout (absent: the main cache's): v41_nvfp4_288 next to a v41_mxfp8_528 main "
                   "cache is FlashMLA's (V41, V41_FP4) pair"),
      opt_str_attr("record_order", layouts::record_order_names(),
                   "kv record layouts: page_segregated (absent; FlashMLA kv_cache_format.h) or token_interleaved")})
    s.schema.attrs.push_back(x);
  s.schema.inputs = {
      {"q", {D::bf16}, {"b,s_q,h_q,d_qk"}, false,
       "queries: V3.2 [q_nope.W_UK (512) | q_pe (64)] (d_qk 576), MODEL1 [nope 448 | rope 64] (512); s_q = 1 + MTP draft tokens"},
      {"k_cache", {D::u8}, {"num_blocks,page_size,1,rec"}, false, "the MLA cache (attr layout: 656-, 584-byte or kv records)"},
      {"indices", {D::i32, D::i64}, {"b,s_q,topk"}, false, "page*page_size+offset per selected token; -1 = invalid"},
      {"block_table", {D::i32}, {"b,?"}, true, "engine block table (unused by the sparse path; kept for provenance)"},
      {"cache_seqlens", {D::i32}, {"b"}, true, "engine sequence lengths (unused by the sparse path; kept for provenance)"},
      {"attn_sink", {D::f32}, {"h_q"}, true, "per-head sink logit (FlashMLA @HEAD): out *= 1/(1 + e^(sink - lse))"},
      {"topk_length", {D::i32, D::i64}, {"b"}, true, "per batch: only the first topk_length indices count (FlashMLA @HEAD)"},
      {"extra_k_cache", {D::u8}, {"x_blocks,x_page_size,1,x_rec"}, true, "the extra KV scope's cache (attr extra_layout, else the main layout; own page size)"},
      {"extra_indices_in_kvcache", {D::i32, D::i64}, {"b,s_q,extra_topk"}, true,
       "extra-scope slots page*x_page_size+offset per row (-1 invalid), attended in the same softmax"},
      {"extra_topk_length", {D::i32, D::i64}, {"b"}, true, "per batch: only the first extra_topk_length extra indices count"}};
  s.schema.outputs = {{{"out", {D::bf16}, {"b,s_q,h_q,512"}, false, "attention output (latent, before W_UV)"}, CompareKind::bounded},
                      {{"lse", {D::f32}, {"b,h_q,s_q"}, false, "natural log-sum-exp per batch, head, q token"}, CompareKind::bounded}};
  s.parse = typed_parse(&parse);
  s.impl[static_cast<std::size_t>(Backend::cpu)] = typed_impl(&cpu);
#ifdef DSA_CUDA_BACKEND
  s.impl[static_cast<std::size_t>(Backend::cuda)] = typed_impl(&cuda);
#endif
  s.sanity = sanity;
  s.generators = generators();
  s.goldens = goldens();
  s.selftest = selftest_cases();
  s.mutants = mutants();
  // Known bugs as values: a failing output is tested against kernels with them (hints, never verdicts).
  s.hypotheses = mla_hypotheses({"out", "lse"}, &locate);
  for (Hypothesis& h : reader_hypotheses()) s.hypotheses.push_back(std::move(h));
  return s;
}

}  // namespace dsa::attn::sparse_mla_decode
