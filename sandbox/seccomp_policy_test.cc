// Tests for the seccomp policy: the exported BPF is evaluated directly (arch
// checks, argument filters, over many argument values) and installed for
// real in forked children that a minimal user-notification supervisor
// watches, so each violation is seen by name - exactly as wardend sees it.
// No root needed: the child sets PR_SET_NO_NEW_PRIVS before seccomp(2).
#include "sandbox/seccomp_policy.h"

#include <asm/unistd.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/io_uring.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace warden {
namespace {

const SeccompProgram& Policy() {
  static const SeccompProgram* program = [] {
    auto built = BuildSeccompPolicy();
    if (!built.ok()) {
      ADD_FAILURE() << built.status();
      return new SeccompProgram();
    }
    return new SeccompProgram(*std::move(built));
  }();
  return *program;
}

// ---------------------------------------------------------------------------
// A classic-BPF interpreter for seccomp programs, so the filter can be probed
// with inputs the kernel cannot produce here (i386 calls when IA32 emulation
// is off) and swept over many argument values cheaply.

uint32_t EvaluateBpf(const SeccompProgram& program, const seccomp_data& data) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(&data);
  uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {};
  const auto& insns = program.instructions;
  for (size_t pc = 0; pc < insns.size(); ++pc) {
    const sock_filter& in = insns[pc];
    const uint32_t src = BPF_SRC(in.code) == BPF_X ? x : in.k;
    switch (BPF_CLASS(in.code)) {
      case BPF_LD:
        if (in.code == (BPF_LD | BPF_W | BPF_ABS)) {
          if (in.k + 4 > sizeof(data)) ADD_FAILURE() << "load out of range";
          std::memcpy(&a, bytes + in.k, 4);
        } else if (BPF_MODE(in.code) == BPF_IMM) {
          a = in.k;
        } else if (BPF_MODE(in.code) == BPF_MEM) {
          a = mem[in.k];
        } else {
          ADD_FAILURE() << "unsupported load " << in.code;
          return 0;
        }
        break;
      case BPF_LDX:
        if (BPF_MODE(in.code) == BPF_IMM) x = in.k;
        else if (BPF_MODE(in.code) == BPF_MEM) x = mem[in.k];
        else { ADD_FAILURE() << "unsupported ldx " << in.code; return 0; }
        break;
      case BPF_ST: mem[in.k] = a; break;
      case BPF_STX: mem[in.k] = x; break;
      case BPF_ALU:
        switch (BPF_OP(in.code)) {
          case BPF_ADD: a += src; break;
          case BPF_SUB: a -= src; break;
          case BPF_MUL: a *= src; break;
          case BPF_DIV: if (src == 0) return 0; a /= src; break;
          case BPF_MOD: if (src == 0) return 0; a %= src; break;
          case BPF_OR: a |= src; break;
          case BPF_AND: a &= src; break;
          case BPF_XOR: a ^= src; break;
          case BPF_LSH: a <<= src; break;
          case BPF_RSH: a >>= src; break;
          case BPF_NEG: a = -a; break;
          default: ADD_FAILURE() << "unsupported alu " << in.code; return 0;
        }
        break;
      case BPF_JMP: {
        if (BPF_OP(in.code) == BPF_JA) { pc += in.k; break; }
        bool taken = false;
        switch (BPF_OP(in.code)) {
          case BPF_JEQ: taken = a == src; break;
          case BPF_JGT: taken = a > src; break;
          case BPF_JGE: taken = a >= src; break;
          case BPF_JSET: taken = (a & src) != 0; break;
          default: ADD_FAILURE() << "unsupported jmp " << in.code; return 0;
        }
        pc += taken ? in.jt : in.jf;
        break;
      }
      case BPF_RET: return BPF_RVAL(in.code) == BPF_A ? a : in.k;
      case BPF_MISC:
        if (BPF_MISCOP(in.code) == BPF_TAX) x = a; else a = x;
        break;
    }
  }
  ADD_FAILURE() << "fell off the end of the program";
  return 0;
}

uint32_t Eval(int nr, std::initializer_list<uint64_t> args = {},
              uint32_t arch = AUDIT_ARCH_X86_64) {
  seccomp_data data = {};
  data.nr = nr;
  data.arch = arch;
  size_t i = 0;
  for (uint64_t arg : args) data.args[i++] = arg;
  return EvaluateBpf(Policy(), data);
}

constexpr uint32_t kAllow = SECCOMP_RET_ALLOW;
constexpr uint32_t kNotify = SECCOMP_RET_USER_NOTIF;
constexpr uint32_t Errno(int e) { return SECCOMP_RET_ERRNO | static_cast<uint32_t>(e); }

TEST(SeccompPolicyTest, BuildsNonEmptyProgramWithinKernelLimit) {
  auto program = BuildSeccompPolicy();
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_GT(program->instructions.size(), 10u);
  EXPECT_LE(program->instructions.size(), static_cast<size_t>(BPF_MAXINSNS));
  // The arch check comes first: load seccomp_data.arch.
  EXPECT_EQ(program->instructions[0].code, BPF_LD | BPF_W | BPF_ABS);
  EXPECT_EQ(program->instructions[0].k, offsetof(seccomp_data, arch));
}

