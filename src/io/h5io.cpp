#include "io/h5io.hpp"
#include "io/cleanup.hpp"
#include "io/h5chunks.hpp"
#include "io/h5handle.hpp"
#include "io/paths.hpp"

#include <hdf5.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <thread>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <algorithm>
#include <functional>
#include <map>
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

// The links of a group, in name order, with their kind. Only data stored in the file itself is read: a hard link or
// a soft link to an object of this file is followed; an external link (another file) or a user-defined link is not.
struct Link {
  std::string name;
  H5L_type_t type = H5L_TYPE_HARD;
};
// Lists the links of `group`; false when HDF5 cannot (a corrupt link table).
bool list_links(hid_t group, std::vector<Link>& out) {
  out.clear();
  const herr_t rc = H5Literate(
      group, H5_INDEX_NAME, H5_ITER_INC, nullptr,
      [](hid_t, const char* name, const H5L_info_t* info, void* op) -> herr_t {
        static_cast<std::vector<Link>*>(op)->push_back({name, info ? info->type : H5L_TYPE_ERROR});
        return 0;
      },
      &out);
  return rc >= 0;
}

// "" when link `l` of `loc` may be followed, else what it is.
std::string link_problem(hid_t loc, const Link& l) {
  if (l.type == H5L_TYPE_EXTERNAL) {
    std::string target = "another file";
    H5L_info_t info;
    if (H5Lget_info(loc, l.name.c_str(), &info, H5P_DEFAULT) >= 0 && info.u.val_size > 0 && info.u.val_size < (1u << 16)) {
      std::vector<char> buf(info.u.val_size);
      const char* f = nullptr;
      const char* o = nullptr;
      if (H5Lget_val(loc, l.name.c_str(), buf.data(), buf.size(), H5P_DEFAULT) >= 0 &&
          H5Lunpack_elink_val(buf.data(), buf.size(), nullptr, &f, &o) >= 0 && f && o)
        target = std::string(f) + ":" + o;
    }
    return "an external link to " + target + " (only data stored in this file is read)";
  }
  if (l.type != H5L_TYPE_HARD && l.type != H5L_TYPE_SOFT) return "a user-defined or unknown link type (only data stored in this file is read)";
  if (l.type == H5L_TYPE_SOFT && H5Oexists_by_name(loc, l.name.c_str(), H5P_DEFAULT) <= 0) return "a dangling soft link";
  return "";
}

// The type of the object a link of `loc` names, and its identity (file number and header address): two links, hard or
// soft, name one dataset exactly when their ids are equal. Unknown type and "" when HDF5 cannot tell.
struct ObjectInfo {
  H5O_type_t type = H5O_TYPE_UNKNOWN;
  std::string id;
};
ObjectInfo object_info(hid_t loc, const std::string& name) {
  H5O_info_t info;
  if (H5Oget_info_by_name(loc, name.c_str(), &info, H5P_DEFAULT) < 0) return {};
  return {info.type, std::to_string(info.fileno) + ":" + std::to_string(static_cast<unsigned long long>(info.addr))};
}

H5O_type_t object_type(hid_t loc, const std::string& name) { return object_info(loc, name).type; }

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
      if (sz > (std::size_t{1} << 20)) {  // a corrupt type must not make us allocate its declared size
        err = "a fixed-length string attribute of " + std::to_string(sz) + " bytes (at most 1 MiB)";
        return false;
      }
      std::string s(sz, '\0');
      H mt(H5Tcopy(type), H5Tclose);
      if (H5Aread(a, mt, s.data()) < 0) {
        err = "an unreadable string attribute";
        return false;
      }
      const std::size_t n0 = std::strlen(s.c_str());
      if (s.find_first_not_of('\0', n0) != std::string::npos) {
        err = "a string with an embedded NUL byte";
        return false;
      }
      s.resize(n0);
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

// The attribute names of `obj`; false when HDF5 cannot list them (corrupt attribute storage).
bool attr_names(hid_t obj, std::vector<std::string>& names) {
  names.clear();
  return H5Aiterate2(
             obj, H5_INDEX_NAME, H5_ITER_INC, nullptr,
             [](hid_t, const char* name, const H5A_info_t*, void* op) -> herr_t {
               static_cast<std::vector<std::string>*>(op)->emplace_back(name);
               return 0;
             },
             &names) >= 0;
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
// The IEEE layout of a float type of `sz` bytes (sign, exponent and mantissa positions, bias), as this reader
// assumes; anything else (VAX, custom exponents, padding bits) would be read as garbage.
bool ieee_float_layout(hid_t type, std::size_t sz, bool& bf16) {
  std::size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
  if (H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize) < 0) return false;
  if (H5Tget_offset(type) != 0 || H5Tget_precision(type) != sz * 8 || H5Tget_norm(type) != H5T_NORM_IMPLIED) return false;
  const std::size_t bias = H5Tget_ebias(type);
  bf16 = sz == 2 && esize == 8;
  if (sz == 4) return spos == 31 && epos == 23 && esize == 8 && mpos == 0 && msize == 23 && bias == 127;
  if (sz == 8) return spos == 63 && epos == 52 && esize == 11 && mpos == 0 && msize == 52 && bias == 1023;
  if (sz == 2 && esize == 5) return spos == 15 && epos == 10 && msize == 10 && mpos == 0 && bias == 15;
  if (sz == 2 && esize == 8) return spos == 15 && epos == 7 && msize == 7 && mpos == 0 && bias == 127;
  return false;
}

