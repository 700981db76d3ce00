// Layer goldens and the layer selftest (see layers.hpp).
#include "pipeline/layers.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>

#include "pipeline/layer.hpp"
#include "stage/mutant_kit.hpp"
#include "stages/indexer/common/gen.hpp"

namespace dsa::golden {

namespace {

std::uint64_t member_seed(std::uint64_t seed, std::uint64_t member) { return seed * 0x9E3779B97F4A7C15ull + member * 0xBF58476D1CE4E5B9ull + 1; }

Case bare_case(const std::string& name, const std::string& stage) {
  Case c;
  c.name = name;
  c.stage = stage;
  return c;
}

GoldenSpec member_spec(const char* name, const char* stage, const char* generator) {
  GoldenSpec g;
  g.name = name;
  g.stage = stage;
  g.generator = generator;
  return g;
}

// DeepSeek-V3.2 decode with MTP (next_n = 2), three requests of 20, 100 and 190 tokens (the first shorter than k: -1
// padded indices), as sglang runs it per layer:
//   idx_kcache_store   the step's new index keys into the paged fp8 index cache (planar 132-byte records)
//   idx_logits         paged MQA logits over that cache (q, gates, context_lens, block_table)
//   idx_topk           top-64 per row (FlashMLA needs a multiple of 64) over the causal lengths, emitted as
//                      page_slot (block_table[p/64]*64 + p%64)
//   mla_kcache_store   the step's new latent KV into the 656-byte fp8 MLA cache (same block table, same slots)
//   sparse_mla_decode  FlashMLA sparse decode over the MLA cache on the top-k's slots ([B*next_n, k] read as
//                      [B, next_n, k])
std::vector<Case> build_v32_decode(std::uint64_t seed, int threads) {
  const std::vector<std::int64_t> L{20, 100, 190};
  const std::int64_t next_n = 2, k = 64, ps = 64, B = static_cast<std::int64_t>(L.size());
  GoldenSpec ls = member_spec("idx_logits", "indexer.logits_paged", "logits.paged_mtp");
  ls.lists["context_lens"] = L;
  ls.dims = {{"next_n", next_n}, {"spare_blocks", 1}, {"extra_pages", 2}};
  Case logits = generate_inputs(ls, member_seed(seed, 2), threads);
  const Tensor& bt = logits.input("block_table");
  const std::int64_t P = logits.input("kv_cache").dim(0), maxb = bt.dim(1);
  // The step's new tokens: the last next_n of every request, at their slots of the shared block table.
  std::vector<std::int64_t> slots;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < next_n; ++t) {
      const std::int64_t j = L[static_cast<std::size_t>(b)] - next_n + t;
      slots.push_back(std::int64_t{bt.data<std::int32_t>()[b * maxb + j / ps]} * ps + j % ps);
    }
  const auto T = static_cast<std::int64_t>(slots.size());
  Tensor slot_mapping = Tensor::from_vector(DType::i64, {T}, slots);

  Case kstore = bare_case("idx_kcache_store", "indexer.kcache_store");
  {
    Tensor codes(DType::fp8_e4m3fn, {T, 128}), scales(DType::f32, {T});
    indexer::gen::make_keys(Rng(member_seed(seed, 1)), indexer::gen::kK, T, 128, threads, false, codes.data<std::uint8_t>(), scales.data<float>());
    kstore.inputs = {{"k_fp8", codes}, {"k_scale", scales}, {"slot_mapping", slot_mapping}, {"kv_cache_in", logits.input("kv_cache")}};
    kstore.attrs["page_size"] = AttrValue{ps};
  }
  logits.links["kv_cache"] = "idx_kcache_store/expected/kv_cache";

