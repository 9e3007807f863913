// UndefinedBehaviorSanitizer's reports into UBSAN_OPTIONS' log_path in the
// ASan+UBSan build (`make test-sanitize`, docs/security.md "Sanitizers").
//
// With GCC, a program built with -fsanitize=address,undefined loads libasan
// and libubsan, each with its own copy of the sanitizer common runtime.
// libubsan's call to set its report file binds to libasan's copy (the first
// definition the dynamic linker finds), so its own file stays stderr and
// log_path is ignored for UBSan's reports (GCC bug 94328). A daemon a test
// starts may not keep its stderr: its finding would be seen only as a test
// failing for no stated reason. This constructor asks libubsan's own copy
// (dlsym on libubsan's handle finds its own definition first).
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

namespace {

__attribute__((constructor)) void UbsanReportPath() {
  const char* options = std::getenv("UBSAN_OPTIONS");
  if (options == nullptr) return;
  // log_path=PATH, first or after a ':' (the separator run_sanitized_tests.sh uses).
  const char* at = std::strncmp(options, "log_path=", 9) == 0 ? options : std::strstr(options, ":log_path=");
  if (at == nullptr) return;
  at = std::strchr(at, '=') + 1;
  char path[4096];
  const size_t length = std::strcspn(at, ":");
  if (length == 0 || length >= sizeof(path)) return;
  std::memcpy(path, at, length);
  path[length] = '\0';
  void* ubsan = dlopen("libubsan.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (ubsan == nullptr) return;
  auto set_report_path = reinterpret_cast<void (*)(const char*)>(dlsym(ubsan, "__sanitizer_set_report_path"));
  if (set_report_path != nullptr) set_report_path(path);
  dlclose(ubsan);
}

}  // namespace