std::optional<DType> native_dtype(hid_t type, std::string& desc) {
  const H5T_class_t cls = H5Tget_class(type);
  const std::size_t sz = H5Tget_size(type);
  if (cls == H5T_INTEGER) {
    const bool sgn = H5Tget_sign(type) == H5T_SGN_2;
    desc = std::string(sgn ? "int" : "uint") + std::to_string(sz * 8);
    if (H5Tget_offset(type) != 0 || H5Tget_precision(type) != sz * 8) {
      desc += " with a non-native bit layout (offset " + std::to_string(H5Tget_offset(type)) + ", precision " +
              std::to_string(H5Tget_precision(type)) + " bits)";
      return std::nullopt;
    }
    if (sgn && sz == 1) return DType::int8;
    if (!sgn && sz == 1) return DType::u8;
    if (!sgn && sz == 2) return DType::u16;
    if (sgn && sz == 4) return DType::i32;
    if (sgn && sz == 8) return DType::i64;
    return std::nullopt;
  }
  if (cls == H5T_FLOAT) {
    desc = "float" + std::to_string(sz * 8);
    bool bf16 = false;
    if (!ieee_float_layout(type, sz, bf16)) {
      std::size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
      H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize);
      desc = "a non-IEEE " + std::to_string(sz * 8) + "-bit float layout (" + std::to_string(esize) + " exponent bits, bias " +
             std::to_string(H5Tget_ebias(type)) + ", " + std::to_string(msize) + " mantissa bits)";
      return std::nullopt;
    }
    if (sz == 4) return DType::f32;
    if (sz == 8) return DType::f64;
    if (sz == 2 && !bf16) return DType::fp16;  // IEEE half as written by numpy float16
    if (sz == 2) {                              // HDF5 2.0's bfloat16 type
      desc = "bfloat16 (HDF5 float)";
      return DType::bf16;
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
  std::int64_t& budget_left;  // bytes the file may still load (ReadOptions::max_total_bytes)
  const Case* c = nullptr;    // the case being read (attrs and stage already set): ReadOptions::defer
};

// One HDF5 call at a time: the library (Debian's serial build) is not thread-safe, and deferred tensors are read
// while `check -j N` runs cases in parallel.
std::mutex& hdf5_mutex() {
  static std::mutex m;
  return m;
}

// Reads rows [r0, r1) of dim 0 of an open dataset into dst (raw bits, native order): the parallel chunk reader, else
// a hyperslab H5Dread. "" or the problem.
std::string read_rows_into(hid_t ds, hid_t mem, int rank, std::int64_t r0, std::int64_t r1, std::size_t es, void* dst) {
  std::string err;
  const ChunkRead cr = read_chunked_rows(ds, r0, r1, es, dst, err);
  if (cr == ChunkRead::failed) return err;
  if (cr == ChunkRead::done) return "";
  H fspace(H5Dget_space(ds), H5Sclose);
  if (!fspace.ok()) return "an unreadable dataspace";
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank)), start(dims.size(), 0);
  if (H5Sget_simple_extent_dims(fspace, dims.data(), nullptr) < 0) return "unreadable dims";
  start[0] = static_cast<hsize_t>(r0);
  dims[0] = static_cast<hsize_t>(r1 - r0);
  if (H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start.data(), nullptr, dims.data(), nullptr) < 0) return "an unselectable row range";
  H mspace(H5Screate_simple(rank, dims.data(), nullptr), H5Sclose);
  if (!mspace.ok() || H5Dread(ds, mem, mspace, fspace, H5P_DEFAULT, dst) < 0) return "a read error (truncated or corrupt file?)";
  return "";
}

// The memory type that reads a dataset's raw bits: the file type in native byte order (no value conversion).
hid_t raw_memory_type(hid_t type) {
  const H5T_class_t cls = H5Tget_class(type);
  const hid_t mem = cls == H5T_ENUM ? H5Tget_native_type(type, H5T_DIR_ASCEND) : H5Tcopy(type);
  if (mem >= 0 && (cls == H5T_INTEGER || cls == H5T_FLOAT)) H5Tset_order(mem, H5Tget_order(H5T_NATIVE_INT));
  return mem;
}

