// Builds Warden's seccomp-bpf policy with libseccomp and exports it as raw BPF.
//
// Layout of the policy (x86_64 only):
//   1. Architecture check: any syscall that is not native x86_64 - i386 via
//      int 0x80, and x32 numbers (nr | 0x40000000) - takes the bad-arch
//      action, which is the same SECCOMP_RET_USER_NOTIF as a violation.
//   2. An allowlist of plain syscalls (kAllowedSyscalls), derived from
//      `strace -f -c` of python3 (numpy/pandas/matplotlib, threads,
//      subprocess, multiprocessing, sockets), node 20 (workers,
//      child_process, net) and bash with coreutils, plus harmless neighbours.
//   3. Argument-filtered syscalls (clone, socket, ioctl, seccomp, ...), see
//      AddArgumentFilteredRules().
//   4. Errno answers for calls that runtimes probe and must survive: clone3
//      -> ENOSYS, mbind -> EPERM, socket()/socketpair() of other families
//      -> EAFNOSUPPORT.
//   5. Everything else, including the fixed denials (kDeniedSyscalls), hits
//      the default action SECCOMP_RET_USER_NOTIF and is reported by name.
//
// libseccomp cannot express "allow unless the low 32 bits equal X": it has
// no masked not-equal, and an unconditional rule for a syscall discards its
// conditional rules. So "all values except S" is spelled out as a set of
// masked-equality patterns that cover exactly the complement of S (see
// ComplementPatterns32). Int-typed arguments are always compared on their
// low 32 bits only, because the kernel ignores the upper half
// (CVE-2019-10063 is this mistake for TIOCSTI).
#include "sandbox/seccomp_policy.h"

#include <asm/unistd.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "sandbox/unique_fd.h"

