#include "pipeline/backend_diff.hpp"

#include <cstring>
#include <stdexcept>

#include "backend/cuda.hpp"
#include "pipeline/load.hpp"

namespace dsa::pipeline {

std::string Impl::str() const {
  return std::string(backend_name(backend)) + ":" + (threads > 0 ? std::to_string(threads) : std::string("all"));
}

Impl parse_impl(const std::string& s) {
  const auto colon = s.find(':');
  const std::string name = s.substr(0, colon);
  Impl i;
  if (const auto b = parse_backend(name)) i.backend = *b;
  else throw std::invalid_argument("implementation '" + s + "': expected cpu, cpu:THREADS, cuda or cuda:THREADS");
  if (colon != std::string::npos) {
    const std::string t = s.substr(colon + 1);
    if (t.empty() || t.size() > 4 || t.find_first_not_of("0123456789") != std::string::npos)
      throw std::invalid_argument("implementation '" + s + "': THREADS must be an integer in [0, 9999]");
    i.threads = std::stoi(t);
  }
  return i;
}

namespace {

// Byte-identical tensors (dtype, shape, bytes); "" or what differs.
std::string tensor_diff(const Tensor& x, const Tensor& y) {
  if (!x.defined() && !y.defined()) return "";
  if (x.defined() != y.defined()) return std::string("present on one side only");
  if (x.dtype() != y.dtype()) return "dtype " + std::string(dtype_name(x.dtype())) + " vs " + std::string(dtype_name(y.dtype()));
  if (x.shape() != y.shape()) return "shape " + shape_str(x.shape()) + " vs " + shape_str(y.shape());
  if (x.same_bytes(y)) return "";
  const std::int64_t es = static_cast<std::int64_t>(dtype_size(x.dtype()));
  std::int64_t n = 0, first = -1;
  for (std::int64_t i = 0; i < x.numel(); ++i)
    if (std::memcmp(x.raw() + i * es, y.raw() + i * es, static_cast<std::size_t>(es)) != 0) {
      if (first < 0) first = i;
      ++n;
    }
  return std::to_string(n) + " of " + std::to_string(x.numel()) + " elements differ; first at flat index " + std::to_string(first);
}

template <class T>
std::string vector_diff(const std::vector<T>& x, const std::vector<T>& y) {
  if (x.size() != y.size()) return "length " + std::to_string(x.size()) + " vs " + std::to_string(y.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::memcmp(&x[i], &y[i], sizeof(T)) != 0) return "differs first at row " + std::to_string(i);
  return "";
}

// The two index maps agree on every candidate of every row (to_index) and on every value they emit (from_index).
std::string index_map_diff(const TopkRef& x, const TopkRef& y) {
  if (!x.to_index || !y.to_index || !x.from_index || !y.from_index)
    return (x.to_index != nullptr) == (y.to_index != nullptr) ? "" : "index map present on one side only";
  for (std::size_t r = 0; r < x.len.size(); ++r) {
    const auto ri = static_cast<std::int64_t>(r);
    for (std::int64_t p = 0; p < x.len[r]; ++p) {
      const std::int64_t ix = x.to_index(ri, p);
      if (ix != y.to_index(ri, p)) return "to_index differs at row " + std::to_string(r) + " position " + std::to_string(p);
      if (x.from_index(ri, ix) != y.from_index(ri, ix))
        return "from_index differs at row " + std::to_string(r) + " index " + std::to_string(ix);
    }
  }
  return "";
}

}  // namespace

std::vector<DiffLine> diff_references(const Case& c, const Impl& a, const Impl& b) {
  BoundCase bc;
  if (auto p = validate_case(c, true, &bc); !p.empty()) throw SchemaError(p.front());
  auto run = [&](const Impl& i) {
    RefOptions ro;
    ro.threads = i.threads;
    ro.emulation = emulated_profile(bc);
    return run_reference(bc, ro, i.backend);
  };
  return diff_expected(run(a), run(b), a.str(), b.str());
}

std::vector<DiffLine> diff_expected(const Expected& ea, const Expected& eb, const std::string& a, const std::string& b) {
  std::vector<DiffLine> out;
  auto add = [&out](const std::string& what, const std::string& msg) {
    if (!msg.empty()) out.push_back({what, msg});
  };
  for (const RefTensor& x : ea.tensors) {
    const RefTensor* y = eb.find(x.name);
    if (!y) {
      add(x.name, "missing on " + b);
      continue;
    }
    add(x.name, x.kind != y->kind ? "compare kind differs" : "");
    add(x.name, tensor_diff(x.value, y->value));
    add(x.name + ".magnitude", tensor_diff(x.magnitude, y->magnitude));
    add(x.name + ".defined", tensor_diff(x.defined, y->defined));
    add(x.name + ".mask_must_match", x.mask_must_match != y->mask_must_match ? "differs" : "");
    for (const auto& [prof, t] : x.emulations) {
      auto it = y->emulations.find(prof);
      add(x.name + ".emulation[" + prof + "]", it == y->emulations.end() ? "missing on " + b : tensor_diff(t, it->second));
    }
    if (x.kind == CompareKind::topk_set) {
      const TopkRef &tx = x.topk, &ty = y->topk;
      add(x.name + ".k", tx.k != ty.k ? std::to_string(tx.k) + " vs " + std::to_string(ty.k) : "");
      add(x.name + ".flags", tx.sorted != ty.sorted || tx.fast_path != ty.fast_path ? "sorted / fast_path differ" : "");
      add(x.name + ".len", vector_diff(tx.len, ty.len));
      add(x.name + ".scores", tensor_diff(tx.scores, ty.scores));
      add(x.name + ".bounds", tensor_diff(tx.bounds, ty.bounds));
      add(x.name + ".kth", vector_diff(tx.kth, ty.kth));
      if (tx.len == ty.len) add(x.name + ".index_map", index_map_diff(tx, ty));
    }
  }
  for (const RefTensor& y : eb.tensors)
    if (!ea.find(y.name)) add(y.name, "missing on " + a);
  return out;
}

int run_backend_diff(const BackendDiffOptions& o, std::ostream& out, std::ostream& err) {
  for (const Impl* i : {&o.a, &o.b})
    if (i->backend == Backend::cuda)
      if (const std::string e = cuda::device_problem(); !e.empty()) {
        err << "error: " << i->str() << ": " << e << "\n";
        return 2;
      }
  int rc = 0;
  std::int64_t same = 0, differ = 0;
  out << "backend-diff: " << o.a.str() << " vs " << o.b.str() << "\n";
  for (const auto& f : o.files) {
    io::ReadResult r = load_file(f);
    for (const auto& p : r.problems) err << "error: " << p.str() << "\n";
    if (!r.ok()) {
      rc = 2;
      continue;
    }
    for (const Case& c : r.cases) {
      // A side without an implementation of the case's stage is an error of its own, not a pass (as selftest and
      // layers tell it before running anything).
      if (const Stage* st = find_stage(c.stage))
        if (const Impl* i = !st->impl_for(o.a.backend) ? &o.a : !st->impl_for(o.b.backend) ? &o.b : nullptr) {
          err << "error: " << c.where() << ": stage " << st->name << " has no " << backend_name(i->backend) << " implementation\n";
          rc = 2;
          continue;
        }
      try {
        const auto d = diff_references(c, o.a, o.b);
        if (d.empty()) {
          ++same;
          out << "IDENTICAL  " << c.where() << " [" << c.stage << "]\n";
        } else {
          ++differ;
          rc = std::max(rc, 1);
          out << "DIFFERENT  " << c.where() << " [" << c.stage << "]\n";
          for (const auto& l : d) out << "           " << l.tensor << ": " << l.message << "\n";
        }
      } catch (const std::exception& e) {
        err << "error: " << c.where() << ": " << e.what() << "\n";
        rc = 2;
      }
    }
  }
  out << same << " identical, " << differ << " different\n";
  return rc;
}

}  // namespace dsa::pipeline
