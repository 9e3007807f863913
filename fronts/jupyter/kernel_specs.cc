#include "fronts/jupyter/kernel_specs.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"

namespace warden::jupyter {

const std::vector<KernelSpec>& KernelSpecs() {
  static const auto* specs = new std::vector<KernelSpec>{
      {"python3", v1::LANGUAGE_PYTHON, "Python 3 (Warden sandbox)", "python", "3", "text/x-python", ".py",
       "ipython3", "ipython"},
      {"javascript", v1::LANGUAGE_JAVASCRIPT, "JavaScript (Node.js, Warden sandbox)", "javascript", "20",
       "application/javascript", ".js", "javascript", "javascript"},
      {"bash", v1::LANGUAGE_BASH, "Bash (Warden sandbox)", "bash", "5", "text/x-sh", ".sh", "bash", "shell"},
  };
  return *specs;
}

const KernelSpec* FindKernelSpec(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  std::string canonical = lower;
  if (lower == "python" || lower == "py") canonical = "python3";
  if (lower == "js" || lower == "node" || lower == "nodejs") canonical = "javascript";
  if (lower == "sh") canonical = "bash";
  for (const KernelSpec& spec : KernelSpecs()) {
    if (canonical == spec.name) return &spec;
  }
  return nullptr;
}

const KernelSpec& KernelSpecFor(v1::Language language) {
  for (const KernelSpec& spec : KernelSpecs()) {
    if (spec.language == language) return spec;
  }
  return KernelSpecs().front();
}

nlohmann::json KernelSpecsJson() {
  nlohmann::json specs = nlohmann::json::object();
  for (const KernelSpec& spec : KernelSpecs()) {
    specs[spec.name] = {
        {"name", spec.name},
        {"spec",
         {{"argv", nlohmann::json::array()},  // Warden starts its kernels itself
          {"display_name", spec.display_name},
          {"language", spec.language_name},
          {"interrupt_mode", "message"},
          {"env", nlohmann::json::object()},
          {"metadata", {{"warden", {{"sandboxed", true}}}}}}},
        {"resources", nlohmann::json::object()},
    };
  }
  return {{"default", kDefaultKernelName}, {"kernelspecs", specs}};
}

nlohmann::json KernelInfoContent(const KernelSpec& spec) {
  return {
      {"status", "ok"},
      {"protocol_version", "5.3"},
      {"implementation", "warden"},
      {"implementation_version", "0.1.0"},
      {"language_info",
       {{"name", spec.language_name},
        {"version", spec.version},
        {"mimetype", spec.mimetype},
        {"file_extension", spec.file_extension},
        {"pygments_lexer", spec.pygments_lexer},
        {"codemirror_mode", spec.codemirror_mode}}},
      {"banner", std::string(spec.display_name) + ": a live interpreter in an isolated sandbox, no network"},
      {"help_links", nlohmann::json::array()},
      {"debugger", false},
  };
}

std::string KernelSpecNames() {
  std::vector<std::string> names;
  for (const KernelSpec& spec : KernelSpecs()) names.push_back(spec.name);
  return absl::StrJoin(names, ", ");
}

}  // namespace warden::jupyter