namespace warden {
namespace {

// Plain allowlist. Grouped by concern; each entry is harmless on its own
// given the rest of the sandbox (private user/pid/net/ipc namespaces, no
// capabilities, rlimits, read-only runtime trees).
constexpr absl::string_view kAllowedSyscalls[] = {
    // Memory. pkey_* is used by node (V8); mlock* is bounded by
    // RLIMIT_MEMLOCK; the mempolicy pair only affects the caller (libnuma
    // probes it, e.g. in procps' ps). mbind is answered EPERM (see
    // AddArgumentFilteredRules).
    "brk", "mmap", "munmap", "mprotect", "mremap", "madvise", "msync",
    "mincore", "mlock", "mlock2", "munlock", "mlockall", "munlockall",
    "membarrier", "memfd_create", "pkey_alloc", "pkey_free", "pkey_mprotect",
    "get_mempolicy", "set_mempolicy",

    // File descriptors and I/O.
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv",
    "pwritev", "preadv2", "pwritev2", "lseek", "close", "close_range", "dup",
    "dup2", "dup3", "fcntl", "flock", "fsync", "fdatasync", "sync_file_range",
    "ftruncate", "truncate", "fallocate", "fadvise64", "readahead",
    "sendfile", "splice", "tee", "copy_file_range", "pipe", "pipe2",

    // Paths and metadata. mknod/mknodat are argument-filtered (FIFOs only).
    "open", "openat", "openat2", "creat", "stat", "fstat", "lstat",
    "newfstatat", "statx", "statfs", "fstatfs", "access", "faccessat",
    "faccessat2", "getdents", "getdents64", "getcwd", "chdir", "fchdir",
    "rename", "renameat", "renameat2", "mkdir", "mkdirat", "rmdir", "link",
    "linkat", "symlink", "symlinkat", "unlink", "unlinkat", "readlink",
    "readlinkat", "chmod", "fchmod", "fchmodat", "fchmodat2", "chown",
    "fchown", "lchown", "fchownat", "umask", "utime", "utimes", "utimensat",
    "futimesat", "getxattr", "lgetxattr", "fgetxattr", "listxattr",
    "llistxattr", "flistxattr", "setxattr", "lsetxattr", "fsetxattr",
    "removexattr", "lremovexattr", "fremovexattr",

    // Readiness and event fds (node/libuv, asyncio).
    "poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1",
    "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd",
    "eventfd2", "signalfd", "signalfd4", "timerfd_create", "timerfd_settime",
    "timerfd_gettime", "inotify_init", "inotify_init1", "inotify_add_watch",
    "inotify_rm_watch",

    // Sockets. socket/socketpair are argument-filtered (families).
    "bind", "listen", "accept", "accept4", "connect", "getsockname",
    "getpeername", "sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg",
    "recvmmsg", "shutdown", "setsockopt", "getsockopt",

    // Processes. clone is argument-filtered (no CLONE_NEW*); signals only
    // reach processes inside the sandbox's pid namespace.
    "fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4",
    "waitid", "kill", "tkill", "tgkill", "rt_sigqueueinfo",
    "rt_tgsigqueueinfo", "pidfd_open", "pidfd_send_signal", "set_tid_address",
    "set_robust_list", "rseq", "futex", "futex_waitv", "arch_prctl",

    // Signals and timers.
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend",
    "rt_sigpending", "rt_sigtimedwait", "sigaltstack", "pause", "alarm",
    "getitimer", "setitimer", "timer_create", "timer_settime",
    "timer_gettime", "timer_getoverrun", "timer_delete", "restart_syscall",

    // Time and scheduling. Raising priority needs CAP_SYS_NICE and
    // RLIMIT_RTPRIO, neither of which the sandbox has.
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep",
    "gettimeofday", "time", "times", "sched_yield", "sched_getaffinity",
    "sched_setaffinity", "sched_getparam", "sched_setparam",
    "sched_getscheduler", "sched_setscheduler", "sched_get_priority_max",
    "sched_get_priority_min", "sched_rr_get_interval", "sched_getattr",
    "getpriority", "setpriority", "ioprio_get", "ioprio_set",

    // Identity and limits (read-only, or bounded by missing capabilities).
    "getpid", "getppid", "gettid", "getpgid", "getpgrp", "setpgid", "getsid",
    "setsid", "getuid", "geteuid", "getgid", "getegid", "getresuid",
    "getresgid", "getgroups", "capget", "getrlimit", "setrlimit",
    "prlimit64", "getrusage", "sysinfo", "uname", "getcpu", "getrandom",

    // SysV shared memory and semaphores, confined to the private IPC
    // namespace. SysV message queues (msg*) stay out: msg_msg is a favourite
    // kernel heap-spray primitive and no runtime needs it.
    "shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop",
    "semctl",
};

// Fixed denials: kernel attack surface or sandbox escape primitives. They
// are not on the allowlist, so they reach the default (notify) action and
// are reported by name; they are listed so extra_allowed can never re-open
// them. io_uring is here because node 20's libuv only uses it when
// UV_USE_IO_URING=1 (and falls back cleanly when io_uring_setup fails), so
// no shipped runtime needs it.
constexpr absl::string_view kDeniedSyscalls[] = {
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
    "process_madvise", "kcmp", "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl",
    "add_key", "request_key", "mount", "umount2", "pivot_root", "chroot",
    "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree",
    "mount_setattr", "setns", "unshare", "kexec_load", "kexec_file_load",
    "init_module", "finit_module", "delete_module", "name_to_handle_at",
    "open_by_handle_at",
};

// Syscalls with rules of their own (argument checks, or mbind's errno
// answer); extra_allowed must not replace them with an unconditional allow.
constexpr absl::string_view kArgumentFilteredSyscalls[] = {
    "mbind", "clone", "clone3", "socket", "socketpair", "ioctl", "seccomp", "prctl",
    "personality", "mknod", "mknodat", "setuid", "setgid", "setreuid", "setregid", "setresuid",
    "setresgid",
};

// Every CLONE_NEW* flag. CLONE_NEWTIME (0x80) overlaps the exit-signal byte
// of clone(2); no valid signal sets that bit, so masking it is harmless.
constexpr uint64_t kCloneNewFlags = CLONE_NEWNS | CLONE_NEWCGROUP |
                                    CLONE_NEWUTS | CLONE_NEWIPC |
                                    CLONE_NEWUSER | CLONE_NEWPID |
                                    CLONE_NEWNET | CLONE_NEWTIME;

constexpr uint64_t kLow32 = 0xFFFFFFFFu;

// prctl options a runtime may use that neither widen privileges nor touch
// other processes. Anything else (PR_SET_MM, PR_SET_PTRACER, speculation
// control, ...) is a violation.
constexpr uint32_t kAllowedPrctlOptions[] = {
    PR_SET_PDEATHSIG,      PR_GET_PDEATHSIG,       PR_GET_DUMPABLE,
    PR_GET_KEEPCAPS,       PR_SET_NAME,            PR_GET_NAME,
    PR_GET_SECCOMP,        PR_SET_SECCOMP,         PR_CAPBSET_READ,
    PR_GET_TIMERSLACK,     PR_SET_TIMERSLACK,      PR_SET_CHILD_SUBREAPER,
    PR_GET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS,   PR_GET_NO_NEW_PRIVS,
    PR_GET_THP_DISABLE,    PR_SET_THP_DISABLE,     PR_GET_SPECULATION_CTRL,
    PR_SET_VMA,
};

// personality(2) values that change nothing security-relevant: PER_LINUX,
// PER_LINUX32 (uname reports i686; `setarch linux32`) and 0xffffffff
// (query). ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC and MMAP_PAGE_ZERO (the
// classic NULL-dereference exploit helper) are violations.
constexpr uint32_t kAllowedPersonalities[] = {PER_LINUX, PER_LINUX32,
                                              0xFFFFFFFFu};

constexpr uint32_t kAllowedSocketFamilies[] = {AF_UNIX, AF_INET, AF_INET6};

// IP protocols for AF_INET/AF_INET6 sockets. Others (SCTP, DCCP, ...) get
// EPROTONOSUPPORT: creating one auto-loads a rarely used protocol module,
// a recurring source of kernel bugs (e.g. CVE-2017-6074 in DCCP).
constexpr uint32_t kAllowedIpProtocols[] = {0, IPPROTO_TCP, IPPROTO_UDP};

// ioctls that are violations; compared on the low 32 bits only.
constexpr uint32_t kDeniedIoctls[] = {TIOCSTI, TIOCLINUX};

// (arg & mask) == value on the low 32 bits of an argument; the upper half
// is ignored, as the kernel ignores it for int-typed arguments.
struct MaskedValue {
  uint32_t mask;
  uint32_t value;
};

void ComplementRecursive(std::span<const uint32_t> sorted, int bit,
                         uint32_t mask, uint32_t value,
                         std::vector<MaskedValue>& out) {
  if (bit < 0) return;  // `sorted` holds exactly the value `value`.
  const uint32_t b = 1u << bit;
  auto first_one = sorted.begin();
  while (first_one != sorted.end() && (*first_one & b) == 0) ++first_one;
  std::span<const uint32_t> zeros(sorted.begin(), first_one);
  std::span<const uint32_t> ones(first_one, sorted.end());
  if (zeros.empty()) {
    out.push_back({mask | b, value});
  } else {
    ComplementRecursive(zeros, bit - 1, mask | b, value, out);
  }
  if (ones.empty()) {
    out.push_back({mask | b, value | b});
  } else {
    ComplementRecursive(ones, bit - 1, mask | b, value | b, out);
  }
}

// Returns disjoint patterns whose union is exactly the 32-bit values that
// are NOT in `values`: a binary trie over the values, emitting each missing
// branch. At most 32 * values.size() patterns.
std::vector<MaskedValue> ComplementPatterns32(std::span<const uint32_t> values) {
  std::vector<uint32_t> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::vector<MaskedValue> out;
  if (sorted.empty()) {
    out.push_back({0, 0});
    return out;
  }
  ComplementRecursive(sorted, 31, 0, 0, out);
  return out;
}

// (arg & mask) == value, on the full 64-bit register.
scmp_arg_cmp MaskedEq(unsigned arg, uint64_t mask, uint64_t value) {
  return scmp_arg_cmp{arg, SCMP_CMP_MASKED_EQ, mask, value};
}

scmp_arg_cmp Low32Equals(unsigned arg, uint32_t value) {
  return MaskedEq(arg, kLow32, value);
}

scmp_arg_cmp Masked(unsigned arg, MaskedValue mv) {
  return MaskedEq(arg, mv.mask, mv.value);
}

// Owns a libseccomp filter context.
class ScmpFilter {
 public:
  static absl::StatusOr<ScmpFilter> Create(uint32_t default_action) {
    scmp_filter_ctx ctx = seccomp_init(default_action);
    if (ctx == nullptr) {
      return absl::InternalError(
          "seccomp_init failed: libseccomp or the kernel lacks "
          "SECCOMP_RET_USER_NOTIF (needs Linux 5.0+ and libseccomp 2.5+)");
    }
    return ScmpFilter(ctx);
  }
  ScmpFilter(ScmpFilter&& other) noexcept
      : ctx_(std::exchange(other.ctx_, nullptr)) {}
  ScmpFilter& operator=(ScmpFilter&&) = delete;
  ScmpFilter(const ScmpFilter&) = delete;
  ~ScmpFilter() {
    if (ctx_ != nullptr) seccomp_release(ctx_);
  }