// A deferred output (ReadOptions::defer): rows read from the file on demand.
struct H5Rows final : RowSource {
  std::string file, dataset, where;  // where: "file: case/outputs/logits" for messages
  DType dtype;
  Shape shape;
  Tensor read_rows(std::int64_t r0, std::int64_t r1) const override {
    Shape s = shape;
    s[0] = r1 - r0;
    Tensor t(dtype, s, Tensor::Uninit{});
    if (t.numel() == 0) return t;
    std::lock_guard<std::mutex> lk(hdf5_mutex());
    QuietErrors quiet;
    auto fail = [&](const std::string& why) {
      return std::runtime_error(where + ": rows " + std::to_string(r0) + ".." + std::to_string(r1 - 1) + " could not be read: " + why);
    };
    H f(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    if (!f.ok()) throw fail("the file cannot be opened any more (changed since it was read?)");
    H ds(H5Dopen2(f, dataset.c_str(), H5P_DEFAULT), H5Dclose);
    H type(ds.ok() ? H5Dget_type(ds) : H5I_INVALID_HID, H5Tclose);
    if (!ds.ok() || !type.ok()) throw fail("the dataset cannot be opened any more");
    H mem(raw_memory_type(type), H5Tclose);
    if (!mem.ok() || H5Tget_size(mem) != dtype_size(dtype)) throw fail("an unreadable element type");
    if (auto e = read_rows_into(ds, mem, static_cast<int>(shape.size()), r0, r1, dtype_size(dtype), t.raw()); !e.empty()) throw fail(e);
    return t;
  }
};

// Where the dataset's bytes live: refuses what is not data of this file (virtual datasets, external raw storage),
// filters this HDF5 cannot run, and data that was never written. "" when the storage can be read.
std::string storage_problem(hid_t ds, std::int64_t nbytes) {
  H dcpl(H5Dget_create_plist(ds), H5Pclose);
  if (!dcpl.ok()) return "a dataset with unreadable creation properties (corrupt?)";
  const H5D_layout_t layout = H5Pget_layout(dcpl);
  if (layout == H5D_VIRTUAL) return "a virtual dataset (VDS: its data lives in other datasets or files; only data stored in this file is read)";
  if (layout < 0) return "a dataset with an unreadable layout (corrupt?)";
  const int ext = H5Pget_external_count(dcpl);
  if (ext != 0) return "external raw-data storage (" + std::to_string(ext) + " file(s) outside this one; only data stored in this file is read)";
  const int nf = H5Pget_nfilters(dcpl);
  if (nf < 0) return "a dataset with an unreadable filter pipeline (corrupt?)";
  for (int i = 0; i < nf; ++i) {
    unsigned flags = 0, cd[8];
    std::size_t ncd = 8;
    char name[128] = {0};
    unsigned fcfg = 0;
    const H5Z_filter_t id = H5Pget_filter2(dcpl, static_cast<unsigned>(i), &flags, &ncd, cd, sizeof name, name, &fcfg);
    if (id < 0) return "a dataset with an unreadable filter (corrupt?)";
    if (H5Zfilter_avail(id) <= 0)
      return "filter " + std::to_string(id) + (name[0] ? " (" + std::string(name) + ")" : std::string()) +
             ", which this HDF5 build cannot decode (install the plugin, or rewrite the file with gzip/shuffle)";
  }
  if (nbytes == 0) return "";
  H5D_space_status_t st;
  if (H5Dget_space_status(ds, &st) < 0) return "a dataset whose storage status is unreadable (corrupt?)";
  if (st == H5D_SPACE_STATUS_NOT_ALLOCATED) return "a dataset whose data was never written (no storage allocated)";
  if (layout == H5D_CHUNKED) {  // every chunk written (a missing chunk would read as fill values)
    H space(H5Dget_space(ds), H5Sclose);
    const int rank = H5Sget_simple_extent_ndims(space);
    if (rank <= 0 || rank > 8) return "";
    hsize_t dims[8], cdims[8];
    if (H5Sget_simple_extent_dims(space, dims, nullptr) < 0 || H5Pget_chunk(dcpl, rank, cdims) != rank)
      return "a chunked dataset with unreadable chunk dims (corrupt?)";
    hsize_t want = 1;
    for (int i = 0; i < rank; ++i) {
      if (cdims[i] == 0) return "a chunked dataset with a zero chunk dim (corrupt)";
      want *= (dims[i] + cdims[i] - 1) / cdims[i];
    }
    hsize_t have = 0;
    if (H5Dget_num_chunks(ds, space, &have) < 0) return "a chunked dataset whose chunk index is unreadable (corrupt?)";
    if (have < want)
      return "a partially written dataset (" + std::to_string(have) + " of " + std::to_string(want) + " chunks were written)";
  }
  // The stored bytes must be able to hold the declared shape: the whole of it without filters, at most ~1032:1
  // (deflate's limit) with them. A corrupt dims field would otherwise make us allocate what the file never held.
  const hsize_t stored = H5Dget_storage_size(ds);
  const auto declared = static_cast<hsize_t>(nbytes);
  if (nf == 0 && layout == H5D_CONTIGUOUS && stored != declared)
    return std::to_string(stored) + " stored bytes for a declared " + std::to_string(declared) + " (truncated or corrupt dims)";
  if (nf == 0 && layout == H5D_CHUNKED && stored < declared)
    return std::to_string(stored) + " stored bytes for a declared " + std::to_string(declared) + " (truncated or corrupt dims)";
  if (nf > 0 && declared / 1100 > stored + (1u << 20) / 1100)
    return std::to_string(stored) + " compressed bytes for a declared " + std::to_string(declared) +
           " (more than any compression ratio allows: corrupt dims?)";
  return "";
}

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
  if (!type.ok() || !space.ok()) return problem("a readable dataset", "an unreadable type or dataspace (corrupt?)");
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 0 || rank > 8) return problem("rank 0..8", "rank " + std::to_string(rank));
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank)), maxdims(static_cast<std::size_t>(rank));
  if (rank > 0 && H5Sget_simple_extent_dims(space, dims.data(), maxdims.data()) < 0)
    return problem("a readable dataspace", "unreadable dims (corrupt?)");
  Shape shape;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const hsize_t d = dims[i];
    if (d > static_cast<hsize_t>(std::numeric_limits<std::int64_t>::max()))
      return problem("dims below 2^63", "a dim of " + std::to_string(d));
    if (maxdims[i] != H5S_UNLIMITED && d > maxdims[i])
      return problem("dims within their maxdims", "dim " + std::to_string(i) + " = " + std::to_string(d) + " > maxdim " +
                                                      std::to_string(maxdims[i]) + " (corrupt dataspace)");
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
  const std::int64_t nbytes = numel * static_cast<std::int64_t>(dtype_size(*dt));
  if (auto e = storage_problem(ds, nbytes); !e.empty()) return problem("data stored in this file", e);
  if (nbytes > ctx.budget_left)
    return problem("the file's tensors within the memory budget (--max-memory; " + std::to_string(opt.max_total_bytes) + " bytes)",
                   shape_str(shape) + " " + std::string(dtype_name(*dt)) + " = " + std::to_string(nbytes) + " bytes with " +
                       std::to_string(std::max<std::int64_t>(ctx.budget_left, 0)) + " left");
  Tensor t;
  try {
    t = Tensor(*dt, shape, Tensor::Uninit{});  // H5Dread writes every byte (checked: storage fully allocated)
  } catch (const std::bad_alloc&) {
    return problem("memory for " + std::to_string(nbytes) + " bytes", "an allocation failure (out of memory)");
  }
  if (rank > 0 && opt.defer && ctx.c && gname != "inputs" && opt.defer(*ctx.c, gname, name, nbytes)) {
    auto src = std::make_shared<H5Rows>();
    src->file = ctx.file;
    src->dataset = "/" + ctx.case_name + "/" + path;
    src->where = ctx.file + ": " + ctx.case_name + "/" + path;
    src->dtype = *dt;
    src->shape = shape;
    return Tensor::deferred(*dt, shape, std::move(src));  // read in row tiles by `check`; not held (no budget)
  }
  ctx.budget_left -= nbytes;
  if (opt.metadata_only) return Tensor();  // the isolated walk of a big file: everything but the data
  if (numel > 0) {
    // Read raw bits: memory type = the file type in native byte order (no value conversion; works for 16-bit
    // floats, which have no native type in HDF5 1.10, and for opaque types).
    H mem(raw_memory_type(type), H5Tclose);
    if (!mem.ok() || H5Tget_size(mem) != dtype_size(*dt)) return problem("a readable element type", desc);
    std::string err;
    const ChunkRead cr = (opt.parallel_inflate || opt.chunk_walk) && rank > 0
                             ? read_chunked_rows(ds, 0, shape[0], dtype_size(*dt), t.raw(), err, opt.parallel_inflate)
                             : ChunkRead::unsupported;
    if (cr == ChunkRead::failed) return problem("readable data", err);
    if (cr == ChunkRead::unsupported && H5Dread(ds, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.raw()) < 0)
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

std::int64_t default_memory_budget() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), size = ::sysconf(_SC_PAGE_SIZE);
  const std::int64_t phys = pages > 0 && size > 0 ? static_cast<std::int64_t>(pages) * size : std::int64_t{8} << 30;
  return std::max<std::int64_t>(phys / 2, std::int64_t{1} << 30);
}