  Case topk = bare_case("idx_topk", "indexer.topk");
  {
    std::vector<std::int32_t> len;
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t t = 0; t < next_n; ++t) len.push_back(static_cast<std::int32_t>(L[static_cast<std::size_t>(b)] - next_n + t + 1));  // causal
    topk.inputs = {{"lengths", Tensor::from_vector(DType::i32, {B * next_n}, len)}, {"page_table", bt}};
    topk.attrs = {{"k", AttrValue{k}}, {"index_base", AttrValue{std::string("page_slot")}}, {"page_size", AttrValue{ps}},
                  {"rows_per_request", AttrValue{next_n}}};
    topk.links["logits"] = "idx_logits/expected/logits";
  }

  GoldenSpec as = member_spec("sparse_mla_decode", "attn.sparse_mla_decode", "sparse_decode.random");
  as.dims = {{"B", B}, {"S", next_n}, {"H", 16}, {"P", P}, {"K", k}};
  Case attn = generate_inputs(as, member_seed(seed, 5), threads);
  attn.links["k_cache"] = "mla_kcache_store/expected/kv_cache";
  attn.links["indices"] = "idx_topk/expected/indices";  // the generated [B, next_n, k] input gives the shape it is read as

  GoldenSpec ms = member_spec("mla_kcache_store", "mla.kcache_store", "mla_kcache.shuffled_slots");
  ms.dims = {{"T", T}, {"P", P}};
  ms.params = {{"pad_frac", 0.0}};
  Case mstore = generate_inputs(ms, member_seed(seed, 4), threads);
  mstore.inputs["slot_mapping"] = slot_mapping;
  mstore.inputs["kv_cache_in"] = attn.input("k_cache");  // every earlier token's record (the generator's full cache)
  return {kstore, logits, topk, mstore, attn};
}