TEST(SeccompPolicyTest, RejectsExtraAllowedThatWouldReopenDenials) {
  for (const char* name : {"ptrace", "io_uring_setup", "mount", "unshare"}) {
    auto program = BuildSeccompPolicy({.extra_allowed = {name}});
    EXPECT_EQ(program.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_PRED_FORMAT2(::testing::IsSubstring, name, std::string(program.status().message()));
  }
}

TEST(SeccompPolicyTest, RejectsExtraAllowedThatWouldDropArgumentChecks) {
  for (const char* name : {"clone", "clone3", "socket", "ioctl", "seccomp", "mbind"}) {
    auto program = BuildSeccompPolicy({.extra_allowed = {name}});
    EXPECT_EQ(program.status().code(), absl::StatusCode::kInvalidArgument) << name;
  }
}

TEST(SeccompPolicyTest, RejectsUnknownExtraAllowed) {
  auto program = BuildSeccompPolicy({.extra_allowed = {"not_a_syscall"}});
  EXPECT_EQ(program.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "not_a_syscall",
                      std::string(program.status().message()));
}

TEST(SeccompPolicyTest, ExtraAllowedSyscallIsAllowed) {
  EXPECT_EQ(Eval(__NR_syslog), kNotify);
  auto program = BuildSeccompPolicy({.extra_allowed = {"syslog"}});
  ASSERT_TRUE(program.ok()) << program.status();
  seccomp_data data = {};
  data.nr = __NR_syslog;
  data.arch = AUDIT_ARCH_X86_64;
  EXPECT_EQ(EvaluateBpf(*program, data), kAllow);
}

TEST(SyscallNameTest, NamesNativeCompatAndUnknownNumbers) {
  EXPECT_EQ(SyscallName(__NR_ptrace, AUDIT_ARCH_X86_64), "ptrace");
  EXPECT_EQ(SyscallName(__NR_write, AUDIT_ARCH_X86_64), "write");
  EXPECT_EQ(SyscallName(26, AUDIT_ARCH_I386), "i386:ptrace");
  EXPECT_EQ(SyscallName(20, AUDIT_ARCH_I386), "i386:getpid");
  EXPECT_EQ(SyscallName(__NR_getpid | __X32_SYSCALL_BIT, AUDIT_ARCH_X86_64),
            "x32:getpid");
  EXPECT_EQ(SyscallName(4000 | __X32_SYSCALL_BIT, AUDIT_ARCH_X86_64), "x32:4000");
  EXPECT_EQ(SyscallName(4000, AUDIT_ARCH_X86_64), "x86_64:4000");
  EXPECT_EQ(SyscallName(4000, AUDIT_ARCH_I386), "i386:4000");
  EXPECT_EQ(SyscallName(12, 0x12345678), "arch_0x12345678:12");
}

// --- The filter as BPF ------------------------------------------------------

TEST(SeccompBpfTest, ForeignArchitecturesNotify) {
  for (uint32_t arch : {static_cast<uint32_t>(AUDIT_ARCH_I386),
                        static_cast<uint32_t>(AUDIT_ARCH_AARCH64),
                        static_cast<uint32_t>(AUDIT_ARCH_ARM), 0x4000003eu, 0u}) {
    for (int nr : {0, 1, 20, 39, 101, 172}) {
      EXPECT_EQ(Eval(nr, {}, arch), kNotify) << std::hex << arch << " nr " << std::dec << nr;
    }
  }
}

TEST(SeccompBpfTest, X32NumbersNotifyEvenForAllowedCalls) {
  for (int nr : {__NR_read, __NR_write, __NR_getpid, __NR_exit_group, 512, 547}) {
    ASSERT_EQ(Eval(nr | __X32_SYSCALL_BIT), kNotify) << nr;
  }
  EXPECT_EQ(Eval(__NR_getpid), kAllow);
}

TEST(SeccompBpfTest, DeniedSyscallsNotify) {
  for (int nr : {__NR_ptrace, __NR_process_vm_readv, __NR_process_vm_writev,
                 __NR_bpf, __NR_perf_event_open, __NR_userfaultfd,
                 __NR_io_uring_setup, __NR_io_uring_enter, __NR_io_uring_register,
                 __NR_keyctl, __NR_add_key, __NR_request_key, __NR_mount,
                 __NR_umount2, __NR_pivot_root, __NR_fsopen, __NR_fsconfig,
                 __NR_fsmount, __NR_fspick, __NR_move_mount, __NR_open_tree,
                 __NR_mount_setattr, __NR_setns, __NR_unshare, __NR_kexec_load,
                 __NR_kexec_file_load, __NR_init_module, __NR_finit_module,
                 __NR_delete_module}) {
    EXPECT_EQ(Eval(nr), kNotify) << SyscallName(nr, AUDIT_ARCH_X86_64);
  }
}

TEST(SeccompBpfTest, IoctlDeniesTiocstiAndTioclinuxOnLow32Bits) {
  for (uint64_t high : {0ull, 1ull, 0x80000000ull, 0xFFFFFFFFull}) {
    EXPECT_EQ(Eval(__NR_ioctl, {0, high << 32 | TIOCSTI}), kNotify) << high;
    EXPECT_EQ(Eval(__NR_ioctl, {0, high << 32 | TIOCLINUX}), kNotify) << high;
  }
  std::vector<uint64_t> allowed = {TCGETS, TCSETS, TIOCGWINSZ, FIONREAD, FIOCLEX,
                                   TIOCSTI - 1, TIOCSTI + 1, TIOCLINUX - 1,
                                   TIOCLINUX + 1, 0, 0xFFFFFFFF,
                                   0x100000000ull | TCGETS};
  std::mt19937_64 rng(42);
  for (int i = 0; i < 20000; ++i) {
    uint64_t v = rng();
    if ((v & 0xFFFFFFFF) != TIOCSTI && (v & 0xFFFFFFFF) != TIOCLINUX) allowed.push_back(v);
  }
  for (uint64_t v : allowed) ASSERT_EQ(Eval(__NR_ioctl, {0, v}), kAllow) << std::hex << v;
}

TEST(SeccompBpfTest, SocketFamiliesAndProtocols) {
  for (int nr : {__NR_socket, __NR_socketpair}) {
    for (uint64_t high : {0ull, 1ull << 32}) {
      for (uint32_t family = 0; family < 300; ++family) {
        uint32_t want = (family == AF_UNIX || family == AF_INET || family == AF_INET6)
                            ? kAllow : Errno(EAFNOSUPPORT);
        ASSERT_EQ(Eval(nr, {high | family, SOCK_STREAM, 0}), want) << family;
      }
      for (uint32_t family : {AF_INET, AF_INET6}) {
        for (uint32_t proto = 0; proto < 300; ++proto) {
          uint32_t want = (proto == 0 || proto == IPPROTO_TCP || proto == IPPROTO_UDP)
                              ? kAllow : Errno(EPROTONOSUPPORT);
          ASSERT_EQ(Eval(nr, {family, SOCK_DGRAM, high | proto}), want) << proto;
        }
      }
      EXPECT_EQ(Eval(nr, {high | 0x80000000u, SOCK_STREAM, 0}), Errno(EAFNOSUPPORT));
      EXPECT_EQ(Eval(nr, {high | 0xFFFFFFFFu, SOCK_STREAM, 0}), Errno(EAFNOSUPPORT));
    }
  }
}

TEST(SeccompBpfTest, CloneAllowsThreadsAndForkButNoNamespaces) {
  const uint64_t thread = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND |
                          CLONE_THREAD | CLONE_SYSVSEM | CLONE_SETTLS |
                          CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID;
  EXPECT_EQ(Eval(__NR_clone, {thread}), kAllow);
  EXPECT_EQ(Eval(__NR_clone, {CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD}), kAllow);
  EXPECT_EQ(Eval(__NR_clone, {CLONE_VM | CLONE_VFORK | SIGCHLD}), kAllow);
  for (uint64_t flag : {CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
                        CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWTIME}) {
    EXPECT_EQ(Eval(__NR_clone, {flag | SIGCHLD}), kNotify) << std::hex << flag;
    EXPECT_EQ(Eval(__NR_clone, {0xFFFFFFFF00000000ull | flag | thread}), kNotify);
  }
  EXPECT_EQ(Eval(__NR_clone3, {0, 88}), Errno(ENOSYS));
}

TEST(SeccompBpfTest, MbindIsEpermNotAViolation) {
  EXPECT_EQ(Eval(__NR_mbind, {0, 4096, 0, 0, 0, 0}), Errno(EPERM));
  EXPECT_EQ(Eval(__NR_set_mempolicy, {0, 0, 0}), kAllow);
}

TEST(SeccompBpfTest, SeccompListenerAndPersonalityChecksUseLow32Bits) {
  EXPECT_EQ(Eval(__NR_seccomp, {SECCOMP_SET_MODE_FILTER, 0, 0}), kAllow);
  EXPECT_EQ(Eval(__NR_seccomp, {SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC}), kAllow);
  EXPECT_EQ(Eval(__NR_seccomp, {SECCOMP_GET_ACTION_AVAIL, 0}), kAllow);
  EXPECT_EQ(Eval(__NR_seccomp, {SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER}),
            kNotify);
  EXPECT_EQ(Eval(__NR_seccomp, {1ull << 32 | SECCOMP_SET_MODE_FILTER,
                                1ull << 32 | SECCOMP_FILTER_FLAG_NEW_LISTENER}),
            kNotify);
  EXPECT_EQ(Eval(__NR_seccomp, {SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_SPEC_ALLOW}),
            kNotify);
  EXPECT_EQ(Eval(__NR_seccomp, {4, 0}), kNotify);  // unknown future op
  EXPECT_EQ(Eval(__NR_personality, {0xFFFFFFFF}), kAllow);
  EXPECT_EQ(Eval(__NR_personality, {PER_LINUX}), kAllow);
  for (uint64_t p : std::initializer_list<uint64_t>{ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, MMAP_PAGE_ZERO,
                     1ull << 32 | MMAP_PAGE_ZERO}) {
    EXPECT_EQ(Eval(__NR_personality, {p}), kNotify) << std::hex << p;
  }
  EXPECT_EQ(Eval(__NR_prctl, {PR_SET_NAME}), kAllow);
  EXPECT_EQ(Eval(__NR_prctl, {PR_SET_PTRACER}), kNotify);
  EXPECT_EQ(Eval(__NR_prctl, {PR_SET_MM}), kNotify);
  EXPECT_EQ(Eval(__NR_mknodat, {0, 0, S_IFIFO | 0600}), kAllow);
  EXPECT_EQ(Eval(__NR_mknodat, {0, 0, S_IFCHR | 0600}), kNotify);
}

TEST(SeccompBpfTest, SetIdCallsAreAllowedOnlyToTheSandboxUsersOwnIds) {
  const uint64_t own = kSandboxId, keep = 0xFFFFFFFFu;
  EXPECT_EQ(Eval(__NR_setuid, {own}), kAllow);
  EXPECT_EQ(Eval(__NR_setgid, {1ull << 32 | own}), kAllow);  // uid_t: the low 32 bits
  EXPECT_EQ(Eval(__NR_setuid, {0}), kNotify);
  EXPECT_EQ(Eval(__NR_setgid, {own + 1}), kNotify);
  EXPECT_EQ(Eval(__NR_setresuid, {own, keep, own}), kAllow);
  EXPECT_EQ(Eval(__NR_setresuid, {own, 0, own}), kNotify);
  EXPECT_EQ(Eval(__NR_setresgid, {keep, keep, keep}), kAllow);
  EXPECT_EQ(Eval(__NR_setreuid, {keep, own}), kAllow);
  EXPECT_EQ(Eval(__NR_setregid, {0, own}), kNotify);
  EXPECT_EQ(Eval(__NR_setgroups, {0, 0}), kNotify);
}

// --- The filter in the kernel, under a user-notification supervisor --------

struct RunReport {
  std::vector<std::string> violations;  // SyscallName() of each notification
  bool exited = false;
  int exit_code = -1;
  int term_signal = 0;
  bool timed_out = false;
  std::string setup_error;
  std::string output;  // the child's stdout and stderr, truncated

  bool CleanExit() const {
    return violations.empty() && setup_error.empty() && !timed_out && exited &&
           exit_code == 0;
  }
  std::string Describe() const {
    std::string s = absl::StrCat(
        "violations: [", absl::StrJoin(violations, ", "), "]",
        exited ? absl::StrCat("; exit ", exit_code)
               : absl::StrCat("; signal ", term_signal),
        timed_out ? "; TIMED OUT" : "");
    if (!setup_error.empty()) absl::StrAppend(&s, "; setup error: ", setup_error);
    if (!output.empty()) absl::StrAppend(&s, "\n--- output ---\n", output);
    return s;
  }
};

// Exit codes the child uses when it fails before running its payload.
constexpr int kExitNoNewPrivs = 210;
constexpr int kExitSeccomp = 211;
constexpr int kExitSendFd = 212;
constexpr int kExitExec = 213;

bool SendFd(int sock, int fd) {
  char byte = 'L';
  iovec iov = {&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
  return sendmsg(sock, &msg, MSG_NOSIGNAL) == 1;
}

int ReceiveFd(int sock) {
  char byte = 0;
  iovec iov = {&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC); while (n < 0 && errno == EINTR);
  if (n != 1) return -1;
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  if (cmsg == nullptr || cmsg->cmsg_type != SCM_RIGHTS) return -1;
  int fd;
  std::memcpy(&fd, CMSG_DATA(cmsg), sizeof(int));
  return fd;
}

// Forks a child in its own process group that installs the policy exactly
// the way the sandbox does (no_new_privs, then seccomp(2) with
// NEW_LISTENER), hands the listener to us and runs `payload`, which must
// not return (it _exits or execs). Every notification is recorded by name
// and kills the child's process group, as wardend's monitor does.
RunReport Supervise(const std::function<void()>& payload,
                    int timeout_seconds = 120) {
  RunReport report;
  const SeccompProgram& policy = Policy();
  sock_fprog prog = {static_cast<unsigned short>(policy.instructions.size()),
                     const_cast<sock_filter*>(policy.instructions.data())};
  int socks[2], out[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, socks) != 0 ||
      pipe2(out, O_CLOEXEC) != 0) {
    report.setup_error = strerror(errno);
    return report;
  }
  fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    close(socks[0]);
    close(out[0]);
    setpgid(0, 0);
    dup2(out[1], STDOUT_FILENO);
    dup2(out[1], STDERR_FILENO);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(kExitNoNewPrivs);
    int listener = static_cast<int>(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                                            SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog));
    if (listener < 0) _exit(kExitSeccomp);
    if (!SendFd(socks[1], listener)) _exit(kExitSendFd);
    close(listener);
    close(socks[1]);
    payload();
    _exit(kExitExec);
  }
  close(socks[1]);
  close(out[1]);
  if (pid < 0) {
    report.setup_error = absl::StrCat("fork: ", strerror(errno));
    close(socks[0]);
    close(out[0]);
    return report;
  }
  setpgid(pid, pid);  // also done by the child; whichever runs first wins
  auto kill_group = [&] {
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
  };

  int listener = ReceiveFd(socks[0]);
  close(socks[0]);
  if (listener < 0) report.setup_error = "child sent no seccomp listener";
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    report.setup_error = absl::StrCat("pidfd_open: ", strerror(errno));
    kill_group();
  }

  seccomp_notif_sizes sizes = {};
  syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes);
  std::vector<char> notif_buf(std::max<size_t>(sizes.seccomp_notif, sizeof(seccomp_notif)));

  auto read_output = [&](int fd) {
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0 && report.output.size() < (1 << 20)) report.output.append(buf, n);
    return n;
  };
  auto receive_notification = [&] {
    std::fill(notif_buf.begin(), notif_buf.end(), 0);
    auto* notif = reinterpret_cast<seccomp_notif*>(notif_buf.data());
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, notif) != 0) return;  // target died
    report.violations.push_back(SyscallName(notif->data.nr, notif->data.arch));
    kill(static_cast<pid_t>(notif->pid), SIGKILL);
    kill_group();
  };

  timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  int out_fd = out[0];
  int listener_to_poll = listener;  // -1 once it reports POLLHUP
  bool child_done = listener < 0 || pidfd < 0;
  while (!child_done) {
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long remaining_ms = (start.tv_sec + timeout_seconds - now.tv_sec) * 1000 +
                        (start.tv_nsec - now.tv_nsec) / 1000000;
    if (remaining_ms <= 0) {
      report.timed_out = true;
      kill_group();
      break;
    }
    pollfd fds[3] = {{listener_to_poll, POLLIN, 0}, {pidfd, POLLIN, 0}, {out_fd, POLLIN, 0}};
    int n = poll(fds, 3, static_cast<int>(remaining_ms));
    if (n < 0 && errno == EINTR) continue;
    if (fds[0].revents & POLLIN) receive_notification();
    else if (fds[0].revents & (POLLHUP | POLLERR)) listener_to_poll = -1;
    if (fds[2].revents & (POLLIN | POLLHUP)) {
      if (read_output(out_fd) <= 0) { close(out_fd); out_fd = -1; }
    }
    if (fds[1].revents & POLLIN) child_done = true;
  }
  // The child is gone; take notifications still queued, then stop stragglers
  // (e.g. pool workers) and collect their remaining output.
  if (listener >= 0) {
    pollfd pending = {listener, POLLIN, 0};
    while (poll(&pending, 1, 0) == 1 && (pending.revents & POLLIN)) receive_notification();
  }
  kill(-pid, SIGKILL);
  while (out_fd >= 0) {
    pollfd p = {out_fd, POLLIN, 0};
    if (poll(&p, 1, 5000) <= 0 || read_output(out_fd) <= 0) {
      close(out_fd);
      out_fd = -1;
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (WIFEXITED(status)) {
    report.exited = true;
    report.exit_code = WEXITSTATUS(status);
    switch (report.exit_code) {
      case kExitNoNewPrivs: report.setup_error = "PR_SET_NO_NEW_PRIVS failed"; break;
      case kExitSeccomp: report.setup_error = "seccomp(SET_MODE_FILTER, NEW_LISTENER) failed"; break;
      case kExitSendFd: report.setup_error = "sending the listener failed"; break;
      default: break;
    }
  } else if (WIFSIGNALED(status)) {
    report.term_signal = WTERMSIG(status);
  }
  if (listener >= 0) close(listener);
  if (pidfd >= 0) close(pidfd);
  return report;
}

// Runs `body` in the confined child; its return value is the exit code.
RunReport RunUnderPolicy(int (*body)()) {
  return Supervise([body] { _exit(body()); });
}

RunReport RunProgramUnderPolicy(const std::vector<std::string>& argv,
                                const std::vector<std::string>& env) {
  std::vector<char*> c_argv, c_env;
  for (const auto& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
  for (const auto& e : env) c_env.push_back(const_cast<char*>(e.c_str()));
  c_argv.push_back(nullptr);
  c_env.push_back(nullptr);
  return Supervise([&] { execve(c_argv[0], c_argv.data(), c_env.data()); });
}

// 0 when the call failed with `want`, else errno (or 254 if it succeeded).
int ExpectErrno(long rc, int want) {
  if (rc != -1) return 254;
  return errno == want ? 0 : errno;
}

int ExpectOk(long rc) { return rc >= 0 ? 0 : (errno ? errno : 253); }

// --- Named violations -------------------------------------------------------

struct ViolationCase {
  const char* test_name;
  const char* expected;  // SyscallName() of the notification
  int (*body)();
};

void PrintTo(const ViolationCase& c, std::ostream* os) { *os << c.test_name; }

class ViolationTest : public ::testing::TestWithParam<ViolationCase> {};

TEST_P(ViolationTest, IsReportedByName) {
  RunReport report = RunUnderPolicy(GetParam().body);
  ASSERT_TRUE(report.setup_error.empty()) << report.Describe();
  ASSERT_FALSE(report.violations.empty())
      << GetParam().expected << " was not caught; " << report.Describe();
  EXPECT_EQ(report.violations.front(), GetParam().expected) << report.Describe();
  EXPECT_FALSE(report.exited) << "the child should have been killed; " << report.Describe();
}

// Arguments are chosen so that each call would be harmless even if the
// policy wrongly allowed it (the test may run as root).
const ViolationCase kViolations[] = {
    {"Ptrace", "ptrace", [] { return (int)syscall(SYS_ptrace, PTRACE_ATTACH, -1, 0, 0); }},
    {"ProcessVmReadv", "process_vm_readv",
     [] { return (int)syscall(SYS_process_vm_readv, getpid(), nullptr, 0, nullptr, 0, 0); }},
    {"ProcessVmWritev", "process_vm_writev",
     [] { return (int)syscall(SYS_process_vm_writev, getpid(), nullptr, 0, nullptr, 0, 0); }},
    {"Bpf", "bpf", [] { return (int)syscall(SYS_bpf, -1, nullptr, 0); }},
    {"PerfEventOpen", "perf_event_open",
     [] { return (int)syscall(SYS_perf_event_open, nullptr, 0, -1, -1, 0); }},
    {"Userfaultfd", "userfaultfd", [] { return (int)syscall(SYS_userfaultfd, O_CLOEXEC); }},
    {"IoUringSetup", "io_uring_setup",
     [] { return (int)syscall(SYS_io_uring_setup, 0, nullptr); }},
    {"IoUringEnter", "io_uring_enter",
     [] { return (int)syscall(SYS_io_uring_enter, -1, 0, 0, 0, nullptr, 0); }},
    {"Keyctl", "keyctl",
     [] { return (int)syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3, 0); }},
    {"AddKey", "add_key", [] { return (int)syscall(SYS_add_key, nullptr, nullptr, nullptr, 0, 0); }},
    {"RequestKey", "request_key",
     [] { return (int)syscall(SYS_request_key, nullptr, nullptr, nullptr, 0); }},
    {"Mount", "mount",
     [] { return (int)syscall(SYS_mount, nullptr, "/nonexistent-warden", nullptr, 0, nullptr); }},
    {"Umount2", "umount2", [] { return (int)syscall(SYS_umount2, "/nonexistent-warden", 0); }},
    {"PivotRoot", "pivot_root",
     [] { return (int)syscall(SYS_pivot_root, "/nonexistent-a", "/nonexistent-b"); }},
    {"Fsopen", "fsopen", [] { return (int)syscall(SYS_fsopen, nullptr, 0); }},
    {"OpenTree", "open_tree", [] { return (int)syscall(SYS_open_tree, -1, nullptr, 0); }},
    {"Setns", "setns", [] { return (int)syscall(SYS_setns, -1, 0); }},
    {"UnshareNewUser", "unshare", [] { return (int)syscall(SYS_unshare, CLONE_NEWUSER); }},
    {"CloneNewUser", "clone",
     [] {
       long rc = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, nullptr, nullptr, nullptr, 0);
       if (rc == 0) _exit(0);
       return (int)rc;
     }},
    {"CloneNewNet", "clone",
     [] {
       long rc = syscall(SYS_clone, CLONE_NEWNET | SIGCHLD, nullptr, nullptr, nullptr, 0);
       if (rc == 0) _exit(0);
       return (int)rc;
     }},
    {"KexecLoad", "kexec_load",
     [] { return (int)syscall(SYS_kexec_load, 0, 0, nullptr, 0xdead0000ul); }},
    {"InitModule", "init_module", [] { return (int)syscall(SYS_init_module, nullptr, 0, ""); }},
    {"FinitModule", "finit_module", [] { return (int)syscall(SYS_finit_module, -1, "", 0); }},
    {"DeleteModule", "delete_module",
     [] { return (int)syscall(SYS_delete_module, "warden_no_such_module", O_NONBLOCK); }},
    {"IoctlTiocsti", "ioctl",
     [] { char c = 'x'; return (int)syscall(SYS_ioctl, -1, TIOCSTI, &c); }},
    {"IoctlTiocstiHighBits", "ioctl",
     [] { char c = 'x'; return (int)syscall(SYS_ioctl, -1, 0x100000000ul | TIOCSTI, &c); }},
    {"IoctlTioclinuxHighBits", "ioctl",
     [] { char c = 0; return (int)syscall(SYS_ioctl, -1, 0xFFFFFFFF00000000ul | TIOCLINUX, &c); }},
    {"SeccompNewListener", "seccomp",
     [] {
       return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                           SECCOMP_FILTER_FLAG_NEW_LISTENER, nullptr);
     }},
    {"PersonalityReadImpliesExec", "personality",
     [] { return (int)syscall(SYS_personality, READ_IMPLIES_EXEC); }},
    {"PrctlSetPtracer", "prctl", [] { return prctl(PR_SET_PTRACER, 0, 0, 0, 0); }},
    {"X32Getpid", "x32:getpid", [] { return (int)syscall(__NR_getpid | __X32_SYSCALL_BIT); }},
    {"UnlistedSyscall", "syslog", [] { return (int)syscall(SYS_syslog, 10, nullptr, 0); }},
};