namespace {

// ReadOptions::isolate: the same read in a forked child; "" when it finished, else what happened to it.
std::string isolated_walk(const std::string& path, const ReadOptions& opt) {
  struct stat st {};
  const bool small = ::stat(path.c_str(), &st) == 0 && st.st_size <= opt.isolate_data_bytes;
  std::int64_t rss_before = 0;  // resident pages the child starts with (shared with us)
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    long vm = 0, res = 0;
    if (std::fscanf(f, "%ld %ld", &vm, &res) == 2) rss_before = static_cast<std::int64_t>(res) * ::sysconf(_SC_PAGE_SIZE);
    std::fclose(f);
  }
  int fds[2];
  if (::pipe(fds) != 0) return "";  // cannot isolate: read in-process as before
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return "";
  }
  if (pid == 0) {
    ::close(fds[0]);
    // Quiet child: a sanitizer's or HDF5's report of the crash is the parent's to give, in one line.
    if (const int fd = ::open("/dev/null", O_WRONLY); fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ReadOptions o;
    o.isolate = false;
    o.parallel_inflate = false;  // no OpenMP in a forked child (libgomp's pool does not survive fork)
    o.chunk_walk = true;         // gzip chunks the parent inflates itself: HDF5 only fetches them
    o.metadata_only = !small;
    o.load_outputs = opt.load_outputs;
    o.max_bytes_per_tensor = opt.max_bytes_per_tensor;
    o.max_total_bytes = opt.max_total_bytes;
    const ReadResult r = read_file(path, o);
    std::int64_t tensor_bytes = 0;  // what the parent will hold anyway: the tensors
    for (const auto& c : r.cases)
      for (const auto* g : {&c.inputs, &c.outputs, &c.expected})
        for (const auto& kv : *g) tensor_bytes += static_cast<std::int64_t>(kv.second.nbytes());
    if (::write(fds[1], &tensor_bytes, sizeof tensor_bytes) != sizeof tensor_bytes) ::_exit(3);
    ::_exit(0);  // no atexit handlers, no flushing of the parent's buffers
  }
  ::close(fds[1]);
  const std::int64_t size = st.st_size > 0 ? static_cast<std::int64_t>(st.st_size) : 0;
  const int limit_s = opt.isolate_timeout_s > 0 ? opt.isolate_timeout_s
                                                : 10 + static_cast<int>(std::min<std::int64_t>(size / (small ? 8 << 20 : 256 << 20), 3600));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limit_s);
  int status = 0;
  struct rusage ru {};
  for (auto wait = std::chrono::microseconds(50);;) {
    const pid_t r = ::wait4(pid, &status, WNOHANG, &ru);
    if (r == pid) break;
    if (r < 0) {  // not our child any more (SIGCHLD ignored by the caller): nothing to say
      ::close(fds[0]);
      return "";
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ::close(fds[0]);
      return "a file the HDF5 library did not finish parsing in " + std::to_string(limit_s) +
             " s (corrupt metadata that loops; parsed in a child process, which was killed)";
    }
    std::this_thread::sleep_for(wait);
    wait = std::min(wait * 2, std::chrono::microseconds(20000));
  }
  if (WIFSIGNALED(status)) {
    ::close(fds[0]);
    return "a corrupt file: the HDF5 library crashed parsing it (signal " + std::to_string(WTERMSIG(status)) + " " +
           ::strsignal(WTERMSIG(status)) + ", in a child process: nothing of it was read)";
  }
  // Memory HDF5 itself allocates for corrupt declared sizes (the child's peak beyond what it shared with us):
  // the parent would allocate the same.
  std::int64_t tensor_bytes = 0;
  const bool got = ::read(fds[0], &tensor_bytes, sizeof tensor_bytes) == sizeof tensor_bytes;
  ::close(fds[0]);
  const std::int64_t overhead = static_cast<std::int64_t>(ru.ru_maxrss) * 1024 - rss_before - tensor_bytes;
  const std::int64_t allowed = (std::int64_t{256} << 20) + 4 * size;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && got && overhead > allowed)
    return "a file whose metadata takes " + std::to_string(overhead >> 20) + " MiB to parse beyond its tensors (at most " +
           std::to_string(allowed >> 20) + " MiB expected: corrupt declared sizes; measured in a child process)";
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
    return "a corrupt file: parsing it failed in a child process (exit " + std::to_string(WEXITSTATUS(status)) +
           ", e.g. a sanitizer report inside the HDF5 library)";
  return "";
}

}  // namespace