// DeepSeek-V4 C4 decode with MTP (2 tokens per request, two requests of 136 and 72 tokens: each step completes one
// compressed entry per request), the Ascend A3 path of vLLM-Ascend's AscendDSAImpl:
//   compressor      the indexer's KV compressor (ratio 4 with overlap, D 128, Hadamard-rotated): the step's entries
//   indexer_prolog  those rows int8-quantised into the paged key cache; the queries quantised, head weights to fp16
//   indexer         the quant lightning indexer (QLI): top-16 compressed entries per query row (34 / 18 visible)
//   sparse_attn     sparse attention over the SWA window plus the QLI's entries (16 heads, 512 dims, sinks)
//   attn_out        inverse RoPE and the grouped o-projection (wo_a, wo_b)
std::vector<Case> build_v4_decode(std::uint64_t seed, int threads) {
  const std::vector<std::int64_t> ql{2, 2}, kvl{136, 72};
  const std::int64_t B = 2, T = 4, K = 16, bs = 16;
  GoldenSpec is = member_spec("indexer", "v4.indexer", "v4i.requests");
  is.dims = {{"H", 64}, {"D", 128}, {"bs", bs}};
  is.lists = {{"q_len", ql}, {"kv_len", kvl}};
  is.attrs = {{"sparse_count", AttrValue{K}}, {"cmp_ratio", AttrValue{std::int64_t{4}}}};
  Case idx = generate_inputs(is, member_seed(seed, 3), threads);
  const Tensor& bt = idx.input("block_table");
  const std::int64_t nblk = idx.input("key").dim(0), maxblk = bt.dim(1);

  GoldenSpec cs = member_spec("compressor", "v4.compressor", "v4c.step");
  cs.dims = {{"D", 128}, {"H", 256}, {"bs", 16}};
  cs.lists = {{"start_pos", {kvl[0] - ql[0], kvl[1] - ql[1]}}, {"q_len", ql}};
  cs.attrs = {{"cmp_ratio", AttrValue{std::int64_t{4}}}, {"coff", AttrValue{std::int64_t{2}}}, {"rotate", AttrValue{std::int64_t{1}}}};
  Case cmp = generate_inputs(cs, member_seed(seed, 1), threads);

  // The prolog scatters the step's entries (entry kv_len/4 - 1 of each request; the compressor's pad row skipped)
  // into the indexer's key cache.
  GoldenSpec ps = member_spec("indexer_prolog", "v4.indexer_prolog", "v4ip.rows");
  const std::int64_t R = cmp.input("rope_cos").dim(0);
  ps.dims = {{"T", T}, {"H", 64}, {"D", 128}, {"R", R}, {"bs", bs}, {"nblk", nblk}};
  ps.params = {{"flat", 1.0}};
  Case pro = generate_inputs(ps, member_seed(seed, 2), threads);
  {
    Tensor sm(DType::i32, {R});
    for (std::int64_t r = 0; r < R; ++r) {
      const std::int64_t j = r < B ? kvl[static_cast<std::size_t>(r)] / 4 - 1 : -1;
      sm.data<std::int32_t>()[r] = j < 0 ? -1 : static_cast<std::int32_t>(std::int64_t{bt.data<std::int32_t>()[r * maxblk + j / bs]} * bs + j % bs);
    }
    pro.inputs["slot_mapping"] = sm;
    pro.inputs["k_cache_in"] = idx.input("key");
    pro.inputs["k_scale_cache_in"] = idx.input("key_dequant_scale");
    pro.links["k"] = "compressor/expected/cmp_kv";
  }
  idx.links = {{"query", "indexer_prolog/expected/q_int8"},
               {"query_dequant_scale", "indexer_prolog/expected/q_scale"},
               {"weights", "indexer_prolog/expected/weights_fp16"},
               {"key", "indexer_prolog/expected/k_cache"},
               {"key_dequant_scale", "indexer_prolog/expected/k_scale_cache"}};

  GoldenSpec as = member_spec("sparse_attn", "attn.v4_sparse", "v4_sparse.requests");
  as.dims = {{"N", 16}, {"D", 512}, {"bs_o", 32}, {"bs_c", 16}, {"K", K}};
  as.lists = {{"q_len", ql}, {"kv_len", kvl}};
  as.params = {{"sink", 1.0}};
  as.attrs = {{"cmp_ratio", AttrValue{std::int64_t{4}}}};
  Case att = generate_inputs(as, member_seed(seed, 4), threads);
  att.links["cmp_sparse_indices"] = "indexer/expected/sparse_indices";

  GoldenSpec os = member_spec("attn_out", "attn.v4_out", "v4_out.tokens");
  os.dims = {{"T", T}, {"N", 16}, {"D", 512}, {"R", 16}, {"dim", 256}};
  os.attrs = {{"o_groups", AttrValue{std::int64_t{8}}}};
  Case out = generate_inputs(os, member_seed(seed, 5), threads);
  out.links["o"] = "sparse_attn/expected/out";
  return {cmp, pro, idx, att, out};
}

// The members in pipeline order: a member once every source of its links is placed (ties: stage pipeline_order).
std::vector<std::size_t> member_order(const std::vector<Case>& cs, const std::string& what) {
  std::vector<std::size_t> order;
  std::set<std::size_t> left;
  for (std::size_t i = 0; i < cs.size(); ++i) left.insert(i);
  auto placed = [&](const std::string& name) {
    for (std::size_t i : order)
      if (cs[i].name == name) return true;
    return false;
  };
  while (!left.empty()) {
    std::size_t best = cs.size();
    for (std::size_t i : left) {
      bool ready = true;
      for (const auto& [in, src] : cs[i].links) ready = ready && placed(src.substr(0, src.find('/')));
      if (!ready) continue;
      const int po = find_stage(cs[i].stage) ? find_stage(cs[i].stage)->pipeline_order : 1 << 20;
      if (best == cs.size() || po < find_stage(cs[best].stage)->pipeline_order) best = i;
    }
    if (best == cs.size()) throw std::runtime_error("layer " + what + ": its links name a member that does not exist or form a cycle");
    order.push_back(best);
    left.erase(best);
  }
  return order;
}