INSTANTIATE_TEST_SUITE_P(Denied, ViolationTest, ::testing::ValuesIn(kViolations),
                         [](const auto& info) { return std::string(info.param.test_name); });

// int $0x80 enters the i386 syscall table from a 64-bit process. Some
// kernels (ia32_emulation=0, or hypervisors without the int 0x80 gate)
// fault it before seccomp runs: then no i386 syscall can run at all, which
// is what this asserts (and SeccompBpfTest.ForeignArchitecturesNotify covers
// the filter's own arch check). Otherwise it must be a named violation.
TEST(SeccompKernelTest, I386SyscallViaInt80IsAViolationOrImpossible) {
  auto int80_getpid = [] {
    long rc;
    // i386 getpid; kernels before 4.17 clobbered r8-r11 on this path.
    asm volatile("int $0x80" : "=a"(rc) : "a"(20L) : "memory", "r8", "r9", "r10", "r11");
    return static_cast<int>(rc);
  };
  pid_t probe = fork();
  if (probe == 0) {
    int80_getpid();
    _exit(0);
  }
  int status = 0;
  waitpid(probe, &status, 0);
  if (!WIFEXITED(status)) {
    // The instruction itself faults: not a syscall, and not a way around the policy.
    ASSERT_TRUE(WIFSIGNALED(status)) << status;
    EXPECT_TRUE(WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGILL) << WTERMSIG(status);
    return;
  }
  RunReport report = RunUnderPolicy(+int80_getpid);
  ASSERT_FALSE(report.violations.empty()) << report.Describe();
  EXPECT_EQ(report.violations.front(), "i386:getpid") << report.Describe();
}