namespace {

struct InputId {
  std::size_t case_index;
  std::string input, id;
};
struct AttrLink {
  std::size_t case_index;
  std::string input, source;
};

// The links between the cases of one file (Case::links): an input dataset that is another case's outputs/ or
// expected/ dataset (same HDF5 object, through a hard or soft link), or an attr from:<input> = "CASE/GROUP/TENSOR".
// An attr-named input absent from inputs/ is filled from its source; a present one must hold the source's bytes (same
// dtype and element count; the shape may differ, e.g. [B*next_n, k] indices read as [B, next_n, k]). A link from
// the case's own outputs, or a cycle of links, is a problem: a layer is a pipeline.
void resolve_links(ReadResult& res, const std::vector<InputId>& input_ids, const std::map<std::string, std::string>& sources,
                   const std::vector<AttrLink>& attr_links, std::vector<std::set<std::string>>& unreadable_of) {
  if (input_ids.empty() && attr_links.empty()) return;
  std::map<std::string, std::size_t> by_name;
  for (std::size_t i = 0; i < res.cases.size(); ++i) by_name[res.cases[i].name] = i;
  auto source_case = [](const std::string& src) { return src.substr(0, src.find('/')); };
  for (const auto& in : input_ids) {
    auto it = sources.find(in.id);
    if (it == sources.end()) continue;
    Case& c = res.cases[in.case_index];
    if (source_case(it->second) == c.name) continue;  // reported below as a cycle only when named by an attr
    c.links[in.input] = it->second;
  }
  for (const auto& al : attr_links) {
    Case& c = res.cases[al.case_index];
    const std::string what = "attr " + std::string(kLinkAttrPrefix) + al.input;
    auto bad = [&](const std::string& expected, const std::string& found) {
      res.problems.push_back({c.file, c.name, what, expected, found});
      unreadable_of[al.case_index].insert("inputs/" + al.input);
    };
    const auto s1 = al.source.find('/'), s2 = s1 == std::string::npos ? s1 : al.source.find('/', s1 + 1);
    if (s2 == std::string::npos || al.source.find('/', s2 + 1) != std::string::npos) {
      bad("'CASE/outputs/TENSOR' or 'CASE/expected/TENSOR' (a tensor of another case of this file)", "'" + printable(al.source) + "'");
      continue;
    }
    const std::string sc = al.source.substr(0, s1), sg = al.source.substr(s1 + 1, s2 - s1 - 1), st = al.source.substr(s2 + 1);
    auto ci = by_name.find(sc);
    if (sg != "outputs" && sg != "expected") {
      bad("a source in outputs/ or expected/ of another case", "group '" + printable(sg) + "'");
      continue;
    }
    if (ci == by_name.end()) {
      std::string names;
      for (const auto& [n, i] : by_name) names += (names.empty() ? "" : ", ") + n;
      bad("a case of this file (" + printable(names) + ")", "'" + printable(sc) + "'");
      continue;
    }
    if (sc == c.name) {
      bad("another case's tensor (a case's input cannot be its own output)", "'" + printable(al.source) + "'");
      continue;
    }
    const Case& src = res.cases[ci->second];
    const TensorMap& g = sg == "outputs" ? src.outputs : src.expected;
    auto ti = g.find(st);
    if (ti == g.end()) {
      std::string names;
      for (const auto& [n, t] : g) names += (names.empty() ? "" : ", ") + n;
      bad("a tensor of " + sc + "/" + sg + "/ (" + (names.empty() ? "none" : printable(names)) + ")", "'" + printable(st) + "'");
      continue;
    }
    if (ti->second.is_deferred()) {
      bad("a source tensor loaded whole (raise --stream-over above its size)", printable(al.source) + " streamed in row tiles");
      continue;
    }
    if (auto li = c.links.find(al.input); li != c.links.end() && li->second != al.source) {
      bad("the source its HDF5 link names (" + printable(li->second) + ")", "'" + printable(al.source) + "'");
      continue;
    }
    auto ii = c.inputs.find(al.input);
    if (ii == c.inputs.end()) {
      c.inputs.emplace(al.input, ti->second);
    } else if (ii->second.dtype() != ti->second.dtype() || ii->second.numel() != ti->second.numel() ||
               (ii->second.nbytes() > 0 && std::memcmp(ii->second.raw(), ti->second.raw(), static_cast<std::size_t>(ii->second.nbytes())) != 0)) {
      bad("inputs/" + al.input + " holding the bytes of " + printable(al.source) + " (" + std::string(dtype_name(ti->second.dtype())) + ", " +
              std::to_string(ti->second.numel()) + " elements)",
          std::string(dtype_name(ii->second.dtype())) + ", " + std::to_string(ii->second.numel()) + " elements" +
              (ii->second.dtype() == ti->second.dtype() && ii->second.numel() == ti->second.numel() ? ", other bytes" : ""));
      continue;
    }
    c.links[al.input] = al.source;
  }
  // A cycle (A's input from B's output and B's from A's) is no pipeline: reported at the link that closes it. An
  // iterative depth-first search (a file may chain many cases: no recursion depth to exhaust).
  std::vector<std::vector<std::pair<std::string, std::size_t>>> up(res.cases.size());  // (input, source case)
  for (std::size_t i = 0; i < res.cases.size(); ++i)
    for (const auto& [input, src] : res.cases[i].links)
      if (auto ci = by_name.find(source_case(src)); ci != by_name.end()) up[i].emplace_back(input, ci->second);
  std::vector<int> state(res.cases.size(), 0);  // 0 new, 1 on the path, 2 done
  std::vector<std::pair<std::size_t, std::size_t>> path;  // (case, next link to follow)
  for (std::size_t s0 = 0; s0 < res.cases.size(); ++s0) {
    if (state[s0] != 0) continue;
    state[s0] = 1;
    path.emplace_back(s0, 0);
    while (!path.empty()) {
      auto& [i, next] = path.back();
      if (next == up[i].size()) {
        state[i] = 2;
        path.pop_back();
        continue;
      }
      const auto& [input, j] = up[i][next++];
      if (state[j] == 1) {
        std::string cyc;
        bool on = false;
        for (const auto& [k, n] : path) {
          on = on || k == j;
          if (on) cyc += res.cases[k].name + " -> ";
        }
        res.problems.push_back({res.cases[i].file, res.cases[i].name, "inputs/" + input, "links that form a pipeline (no cycle)",
                                "a cycle of links: " + printable(cyc + res.cases[j].name)});
      } else if (state[j] == 0) {
        state[j] = 1;
        path.emplace_back(j, 0);
      }
    }
  }
}

}  // namespace