// Fills c's linked inputs from the members before it (`group` of the source: "expected" or "outputs").
void fill_links(Case& c, const std::vector<Case>& done, const std::string& group, const std::string& what) {
  for (auto& [in, src] : c.links) {
    const auto s1 = src.find('/'), s2 = src.rfind('/');
    const std::string mname = src.substr(0, s1), t = src.substr(s2 + 1);
    const Case* m = nullptr;
    for (const auto& d : done)
      if (d.name == mname) m = &d;
    const TensorMap* g = m ? (group == "expected" ? &m->expected : &m->outputs) : nullptr;
    if (!g || !g->count(t)) throw std::runtime_error("layer " + what + ": member " + c.name + " links " + in + " to " + src + ", not built");
    Tensor v = g->at(t);
    if (auto it = c.inputs.find(in); it != c.inputs.end() && it->second.shape() != v.shape()) {
      if (it->second.numel() != v.numel())
        throw std::runtime_error("layer " + what + ": " + c.name + "/inputs/" + in + " cannot be read from " + src + " (element counts differ)");
      v = v.reshape(it->second.shape());
    }
    c.inputs[in] = v;
    src = mname + "/" + group + "/" + t;
  }
}

}  // namespace

const std::vector<LayerSpec>& layer_catalogue() {
  static const std::vector<LayerSpec> cat{
      {.name = "layer_v32_decode",
       .doc = "V3.2 MTP decode layer (next_n 2, requests of 20/100/190 tokens): indexer K store -> paged logits -> top-64 "
              "page_slot -> MLA cache store -> sparse MLA decode on the top-k slots, joined by HDF5 links",
       .seed = 3201,
       .committed = true,
       .build = build_v32_decode},
      {.name = "layer_v4_decode",
       .doc = "V4 C4 MTP decode layer, Ascend A3 path (2 requests of 136/72 tokens): indexer KV compressor -> indexer "
              "prolog (int8 key cache) -> quant lightning indexer top-16 -> sparse attention (SWA + compressed, sinks) -> "
              "o-projection, joined by HDF5 links",
       .seed = 4101,
       .committed = true,
       .build = build_v4_decode},
  };
  return cat;
}

const LayerSpec* find_layer_spec(const std::string& name) {
  for (const auto& s : layer_catalogue())
    if (s.name == name) return &s;
  return nullptr;
}

std::vector<Case> make_layer(const LayerSpec& s, std::optional<std::uint64_t> seed, int threads, Backend backend, std::vector<Expected>* refs) {
  std::vector<Case> built = s.build(seed.value_or(s.seed), threads);
  const auto order = member_order(built, s.name);
  std::vector<Case> out;
  if (refs) refs->clear();
  for (std::size_t i : order) {
    Case c = std::move(built[i]);
    c.attrs["layer"] = AttrValue{s.name};
    apply_attr_defaults(c);
    fill_links(c, out, "expected", s.name);
    Expected E;
    c = with_reference(std::move(c), s.name + "/" + c.name, threads, &E, backend);
    out.push_back(std::move(c));
    if (refs) refs->push_back(std::move(E));
  }
  return out;
}