// --- Allowed calls and errno answers ---------------------------------------

struct BehaviourCase {
  const char* test_name;
  int (*body)();  // 0 when the behaviour is as expected
};

void PrintTo(const BehaviourCase& c, std::ostream* os) { *os << c.test_name; }

class BehaviourTest : public ::testing::TestWithParam<BehaviourCase> {};

TEST_P(BehaviourTest, RunsWithoutViolation) {
  RunReport report = RunUnderPolicy(GetParam().body);
  EXPECT_TRUE(report.CleanExit()) << report.Describe();
}

int Clone3(uint64_t flags) {
  clone_args args = {};
  args.flags = flags;
  args.exit_signal = SIGCHLD;
  long rc = syscall(SYS_clone3, &args, sizeof(args));
  if (rc == 0) _exit(0);
  return ExpectErrno(rc, ENOSYS);
}

const BehaviourCase kBehaviours[] = {
    {"Clone3ReturnsEnosys", [] { return Clone3(0); }},
    {"Clone3WithNewUserReturnsEnosys", [] { return Clone3(CLONE_NEWUSER); }},
    {"MbindReturnsEperm",
     [] { return ExpectErrno(syscall(SYS_mbind, nullptr, 4096, 0, nullptr, 0, 0), EPERM); }},
    {"SocketNetlinkIsEafnosupport",
     [] { return ExpectErrno(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0), EAFNOSUPPORT); }},
    {"SocketPacketIsEafnosupport",
     [] { return ExpectErrno(socket(AF_PACKET, SOCK_RAW, 0), EAFNOSUPPORT); }},
    {"SocketVsockIsEafnosupport",
     [] { return ExpectErrno(socket(AF_VSOCK, SOCK_STREAM, 0), EAFNOSUPPORT); }},
    {"SocketAlgIsEafnosupport",
     [] { return ExpectErrno(socket(AF_ALG, SOCK_SEQPACKET, 0), EAFNOSUPPORT); }},
    {"SocketNetlinkHighBitsIsEafnosupport",
     [] {
       return ExpectErrno(syscall(SYS_socket, 0x100000000ul | AF_NETLINK, SOCK_RAW, 0),
                          EAFNOSUPPORT);
     }},
    {"SocketSctpIsEprotonosupport",
     [] { return ExpectErrno(socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP), EPROTONOSUPPORT); }},
    {"SocketpairNetlinkIsEafnosupport",
     [] {
       int sv[2];
       return ExpectErrno(socketpair(AF_NETLINK, SOCK_RAW, 0, sv), EAFNOSUPPORT);
     }},
    {"SocketUnixWorks", [] { return ExpectOk(socket(AF_UNIX, SOCK_STREAM, 0)); }},
    {"SocketInetTcpWorks", [] { return ExpectOk(socket(AF_INET, SOCK_STREAM, IPPROTO_TCP)); }},
    {"SocketInetUdpWorks", [] { return ExpectOk(socket(AF_INET, SOCK_DGRAM, 0)); }},
    {"SocketInet6Works",
     [] {
       long rc = socket(AF_INET6, SOCK_STREAM, 0);
       // A kernel booted with ipv6.disable=1 says EAFNOSUPPORT by itself.
       return rc >= 0 || errno == EAFNOSUPPORT ? 0 : errno;
     }},
    {"SocketpairUnixWorks",
     [] {
       int sv[2];
       return ExpectOk(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
     }},
    {"ThreadsAndForkWork",
     [] {
       int value = 0;
       std::thread t([&] { value = 42; });
       t.join();
       pid_t pid = fork();
       if (pid == 0) _exit(7);
       int status = 0;
       if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return 1;
       return value == 42 && WEXITSTATUS(status) == 7 ? 0 : 2;
     }},
    {"OrdinaryIoctlsWork",
     [] {
       int p[2];
       if (pipe(p) != 0) return 1;
       int n = 0;
       if (ioctl(p[0], FIONREAD, &n) != 0) return 2;
       termios t;
       // Not a terminal: the kernel answers ENOTTY; the filter lets it through.
       return ExpectErrno(ioctl(p[0], TCGETS, &t), ENOTTY);
     }},
    {"StackingAnotherFilterWorks",
     [] {
       sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
       sock_fprog prog = {1, &allow};
       return ExpectOk(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog));
     }},
    {"PersonalityQueryWorks", [] { return ExpectOk(personality(0xffffffff)); }},
    {"PrctlSetNameWorks", [] { return ExpectOk(prctl(PR_SET_NAME, "warden-test", 0, 0, 0)); }},
    {"MkfifoWorks",
     [] {
       char dir[] = "/tmp/warden-seccomp-XXXXXX";
       if (mkdtemp(dir) == nullptr) return 1;
       std::string path = std::string(dir) + "/fifo";
       int rc = ExpectOk(mkfifo(path.c_str(), 0600));
       unlink(path.c_str());
       rmdir(dir);
       return rc;
     }},
};