ReadResult read_file(const std::string& path, const ReadOptions& opt) {
  ReadResult res;
  QuietErrors quiet;
  auto file_problem = [&](std::string expected, std::string found) {
    res.problems.push_back({path, "", "", std::move(expected), std::move(found)});
    return res;
  };
  // Only regular files: a FIFO or device would block or stream, a symlink loop would throw.
  if (auto e = input_file_problem(path); !e.empty()) {
    if (e == "no such file") return file_problem("an existing file", e);
    if (e.rfind("a directory", 0) == 0) return file_problem("an HDF5 file", "a directory");
    return file_problem("a regular HDF5 file", e);
  }
  if (H5Fis_hdf5(path.c_str()) <= 0) return file_problem("an HDF5 file", "not HDF5 (no HDF5 signature)");
  if (opt.isolate)
    if (auto e = isolated_walk(path, opt); !e.empty()) return file_problem("a file HDF5 can parse", e);
  H file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!file.ok()) {
    // Name the real cause: a file an HDF5 writer holds open is locked (it opens without locking).
    H fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
    if (fapl.ok() && H5Pset_file_locking(fapl, false, true) >= 0) {
      H probe(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl), H5Fclose);
      if (probe.ok())
        return file_problem("a file no process is writing", "a file locked by an HDF5 writer (close the writer first; "
                                                            "reading it now could give torn data)");
    }
    return file_problem("a readable HDF5 file", "a file HDF5 cannot open (truncated or corrupt)");
  }
  H root(H5Gopen2(file, "/", H5P_DEFAULT), H5Gclose);
  if (!root.ok()) return file_problem("a readable root group", "an unreadable root group (truncated or corrupt)");
  std::vector<Link> links;
  if (!list_links(root, links)) return file_problem("a readable root group", "a corrupt link table (HDF5 cannot list the root group)");
  std::int64_t budget_left = opt.max_total_bytes;
  int n_case_groups = 0;
  std::map<std::string, Tensor> loaded;            // object id -> its tensor (read once)
  std::map<std::string, std::string> sources;      // object id -> "CASE/outputs/T" (first outputs/expected holding it)
  std::vector<InputId> input_ids;                  // every input's object id
  std::vector<AttrLink> attr_links;                // attrs from:<input>
  std::vector<std::set<std::string>> unreadable_of;  // per case: tensors that failed to load
  for (const auto& link : links) {
    const std::string& name = link.name;
    if (auto e = link_problem(root, link); !e.empty()) {
      res.problems.push_back({path, name, "/" + name, "a case group stored in this file", e});
      continue;
    }
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
    std::vector<std::string> anames;
    if (!attr_names(g, anames))
      res.problems.push_back({path, name, "attrs", "readable attributes", "a corrupt attribute table (HDF5 cannot list them)"});
    for (const auto& an : anames) {
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
        if (auto st = std::get_if<std::string>(&v); st && !st->empty()) c.stage = *st;
        else res.problems.push_back({path, name, "attr stage", "a non-empty string naming the stage", attr_to_string(v)});
      } else if (an == "schema_version") {
        version_attr = true;
        auto i = std::get_if<std::int64_t>(&v);
        if (!i || *i != kSchemaVersion)
          res.problems.push_back({path, name, "attr schema_version", std::to_string(kSchemaVersion) + " (this dsa-check reads schema v1)",
                                  attr_to_string(v)});
      } else if (an.rfind(kLinkAttrPrefix, 0) == 0) {
        auto st = std::get_if<std::string>(&v);
        if (st && an.size() > std::strlen(kLinkAttrPrefix)) attr_links.push_back({res.cases.size(), an.substr(std::strlen(kLinkAttrPrefix)), *st});
        else res.problems.push_back({path, name, "attr " + an, "a string 'CASE/outputs/TENSOR' naming the output this input is taken from", attr_to_string(v)});
      } else {
        c.attrs[an] = v;
      }
    }
    if (!stage_attr)
      res.problems.push_back({path, name, "attr stage", "a string attribute naming the stage (dsa-check stages lists them)", "none"});
    if (!version_attr) res.problems.push_back({path, name, "attr schema_version", "1", "none"});
    std::set<std::string> unreadable;  // tensors that failed to load: not reported again as missing
    std::vector<Link> members;
    if (!list_links(g, members)) {
      res.problems.push_back({path, name, "", "a readable case group", "a corrupt link table (HDF5 cannot list the group)"});
      unreadable_of.push_back({"*"});  // not validated: its tensors were never listed
      res.cases.push_back(std::move(c));
      continue;
    }
    auto member = [&](const std::string& n) -> const Link* {
      for (const auto& m : members)
        if (m.name == n) return &m;
      return nullptr;
    };
    for (const char* gname : {"inputs", "outputs", "expected"}) {
      const Link* gl = member(gname);
      if (!gl) {
        if (std::string(gname) == "inputs") res.problems.push_back({path, name, "inputs/", "a group of input tensors", "none"});
        continue;
      }
      if (!opt.load_outputs && std::string(gname) != "inputs") continue;
      if (auto e = link_problem(g, *gl); !e.empty()) {
        res.problems.push_back({path, name, std::string(gname) + "/", "a group stored in this file", e});
        continue;
      }
      if (object_type(g, gname) != H5O_TYPE_GROUP) {
        res.problems.push_back({path, name, std::string(gname) + "/", "a group of tensors", "a dataset or other object"});
        continue;
      }
      H sub(H5Gopen2(g, gname, H5P_DEFAULT), H5Gclose);
      std::vector<Link> tensors;
      if (!sub.ok() || !list_links(sub, tensors)) {
        res.problems.push_back({path, name, std::string(gname) + "/", "a readable group", "an unreadable object (truncated or corrupt?)"});
        continue;
      }
      TensorMap& dst = std::string(gname) == "inputs" ? c.inputs : std::string(gname) == "outputs" ? c.outputs : c.expected;
      for (const auto& tl : tensors) {
        const std::string& tn = tl.name;
        const std::string tpath = std::string(gname) + "/" + tn;
        if (auto e = link_problem(sub, tl); !e.empty()) {
          res.problems.push_back({path, name, tpath, "a dataset stored in this file", e});
          unreadable.insert(tpath);
          continue;
        }
        const ObjectInfo obj = object_info(sub, tn);
        if (obj.type != H5O_TYPE_DATASET) {
          res.problems.push_back({path, name, tpath, "a dataset", "a group or other object"});
          unreadable.insert(tpath);
          continue;
        }
        // One dataset linked from several places (a layer dump's input hard- or soft-linked to another case's
        // output, inputs shared by two cases) is read once: its tensors share storage.
        const std::string& id = obj.id;
        if (auto it = loaded.find(id); !id.empty() && it != loaded.end() && !it->second.is_deferred()) {
          dst.emplace(tn, it->second);
        } else if (auto t = read_dataset(sub, gname, tn, DsCtx{path, name, res.problems, budget_left, &c}, opt)) {
          if (!id.empty() && !loaded.count(id)) loaded.emplace(id, *t);
          dst.emplace(tn, std::move(*t));
        } else {
          unreadable.insert(tpath);
          continue;
        }
        if (id.empty()) continue;
        if (std::string(gname) == "inputs") input_ids.push_back({res.cases.size(), tn, id});
        else sources.try_emplace(id, name + "/" + gname + "/" + tn);
      }
    }
    for (const auto& other : members)
      if (other.name != "inputs" && other.name != "outputs" && other.name != "expected")
        res.problems.push_back({path, name, other.name, "only inputs/, outputs/, expected/ in a case", "'" + other.name + "'"});
    if (opt.apply_defaults && opt.defaults) opt.defaults(c);
    unreadable_of.push_back(std::move(unreadable));
    res.cases.push_back(std::move(c));
  }
  // Layer dumps: which inputs are other cases' outputs (hard / soft links, attrs from:), before validation (an input
  // given by an attr alone is filled in here).
  resolve_links(res, input_ids, sources, attr_links, unreadable_of);
  // Validate even when something failed to load, so that every problem of the file is reported at once; tensors that
  // failed to load are not reported again (as missing). An unknown or missing stage is already reported above.
  for (std::size_t i = 0; i < res.cases.size() && opt.validate; ++i) {
    const Case& c = res.cases[i];
    if (c.stage.empty() || unreadable_of[i].count("*")) continue;
    Case with_defaults;
    const Case* v = &c;
    if (!opt.apply_defaults && opt.defaults) {
      with_defaults = c;
      opt.defaults(with_defaults);
      v = &with_defaults;
    }
    for (auto& p : opt.validate(*v, opt.load_outputs))
      if (!unreadable_of[i].count(p.tensor)) res.problems.push_back(std::move(p));
  }
  if (n_case_groups == 0 && res.problems.empty()) file_problem("at least one case group (with a stage attribute)", "an empty file");
  return res;
}