namespace {

// Members as a kernel's dump: outputs (plausible results of the reference on the member's inputs), no expected/,
// every link naming outputs; from member `from` on, each member's linked inputs are its upstream OUTPUTS and its
// reference is recomputed from them. A member whose recomputed inputs are invalid (a bad upstream index, say) is
// dropped with its reason in `dropped`.
void propagate(std::vector<Case>& cs, std::vector<Expected>& refs, std::size_t from, std::uint64_t seed, int threads, Backend backend,
               std::vector<std::string>& dropped) {
  for (std::size_t j = from; j < cs.size(); ++j) {
    Case& c = cs[j];
    std::vector<Case> before(cs.begin(), cs.begin() + static_cast<std::ptrdiff_t>(j));
    bool linked_to_dropped = false;
    for (const auto& [in, src] : c.links)
      for (const auto& d : dropped) linked_to_dropped = linked_to_dropped || d.rfind(src.substr(0, src.find('/')) + ":", 0) == 0;
    if (linked_to_dropped) {
      dropped.push_back(c.name + ": below a dropped member");
      continue;
    }
    fill_links(c, before, "outputs", "selftest");
    BoundCase b;
    if (auto p = validate_case(c, false, &b); !p.empty()) {
      dropped.push_back(c.name + ": " + p.front().str());
      continue;
    }
    RefOptions ro;
    ro.threads = threads;
    refs[j] = run_reference(b, ro, backend);
    c.outputs.clear();
    mutant::plausible_outputs(c, refs[j], seed + j);
  }
}

// The first member (index into cs) whose local check fails, or cs.size(); `lines` gets every failing local result.
std::size_t first_local_failure(const std::vector<Case>& cs, const std::vector<std::string>& dropped, const pipeline::CheckOptions& o,
                                std::vector<std::string>& lines, std::vector<std::string>* drifting = nullptr) {
  std::vector<Case> kept;
  std::vector<std::size_t> map;
  for (std::size_t j = 0; j < cs.size(); ++j) {
    bool gone = false;
    for (const auto& d : dropped) gone = gone || d.rfind(cs[j].name + ":", 0) == 0;
    if (gone) continue;
    kept.push_back(cs[j]);
    kept.back().file = "(layer selftest)";
    map.push_back(j);
  }
  std::vector<ParamsPtr> params(kept.size());
  for (std::size_t j = 0; j < kept.size(); ++j) {
    BoundCase b;
    if (validate_case(kept[j], true, &b).empty()) params[j] = b.params;
  }
  std::size_t first = cs.size();
  const auto layers = pipeline::find_layers(kept);
  std::vector<std::vector<cmp::CheckResult>> res(kept.size());
  std::set<std::size_t> in_layer;
  for (const auto& l : layers) {
    auto r = pipeline::check_layer(l, kept, params, o);
    for (std::size_t q = 0; q < l.order.size(); ++q) {
      res[l.order[q]] = std::move(r[q]);
      in_layer.insert(l.order[q]);
    }
  }
  for (std::size_t j = 0; j < kept.size(); ++j) {
    if (!in_layer.count(j)) res[j] = pipeline::check_case(kept[j], o);
    bool drift = false;
    for (const auto& r : res[j]) {
      if (!r.informational && !r.pass()) {
        first = std::min(first, map[j]);
        lines.push_back(r.case_name + "/" + r.group + "/" + r.tensor + " " + std::string(cmp::verdict_name(r.verdict)) + ": " + r.message);
      }
      drift = drift || (r.informational && !cmp::verdict_pass(r.verdict));
    }
    if (drift && drifting) drifting->push_back(kept[j].name);
  }
  return first;
}

}  // namespace

