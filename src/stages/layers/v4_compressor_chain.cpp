// Layer recipe layer_v4_compressor_chain (table.cpp).
#include "stages/layers/recipe.hpp"

namespace dsa::golden::layers {

// vLLM's CUDA indexer compressor (D 128, C4) over three steps of one history, chained by state: step n+1's
// state_cache_in and kv_cache_in are step n's state_cache and kv_cache. Two requests: A a 6-token prefill (entry 0
// at p 3), then decodes p 6 and p 7 (entry 1 from rows 0..5 of the prefill and row 6 of the first decode); B a 3-token
// prefill, then decodes p 3 (entry 0 across the step boundary) and p 4. Pads in every step.
std::vector<Case> build_v4_compressor_chain(std::uint64_t seed, int threads) {
  const std::vector<std::vector<std::int64_t>> starts{{0, 0}, {6, 3}, {7, 4}}, lens{{6, 3}, {1, 1}, {1, 1}};
  std::vector<Case> out;
  for (std::size_t k = 0; k < 3; ++k) {
    const std::string name = "step" + std::to_string(k);
    GoldenSpec s = member_spec("", "v4.compressor_cache", "v4cc.step");
    s.name = name;
    s.dims = {{"D", 128}, {"sbs", 4}, {"kbs", 4}, {"cap", 8}};
    s.lists = {{"start_pos", starts[k]}, {"q_len", lens[k]}};
    s.params = {{"pads", 2.0}, {"data_seed", static_cast<double>(seed % 1000003)}, {"bf16_values", 1.0}};
    s.attrs = {{"cmp_ratio", AttrValue{std::int64_t{4}}}};
    Case c = generate_inputs(s, member_seed(seed, k + 1), threads);
    c.name = name;
    if (k > 0) {
      const std::string prev = "step" + std::to_string(k - 1);
      c.links["state_cache_in"] = prev + "/expected/state_cache";
      c.links["kv_cache_in"] = prev + "/expected/kv_cache";
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace dsa::golden::layers