  scmp_filter_ctx get() const { return ctx_; }

  absl::Status SetAttr(enum scmp_filter_attr attr, uint32_t value,
                       absl::string_view what) {
    int rc = seccomp_attr_set(ctx_, attr, value);
    if (rc < 0) return absl::ErrnoToStatus(-rc, absl::StrCat("seccomp_attr_set ", what));
    return absl::OkStatus();
  }

  absl::Status Add(uint32_t action, int nr, absl::string_view name,
                   std::initializer_list<scmp_arg_cmp> args = {}) {
    int rc = seccomp_rule_add_exact_array(ctx_, action, nr, args.size(),
                                          args.size() ? args.begin() : nullptr);
    if (rc < 0) {
      return absl::ErrnoToStatus(-rc, absl::StrCat("seccomp rule for ", name));
    }
    return absl::OkStatus();
  }

 private:
  explicit ScmpFilter(scmp_filter_ctx ctx) : ctx_(ctx) {}
  scmp_filter_ctx ctx_;
};

absl::StatusOr<int> ResolveX8664(absl::string_view name) {
  std::string n(name);
  int nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, n.c_str());
  if (nr == __NR_SCMP_ERROR || nr < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' is not an x86_64 syscall known to libseccomp"));
  }
  return nr;
}

bool Contains(std::span<const absl::string_view> list, absl::string_view name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

// Allows `nr` when the low 32 bits of `arg` are one of `values`.
absl::Status AllowLow32In(ScmpFilter& f, int nr, absl::string_view name,
                          unsigned arg, std::span<const uint32_t> values) {
  for (uint32_t v : values) {
    RETURN_IF_ERROR(f.Add(SCMP_ACT_ALLOW, nr, name, {Low32Equals(arg, v)}));
  }
  return absl::OkStatus();
}

// socket(2) and socketpair(2) share one rule set: AF_UNIX as is; AF_INET and
// AF_INET6 with protocol 0/TCP/UDP (other protocols: EPROTONOSUPPORT); any
// other family: EAFNOSUPPORT, which glibc's getaddrinfo (it probes
// AF_NETLINK) and friends handle. The rule set covers every argument value,
// so socket creation never notifies.
absl::Status AddSocketRules(ScmpFilter& f, absl::string_view name) {
  ASSIGN_OR_RETURN(int nr, ResolveX8664(name));
  RETURN_IF_ERROR(f.Add(SCMP_ACT_ALLOW, nr, name, {Low32Equals(0, AF_UNIX)}));
  const auto other_protocols = ComplementPatterns32(kAllowedIpProtocols);
  for (uint32_t family : {AF_INET, AF_INET6}) {
    for (uint32_t proto : kAllowedIpProtocols) {
      RETURN_IF_ERROR(f.Add(SCMP_ACT_ALLOW, nr, name,
                            {Low32Equals(0, family), Low32Equals(2, proto)}));
    }
    for (const MaskedValue& mv : other_protocols) {
      RETURN_IF_ERROR(f.Add(SCMP_ACT_ERRNO(EPROTONOSUPPORT), nr, name,
                            {Low32Equals(0, family), Masked(2, mv)}));
    }
  }
  for (const MaskedValue& mv : ComplementPatterns32(kAllowedSocketFamilies)) {
    RETURN_IF_ERROR(
        f.Add(SCMP_ACT_ERRNO(EAFNOSUPPORT), nr, name, {Masked(0, mv)}));
  }
  return absl::OkStatus();
}

absl::Status AddArgumentFilteredRules(ScmpFilter& f) {
  // clone: fork, vfork-style spawns and threads, but no new namespaces.
  RETURN_IF_ERROR(
      f.Add(SCMP_ACT_ALLOW, SCMP_SYS(clone), "clone",
            {MaskedEq(0, kCloneNewFlags, 0)}));
  // clone3 keeps its flags in a struct behind a pointer, which BPF cannot
  // read. ENOSYS makes glibc (2.34+: pthread_create, posix_spawn, fork)
  // fall back to clone(2), which the rule above inspects.
  RETURN_IF_ERROR(
      f.Add(SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), "clone3"));
  // mbind: Debian's pthread OpenBLAS (numpy's BLAS when libopenblas0-pthread
  // is installed) binds its buffers to NUMA nodes at import and ignores a
  // failure. EPERM is what it gets in a container without CAP_SYS_NICE
  // (Docker's default profile); page placement is not the sandbox's to set.
  RETURN_IF_ERROR(f.Add(SCMP_ACT_ERRNO(EPERM), SCMP_SYS(mbind), "mbind"));

  RETURN_IF_ERROR(AddSocketRules(f, "socket"));
  RETURN_IF_ERROR(AddSocketRules(f, "socketpair"));

  // ioctl: everything except TIOCSTI/TIOCLINUX (terminal input injection),
  // judged on the low 32 bits like the kernel does (CVE-2019-10063).
  for (const MaskedValue& mv : ComplementPatterns32(kDeniedIoctls)) {
    RETURN_IF_ERROR(
        f.Add(SCMP_ACT_ALLOW, SCMP_SYS(ioctl), "ioctl", {Masked(1, mv)}));
  }

  // seccomp: a process may stack more filters on itself, but may not create
  // a notification listener (a user-space syscall emulator for its own
  // children; the kernel would refuse a second listener with EBUSY anyway,
  // this keeps it a named violation) nor opt out of the speculative store
  // bypass mitigation. `op` and `flags` are unsigned int: low 32 bits only.
  for (uint32_t op : {SECCOMP_SET_MODE_STRICT, SECCOMP_GET_ACTION_AVAIL,
                      SECCOMP_GET_NOTIF_SIZES}) {
    RETURN_IF_ERROR(
        f.Add(SCMP_ACT_ALLOW, SCMP_SYS(seccomp), "seccomp", {Low32Equals(0, op)}));
  }
  RETURN_IF_ERROR(f.Add(
      SCMP_ACT_ALLOW, SCMP_SYS(seccomp), "seccomp",
      {Low32Equals(0, SECCOMP_SET_MODE_FILTER),
       MaskedEq(1, SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_SPEC_ALLOW,
                0)}));

  RETURN_IF_ERROR(
      AllowLow32In(f, SCMP_SYS(prctl), "prctl", 0, kAllowedPrctlOptions));
  RETURN_IF_ERROR(AllowLow32In(f, SCMP_SYS(personality), "personality", 0,
                               kAllowedPersonalities));

  // The set*id family only to the ids the program has already (the
  // sandbox user's; -1 keeps one as it is): a no-op the kernel allows
  // anyone, which busybox (Alpine images' sh) makes at every start to drop
  // set-id privileges it never had. uid_t is 32 bits: low 32 bits only.
  const uint32_t own = kSandboxId, keep = 0xFFFFFFFFu;
  for (const auto& [nr, name] : {std::pair{SCMP_SYS(setuid), "setuid"}, std::pair{SCMP_SYS(setgid), "setgid"}}) {
    RETURN_IF_ERROR(f.Add(SCMP_ACT_ALLOW, nr, name, {Low32Equals(0, own)}));
  }
  for (const auto& [nr, name] :
       {std::pair{SCMP_SYS(setreuid), "setreuid"}, std::pair{SCMP_SYS(setregid), "setregid"}}) {
    for (uint32_t a : {own, keep}) {
      for (uint32_t b : {own, keep}) {
        RETURN_IF_ERROR(f.Add(SCMP_ACT_ALLOW, nr, name, {Low32Equals(0, a), Low32Equals(1, b)}));
      }
    }
  }
  for (const auto& [nr, name] :
       {std::pair{SCMP_SYS(setresuid), "setresuid"}, std::pair{SCMP_SYS(setresgid), "setresgid"}}) {
    for (uint32_t a : {own, keep}) {
      for (uint32_t b : {own, keep}) {
        for (uint32_t c : {own, keep}) {
          RETURN_IF_ERROR(
              f.Add(SCMP_ACT_ALLOW, nr, name, {Low32Equals(0, a), Low32Equals(1, b), Low32Equals(2, c)}));
        }
      }
    }
  }

  // mknod: FIFOs only (mkfifo). mode is umode_t; S_IFMT lies in its low bits.
  RETURN_IF_ERROR(
      f.Add(SCMP_ACT_ALLOW, SCMP_SYS(mknod), "mknod",
            {MaskedEq(1, S_IFMT, S_IFIFO)}));
  RETURN_IF_ERROR(
      f.Add(SCMP_ACT_ALLOW, SCMP_SYS(mknodat), "mknodat",
            {MaskedEq(2, S_IFMT, S_IFIFO)}));
  return absl::OkStatus();
}

absl::Status CheckExtraAllowed(absl::string_view name) {
  if (Contains(kDeniedSyscalls, name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "seccomp extra_allowed names '", name,
        "', which Warden always denies; remove it from the configuration"));
  }
  if (Contains(kArgumentFilteredSyscalls, name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "seccomp extra_allowed names '", name,
        "', which the policy already answers with rules of its own "
        "(argument checks or an errno); an unconditional allow would drop "
        "them, so remove it"));
  }
  return absl::OkStatus();
}

