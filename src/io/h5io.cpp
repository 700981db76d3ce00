#include "io/h5io.hpp"
#include "io/h5handle.hpp"

#include <hdf5.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>


namespace dsa::io {

std::function<void(const std::string&)> g_before_rename_hook;

namespace {

namespace fs = std::filesystem;

using H = H5Handle;

struct QuietErrors {
  H5E_auto2_t func = nullptr;
  void* data = nullptr;
  QuietErrors() {
    H5Eget_auto2(H5E_DEFAULT, &func, &data);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietErrors() { H5Eset_auto2(H5E_DEFAULT, func, data); }
};

std::vector<std::string> child_names(hid_t group) {
  std::vector<std::string> names;
  H5Literate(
      group, H5_INDEX_NAME, H5_ITER_INC, nullptr,
      [](hid_t, const char* name, const H5L_info_t*, void* op) -> herr_t {
        static_cast<std::vector<std::string>*>(op)->emplace_back(name);
        return 0;
      },
      &names);
  return names;
}

H5O_type_t object_type(hid_t loc, const std::string& name) {
  H5O_info_t info;
  if (H5Oget_info_by_name(loc, name.c_str(), &info, H5P_DEFAULT) < 0) return H5O_TYPE_UNKNOWN;
  return info.type;
}

// ---- attributes ----
// Reads a scalar or 1-D integer / float / string attribute. On failure `err` describes what was found (the
// caller says what was expected: kAttrExpected).
constexpr const char* kAttrExpected = "an integer, float or string attribute (scalar or 1-D)";
bool read_attr(hid_t obj, const std::string& name, AttrValue& out, std::string& err) {
  H a(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose);
  if (!a.ok()) {
    err = "an unreadable attribute";
    return false;
  }
  H type(H5Aget_type(a), H5Tclose);
  H space(H5Aget_space(a), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 0 || rank > 1) {
    err = "an attribute of rank " + std::to_string(rank);
    return false;
  }
  hssize_t n = H5Sget_simple_extent_npoints(space);
  if (n < 0 || n > (1 << 20)) {
    err = "an attribute of " + std::to_string(n) + " elements (at most 2^20)";
    return false;
  }
  if (n == 0) {
    err = "an empty attribute (null dataspace or 0 elements)";
    return false;
  }
  const H5T_class_t cls = H5Tget_class(type);
  if (cls == H5T_STRING) {
    if (rank != 0 && n != 1) {
      err = "an array of " + std::to_string(n) + " strings";
      return false;
    }
    if (H5Tis_variable_str(type) > 0) {
      H mt(H5Tcopy(H5T_C_S1), H5Tclose);
      H5Tset_size(mt, H5T_VARIABLE);
      H5Tset_cset(mt, H5Tget_cset(type));
      char* p = nullptr;
      if (H5Aread(a, mt, &p) < 0) {
        err = "an unreadable string attribute";
        return false;
      }
      out = std::string(p ? p : "");
      H5free_memory(p);
    } else {
      const std::size_t sz = H5Tget_size(type);
      std::string s(sz, '\0');
      H mt(H5Tcopy(type), H5Tclose);
      if (H5Aread(a, mt, s.data()) < 0) {
        err = "an unreadable string attribute";
        return false;
      }
      s.resize(std::strlen(s.c_str()));
      out = s;
    }
    return true;
  }
  if (cls == H5T_INTEGER || cls == H5T_ENUM) {
    std::vector<std::int64_t> v(static_cast<std::size_t>(n));
    if (cls == H5T_ENUM) {  // h5py bools: enum over int8; read the base integer values
      H base(H5Tget_super(type), H5Tclose);
      H native(H5Tget_native_type(type, H5T_DIR_ASCEND), H5Tclose);
      std::vector<unsigned char> buf(static_cast<std::size_t>(n) * H5Tget_size(native));
      if (H5Aread(a, native, buf.data()) < 0) {
        err = "an unreadable enum attribute";
        return false;
      }
      const std::size_t es = H5Tget_size(native);
      const bool sgn = H5Tget_sign(base) == H5T_SGN_2;
      for (std::size_t i = 0; i < v.size(); ++i) {
        std::int64_t x = 0;
        if (es == 1) x = sgn ? static_cast<std::int8_t>(buf[i]) : buf[i];
        else std::memcpy(&x, buf.data() + i * es, std::min<std::size_t>(es, 8));
        v[i] = x;
      }
    } else if (H5Aread(a, H5T_NATIVE_INT64, v.data()) < 0) {
      err = "an unreadable integer attribute";
      return false;
    }
    if (rank == 0) out = v[0];
    else out = v;
    return true;
  }
  if (cls == H5T_FLOAT) {
    std::vector<double> v(static_cast<std::size_t>(n));
    if (H5Aread(a, H5T_NATIVE_DOUBLE, v.data()) < 0) {
      err = "an unreadable float attribute";
      return false;
    }
    if (rank == 0) out = v[0];
    else out = v;
    return true;
  }
  err = "an attribute of HDF5 type class " + std::to_string(static_cast<int>(cls)) + " (compound, array, reference, ...)";
  return false;
}

std::vector<std::string> attr_names(hid_t obj) {
  std::vector<std::string> names;
  H5Aiterate2(
      obj, H5_INDEX_NAME, H5_ITER_INC, nullptr,
      [](hid_t, const char* name, const H5A_info_t*, void* op) -> herr_t {
        static_cast<std::vector<std::string>*>(op)->emplace_back(name);
        return 0;
      },
      &names);
  return names;
}

void write_attr(hid_t obj, const std::string& name, const AttrValue& v) {
  auto fail = [&] { throw std::runtime_error("cannot write attribute " + name); };
  if (auto s = std::get_if<std::string>(&v)) {
    H type(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(type, H5T_VARIABLE);
    H5Tset_cset(type, H5T_CSET_UTF8);
    H space(H5Screate(H5S_SCALAR), H5Sclose);
    H a(H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    const char* p = s->c_str();
    if (!a.ok() || H5Awrite(a, type, &p) < 0) fail();
    return;
  }
  auto write_num = [&](hid_t file_type, hid_t mem_type, const void* data, hsize_t n, bool scalar) {
    H space(scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, nullptr), H5Sclose);
    H a(H5Acreate2(obj, name.c_str(), file_type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    if (!a.ok() || H5Awrite(a, mem_type, data) < 0) fail();
  };
  if (auto i = std::get_if<std::int64_t>(&v)) write_num(H5T_STD_I64LE, H5T_NATIVE_INT64, i, 1, true);
  else if (auto d = std::get_if<double>(&v)) write_num(H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, d, 1, true);
  else if (auto iv = std::get_if<std::vector<std::int64_t>>(&v)) write_num(H5T_STD_I64LE, H5T_NATIVE_INT64, iv->data(), iv->size(), false);
  else if (auto dv = std::get_if<std::vector<double>>(&v)) write_num(H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, dv->data(), dv->size(), false);
}

// ---- datasets ----
// Storage (file) type -> the logical dtype it holds when no `dtype` attr says otherwise.
std::optional<DType> native_dtype(hid_t type, std::string& desc) {
  const H5T_class_t cls = H5Tget_class(type);
  const std::size_t sz = H5Tget_size(type);
  if (cls == H5T_INTEGER) {
    const bool sgn = H5Tget_sign(type) == H5T_SGN_2;
    desc = std::string(sgn ? "int" : "uint") + std::to_string(sz * 8);
    if (sgn && sz == 1) return DType::int8;
    if (!sgn && sz == 1) return DType::u8;
    if (!sgn && sz == 2) return DType::u16;
    if (sgn && sz == 4) return DType::i32;
    if (sgn && sz == 8) return DType::i64;
    return std::nullopt;
  }
  if (cls == H5T_FLOAT) {
    desc = "float" + std::to_string(sz * 8);
    if (sz == 4) return DType::f32;
    if (sz == 8) return DType::f64;
    if (sz == 2) {  // IEEE half as written by numpy float16, or HDF5 2.0's bfloat16 type
      std::size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
      if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) >= 0) {
        if (esize == 5 && msize == 10) return DType::fp16;
        if (esize == 8 && msize == 7) {
          desc = "bfloat16 (HDF5 float)";
          return DType::bf16;
        }
        desc = "a 16-bit float with " + std::to_string(esize) + " exponent and " + std::to_string(msize) +
               " mantissa bits";
      }
    }
    return std::nullopt;
  }
  if (cls == H5T_ENUM && sz == 1) {
    desc = "enum8 (bool)";
    return DType::u8;
  }
  if (cls == H5T_OPAQUE) {
    desc = "opaque" + std::to_string(sz * 8);
    return std::nullopt;  // needs a dtype attr (ml_dtypes arrays written by h5py)
  }
  desc = "HDF5 class " + std::to_string(static_cast<int>(cls));
  return std::nullopt;
}

struct DsCtx {
  const std::string& file;
  const std::string& case_name;
  std::vector<Problem>& problems;
};

std::optional<Tensor> read_dataset(hid_t group, const std::string& gname, const std::string& name, DsCtx ctx,
                                   const ReadOptions& opt) {
  const std::string path = gname + "/" + name;
  auto problem = [&](std::string expected, std::string found) {
    ctx.problems.push_back({ctx.file, ctx.case_name, path, std::move(expected), std::move(found)});
    return std::nullopt;
  };
  H ds(H5Dopen2(group, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) return problem("a readable dataset", "an unreadable object (truncated or corrupt file?)");
  H type(H5Dget_type(ds), H5Tclose);
  H space(H5Dget_space(ds), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 0 || rank > 8) return problem("rank 0..8", "rank " + std::to_string(rank));
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  Shape shape;
  for (hsize_t d : dims) {
    if (d > static_cast<hsize_t>(std::numeric_limits<std::int64_t>::max()))
      return problem("dims below 2^63", "a dim of " + std::to_string(d));
    shape.push_back(static_cast<std::int64_t>(d));
  }
  std::string desc;
  auto nat = native_dtype(type, desc);
  std::optional<DType> dt = nat;
  // dtype attribute
  if (H5Aexists(ds, "dtype") > 0) {
    AttrValue v;
    std::string err;
    if (!read_attr(ds, "dtype", v, err) || !std::holds_alternative<std::string>(v))
      return problem("a string attribute dtype", err.empty() ? attr_to_string(v) : err);
    const std::string& s = std::get<std::string>(v);
    auto parsed = parse_dtype(s);
    if (!parsed) return problem("dtype attr one of bf16, fp16, fp8_e4m3fn, fp8_e5m2, int8, uint8, uint16, int32, int64, float32, float64",
                                "'" + s + "'");
    const H5T_class_t cls = H5Tget_class(type);
    const bool size_ok = H5Tget_size(type) == dtype_size(*parsed);
    bool class_ok;
    if (dtype_stored_as_bits(*parsed))
      class_ok = (cls == H5T_INTEGER && H5Tget_sign(type) == H5T_SGN_NONE) || cls == H5T_OPAQUE ||
                 (cls == H5T_FLOAT && nat && *nat == *parsed);
    else
      class_ok = nat && *nat == *parsed;
    if (!size_ok || !class_ok)
      return problem("storage for dtype " + s + (dtype_stored_as_bits(*parsed) ? " (raw uint" + std::to_string(dtype_size(*parsed) * 8) + " bits)" : ""),
                     desc);
    dt = parsed;
  }
  if (!dt)
    return problem("a supported storage type (uint8/uint16 raw bits with a dtype attr, int8, uint8, uint16, int32, "
                   "int64, float16, float32, float64)",
                   desc + (H5Tget_class(type) == H5T_OPAQUE
                               ? " without a dtype attr (h5py writes ml_dtypes arrays as opaque: store raw bits + dtype)"
                               : ""));
  std::int64_t numel;
  try {
    numel = checked_numel(shape);
  } catch (const std::overflow_error&) {
    return problem("a shape whose element count fits in 64 bits", shape_str(shape));
  }
  if (numel > opt.max_bytes_per_tensor / static_cast<std::int64_t>(dtype_size(*dt)))
    return problem("at most " + std::to_string(opt.max_bytes_per_tensor) + " bytes", shape_str(shape) + " " + std::string(dtype_name(*dt)));
  Tensor t(*dt, shape);
  if (numel > 0) {
    // Read raw bits: memory type = the file type in native byte order (no value conversion; works for 16-bit
    // floats, which have no native type in HDF5 1.10, and for opaque types).
    const H5T_class_t cls = H5Tget_class(type);
    H mem(cls == H5T_ENUM ? H5Tget_native_type(type, H5T_DIR_ASCEND) : H5Tcopy(type), H5Tclose);
    if (mem.ok() && (cls == H5T_INTEGER || cls == H5T_FLOAT)) H5Tset_order(mem, H5Tget_order(H5T_NATIVE_INT));
    if (!mem.ok() || H5Tget_size(mem) != dtype_size(*dt)) return problem("a readable element type", desc);
    if (H5Dread(ds, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.raw()) < 0)
      return problem("readable data", "a read error (truncated or corrupt file?)");
  }
  return t;
}

hid_t storage_type(DType t) {
  switch (t) {
    case DType::bf16:
    case DType::fp16:
    case DType::u16: return H5T_STD_U16LE;
    case DType::fp8_e4m3fn:
    case DType::fp8_e5m2:
    case DType::u8: return H5T_STD_U8LE;
    case DType::int8: return H5T_STD_I8LE;
    case DType::i32: return H5T_STD_I32LE;
    case DType::i64: return H5T_STD_I64LE;
    case DType::f32: return H5T_IEEE_F32LE;
    case DType::f64: return H5T_IEEE_F64LE;
  }
  return H5T_STD_U8LE;
}
hid_t memory_type(DType t) {
  switch (t) {
    case DType::bf16:
    case DType::fp16:
    case DType::u16: return H5T_NATIVE_UINT16;
    case DType::fp8_e4m3fn:
    case DType::fp8_e5m2:
    case DType::u8: return H5T_NATIVE_UINT8;
    case DType::int8: return H5T_NATIVE_INT8;
    case DType::i32: return H5T_NATIVE_INT32;
    case DType::i64: return H5T_NATIVE_INT64;
    case DType::f32: return H5T_NATIVE_FLOAT;
    case DType::f64: return H5T_NATIVE_DOUBLE;
  }
  return H5T_NATIVE_UINT8;
}

void write_dataset(hid_t group, const std::string& name, const Tensor& t) {
  const int rank = t.rank();
  std::vector<hsize_t> dims(t.shape().begin(), t.shape().end());
  H space(rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(rank, dims.data(), nullptr), H5Sclose);
  H dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (rank > 0 && t.numel() > 0) {
    // Chunks of about 1 MiB, cut along the leading dims.
    std::vector<hsize_t> chunk = dims;
    const hsize_t es = dtype_size(t.dtype());
    auto bytes = [&] {
      hsize_t b = es;
      for (hsize_t c : chunk) b *= c;
      return b;
    };
    for (std::size_t i = 0; i < chunk.size() && bytes() > (1u << 20); ++i) {
      hsize_t inner = bytes() / chunk[i];
      chunk[i] = std::max<hsize_t>(1, (1u << 20) / std::max<hsize_t>(inner, 1));
      if (chunk[i] > dims[i]) chunk[i] = dims[i];
    }
    H5Pset_chunk(dcpl, rank, chunk.data());
    H5Pset_shuffle(dcpl);
    H5Pset_deflate(dcpl, 4);
  }
  H ds(H5Dcreate2(group, name.c_str(), storage_type(t.dtype()), space, H5P_DEFAULT, dcpl, H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) throw std::runtime_error("cannot create dataset " + name);
  if (t.numel() > 0 && H5Dwrite(ds, memory_type(t.dtype()), H5S_ALL, H5S_ALL, H5P_DEFAULT, t.raw()) < 0)
    throw std::runtime_error("cannot write dataset " + name);
  write_attr(ds, "dtype", AttrValue{std::string(dtype_name(t.dtype()))});
}

}  // namespace

ReadResult read_file(const std::string& path, const ReadOptions& opt) {
  ReadResult res;
  QuietErrors quiet;
  auto file_problem = [&](std::string expected, std::string found) {
    res.problems.push_back({path, "", "", std::move(expected), std::move(found)});
    return res;
  };
  std::error_code ec;
  if (!fs::exists(path, ec)) return file_problem("an existing file", "no such file");
  if (fs::is_directory(path, ec)) return file_problem("an HDF5 file", "a directory");
  {
    std::ifstream f(path, std::ios::binary);
    if (!f) return file_problem("a readable file", "permission denied or unreadable");
  }
  if (H5Fis_hdf5(path.c_str()) <= 0) return file_problem("an HDF5 file", "not HDF5 (no HDF5 signature)");
  H file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.ok()) return file_problem("a readable HDF5 file", "a file HDF5 cannot open (truncated or corrupt)");
  H root(H5Gopen2(file, "/", H5P_DEFAULT), H5Gclose);
  if (!root.ok()) return file_problem("a readable root group", "an unreadable root group (truncated or corrupt)");
  std::vector<std::string> names = child_names(root);
  int n_case_groups = 0;
  for (const auto& name : names) {
    if (object_type(root, name) != H5O_TYPE_GROUP) {
      res.problems.push_back({path, "", "/" + name, "case groups only at the top level", "a dataset or other object"});
      continue;
    }
    H g(H5Gopen2(root, name.c_str(), H5P_DEFAULT), H5Gclose);
    if (!g.ok()) {
      res.problems.push_back({path, name, "", "a readable group", "an unreadable group (truncated or corrupt?)"});
      continue;
    }
    ++n_case_groups;
    Case c;
    c.file = path;
    c.name = name;
    bool stage_attr = false, version_attr = false;
    for (const auto& an : attr_names(g)) {
      AttrValue v;
      std::string err;
      if (!read_attr(g, an, v, err)) {
        res.problems.push_back({path, name, "attr " + an, kAttrExpected, err});
        stage_attr |= an == "stage";
        version_attr |= an == "schema_version";
        continue;
      }
      if (an == "stage") {
        stage_attr = true;
        if (auto st = std::get_if<std::string>(&v)) c.stage = *st;
        else res.problems.push_back({path, name, "attr stage", "a string naming the stage", attr_to_string(v)});
      } else if (an == "schema_version") {
        version_attr = true;
        auto i = std::get_if<std::int64_t>(&v);
        if (!i || *i != kSchemaVersion)
          res.problems.push_back({path, name, "attr schema_version", std::to_string(kSchemaVersion) + " (this dsa-check reads schema v1)",
                                  attr_to_string(v)});
      } else {
        c.attrs[an] = v;
      }
    }
    if (!stage_attr)
      res.problems.push_back({path, name, "attr stage", "a string attribute naming the stage (dsa-check stages lists them)", "none"});
    if (!version_attr) res.problems.push_back({path, name, "attr schema_version", "1", "none"});
    std::set<std::string> unreadable;  // tensors that failed to load: not reported again as missing
    for (const char* gname : {"inputs", "outputs", "expected"}) {
      if (H5Lexists(g, gname, H5P_DEFAULT) <= 0) {
        if (std::string(gname) == "inputs") res.problems.push_back({path, name, "inputs/", "a group of input tensors", "none"});
        continue;
      }
      if (!opt.load_outputs && std::string(gname) != "inputs") continue;
      if (object_type(g, gname) != H5O_TYPE_GROUP) {
        res.problems.push_back({path, name, std::string(gname) + "/", "a group of tensors", "a dataset or other object"});
        continue;
      }
      H sub(H5Gopen2(g, gname, H5P_DEFAULT), H5Gclose);
      if (!sub.ok()) {
        res.problems.push_back({path, name, std::string(gname) + "/", "a readable group", "an unreadable object (truncated or corrupt?)"});
        continue;
      }
      TensorMap& dst = std::string(gname) == "inputs" ? c.inputs : std::string(gname) == "outputs" ? c.outputs : c.expected;
      for (const auto& tn : child_names(sub)) {
        const std::string tpath = std::string(gname) + "/" + tn;
        if (object_type(sub, tn) != H5O_TYPE_DATASET) {
          res.problems.push_back({path, name, tpath, "a dataset", "a group or other object"});
          unreadable.insert(tpath);
          continue;
        }
        if (auto t = read_dataset(sub, gname, tn, DsCtx{path, name, res.problems}, opt)) dst.emplace(tn, std::move(*t));
        else unreadable.insert(tpath);
      }
    }
    for (const auto& other : child_names(g))
      if (other != "inputs" && other != "outputs" && other != "expected")
        res.problems.push_back({path, name, other, "only inputs/, outputs/, expected/ in a case", "'" + other + "'"});
    if (opt.apply_defaults && opt.defaults) opt.defaults(c);
    // Validate even when something failed to load, so that every problem of the file is reported at once;
    // tensors that failed to load are not reported again (as missing). An unknown or missing stage is already
    // reported above.
    if (opt.validate && !c.stage.empty()) {
      Case with_defaults;
      const Case* v = &c;
      if (!opt.apply_defaults && opt.defaults) {
        with_defaults = c;
        opt.defaults(with_defaults);
        v = &with_defaults;
      }
      for (auto& p : opt.validate(*v, opt.load_outputs))
        if (!unreadable.count(p.tensor)) res.problems.push_back(std::move(p));
    }
    res.cases.push_back(std::move(c));
  }
  if (n_case_groups == 0 && res.problems.empty()) file_problem("at least one case group (with a stage attribute)", "an empty file");
  return res;
}

void write_file(const std::string& path, const std::vector<Case>& cases) {
  QuietErrors quiet;
  static std::atomic<int> counter{0};
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw std::runtime_error(path + ": output directory does not exist");
  const std::string tmp = (dir / ("." + target.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" +
                                  std::to_string(counter++)))
                              .string();
  try {
    {
      H file(H5Fcreate(tmp.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
      if (!file.ok()) throw std::runtime_error(path + ": cannot create file (directory not writable?)");
      for (const Case& c : cases) {
        H g(H5Gcreate2(file, c.name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
        if (!g.ok()) throw std::runtime_error(path + ": cannot create case group '" + c.name + "'");
        write_attr(g, "schema_version", AttrValue{kSchemaVersion});
        write_attr(g, "stage", AttrValue{c.stage});
        for (const auto& [k, v] : c.attrs) write_attr(g, k, v);
        for (const auto& [gname, m] : {std::pair<const char*, const TensorMap*>{"inputs", &c.inputs},
                                       {"outputs", &c.outputs}, {"expected", &c.expected}}) {
          if (m->empty() && std::string(gname) != "inputs") continue;
          H sub(H5Gcreate2(g, gname, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
          if (!sub.ok()) throw std::runtime_error(path + ": cannot create group " + gname);
          for (const auto& [tn, t] : *m) write_dataset(sub, tn, t);
        }
      }
      if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0) throw std::runtime_error(path + ": flush failed (disk full?)");
    }
    if (g_before_rename_hook) g_before_rename_hook(tmp);
    fs::rename(tmp, target);
  } catch (const std::exception& e) {
    fs::remove(tmp, ec);
    const std::string msg = e.what();
    throw std::runtime_error(msg.rfind(path, 0) == 0 ? msg : path + ": " + msg);
  }
}

}  // namespace dsa::io
