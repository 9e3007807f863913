// What `ps`, `top`, `pidof` and `kill` see of a sandbox's init: the name
// "warden-sandbox" (its comm) and the command line "warden-sandbox LABEL"
// (the session's id, or what the sandbox is for), never those of the
// process it was cloned from - wardend, or a fork server that poses as
// `python3` - so that an operator's `kill $(pidof wardend)` cannot reach a
// sandbox.
//
// The init points its command line at a buffer of its own with
// prctl(PR_SET_MM, PR_SET_MM_MAP), which needs no privilege as long as the
// executable stays the same (kernel/sys.c, prctl_set_mm_map; Linux 3.18+
// with CONFIG_CHECKPOINT_RESTORE, which Debian's kernels have), but does
// need every other field of the memory layout: whoever clones the init
// reads them once from /proc/self/stat (ProcessLayout). A kernel without it
// gets the title over the original argument strings, cut to their length.
// The child side is async-signal-safe: system calls only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"

namespace warden {

inline constexpr char kSandboxProcessName[] = "warden-sandbox";

// The fields of the kernel's struct prctl_mm_map that stay as they are for
// the life of a process (all but brk), as /proc/self/stat shows them
// (proc(5), fields 26-28 and 45-51).
struct ProcessLayout {
  uint64_t start_code = 0, end_code = 0, start_stack = 0;
  uint64_t start_data = 0, end_data = 0, start_brk = 0;
  uint64_t arg_start = 0, arg_end = 0, env_start = 0, env_end = 0;
};

// The calling process's layout.
absl::StatusOr<ProcessLayout> ReadProcessLayout();

// A sandbox init's command line, "warden-sandbox LABEL": kept in the init's
// own memory for as long as it lives (the kernel reads it from there), and
// in anonymous memory - its stack or the heap, not a binary's .data or
// .bss: /proc/pid/cmdline reads only that (FOLL_ANON in fs/proc/base.c) and
// shows an empty command line otherwise.
struct ProcessTitle {
  static constexpr size_t kMaxLabel = 95;  // longer labels are cut
  char text[sizeof(kSandboxProcessName) + 1 + kMaxLabel];
};

// Child side. Names the calling init "warden-sandbox" and points its
// command line at `title`, filled with "warden-sandbox LABEL" (`label` may
// be null or empty: the name alone). `layout` null: the comm only.
// Without PR_SET_MM_MAP the original argument strings are overwritten, if
// `may_overwrite` (a fork server's init must not: the program it runs in
// place would inherit them).
void TitleSandboxInit(const ProcessLayout* layout, const char* label, bool may_overwrite,
                      ProcessTitle* title);

// Child side, in a program a fork server runs in place (a fork of its
// init): the command line of the process the init was cloned from again,
// and `name` (cut to 15 bytes) as its comm, as an execve of that program
// would have them.
void RestoreProgramTitle(const ProcessLayout* layout, const char* name);

}  // namespace warden
