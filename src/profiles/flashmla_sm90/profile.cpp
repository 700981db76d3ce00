// Kernel profile `flashmla-sm90`: FlashMLA's sparse attention kernels on Hopper (flash_mla_sparse_fwd, the sparse
// fp8 decode with its V3.2 656-byte and MODEL1 584-byte caches) and its DeepSeek-V4 attention (fp32 online softmax,
// the sink in the denominator). The prefill kernel and the sparse fp8 decode (its split-KV schedule for attr num_sms
// SMs, the CTAs and the combine) are emulated bit for bit (prefill_emu.cpp, decode_emu.cpp, from reference/
// flashmla_sm90.py and the measured MUFU tables: 100 % of the real output in tests/data/flashmla_sm90.h5;
// docs/research_flashmla_sm90.md); an output that differs from the emulation FAILs. V4 attention is judged by the
// stage's derived bound.
#include "profiles/profiles.hpp"

namespace dsa::profiles {

const Profile& flashmla_sm90() {
  static const Profile p{"flashmla-sm90",
                         "FlashMLA sparse prefill / decode on Hopper: bf16 (or dequantized fp8) operands, fp32 accumulation "
                         "and online softmax; prefill and sparse fp8 decode emulated bit for bit (measured bf16 WGMMA, ex2 / "
                         "rcp / lg2.approx tables, phase1.cuh's / splitkv_mla.cuh's order, the split-KV schedule of "
                         "attr num_sms SMs and the combine kernel)",
                         {{"attn.sparse_mla_prefill", "", true},
                          {"attn.sparse_mla_decode", "", true},
                          {"attn.v4_sparse", "", false}},
                         {}};
  return p;
}

}  // namespace dsa::profiles
