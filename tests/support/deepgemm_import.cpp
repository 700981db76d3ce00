#include "tests/support/deepgemm_import.hpp"
#include "io/h5handle.hpp"

#include <hdf5.h>

#include <stdexcept>
#include <utility>

namespace dsa::io {
namespace {

using Handle = H5Handle;

[[noreturn]] void fail(const std::string& file, const std::string& what, const std::string& expected, const std::string& found) {
  throw std::runtime_error(file + ": " + what + ": expected " + expected + ", found " + found);
}

// Reads dataset `name` of `group` as `want` (storage type read natively, no conversion beyond HDF5's integer/float
// widening of the same class), checking the rank.
Tensor read_ds(const std::string& file, hid_t group, const std::string& gname, const std::string& name, DType want, int rank) {
  const std::string what = gname + "/" + name;
  if (H5Lexists(group, name.c_str(), H5P_DEFAULT) <= 0) fail(file, what, "a dataset", "none");
  Handle ds(H5Dopen2(group, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (ds.id < 0) fail(file, what, "a readable dataset", "an unreadable object");
  Handle space(H5Dget_space(ds.id), H5Sclose);
  const int r = H5Sget_simple_extent_ndims(space.id);
  if (r != rank) fail(file, what, "rank " + std::to_string(rank), "rank " + std::to_string(r));
  std::vector<hsize_t> dims(static_cast<std::size_t>(r));
  H5Sget_simple_extent_dims(space.id, dims.data(), nullptr);
  Shape shape(dims.begin(), dims.end());
  Tensor t(want, shape);
  hid_t mem = H5T_NATIVE_UINT8;
  switch (want) {
    case DType::u8:
    case DType::fp8_e4m3fn: mem = H5T_NATIVE_UINT8; break;
    case DType::u16:
    case DType::bf16: mem = H5T_NATIVE_UINT16; break;
    case DType::i32: mem = H5T_NATIVE_INT32; break;
    case DType::f32: mem = H5T_NATIVE_FLOAT; break;
    default: fail(file, what, "a supported dtype", std::string(dtype_name(want)));
  }
  Handle ftype(H5Dget_type(ds.id), H5Tclose);
  const H5T_class_t cls = H5Tget_class(ftype.id);
  const bool want_float = want == DType::f32;
  if ((want_float && cls != H5T_FLOAT) || (!want_float && cls != H5T_INTEGER) ||
      H5Tget_size(ftype.id) != dtype_size(want))
    fail(file, what, std::string(dtype_name(want)) + " storage", "HDF5 class " + std::to_string(static_cast<int>(cls)) +
                                                                   " size " + std::to_string(H5Tget_size(ftype.id)));
  if (t.numel() > 0 && H5Dread(ds.id, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.raw()) < 0)
    fail(file, what, "readable data", "a read error");
  return t;
}

std::int64_t read_int_attr(const std::string& file, hid_t group, const std::string& gname, const std::string& name) {
  if (H5Aexists(group, name.c_str()) <= 0) fail(file, gname + " attr " + name, "an integer attribute", "none");
  Handle a(H5Aopen(group, name.c_str(), H5P_DEFAULT), H5Aclose);
  std::int64_t v = 0;
  if (a.id < 0 || H5Aread(a.id, H5T_NATIVE_INT64, &v) < 0) fail(file, gname + " attr " + name, "an integer attribute", "unreadable");
  return v;
}

std::vector<std::string> group_names(hid_t f) {
  std::vector<std::string> names;
  H5Literate(f, H5_INDEX_NAME, H5_ITER_INC, nullptr,
             [](hid_t, const char* n, const H5L_info_t*, void* op) -> herr_t {
               static_cast<std::vector<std::string>*>(op)->push_back(n);
               return 0;
             },
             &names);
  return names;
}

Handle open_file(const std::string& path) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (f.id < 0) fail(path, "file", "a readable HDF5 file", "cannot open");
  return Handle(std::exchange(f.id, -1), H5Fclose);
}

}  // namespace

std::vector<Case> import_deepgemm_sm90_logits(const std::string& path) {
  Handle f = open_file(path);
  std::vector<Case> out;
  for (const std::string& g : group_names(f.id)) {
    Handle grp(H5Gopen2(f.id, g.c_str(), H5P_DEFAULT), H5Gclose);
    if (grp.id < 0) fail(path, g, "a group", "an unreadable object");
    Case c;
    c.file = path;
    c.name = g;
    c.attrs["kernel"] = std::string("deepgemm-sm90");
    c.attrs["logits_dtype"] = std::string("float32");
    if (g.rfind("ragged", 0) == 0) {
      c.stage = "indexer.logits_ragged";
      c.inputs["q"] = read_ds(path, grp.id, g, "q_fp8", DType::fp8_e4m3fn, 3);
      c.inputs["kv"] = read_ds(path, grp.id, g, "kv_fp8", DType::fp8_e4m3fn, 2);
      c.inputs["kv_scale"] = read_ds(path, grp.id, g, "kv_scale", DType::f32, 1);
      c.inputs["weights"] = read_ds(path, grp.id, g, "weights", DType::f32, 2);
      c.inputs["ks"] = read_ds(path, grp.id, g, "ks", DType::i32, 1);
      c.inputs["ke"] = read_ds(path, grp.id, g, "ke", DType::i32, 1);
      c.attrs["clean_logits"] = std::int64_t{1};
      c.attrs["max_seqlen_k"] = std::int64_t{0};
      c.outputs["logits"] = read_ds(path, grp.id, g, "logits", DType::f32, 2);
      Case b = c;
      b.name = g + "_bf16";
      b.attrs["logits_dtype"] = std::string("bf16");
      b.outputs["logits"] = read_ds(path, grp.id, g, "logits_bf16_bits", DType::bf16, 2);
      out.push_back(std::move(c));
      out.push_back(std::move(b));
    } else if (g.rfind("paged", 0) == 0) {
      c.stage = "indexer.logits_paged";
      c.inputs["q"] = read_ds(path, grp.id, g, "q_fp8", DType::fp8_e4m3fn, 4);
      c.inputs["kv_cache"] = read_ds(path, grp.id, g, "kv_cache", DType::u8, 4);
      c.inputs["weights"] = read_ds(path, grp.id, g, "weights", DType::f32, 2);
      c.inputs["context_lens"] = read_ds(path, grp.id, g, "context_lens_2d", DType::i32, 2);
      c.inputs["block_table"] = read_ds(path, grp.id, g, "block_table", DType::i32, 2);
      c.attrs["clean_logits"] = std::int64_t{0};
      c.attrs["max_context_len"] = read_int_attr(path, grp.id, g, "max_len");
      c.attrs["page_size"] = read_int_attr(path, grp.id, g, "block");
      c.outputs["logits"] = read_ds(path, grp.id, g, "logits", DType::f32, 2);
      out.push_back(std::move(c));
    } else {
      fail(path, g, "a group named ragged_* or paged_*", "'" + g + "'");
    }
  }
  if (out.empty()) fail(path, "file", "at least one ragged_*/paged_* group", "none");
  return out;
}

Sm90Probe read_sm90_probe(const std::string& path) {
  Handle f = open_file(path);
  Sm90Probe p;
  p.q_rows = read_ds(path, f.id, "", "q_rows", DType::u8, 2);
  p.k = read_ds(path, f.id, "", "k", DType::u8, 2);
  p.logits = read_ds(path, f.id, "", "logits", DType::f32, 2);
  if (p.logits.dim(0) != 2 * p.q_rows.dim(0) || p.logits.dim(1) != p.k.dim(0) || p.q_rows.dim(1) != p.k.dim(1))
    fail(path, "logits", "shape [2*" + std::to_string(p.q_rows.dim(0)) + ", " + std::to_string(p.k.dim(0)) + "]",
         shape_str(p.logits.shape()));
  return p;
}

}  // namespace dsa::io