bool layer_selftest(std::ostream& out, int threads, Backend backend, bool verbose) {
  bool all_ok = true;
  pipeline::CheckOptions o;
  o.backend = backend;
  o.threads = threads;
  const std::uint64_t seed = 1;
  for (const LayerSpec& ls : layer_catalogue()) {
    std::vector<Case> base;
    std::vector<Expected> refs;
    std::vector<std::string> dropped;
    std::string missing;  // member stages without an implementation on this backend
    for (const auto& c : ls.build(ls.seed, threads))
      if (const Stage* st = find_stage(c.stage); st && !st->impl_for(backend)) missing += (missing.empty() ? "" : ", ") + st->name;
    if (!missing.empty()) {
      out << "LEFT OUT layer " << ls.name << ": no " << backend_name(backend) << " implementation of " << missing << "\n";
      continue;
    }
    try {
      base = make_layer(ls, std::nullopt, threads, backend, &refs);
      for (auto& c : base) {
        c.expected.clear();
        for (auto& [in, src] : c.links) src.replace(src.find("/expected/"), 10, "/outputs/");
      }
      propagate(base, refs, 0, seed, threads, backend, dropped);
    } catch (const std::exception& e) {
      out << "FAIL     layer " << ls.name << ": cannot build: " << e.what() << "\n";
      all_ok = false;
      continue;
    }
    std::vector<std::string> lines;
    const std::size_t f0 = dropped.empty() ? first_local_failure(base, dropped, o, lines) : 0;
    if (!dropped.empty() || f0 != base.size()) {
      out << "FAIL     layer " << ls.name << ": the plausible base layer does not pass: " << (dropped.empty() ? lines.front() : dropped.front()) << "\n";
      all_ok = false;
      continue;
    }
    std::int64_t total = 0, attributed = 0, not_applicable = 0;
    std::string stages_seen;
    for (std::size_t i = 0; i < base.size(); ++i) {
      const Stage* st = find_stage(base[i].stage);
      stages_seen += (stages_seen.empty() ? "" : ", ") + st->name;
      for (const Mutant& m : st->mutants) {
        std::vector<Case> cs = base;
        std::vector<Expected> rs = refs;
        for (auto& [n, t] : cs[i].outputs) t = t.clone();
        const TensorMap before = base[i].outputs;
        std::vector<std::string> drop;
        try {
          m.apply(cs[i], rs[i], seed * 1000003u + static_cast<std::uint64_t>(i * 131 + static_cast<std::size_t>(total)));
        } catch (const std::exception&) {
          ++not_applicable;  // the mutant needs a feature this member lacks
          continue;
        }
        bool changed = cs[i].outputs.size() != before.size();
        for (const auto& [n, t] : cs[i].outputs) changed = changed || !before.count(n) || !before.at(n).same_bytes(t);
        if (!changed) {
          ++not_applicable;
          continue;
        }
        try {
          propagate(cs, rs, i + 1, seed, threads, backend, drop);
        } catch (const std::exception& e) {
          drop.push_back(std::string("(propagation) ") + e.what());
        }
        ++total;
        bool benign = !m.expect.empty();
        for (auto v : m.expect) benign = benign && cmp::verdict_pass(v);
        std::vector<std::string> ls_lines, drifting;
        const std::size_t first = first_local_failure(cs, drop, o, ls_lines, &drifting);
        if (!benign && first == cs.size()) {
          // The member passes its own check with this mutant: the bug needs a feature the member lacks (a cache
          // layout, sinks, the extra KV scope, another dequant); nothing to attribute.
          --total;
          ++not_applicable;
          if (verbose) out << "N/A      " << ls.name << ": " << m.name << " [" << m.bug << "] at " << cs[i].name << ": the member passes its own check\n";
          continue;
        }
        const bool ok = benign ? first == cs.size() : first == i;
        attributed += ok ? 1 : 0;
        if (!ok || verbose) {
          std::string dr;
          for (const auto& d : drifting) dr += (dr.empty() ? "" : ", ") + d;
          out << (ok ? "ATTRIB   " : "MISATTR  ") << ls.name << ": " << m.name << " [" << m.bug << "] at " << cs[i].name << " (" << st->name
              << "): first local divergence " << (first == cs.size() ? std::string("none") : cs[first].name)
              << (drop.empty() ? "" : "; " + std::to_string(drop.size()) + " member(s) below get invalid inputs")
              << (dr.empty() ? "" : "; end-to-end drift at " + dr) << "\n";
          if (!ok)
            for (const auto& l : ls_lines) out << "         " << l << "\n";
        }
      }
    }
    const bool ok = attributed == total && total > 0;
    all_ok = all_ok && ok;
    char pct[32];
    std::snprintf(pct, sizeof pct, "%.1f", total ? 100.0 * static_cast<double>(attributed) / static_cast<double>(total) : 0.0);
    out << (ok ? "PASS     " : "FAIL     ") << "layer " << ls.name << " [" << stages_seen << "]: attribution " << attributed << "/" << total
        << " mutants (" << pct << " %)"
        << (not_applicable ? ", " + std::to_string(not_applicable) + " not applicable (the member passes its own check: the bug needs a feature it lacks)" : "")
        << "\n";
  }
  return all_ok;
}

}  // namespace dsa::golden
