#include "sandbox/process_title.h"

#include <errno.h>
#include <linux/prctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace warden {

absl::StatusOr<ProcessLayout> ReadProcessLayout() {
  std::ifstream in("/proc/self/stat");
  const std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The name (field 2) may hold spaces and parentheses; the fields after it
  // start past the last ')'.
  const size_t name_end = stat.rfind(')');
  if (name_end == std::string::npos || name_end + 2 > stat.size()) {
    return absl::InternalError(absl::StrCat("/proc/self/stat reads '", stat, "'"));
  }
  const std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(name_end + 2), ' ', absl::SkipWhitespace());
  ProcessLayout layout;
  const std::pair<size_t, uint64_t*> wanted[] = {
      {26, &layout.start_code}, {27, &layout.end_code},  {28, &layout.start_stack},
      {45, &layout.start_data}, {46, &layout.end_data},  {47, &layout.start_brk},
      {48, &layout.arg_start},  {49, &layout.arg_end},   {50, &layout.env_start},
      {51, &layout.env_end}};
  for (const auto& [number, value] : wanted) {
    // fields[0] is field 3.
    if (number - 3 >= fields.size() || !absl::SimpleAtoi(fields[number - 3], value)) {
      return absl::InternalError(absl::StrCat("/proc/self/stat has no field ", number));
    }
  }
  if (layout.arg_end <= layout.arg_start || layout.env_end < layout.env_start) {
    return absl::FailedPreconditionError("/proc/self/stat does not show this process's memory layout");
  }
  return layout;
}

namespace {

// Points the caller's command line at [start, start + size); 0 or an errno.
int SetCommandLine(const ProcessLayout& layout, uint64_t start, uint64_t size) {
  struct prctl_mm_map map = {};
  map.start_code = layout.start_code;
  map.end_code = layout.end_code;
  map.start_data = layout.start_data;
  map.end_data = layout.end_data;
  map.start_brk = layout.start_brk;
  map.brk = static_cast<uint64_t>(syscall(SYS_brk, 0));
  map.start_stack = layout.start_stack;
  map.arg_start = start;
  map.arg_end = start + size;
  map.env_start = layout.env_start;
  map.env_end = layout.env_end;
  map.exe_fd = static_cast<uint32_t>(-1);  // the executable stays: no privilege needed
  return prctl(PR_SET_MM, PR_SET_MM_MAP, &map, sizeof(map), 0) == 0 ? 0 : errno;
}

}  // namespace

void TitleSandboxInit(const ProcessLayout* layout, const char* label, bool may_overwrite,
                      ProcessTitle* title) {
  prctl(PR_SET_NAME, kSandboxProcessName, 0, 0, 0);
  size_t n = 0;
  for (const char* c = kSandboxProcessName; *c != '\0'; ++c) title->text[n++] = *c;
  if (label != nullptr && label[0] != '\0') {
    title->text[n++] = ' ';
    for (size_t i = 0; label[i] != '\0' && i < ProcessTitle::kMaxLabel; ++i) title->text[n++] = label[i];
  }
  title->text[n] = '\0';
  if (layout == nullptr) return;
  if (SetCommandLine(*layout, reinterpret_cast<uint64_t>(title->text), n + 1) == 0 || !may_overwrite) return;
  // The original argument strings instead, ours alone since the clone (copy
  // on write): the title cut to their length, padded with NULs, so that the
  // kernel shows exactly these bytes (proc(5), /proc/pid/cmdline: a last
  // byte that is not NUL would make it read on into the environment).
  char* area = reinterpret_cast<char*>(layout->arg_start);
  const size_t size = layout->arg_end - layout->arg_start;
  for (size_t i = 0; i < size; ++i) area[i] = i + 1 < size && i < n ? title->text[i] : '\0';
}

void RestoreProgramTitle(const ProcessLayout* layout, const char* path) {
  // The comm an execve of `path` would give: its last component, cut to
  // TASK_COMM_LEN - 1 bytes.
  char comm[16] = {};
  const char* name = path;
  for (const char* c = path; c != nullptr && *c != '\0'; ++c) {
    if (*c == '/') name = c + 1;
  }
  for (size_t i = 0; name != nullptr && name[i] != '\0' && i + 1 < sizeof(comm); ++i) comm[i] = name[i];
  prctl(PR_SET_NAME, comm, 0, 0, 0);
  if (layout != nullptr) SetCommandLine(*layout, layout->arg_start, layout->arg_end - layout->arg_start);
}

}  // namespace warden
