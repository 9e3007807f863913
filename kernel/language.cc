#include "kernel/language.h"

#include <iterator>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace warden {

const char* LanguageName(Language language) {
  switch (language) {
    case Language::kPython: return "python";
    case Language::kJavaScript: return "javascript";
    case Language::kBash: return "bash";
    case Language::kTypeScript: return "typescript";
    case Language::kR: return "r";
    case Language::kJava: return "java";
  }
  return "python";
}

std::string LanguageChoices() {
  std::string out;
  for (size_t i = 0; i < std::size(kAllLanguages); ++i) {
    if (i > 0) out += i + 1 == std::size(kAllLanguages) ? " or " : ", ";
    out += LanguageName(kAllLanguages[i]);
  }
  return out;
}

absl::StatusOr<Language> ParseLanguage(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n == "python" || n == "python3" || n == "py") return Language::kPython;
  if (n == "javascript" || n == "js" || n == "node" || n == "nodejs") return Language::kJavaScript;
  if (n == "bash" || n == "sh" || n == "shell") return Language::kBash;
  if (n == "typescript" || n == "ts") return Language::kTypeScript;
  if (n == "r") return Language::kR;
  if (n == "java") return Language::kJava;
  return absl::InvalidArgumentError(absl::StrCat("unknown language '", name, "': use ", LanguageChoices()));
}

const char* KernelSubdirectory(Language language) {
  switch (language) {
    case Language::kPython: return "python";
    case Language::kJavaScript: return "node";
    case Language::kBash: return "bash";
    // TypeScript is the JavaScript kernel in its TypeScript mode; the R
    // kernel is Python hosting R (rpy2), beside the Python kernel it reuses.
    case Language::kTypeScript: return "node";
    case Language::kR: return "python";
    case Language::kJava: return "java";
  }
  return "python";
}

std::string KernelMountPoint(Language language, bool machine) {
  // Python's directory (also R's, whose kernel is a Python program) stays
  // where the zygote's kernel believes it is.
  if (!machine || absl::string_view(KernelSubdirectory(language)) == "python") return kKernelMountPoint;
  return absl::StrCat("/opt/warden/kernels/", KernelSubdirectory(language));
}

std::vector<std::string> KernelArgv(Language language, const std::string& dir) {
  switch (language) {
    case Language::kPython:
      // -u: unbuffered fds 1/2 so output streams; -E: ignore PYTHON* variables.
      return {"/usr/bin/python3", "-u", "-E", dir + "/warden_kernel.py"};
    case Language::kJavaScript:
      return {"/usr/bin/node", dir + "/warden_kernel.js"};
    case Language::kBash:
      return {"/bin/bash", "--noprofile", "--norc", dir + "/warden_kernel.sh"};
    case Language::kTypeScript:
      return {"/usr/bin/node", dir + "/warden_kernel.js", "--typescript"};
    case Language::kR:
      return {"/usr/bin/python3", "-u", "-E", dir + "/warden_r_kernel.py"};
    case Language::kJava:
      // Java takes its channel as the inherited fd 0 (see WardenKernel.java).
      // Serial GC and the client compiler: fewer threads (the pids limit)
      // and less memory; source-file mode compiles the kernel at start.
      return {"/bin/sh", "-c",
              "exec /usr/bin/java -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData -Xss1m " + dir +
                  "/WardenKernel.java 0<&3"};
  }
  return {};
}

std::vector<std::string> TemplateKernelArgv(Language language, const std::string& interpreter,
                                            const std::string& dir) {
  switch (language) {
    case Language::kPython:
      return {interpreter, "-u", dir + "/warden_kernel.py"};
    case Language::kJavaScript:
      return {interpreter, dir + "/warden_kernel.js"};
    case Language::kBash:
      return {interpreter, "--noprofile", "--norc", dir + "/warden_kernel.sh"};
    default:
      return {};
  }
}

}  // namespace warden