// Writes the compiled filter into a memfd and reads it back.
absl::StatusOr<SeccompProgram> ExportBpf(const ScmpFilter& f) {
  UniqueFd fd(memfd_create("warden-seccomp-bpf", MFD_CLOEXEC));
  if (!fd) return absl::ErrnoToStatus(errno, "memfd_create for the seccomp export");
  int rc = seccomp_export_bpf(f.get(), fd.get());
  if (rc < 0) return absl::ErrnoToStatus(-rc, "seccomp_export_bpf");
  struct stat st = {};
  if (fstat(fd.get(), &st) != 0) return absl::ErrnoToStatus(errno, "fstat seccomp memfd");
  const size_t bytes = static_cast<size_t>(st.st_size);
  if (bytes == 0 || bytes % sizeof(sock_filter) != 0) {
    return absl::InternalError(absl::StrCat(
        "seccomp_export_bpf wrote ", bytes, " bytes, not whole BPF instructions"));
  }
  SeccompProgram program;
  program.instructions.resize(bytes / sizeof(sock_filter));
  auto* out = reinterpret_cast<char*>(program.instructions.data());
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = pread(fd.get(), out + done, bytes - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, "reading the seccomp memfd");
    if (n == 0) return absl::InternalError("seccomp memfd shorter than its size");
    done += static_cast<size_t>(n);
  }
  if (program.instructions.size() > BPF_MAXINSNS) {
    return absl::InternalError(absl::StrCat(
        "seccomp policy compiles to ", program.instructions.size(),
        " BPF instructions; the kernel accepts at most ", BPF_MAXINSNS));
  }
  return program;
}