INSTANTIATE_TEST_SUITE_P(Allowed, BehaviourTest, ::testing::ValuesIn(kBehaviours),
                         [](const auto& info) { return std::string(info.param.test_name); });

// --- Real runtimes ----------------------------------------------------------

constexpr char kPythonScript[] = R"PY(
import os, sys, tempfile, threading, subprocess, socket, signal, mmap
import concurrent.futures, multiprocessing
import numpy as np, pandas as pd
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

def square(x):
    return x * x

if __name__ == "__main__":
    d = tempfile.mkdtemp()
    df = pd.DataFrame({"x": np.arange(50), "y": np.random.rand(50).cumsum()})
    fig, ax = plt.subplots()
    ax.plot(df.x, df.y)
    ax.set_title(f"mean {df.y.mean():.2f}")
    png = os.path.join(d, "plot.png")
    fig.savefig(png)
    assert os.path.getsize(png) > 1000
    out = []
    t = threading.Thread(target=lambda: out.append(sum(range(1000))))
    t.start(); t.join()
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        assert list(ex.map(square, range(5))) == [0, 1, 4, 9, 16]
    assert subprocess.run(["/bin/sh", "-c", "echo hi"], capture_output=True).stdout == b"hi\n"
    assert subprocess.run([sys.executable, "-c", "print(1)"], capture_output=True).stdout == b"1\n"
    with multiprocessing.Pool(2) as pool:
        assert pool.map(square, range(8)) == [x * x for x in range(8)]
    srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen()
    cli = socket.create_connection(srv.getsockname()); conn, _ = srv.accept()
    cli.sendall(b"ping"); assert conn.recv(4) == b"ping"
    socket.getaddrinfo("localhost", 80)
    signal.signal(signal.SIGUSR1, lambda *a: out.append("sig"))
    os.kill(os.getpid(), signal.SIGUSR1)
    m = mmap.mmap(-1, 1 << 20); m[:4] = b"abcd"; m.close()
    open("/proc/self/status").read(); os.listdir("/proc/self/fd")
    print("ok")
)PY";