namespace {
// " (no space left on device: DIR has N bytes free)" when the write most likely failed for want of space, else "".
std::string space_hint(const fs::path& dir) {
  const int e = errno;
  struct statvfs v;
  if (::statvfs(dir.c_str(), &v) == 0) {
    const unsigned long long free_bytes = static_cast<unsigned long long>(v.f_bavail) * v.f_frsize;
    if (e == ENOSPC || free_bytes < (1ull << 20))
      return " (no space left on device: " + dir.string() + " has " + std::to_string(free_bytes) + " bytes free)";
  }
  if (e == ENOSPC || e == EDQUOT) return std::string(" (") + std::strerror(e) + ")";
  return "";
}
}  // namespace

void write_file(const std::string& path, const std::vector<Case>& cases, const std::vector<std::string>& inputs) {
  QuietErrors quiet;
  static std::atomic<int> counter{0};
  OutputTarget out;
  if (auto e = resolve_output(path, inputs, out); !e.empty()) throw std::runtime_error(e);
  if (out.direct) throw std::runtime_error(path + ": not a regular file (an HDF5 dump is written to a file, then renamed)");
  const fs::path target(out.path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw std::runtime_error(path + ": output directory does not exist");
  const std::string tmp = (dir / ("." + target.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" +
                                  std::to_string(counter++)))
                              .string();
  TempGuard guard(tmp);  // removed by the SIGINT/SIGTERM handler while it exists
  try {
    {
      H file(H5Fcreate(tmp.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
      if (!file.ok()) {
        const int e = errno;
        throw std::runtime_error(path + ": cannot create a file in " + dir.string() + " (" +
                                 (e != 0 ? std::strerror(e) : "directory not writable?") + ")");
      }
      // A linked input (Case::links) whose source is written too, with its shape and bytes, becomes a hard link to
      // that dataset (created once every case exists); any other linked input is written whole, with attr from:.
      auto linked_source = [&](const Case& c, const std::string& input, const Tensor& t) -> std::string {
        auto li = c.links.find(input);
        if (li == c.links.end()) return "";
        const std::string& src = li->second;
        const auto s1 = src.find('/'), s2 = src.rfind('/');
        if (s1 == std::string::npos || s2 <= s1) return "";
        for (const Case& o : cases) {
          if (o.name != src.substr(0, s1) || &o == &c) continue;
          const std::string grp = src.substr(s1 + 1, s2 - s1 - 1);
          const TensorMap* m = grp == "outputs" ? &o.outputs : grp == "expected" ? &o.expected : nullptr;
          if (!m) return "";
          auto ti = m->find(src.substr(s2 + 1));
          return ti != m->end() && !ti->second.is_deferred() && !t.is_deferred() && ti->second.same_bytes(t) ? "/" + src : "";
        }
        return "";
      };
      std::vector<std::pair<std::string, std::string>> hard;  // (link path, target path)
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
          for (const auto& [tn, t] : *m) {
            if (std::string(gname) == "inputs" && c.links.count(tn)) {
              if (auto src = linked_source(c, tn, t); !src.empty()) {
                hard.emplace_back("/" + c.name + "/inputs/" + tn, src);
                continue;
              }
              // A link to a case not written here (`cut` of one case out of a layer) is dropped: the input stands alone.
              const std::string sc = c.links.at(tn).substr(0, c.links.at(tn).find('/'));
              if (std::any_of(cases.begin(), cases.end(), [&](const Case& o) { return o.name == sc && &o != &c; }))
                write_attr(g, kLinkAttrPrefix + tn, AttrValue{c.links.at(tn)});
            }
            write_dataset(sub, tn, t);
          }
        }
      }
      for (const auto& [link, src] : hard)
        if (H5Lcreate_hard(file, src.c_str(), file, link.c_str(), H5P_DEFAULT, H5P_DEFAULT) < 0)
          throw std::runtime_error(path + ": cannot link " + link + " to " + src);
      if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0) throw std::runtime_error(path + ": flush failed" + space_hint(dir));
      // Close explicitly: a close that fails (its last metadata writes) must not be renamed into place.
      if (H5Fclose(file.id) < 0) {
        file.id = H5I_INVALID_HID;
        throw std::runtime_error(path + ": closing the file failed" + space_hint(dir));
      }
      file.id = H5I_INVALID_HID;
    }
    test_hold_before_rename(tmp);
    if (g_before_rename_hook) g_before_rename_hook(tmp);
    fs::rename(tmp, target);
  } catch (const std::exception& e) {
    std::string msg = e.what();
    if (msg.find("space") == std::string::npos) msg += space_hint(dir);
    fs::remove(tmp, ec);
    throw std::runtime_error(msg.rfind(path, 0) == 0 ? msg : path + ": " + msg);
  }
}

}  // namespace dsa::io
