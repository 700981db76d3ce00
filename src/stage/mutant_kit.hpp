// The toolkit of selftest mutants (each stage's mutants.cpp) and of the demo files: outputs "as a correct kernel
// would" produce them, outputs of a kernel with a bug expressible as modified inputs/attrs, and small editors.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "stage/stage.hpp"

namespace dsa::mutant {

// The reference `check` computes for case c: with the emulation of the kernel the case names (attr `kernel`).
Expected reference_for_check(const Case& c);

// Fills c.outputs from the reference `E` as a correct kernel might: bytes tensors exact; bounded tensors equal to
// the kernel's emulation when the case names one (attr `kernel`), otherwise perturbed inside 0.3 of the case's
// bound and rounded once to the output dtype, undefined elements filled with junk; top-k with in-band swaps
// (when the band allows), shuffled order (unless sorted) and -1 padding. Deterministic in `seed`.
// Compute `E` with reference_for_check (as `check` does); otherwise a case with attr `kernel` gets perturbed
// logits, which `check` fails.
void plausible_outputs(Case& c, const Expected& E, std::uint64_t seed);
// The outputs of another correct kernel for a case whose attr `kernel` names an emulated profile: plausible_outputs
// of the case without that attr (the exact value perturbed inside the bound), replacing c.outputs.
void other_kernel_outputs(Case& c, const Expected& E, std::uint64_t seed);

// Outputs of a kernel with a bug expressible as modified inputs/attrs: copies `c`, applies `bug` to the copy, runs
// the stage reference on it and returns plausible outputs of that reference. Inputs of `c` are not changed.
TensorMap buggy_outputs(const Case& c, const std::function<void(Case&)>& bug, std::uint64_t seed);
// A Mutant::apply that replaces the outputs by buggy_outputs(c, bug, seed).
std::function<void(Case&, const Expected&, std::uint64_t)> buggy(std::function<void(Case&)> bug);

// A Mutant::apply for a bug the stage's own reference reproduces (a `Bug` switch of `run(c, params, bug, threads)`):
// the case's outputs become plausible outputs of that buggy run.
// reference_with: the same for a bug the reference reproduces through its parameters (edit sets the bug on a copy of
// the case's parsed params; run computes the reference with them).
template <typename P>
std::function<void(Case&, const Expected&, std::uint64_t)> reference_with(std::function<void(P&)> edit,
                                                                         std::function<Expected(const Case&, const P&)> run) {
  return [edit, run](Case& c, const Expected&, std::uint64_t seed) {
    BoundCase b;
    if (auto pr = validate_case(c, false, &b); !pr.empty()) throw SchemaError(pr.front());
    P p = dynamic_cast<const P&>(*b.params);
    edit(p);
    const Expected E = run(c, p);
    c.outputs.clear();
    plausible_outputs(c, E, seed);
  };
}
template <typename P, typename B>
std::function<void(Case&, const Expected&, std::uint64_t)> reference_bug(Expected (*run)(const Case&, const P&, B, int), B bug) {
  return reference_with<P>([](P&) {}, [run, bug](const Case& c, const P& p) { return run(c, p, bug, 1); });
}

// The case's default tolerance for `tensor` (no CLI overrides).
cmp::Tolerance default_tolerance(const Case& c, const std::string& tensor);

// Small editors.
Tensor& output(Case& c, const std::string& n);             // outputs/n, made private (cloned) for editing
const RefTensor& reft(const Expected& E, const std::string& n);
void set_attr(Case& c, const std::string& k, AttrValue v);
void iset(Tensor& t, std::int64_t i, std::int64_t v);       // integer element write (i32 or i64)
void scale_bf16(Tensor& t, double f);                      // every finite bf16 element times f, rounded to bf16
std::vector<std::int64_t> finite_defined(const RefTensor& t);  // defined elements with a finite reference value
// The padded-token bug of cache writers (B12): every -1 of a slot_mapping replaced by the lowest slot no other token
// stores into (slot 0 first).
void write_padded_tokens(Tensor& slot_mapping);
// Top-k index editors on an [R, ..., W] index tensor: every -1 replaced by v (padding bug B12); each row's valid
// prefix (up to its first -1) sorted ascending (an unsorted kernel declared sorted, B9).
void replace_padding(Tensor& indices, std::int64_t v);
void rows_ascending(Tensor& indices);
template <typename F>
void edit_input(Case& c, const std::string& n, F f) {
  Tensor t = c.input(n).clone();
  f(t);
  c.inputs[n] = t;
}

}  // namespace dsa::mutant
