#include "stage/describe.hpp"

#include <algorithm>
#include <iomanip>

#include "io/h5io.hpp"
#include "layouts/layouts.hpp"
#include "schema/schema.hpp"
#include "stage/stage.hpp"

namespace dsa {
namespace {

nlohmann::json tensor_json(const TensorSpec& t) {
  nlohmann::json dts = nlohmann::json::array();
  for (DType d : t.dtypes) dts.push_back(std::string(dtype_name(d)));
  nlohmann::json ranks = nlohmann::json::array();
  nlohmann::json dims = nlohmann::json::array();
  for (const auto& alt : t.dims) {
    dims.push_back(alt);
    ranks.push_back(alt.empty() ? 0 : static_cast<int>(std::count(alt.begin(), alt.end(), ',') + 1));
  }
  return {{"name", t.name}, {"dtypes", dts}, {"dims", dims}, {"ranks", ranks}, {"optional", t.optional}, {"doc", t.doc}};
}

nlohmann::json attr_value_json(const AttrValue& v) {
  return std::visit([](const auto& x) { return nlohmann::json(x); }, v);
}

}  // namespace

nlohmann::json stages_json() {
  nlohmann::json out;
  out["schema_version"] = io::kSchemaVersion;
  out["tool_version"] = DSA_VERSION;
  nlohmann::json dt = nlohmann::json::array();
  for (DType d : kAllDTypes)
    dt.push_back({{"name", std::string(dtype_name(d))},
                  {"size", dtype_size(d)},
                  {"storage", dtype_stored_as_bits(d) ? (dtype_size(d) == 2 ? "uint16 bits" : "uint8 bits") : "native"}});
  out["dtypes"] = dt;
  nlohmann::json prof = nlohmann::json::array();
  for (const auto& p : tolerance_policies()) prof.push_back({{"name", p.name}, {"rtol", p.rtol}, {"atol", p.atol}, {"doc", p.doc}});
  out["tolerance_profiles"] = prof;
  nlohmann::json kp = nlohmann::json::array();
  for (const Profile* p : kernel_profiles()) {
    nlohmann::json serves = nlohmann::json::array();
    std::vector<std::string> emulated;
    for (const auto& s : p->serves) {
      serves.push_back({{"stage", s.stage}, {"tolerance", s.tolerance}, {"emulation", s.emulation},
                        {"emulation_required", s.emulation && s.emulation_required}});
      if (s.emulation) emulated.push_back(s.stage);
    }
    kp.push_back({{"name", p->name}, {"doc", p->doc}, {"aliases", p->aliases}, {"serves", serves}, {"stages", emulated}});
  }
  out["kernel_profiles"] = kp;
  nlohmann::json ly = nlohmann::json::array();
  for (const auto& l : layouts::all()) ly.push_back({{"name", l.name}, {"kind", l.kind}, {"doc", l.doc}});
  out["layouts"] = ly;
  nlohmann::json pa = nlohmann::json::array();
  for (const auto& p : provenance_attrs()) pa.push_back({{"name", p.name}, {"doc", p.doc}});
  out["provenance_attrs"] = pa;
  out["user_attr_prefix"] = kUserAttrPrefix;
  nlohmann::json st = nlohmann::json::array();
  for (const Stage& s : stages()) {
    nlohmann::json j;
    j["name"] = s.name;
    j["summary"] = s.summary;
    j["spec"] = s.spec;
    j["formula"] = s.formula;
    j["default_tolerance"] = s.default_tolerance;
    j["emulation_profiles"] = s.emulated_by();
    j["pipeline_order"] = s.pipeline_order;
    nlohmann::json attrs = nlohmann::json::array();
    for (const auto& a : s.schema.attrs) {
      nlohmann::json aj{{"name", a.name}, {"type", std::string(attr_type_name(a.type))}, {"required", a.required}, {"doc", a.doc}};
      aj["default"] = a.default_value ? attr_value_json(*a.default_value) : nlohmann::json(nullptr);
      aj["choices"] = a.choices;
      attrs.push_back(aj);
    }
    j["attrs"] = attrs;
    nlohmann::json ins = nlohmann::json::array();
    for (const auto& t : s.schema.inputs) ins.push_back(tensor_json(t));
    j["inputs"] = ins;
    nlohmann::json outs = nlohmann::json::array();
    for (const auto& o : s.schema.outputs) {
      auto oj = tensor_json(o.tensor);
      oj["compare"] = std::string(compare_kind_name(o.compare));
      outs.push_back(oj);
    }
    j["outputs"] = outs;
    st.push_back(j);
  }
  out["stages"] = st;
  return out;
}

void print_stages_text(std::ostream& os, const std::vector<std::string>& only) {
  for (const Stage& s : stages()) {
    if (!only.empty() && std::find(only.begin(), only.end(), s.name) == only.end()) continue;
    os << s.name << "  — " << s.summary << "  [" << s.spec << "]\n";
    if (!s.formula.empty()) os << "  computes: " << s.formula << "\n";
    auto tensors = [&](const char* group, const std::vector<TensorSpec>& ts, const std::vector<OutputSpec>* outs) {
      for (std::size_t i = 0; i < ts.size(); ++i) {
        const auto& t = ts[i];
        std::string dts, dims;
        for (DType d : t.dtypes) dts += (dts.empty() ? "" : "|") + std::string(dtype_name(d));
        for (const auto& a : t.dims) dims += (dims.empty() ? "" : " or ") + ("[" + a + "]");
        os << "  " << group << "/" << std::left << std::setw(14) << t.name << std::setw(22) << dts << std::setw(30) << dims
           << (t.optional ? "optional " : "") << (outs ? "compare=" + std::string(compare_kind_name((*outs)[i].compare)) + " " : "")
           << t.doc << "\n";
      }
    };
    tensors("inputs", s.schema.inputs, nullptr);
    std::vector<TensorSpec> ots;
    for (const auto& o : s.schema.outputs) ots.push_back(o.tensor);
    tensors("outputs", ots, &s.schema.outputs);
    for (const auto& a : s.schema.attrs)
      os << "  attr " << std::left << std::setw(18) << a.name << std::setw(8) << attr_type_name(a.type)
         << (a.required ? "required " : "default=" + (a.default_value ? attr_to_string(*a.default_value) : std::string("-")) + " ")
         << a.doc << "\n";
    os << "\n";
  }
  if (!only.empty()) return;  // the named stages only
  os << "kernel profiles (attr kernel, or its older spelling variant):\n";
  for (const Profile* p : kernel_profiles()) {
    std::string st;
    for (const auto& x : p->serves)
      st += (st.empty() ? "" : ", ") + x.stage +
            (x.emulation ? (x.emulation_required ? " (bit-exact emulation)" : " (emulation, a match is BITEXACT; not required)") : "") +
            (x.tolerance.empty() ? "" : " [" + x.tolerance + "]");
    os << "  " << std::left << std::setw(16) << p->name << "serves " << st << "\n      " << p->doc << "\n";
    if (!p->aliases.empty()) {
      std::string al;
      for (const auto& a : p->aliases) al += (al.empty() ? "" : ", ") + a;
      os << "      also read as: " << al << "\n";
    }
  }
  os << "tolerance profiles (--profile):\n";
  for (const auto& p : tolerance_policies())
    os << "  " << std::left << std::setw(16) << p.name << "rtol " << p.rtol << " atol " << p.atol << "  " << p.doc << "\n";
  os << "layouts:\n";
  for (const auto& l : layouts::all()) os << "  " << std::left << std::setw(24) << l.name << std::setw(12) << l.kind << l.doc << "\n";
}

}  // namespace dsa