constexpr char kNodeScript[] = R"JS(
const { Worker } = require('worker_threads');
const cp = require('child_process');
const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');
(async () => {
  const r = await new Promise((res, rej) => {
    const w = new Worker('require("worker_threads").parentPort.postMessage(21 * 2)', { eval: true });
    w.on('message', res); w.on('error', rej);
  });
  if (r !== 42) throw new Error('worker');
  if (cp.execSync('echo hi').toString() !== 'hi\n') throw new Error('execSync');
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'w'));
  fs.writeFileSync(path.join(d, 'f'), 'data');
  if (fs.readFileSync(path.join(d, 'f'), 'utf8') !== 'data') throw new Error('fs');
  await fs.promises.readFile(path.join(d, 'f'));
  const srv = net.createServer(s => s.end('pong'));
  await new Promise(res => srv.listen(0, '127.0.0.1', res));
  const got = await new Promise((res, rej) => {
    const c = net.connect(srv.address().port, '127.0.0.1');
    let b = ''; c.on('data', x => b += x); c.on('end', () => res(b)); c.on('error', rej);
  });
  srv.close();
  if (got !== 'pong') throw new Error('net');
  const child = await new Promise(res => cp.exec('/usr/bin/node -e "console.log(3)"', (e, so) => res(so)));
  if (child !== '3\n') throw new Error('child node');
  console.log('ok');
})().catch(e => { console.error(e); process.exit(1); });
)JS";

