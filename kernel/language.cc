#include "kernel/language.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace warden {

const char* LanguageName(Language language) {
  switch (language) {
    case Language::kPython: return "python";
    case Language::kJavaScript: return "javascript";
    case Language::kBash: return "bash";
  }
  return "python";
}

absl::StatusOr<Language> ParseLanguage(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n == "python" || n == "python3" || n == "py") return Language::kPython;
  if (n == "javascript" || n == "js" || n == "node" || n == "nodejs") return Language::kJavaScript;
  if (n == "bash" || n == "sh" || n == "shell") return Language::kBash;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown language '", name, "': use python, javascript or bash"));
}

const char* KernelSubdirectory(Language language) {
  switch (language) {
    case Language::kPython: return "python";
    case Language::kJavaScript: return "node";
    case Language::kBash: return "bash";
  }
  return "python";
}

std::vector<std::string> KernelArgv(Language language) {
  const std::string dir = kKernelMountPoint;
  switch (language) {
    case Language::kPython:
      // -u: unbuffered fds 1/2 so output streams; -E: ignore PYTHON* variables.
      return {"/usr/bin/python3", "-u", "-E", dir + "/warden_kernel.py"};
    case Language::kJavaScript:
      return {"/usr/bin/node", dir + "/warden_kernel.js"};
    case Language::kBash:
      return {"/bin/bash", "--noprofile", "--norc", dir + "/warden_kernel.sh"};
  }
  return {};
}

}  // namespace warden
