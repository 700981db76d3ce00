// The one RAII wrapper of HDF5 C-API handles (hid_t + its close function), used by every HDF5 reader and writer.
#pragma once
#include <hdf5.h>

#include <utility>

namespace dsa::io {

struct H5Handle {
  hid_t id = H5I_INVALID_HID;
  herr_t (*close)(hid_t) = nullptr;
  H5Handle() = default;
  H5Handle(hid_t i, herr_t (*c)(hid_t)) : id(i), close(c) {}
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  H5Handle(H5Handle&& o) noexcept : id(o.id), close(o.close) { o.id = H5I_INVALID_HID; }
  H5Handle& operator=(H5Handle&& o) noexcept {
    std::swap(id, o.id);
    std::swap(close, o.close);
    return *this;
  }
  ~H5Handle() {
    if (id >= 0 && close) close(id);
  }
  bool ok() const { return id >= 0; }
  operator hid_t() const { return id; }
};

}  // namespace dsa::io