constexpr char kBashScript[] = R"SH(
set -eu
d=$(mktemp -d)
seq 1 200 | grep 7 | sed 's/7/seven/' | awk '{ print length($0) }' | sort -n | uniq -c | wc -l > "$d/out"
x=$( (echo a; echo b) | tr a-z A-Z | head -1 )
[ "$x" = A ]
n=$(cat "$d/out" | cut -c1-8 | tr -d ' ')
[ "$n" -gt 0 ]
echo hello > "$d/f"; cat < "$d/f" >> "$d/g"; ls -la "$d" > /dev/null
cp "$d/f" "$d/h"; mv "$d/h" "$d/i"; mkfifo "$d/p"
for i in 1 2 3; do echo $i; done | tac | xargs echo > /dev/null
date > /dev/null; env > /dev/null; id > /dev/null; stat /etc/passwd > /dev/null
find /etc -maxdepth 1 -name 'pass*' > /dev/null; tee /dev/null < /etc/hostname > /dev/null
(cd "$d" && sleep 0.01 & wait)
trap 'echo trapped > /dev/null' USR1; kill -USR1 $$
rm -r "$d"
echo ok
)SH";

struct RuntimeCase {
  const char* test_name;
  std::vector<std::string> argv;
  std::vector<std::string> extra_env;
  const char* expected_violation;  // nullptr: must run clean
};

