#include "pipeline/load.hpp"

#include "stage/stage.hpp"

namespace dsa::pipeline {

io::ReadOptions read_options() {
  io::ReadOptions o;
  o.validate = [](const Case& c, bool check_outputs) { return validate_case(c, check_outputs); };
  o.defaults = [](Case& c) { apply_attr_defaults(c); };
  return o;
}

io::ReadResult load_file(const std::string& path, io::ReadOptions opt) { return io::read_file(path, opt); }

}  // namespace dsa::pipeline
