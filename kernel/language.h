// Language: the interpreters a session can run, and how each kernel starts.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace warden {

enum class Language { kPython, kJavaScript, kBash, kTypeScript, kR, kJava };

// Every language, in the order they are listed to users.
inline constexpr Language kAllLanguages[] = {Language::kPython, Language::kJavaScript, Language::kBash,
                                             Language::kTypeScript, Language::kR, Language::kJava};

// "python", "javascript", "bash", "typescript", "r", "java".
const char* LanguageName(Language language);
// Accepts the names above and common aliases ("py", "python3", "js",
// "node", "sh", "shell", "ts"); anything else is an error listing the choices.
absl::StatusOr<Language> ParseLanguage(absl::string_view name);
// "python, javascript, bash, typescript, r or java", for error messages.
std::string LanguageChoices();

// Where the kernel program's directory is bound inside the sandbox.
inline constexpr char kKernelMountPoint[] = "/opt/warden/kernel";
// Where the kernels dir's bin/ (Warden's `pip`, kernel/bin/) is bound, first
// on every kernel's PATH.
inline constexpr char kToolsSubdirectory[] = "bin";
inline constexpr char kToolsMountPoint[] = "/opt/warden/bin";
// Where a pool's wheelhouse (a host directory of wheels) is bound read-only.
inline constexpr char kWheelhouseMountPoint[] = "/opt/warden/wheelhouse";

// The language's kernel subdirectory of the kernels dir ("python", ...).
const char* KernelSubdirectory(Language language);
// Where the language's kernel directory is bound: kKernelMountPoint in a
// sandbox of its own; in a machine, which holds every language's kernel,
// Python's there too (where the zygote's kernel believes it is) and the
// others' in /opt/warden/kernels/<subdirectory>.
std::string KernelMountPoint(Language language, bool machine);
// argv that starts the kernel inside the sandbox, from `dir` (its
// KernelMountPoint).
std::vector<std::string> KernelArgv(Language language, const std::string& dir = kKernelMountPoint);
// The same with a template's own interpreter (an absolute path inside it):
// Python without -E, so that the image's PYTHON* settings (PYTHONPATH)
// hold, as they would for `python3` in a container of it.
std::vector<std::string> TemplateKernelArgv(Language language, const std::string& interpreter,
                                            const std::string& dir = kKernelMountPoint);

}  // namespace warden
