// The seccomp-bpf policy every sandboxed process runs under.
//
// Built with libseccomp in the supervisor, ahead of time, and exported as a
// raw BPF program so the child installs it with one seccomp(2) call and no
// allocation. The policy is an allowlist for the runtimes Warden ships
// (python3 with numpy/pandas/matplotlib, node, bash with coreutils). Anything
// else - and a fixed set of explicitly dangerous calls - triggers
// SECCOMP_RET_USER_NOTIF: the offending thread blocks, the supervisor reads
// the notification (which names the syscall and its arch) and kills the
// sandbox, so a violation is reported by name. If no supervisor listens the
// kernel fails the call with ENOSYS: the policy fails closed either way.
#pragma once

#include <linux/filter.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace warden {

struct SeccompProgram {
  std::vector<sock_filter> instructions;
};

// The ids a sandbox's program runs as inside its user namespace
// (FilesystemSpec's sandbox_uid and sandbox_gid by default): the set*id
// calls the policy lets through are those to these ids only.
inline constexpr uint32_t kSandboxId = 1000;

struct SeccompOptions {
  // Extra syscalls (by name) to allow on top of the default allowlist.
  std::vector<std::string> extra_allowed;
};

// Builds the default policy for x86_64 (other arches: an error naming it).
absl::StatusOr<SeccompProgram> BuildSeccompPolicy(const SeccompOptions& options = {});

// Names a syscall from a seccomp notification's (nr, arch): "ptrace" for
// native x86_64; "i386:ptrace" for the i386 ABI; "x32:getpid" for an x32
// number (nr | 0x40000000 under AUDIT_ARCH_X86_64); and "x86_64:1234",
// "i386:999" or "arch_0x40000028:12" when there is no name.
std::string SyscallName(int nr, uint32_t audit_arch);

}  // namespace warden
