#include "kernel/sandbox_template.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "sandbox/sandbox.h"

namespace warden {

std::string SandboxTemplate::Path() const {
  for (const std::string& e : env) {
    if (absl::StartsWith(e, "PATH=")) return e.substr(5);
  }
  return "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
}

std::string SandboxTemplate::Unavailable(Language language) const {
  if (interpreters.count(language)) return "";
  auto it = unavailable.find(language);
  if (it != unavailable.end()) return it->second;
  return absl::StrCat("the template '", name, "' cannot run ", LanguageName(language),
                      ": Warden runs Python, JavaScript and bash in templates");
}

std::vector<std::string> TemplateKernelEnvironment(const SandboxTemplate& t, const std::vector<std::string>& kernel_env) {
  std::vector<std::string> base;
  for (const std::string& e : SandboxSpec::DefaultEnvironment()) {
    if (!absl::StartsWith(e, "PATH=")) base.push_back(e);
  }
  std::vector<std::string> image;
  for (const std::string& e : t.env) {
    if (!absl::StartsWith(e, "PATH=")) image.push_back(e);
  }
  base = MergeEnvironment(std::move(base), image);
  std::vector<std::string> warden;
  for (const std::string& e : kernel_env) {
    if (absl::StartsWith(e, "PATH=")) continue;
    // The sandbox's own: its home is the workspace, its user Warden's.
    warden.push_back(e);
  }
  base = MergeEnvironment(std::move(base), warden);
  base.push_back(absl::StrCat("PATH=", kToolsMountPoint, ":", t.Path(), ":/workspace/.local/bin"));
  return base;
}

}  // namespace warden
