#include "pipeline/inspect.hpp"

#include <cmath>
#include <iomanip>
#include <sstream>

#include "pipeline/load.hpp"

namespace dsa {

TensorStats tensor_stats(const Tensor& t) {
  TensorStats s;
  s.numel = t.numel();
  double sum = 0.0;
  bool first = true;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double v = t.value(i);
    if (std::isnan(v)) {
      ++s.nan;
    } else if (std::isinf(v)) {
      (v > 0 ? s.pos_inf : s.neg_inf)++;
    } else {
      ++s.finite;
      sum += v;
      if (first || v < s.min) s.min = v;
      if (first || v > s.max) s.max = v;
      first = false;
    }
  }
  s.mean = s.finite ? sum / static_cast<double>(s.finite) : 0.0;
  return s;
}

int run_inspect(const std::vector<std::string>& files, std::ostream& out, std::ostream& err, nlohmann::json* json_out) {
  int rc = 0;
  nlohmann::json jfiles = nlohmann::json::array();
  for (const auto& f : files) {
    io::ReadResult r = pipeline::load_file(f);
    nlohmann::json jf{{"file", f}, {"cases", nlohmann::json::array()}};
    out << printable(f) << ": " << r.cases.size() << " case(s)\n";
    for (const Case& c : r.cases) {
      nlohmann::json jc{{"name", c.name}, {"stage", c.stage}, {"attrs", nlohmann::json::object()}, {"tensors", nlohmann::json::array()}};
      out << "  case '" << printable(c.name) << "'  stage " << printable(c.stage) << "\n";
      for (const auto& [k, v] : c.attrs) {
        out << "    attr " << printable(k) << " = " << printable(attr_to_string(v)) << "\n";
        jc["attrs"][k] = attr_to_string(v);
      }
      for (const auto& [gname, m] : {std::pair<const char*, const TensorMap*>{"inputs", &c.inputs},
                                     {"outputs", &c.outputs}, {"expected", &c.expected}}) {
        for (const auto& [tn, t] : *m) {
          const TensorStats s = tensor_stats(t);
          std::ostringstream line;
          line << "    " << std::left << std::setw(26) << printable(std::string(gname) + "/" + tn) << std::setw(12)
               << dtype_name(t.dtype()) << std::setw(20) << shape_str(t.shape());
          line << std::setprecision(6) << "min " << s.min << "  max " << s.max << "  mean " << s.mean;
          if (s.nan) line << "  NaN " << s.nan;
          if (s.pos_inf) line << "  +inf " << s.pos_inf;
          if (s.neg_inf) line << "  -inf " << s.neg_inf;
          out << line.str() << "\n";
          jc["tensors"].push_back({{"group", gname}, {"name", tn}, {"dtype", std::string(dtype_name(t.dtype()))},
                                   {"shape", t.shape()}, {"min", s.min}, {"max", s.max}, {"mean", s.mean},
                                   {"nan", s.nan}, {"pos_inf", s.pos_inf}, {"neg_inf", s.neg_inf}});
        }
      }
      jf["cases"].push_back(jc);
    }
    nlohmann::json jp = nlohmann::json::array();
    for (const auto& p : r.problems) {
      err << "error: " << p.str() << "\n";
      jp.push_back(p.str());
    }
    jf["problems"] = jp;
    jf["valid"] = r.ok();
    out << "  schema: " << (r.ok() ? "valid" : std::to_string(r.problems.size()) + " problem(s)") << "\n";
    if (!r.ok()) rc = 2;
    jfiles.push_back(jf);
  }
  if (json_out) *json_out = {{"files", jfiles}};
  return rc;
}

}  // namespace dsa
