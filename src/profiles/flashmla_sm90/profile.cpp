// Kernel profile `flashmla-sm90`: FlashMLA's sparse attention kernels on Hopper (flash_mla_sparse_fwd, the sparse
// fp8 decode with its V3.2 656-byte and MODEL1 584-byte caches) and its DeepSeek-V4 attention (fp32 online softmax,
// the sink in the denominator). The prefill kernel is emulated bit for bit (prefill_emu.cpp, from reference/
// flashmla_sm90.py and the measured MUFU tables: 100 % of the real output in tests/data/flashmla_sm90.h5;
// docs/research_flashmla_sm90.md); an output that differs from the emulation FAILs. Decode and V4 attention are
// judged by the stages' derived bounds.
#include "profiles/profiles.hpp"

namespace dsa::profiles {

const Profile& flashmla_sm90() {
  static const Profile p{"flashmla-sm90",
                         "FlashMLA sparse prefill / decode on Hopper: bf16 (or dequantized fp8) operands, fp32 accumulation "
                         "and online softmax; prefill emulated bit for bit (measured bf16 WGMMA, ex2 / rcp / lg2.approx "
                         "tables, phase1.cuh's order), decode judged by the stages' derived bounds",
                         {{"attn.sparse_mla_prefill", "", true},
                          {"attn.sparse_mla_decode", "", false},
                          {"attn.v4_sparse", "", false}},
                         {}};
  return p;
}

}  // namespace dsa::profiles