void PrintTo(const RuntimeCase& c, std::ostream* os) { *os << c.test_name; }

class RuntimeTest : public ::testing::TestWithParam<RuntimeCase> {
 protected:
  void SetUp() override {
    // Every runtime Warden ships is installed by `make deps`.
    ASSERT_EQ(access(GetParam().argv[0].c_str(), X_OK), 0) << GetParam().argv[0] << " is missing";
    char tmpl[] = "/tmp/warden-seccomp-runtime-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string dir_;
};

TEST_P(RuntimeTest, RunsUnderPolicy) {
  std::vector<std::string> env = {"PATH=/usr/local/bin:/usr/bin:/bin",
                                  "HOME=" + dir_, "TMPDIR=" + dir_, "LANG=C.UTF-8"};
  for (const auto& e : GetParam().extra_env) env.push_back(e);
  RunReport report = RunProgramUnderPolicy(GetParam().argv, env);
  if (GetParam().expected_violation != nullptr) {
    ASSERT_FALSE(report.violations.empty()) << report.Describe();
    EXPECT_EQ(report.violations.front(), GetParam().expected_violation) << report.Describe();
    return;
  }
  EXPECT_TRUE(report.violations.empty())
      << "syscalls outside the policy: " << absl::StrJoin(report.violations, ", ")
      << "\n" << report.Describe();
  EXPECT_TRUE(report.CleanExit()) << report.Describe();
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "ok\n", report.output) << report.Describe();
}

INSTANTIATE_TEST_SUITE_P(
    Runtimes, RuntimeTest,
    ::testing::Values(
        RuntimeCase{"Python3NumpyPandasMatplotlibThreadsSubprocessPoolSockets",
                    {"/usr/bin/python3", "-c", kPythonScript}, {}, nullptr},
        RuntimeCase{"NodeWorkersChildProcessFsNet",
                    {"/usr/bin/node", "-e", kNodeScript}, {}, nullptr},
        RuntimeCase{"BashCoreutilsPipelines", {"/bin/bash", "-c", kBashScript}, {}, nullptr},
        // libuv only touches io_uring when asked to; then it is a violation.
        RuntimeCase{"NodeIoUringOptInIsAViolation",
                    {"/usr/bin/node", "-e", kNodeScript}, {"UV_USE_IO_URING=1"},
                    "io_uring_setup"}),
    [](const auto& info) { return std::string(info.param.test_name); });

}  // namespace
}  // namespace warden