// The libseccomp token and a short name for an AUDIT_ARCH_* value.
struct ArchInfo {
  absl::string_view name;
  uint32_t scmp_token;  // 0 when libseccomp has no table for it here.
};

ArchInfo ArchFor(uint32_t audit_arch) {
  switch (audit_arch) {
    case AUDIT_ARCH_X86_64: return {"x86_64", SCMP_ARCH_X86_64};
    case AUDIT_ARCH_I386: return {"i386", SCMP_ARCH_X86};
    case SCMP_ARCH_X32: return {"x32", SCMP_ARCH_X32};
    case AUDIT_ARCH_AARCH64: return {"aarch64", SCMP_ARCH_AARCH64};
    case AUDIT_ARCH_ARM: return {"arm", SCMP_ARCH_ARM};
    case AUDIT_ARCH_RISCV64: return {"riscv64", SCMP_ARCH_RISCV64};
    default: return {"", 0};
  }
}

std::string ArchLabel(uint32_t audit_arch) {
  ArchInfo info = ArchFor(audit_arch);
  if (!info.name.empty()) return std::string(info.name);
  return absl::StrFormat("arch_0x%08x", audit_arch);
}

}  // namespace

absl::StatusOr<SeccompProgram> BuildSeccompPolicy(const SeccompOptions& options) {
  const uint32_t native = seccomp_arch_native();
  if (native != SCMP_ARCH_X86_64) {
    return absl::UnimplementedError(absl::StrFormat(
        "Warden's seccomp policy is written for x86_64; this host's "
        "architecture is %s; run wardend on an x86_64 host",
        ArchLabel(native)));
  }
  ASSIGN_OR_RETURN(ScmpFilter filter, ScmpFilter::Create(SCMP_ACT_NOTIFY));
  // Foreign ABIs are violations too. libseccomp rejects x32 numbers
  // (nr >= 0x40000000) on an x86_64-only filter with this same action.
  RETURN_IF_ERROR(filter.SetAttr(SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_NOTIFY,
                                 "ACT_BADARCH=NOTIFY"));
  // The child installs the program itself, after PR_SET_NO_NEW_PRIVS.
  RETURN_IF_ERROR(filter.SetAttr(SCMP_FLTATR_CTL_NNP, 0, "CTL_NNP=0"));
  // Binary search over syscall numbers instead of a linear chain.
  RETURN_IF_ERROR(filter.SetAttr(SCMP_FLTATR_CTL_OPTIMIZE, 2, "CTL_OPTIMIZE=2"));

  for (absl::string_view name : kAllowedSyscalls) {
    ASSIGN_OR_RETURN(int nr, ResolveX8664(name));
    RETURN_IF_ERROR(filter.Add(SCMP_ACT_ALLOW, nr, name));
  }
  RETURN_IF_ERROR(AddArgumentFilteredRules(filter));
  for (const std::string& name : options.extra_allowed) {
    RETURN_IF_ERROR(CheckExtraAllowed(name));
    ASSIGN_OR_RETURN(int nr, ResolveX8664(name));
    RETURN_IF_ERROR(filter.Add(SCMP_ACT_ALLOW, nr, name));
  }
  return ExportBpf(filter);
}

std::string SyscallName(int nr, uint32_t audit_arch) {
  // x32 syscalls arrive with AUDIT_ARCH_X86_64 and bit 30 set in the number.
  if (audit_arch == AUDIT_ARCH_X86_64 && nr >= 0 &&
      (nr & __X32_SYSCALL_BIT) != 0) {
    audit_arch = SCMP_ARCH_X32;
  }
  const ArchInfo arch = ArchFor(audit_arch);
  const int plain_nr = audit_arch == SCMP_ARCH_X32 ? nr & ~__X32_SYSCALL_BIT : nr;
  std::string name;
  if (arch.scmp_token != 0 && nr >= 0) {
    // Returns a malloc()ed string, or NULL for an unknown number.
    if (char* resolved = seccomp_syscall_resolve_num_arch(arch.scmp_token, nr)) {
      name = resolved;
      free(resolved);
    }
  }
  if (name.empty()) return absl::StrCat(ArchLabel(audit_arch), ":", plain_nr);
  if (audit_arch == AUDIT_ARCH_X86_64) return name;
  return absl::StrCat(arch.name, ":", name);
}

}  // namespace warden
