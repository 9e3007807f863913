// The containment sequence. Read SandboxInitMain and PayloadMain top to
// bottom: together they are the security argument for a sandbox's process.
#include "sandbox/sandbox_child.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>

#include "sandbox/fd_passing.h"

namespace warden {

const char* ChildStageName(ChildStage stage) {
  switch (stage) {
    case ChildStage::kWaitForSupervisor: return "waiting for the supervisor";
    case ChildStage::kInitIdentity: return "switching the init to its mapped ids";
    case ChildStage::kHostname: return "sethostname";
    case ChildStage::kLoopback: return "bringing up loopback";
    case ChildStage::kGroups: return "setgroups";
    case ChildStage::kCgroupNamespace: return "unshare(CLONE_NEWCGROUP)";
    case ChildStage::kMounts: return "building the root filesystem";
    case ChildStage::kForkPayload: return "forking the program";
    case ChildStage::kSession: return "setsid";
    case ChildStage::kStdio: return "setting up stdio";
    case ChildStage::kRlimits: return "setrlimit";
    case ChildStage::kCapabilities: return "dropping capabilities";
    case ChildStage::kIdentity: return "setresuid/setresgid";
    case ChildStage::kChdir: return "chdir";
    case ChildStage::kNoNewPrivs: return "PR_SET_NO_NEW_PRIVS";
    case ChildStage::kSeccomp: return "installing the seccomp filter";
    case ChildStage::kExec: return "execve";
    case ChildStage::kOomScore: return "writing /proc/self/oom_score_adj";
    case ChildStage::kSpawnRequest: return "reading the spawn request";
    case ChildStage::kTerminal: return "opening a terminal";
    case ChildStage::kEgress: return "listening on the sandbox's egress port";
  }
  return "unknown stage";
}

namespace {

constexpr int kSetupFailedExit = 126;

// Credentials change through raw system calls: glibc's setresuid() and
// friends broadcast the change to every thread it believes the process has
// (nptl_setxid.c), and a raw clone of a multi-threaded process inherits that
// belief without the threads, so the wrapper would wait for them forever.
int SetIds(uid_t uid, gid_t gid) {
  if (syscall(SYS_setresgid, gid, gid, gid) != 0) return errno;
  if (syscall(SYS_setresuid, uid, uid, uid) != 0) return errno;
  return 0;
}

// Sends `msg` (a ControlMessage or a SpawnReport), with the fds that are
// not -1 among `fd1`..`fd3`, in that order.
template <typename Message>
void Send(int fd, const Message& msg, int fd1 = -1, int fd2 = -1, int fd3 = -1) {
  int fds[3];
  int n = 0;
  for (int f : {fd1, fd2, fd3}) {
    if (f >= 0) fds[n++] = f;
  }
  SendWithFds(fd, &msg, sizeof(msg), nullptr, 0, fds, n);
}

// Reports a failed setup step of the sandbox's own program (spawn_id 0) or
// of a process a machine's init spawned, and exits.
[[noreturn]] void FailAs(int control_fd, int32_t spawn_id, ChildStage stage, int error,
                         int op_index = -1) {
  if (spawn_id != 0) {
    SpawnReport report;
    report.type = SpawnReport::kFailed;
    report.id = spawn_id;
    report.pid = static_cast<int32_t>(syscall(SYS_getpid));
    report.stage = static_cast<int32_t>(stage);
    report.error = error;
    Send(control_fd, report);
  } else {
    ControlMessage msg;
    msg.type = ControlMessage::kSetupFailed;
    msg.stage = static_cast<int32_t>(stage);
    msg.error = error;
    msg.op_index = op_index;
    Send(control_fd, msg);
  }
  _exit(kSetupFailedExit);
}

[[noreturn]] void Fail(int control_fd, ChildStage stage, int error, int op_index = -1) {
  FailAs(control_fd, 0, stage, error, op_index);
}

// execve of `name`: a path as it is, a bare name looked up in the PATH of
// `envp` (or the default one), the way execvp does, without allocating.
// Returns the errno of the most telling failure.
int ExecSearch(const char* name, char* const* argv, char* const* envp) {
  bool has_slash = false;
  for (const char* c = name; *c; ++c) has_slash = has_slash || *c == '/';
  if (has_slash || *name == '\0') {
    execve(name, argv, envp);
    return errno;
  }
  const char* path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  for (char* const* e = envp; e != nullptr && *e != nullptr; ++e) {
    const char* v = *e;
    if (v[0] == 'P' && v[1] == 'A' && v[2] == 'T' && v[3] == 'H' && v[4] == '=') path = v + 5;
  }
  size_t name_len = 0;
  while (name[name_len]) ++name_len;
  int best = ENOENT;
  char buf[4096];
  for (const char* dir = path;;) {
    const char* end = dir;
    while (*end && *end != ':') ++end;
    const size_t dir_len = static_cast<size_t>(end - dir);
    if (dir_len + 1 + name_len < sizeof(buf)) {
      size_t n = 0;
      for (size_t i = 0; i < dir_len; ++i) buf[n++] = dir[i];
      if (n == 0) buf[n++] = '.';  // an empty entry is the working directory
      buf[n++] = '/';
      for (size_t i = 0; i <= name_len; ++i) buf[n++] = name[i];
      execve(buf, argv, envp);
      if (errno == EACCES) best = EACCES;
      if (errno != ENOENT && errno != ENOTDIR && errno != EACCES) return errno;
    }
    if (*end == '\0') break;
    dir = end + 1;
  }
  return best;
}

// The most fds CloseAllExcept keeps: the init's five and one per mount op.
constexpr int kMaxKeptFds = 5 + kMaxMountOps;

// Closes every fd except the (at most kMaxKeptFds) listed ones.
void CloseAllExcept(const int* keep_in, int n) {
  int keep[kMaxKeptFds];
  int k = 0;
  for (int i = 0; i < n && k < kMaxKeptFds; ++i) {
    if (keep_in[i] >= 0) keep[k++] = keep_in[i];
  }
  for (int i = 1; i < k; ++i) {  // insertion sort
    for (int j = i; j > 0 && keep[j - 1] > keep[j]; --j) {
      int t = keep[j];
      keep[j] = keep[j - 1];
      keep[j - 1] = t;
    }
  }
  unsigned next = 0;
  for (int i = 0; i < k; ++i) {
    unsigned fd = static_cast<unsigned>(keep[i]);
    if (fd > next) syscall(SYS_close_range, next, fd - 1, 0);
    next = fd + 1;
  }
  syscall(SYS_close_range, next, ~0U, 0);
}


// The program's process: becomes the sandbox user with nothing else, then
// execs. Its parent is the sandbox's init.
[[noreturn]] void PayloadMain(const ChildPlan& p) {
  int ctl = p.control_fd;

  // A program run in place is a fork of the init: it gets back the name
  // and command line its execve would have given it (process_title.h).
  if (p.run_in_place) RestoreProgramTitle(p.layout, p.argv != nullptr ? p.argv[0] : nullptr);

  // Default dispositions and an empty mask: ignored signals (the supervisor
  // ignores SIGPIPE) and blocked ones would otherwise survive execve.
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);

  // A new session: no controlling terminal, its own process group.
  if (setsid() < 0) FailAs(ctl, p.spawn_id, ChildStage::kSession, errno);
  // A spawned terminal's slave (stdio) becomes its controlling terminal.
  if (p.terminal_master >= 0 && ioctl(p.stdin_fd, TIOCSCTTY, 0) != 0) {
    FailAs(ctl, p.spawn_id, ChildStage::kTerminal, errno);
  }

  // stdio from the supervisor's pipes (all at fds >= 3, since the
  // supervisor keeps 0-2 open), the channel socket at fd 3 if there is one;
  // every other fd is closed. The control socket moves out of the way first;
  // it is close-on-exec and disappears at execve.
  if (dup2(p.stdin_fd, 0) < 0 || dup2(p.stdout_fd, 1) < 0 || dup2(p.stderr_fd, 2) < 0) {
    FailAs(ctl, p.spawn_id, ChildStage::kStdio, errno);
  }
  ctl = fcntl(ctl, F_DUPFD_CLOEXEC, 100);
  if (ctl < 0) FailAs(p.control_fd, p.spawn_id, ChildStage::kStdio, errno);
  // A terminal's master goes to the supervisor with the report below.
  int master = -1;
  if (p.terminal_master >= 0) {
    master = fcntl(p.terminal_master, F_DUPFD_CLOEXEC, 100);
    if (master < 0) FailAs(ctl, p.spawn_id, ChildStage::kStdio, errno);
  }
  if (p.channel_fd >= 0) {
    // dup2(3, 3) would keep FD_CLOEXEC, hence the explicit F_SETFD.
    if ((p.channel_fd != 3 && dup2(p.channel_fd, 3) < 0) || fcntl(3, F_SETFD, 0) != 0) {
      FailAs(ctl, p.spawn_id, ChildStage::kStdio, errno);
    }
  }
  const int keep[] = {0, 1, 2, p.channel_fd >= 0 ? 3 : -1, ctl, master};
  CloseAllExcept(keep, 6);

  for (int i = 0; i < p.n_rlimits; ++i) {
    struct rlimit rl = {p.rlimits[i].soft, p.rlimits[i].hard};
    if (setrlimit(p.rlimits[i].resource, &rl) != 0) FailAs(ctl, p.spawn_id, ChildStage::kRlimits, errno);
  }

  // The program, never the init, is the OOM killer's first choice: in a
  // sandbox at its memory limit with little resident memory of its own (a
  // tmpfs filled, a fork bomb of small processes) the init, a clone of its
  // supervisor, could be the largest process, and its death would lose the
  // program's exit status. On the host, sandboxed code then dies before
  // anything else when memory runs out. Raising one's own score needs no
  // privilege, but the file of a process that is not dumpable belongs to
  // the host's root, which this user namespace does not map: the program is
  // dumpable for the write only, while it is still this namespace's root,
  // and nothing else in the sandbox may trace it (its other processes run
  // as the sandbox user, under a seccomp filter that refuses ptrace).
  // /proc is always mounted here (mount_plan).
  if (prctl(PR_SET_DUMPABLE, 1) != 0) FailAs(ctl, p.spawn_id, ChildStage::kOomScore, errno);
  if (int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC); fd < 0) {
    FailAs(ctl, p.spawn_id, ChildStage::kOomScore, errno);
  } else {
    const bool written = write(fd, "1000", 4) == 4;
    const int err = errno;
    close(fd);
    if (!written) FailAs(ctl, p.spawn_id, ChildStage::kOomScore, err);
  }
  if (prctl(PR_SET_DUMPABLE, 0) != 0) FailAs(ctl, p.spawn_id, ChildStage::kOomScore, errno);

  // ---- Privileges drop from here on. ----
  // Empty the bounding set while we still hold CAP_SETPCAP (in this user
  // namespace), so no later execve can regain a capability.
  for (int cap = 0; cap <= 63; ++cap) {
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) {
      FailAs(ctl, p.spawn_id, ChildStage::kCapabilities, errno);
    }
  }
  if (int err = SetIds(p.uid, p.gid); err != 0) FailAs(ctl, p.spawn_id, ChildStage::kIdentity, err);
  // Ambient, permitted, effective and inheritable sets: all empty.
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0) {
    FailAs(ctl, p.spawn_id, ChildStage::kCapabilities, errno);
  }
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capset, &header, data) != 0) FailAs(ctl, p.spawn_id, ChildStage::kCapabilities, errno);

  if (chdir(p.cwd) != 0) FailAs(ctl, p.spawn_id, ChildStage::kChdir, errno);

  // No execve may ever grant privileges again (setuid bits, file caps).
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) FailAs(ctl, p.spawn_id, ChildStage::kNoNewPrivs, errno);

  // execve would make the program dumpable again (its /proc files its own);
  // a program run in place inherits the init's "not dumpable" instead.
  if (p.run_in_place && prctl(PR_SET_DUMPABLE, 1) != 0) FailAs(ctl, p.spawn_id, ChildStage::kIdentity, errno);

  // The seccomp filter, last: from here every syscall is checked. The
  // listener fd goes to the supervisor, which names and stops violations.
  // The program's own pidfd goes along, so the supervisor can signal its
  // process group (interrupts) without guessing at pids.
  int self = static_cast<int>(syscall(SYS_pidfd_open, getpid(), 0));
  if (self < 0) FailAs(ctl, p.spawn_id, ChildStage::kSeccomp, errno);
  int listener = static_cast<int>(syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                                          SECCOMP_FILTER_FLAG_NEW_LISTENER, &p.seccomp));
  if (listener < 0) FailAs(ctl, p.spawn_id, ChildStage::kSeccomp, errno);
  if (p.spawn_id != 0) {
    SpawnReport ready;
    ready.type = SpawnReport::kReady;
    ready.id = p.spawn_id;
    ready.pid = static_cast<int32_t>(syscall(SYS_getpid));
    Send(ctl, ready, listener, self, master);
  } else {
    ControlMessage ready;
    ready.type = ControlMessage::kPayloadReady;
    Send(ctl, ready, listener, self);
  }
  close(listener);
  close(self);
  if (master >= 0) close(master);

  if (p.run_in_place) {
    // The control socket is the init's: the program must not keep it.
    close(ctl);
    p.run_in_place(p);
    _exit(kSetupFailedExit);
  }
  FailAs(ctl, p.spawn_id, ChildStage::kExec, ExecSearch(p.path, p.argv, p.envp));
}

// Forks the program (PayloadMain). fork() from glibc would run atfork
// handlers of a process we are only a raw clone of; a bare clone syscall is
// what fork does underneath.
pid_t StartPayload(const ChildPlan& p) {
  pid_t pid = static_cast<pid_t>(syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0));
  if (pid < 0) Fail(p.control_fd, ChildStage::kForkPayload, errno);
  if (pid == 0) PayloadMain(p);
  return pid;
}

// The processes a machine's init spawned, by pid, so that their ends are
// reported with their ids. Kept on the init's stack.
struct SpawnTable {
  static constexpr int kMax = 1024;
  pid_t pid[kMax];
  int32_t id[kMax];
  int n = 0;
};

// Reaps children (all of them, waiting, if `block`); reports the end of the
// program (clearing *payload) and of spawned processes; anything else (an
// orphan this pid 1 inherited) is reaped silently.
void ReapChildren(int ctl, pid_t* payload, SpawnTable* spawned, bool block) {
  for (;;) {
    int status = 0;
    struct rusage usage = {};
    pid_t pid = wait4(-1, &status, __WALL | (block ? 0 : WNOHANG), &usage);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) return;  // none ready, or no children left
    if (pid == *payload) {
      ControlMessage msg;
      msg.type = ControlMessage::kMainExited;
      msg.value = status;
      Send(ctl, msg);
      *payload = -1;
      continue;
    }
    for (int i = 0; i < spawned->n; ++i) {
      if (spawned->pid[i] != pid) continue;
      SpawnReport report;
      report.type = SpawnReport::kExited;
      report.id = spawned->id[i];
      report.pid = pid;
      report.status = status;
      report.cpu_us = (static_cast<int64_t>(usage.ru_utime.tv_sec) + usage.ru_stime.tv_sec) * 1'000'000 +
                      usage.ru_utime.tv_usec + usage.ru_stime.tv_usec;
      Send(ctl, report);
      spawned->pid[i] = spawned->pid[spawned->n - 1];
      spawned->id[i] = spawned->id[spawned->n - 1];
      --spawned->n;
      break;
    }
  }
}

// The entry of a process spawned with CLONE_VM | CLONE_VFORK, on a stack of
// its own: it shares the init's memory until its execve, and writes none of
// it (PayloadMain keeps its state on this stack).
int SpawnedMain(void* plan) { PayloadMain(*static_cast<const ChildPlan*>(plan)); }

void ReportSpawnFailure(int ctl, int32_t id, ChildStage stage, int error) {
  SpawnReport report;
  report.type = SpawnReport::kFailed;
  report.id = id;
  report.stage = static_cast<int32_t>(stage);
  report.error = error;
  Send(ctl, report);
}

// A private, writable copy of a spawn spec (SpawnSpec), its offsets turned
// into pointers; null if it is malformed.
struct MappedSpec {
  void* base = MAP_FAILED;
  size_t size = 0;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* cwd = nullptr;
};

bool MapSpec(int fd, MappedSpec* out) {
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(SpawnSpec)) ||
      st.st_size > (64 << 20)) {
    return false;
  }
  out->size = static_cast<size_t>(st.st_size);
  out->base = mmap(nullptr, out->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  if (out->base == MAP_FAILED) return false;
  char* bytes = static_cast<char*>(out->base);
  SpawnSpec header;
  memcpy(&header, bytes, sizeof(header));
  const uint64_t slots = uint64_t{header.argc} + header.envc + 2;
  // Every string ends inside the mapping: its last byte is a NUL.
  if (header.magic != SpawnSpec::kMagic || header.argc == 0 || bytes[out->size - 1] != '\0' ||
      sizeof(SpawnSpec) + slots * 8 > out->size || header.cwd >= out->size) {
    return false;
  }
  uint64_t* slot = reinterpret_cast<uint64_t*>(bytes + sizeof(SpawnSpec));
  for (uint64_t i = 0; i < slots; ++i) {
    const bool terminator = i == header.argc || i == slots - 1;
    if (terminator != (slot[i] == 0) || slot[i] >= out->size) return false;
    slot[i] = terminator ? 0 : reinterpret_cast<uint64_t>(bytes + slot[i]);
  }
  out->argv = reinterpret_cast<char* const*>(slot);
  out->envp = reinterpret_cast<char* const*>(slot + header.argc + 1);
  out->cwd = bytes + header.cwd;
  return true;
}

// Opens a terminal in the sandbox's own devpts (mount_plan's /dev/pts):
// *master, and *slave given to the sandbox's user. 0 or an errno.
int OpenTerminal(const ChildPlan& p, uint16_t cols, uint16_t rows, int* master, int* slave) {
  const int opened = open("/dev/pts/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (opened < 0) return errno;
  // Above the program's own numbers (see Spawn).
  *master = fcntl(opened, F_DUPFD_CLOEXEC, 64);
  close(opened);
  if (*master < 0) return errno;
  int unlock = 0;
  struct winsize size = {rows > 0 ? rows : static_cast<uint16_t>(24),
                         cols > 0 ? cols : static_cast<uint16_t>(80), 0, 0};
  int err = 0;
  if (ioctl(*master, TIOCSPTLCK, &unlock) != 0 || ioctl(*master, TIOCSWINSZ, &size) != 0) err = errno;
  if (err == 0) {
    const int peer = ioctl(*master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
    *slave = peer < 0 ? -1 : fcntl(peer, F_DUPFD_CLOEXEC, 64);
    if (*slave < 0) err = errno;
    if (peer >= 0) close(peer);
  }
  if (err == 0 && fchown(*slave, p.uid, p.gid) != 0) err = errno;
  if (err != 0) {
    close(*master);
    if (*slave >= 0) close(*slave);
  }
  return err;
}

// Starts one process on a machine's behalf: `fds` are the request's (the
// spec, then stdio and maybe the channel), all closed here.
void Spawn(const ChildPlan& p, const SpawnRequest& request, int* fds, int n_fds,
           SpawnTable* spawned, char* stack, size_t stack_size) {
  const int ctl = p.control_fd;
  const bool terminal = (request.flags & SpawnRequest::kTerminal) != 0;
  const bool channel = (request.flags & SpawnRequest::kChannel) != 0;
  const int wanted = 1 + (terminal ? 0 : 3) + (channel ? 1 : 0);
  // Everything above the program's own numbers first: PayloadMain dup2s
  // stdio onto 0-2 (and the channel onto 3), which must not land on (or be)
  // one of these.
  for (int i = 0; i < n_fds; ++i) {
    const int high = fcntl(fds[i], F_DUPFD_CLOEXEC, 64);
    if (high >= 0) {
      close(fds[i]);
      fds[i] = high;
    }
  }
  MappedSpec spec;
  int master = -1, slave = -1;
  auto done = [&] {
    for (int i = 0; i < n_fds; ++i) close(fds[i]);
    if (spec.base != MAP_FAILED) munmap(spec.base, spec.size);
    if (master >= 0) close(master);
    if (slave >= 0) close(slave);
  };
  if (request.id <= 0 || n_fds != wanted || spawned->n >= SpawnTable::kMax ||
      ((request.flags & SpawnRequest::kInPlace) && p.run_in_place == nullptr) || !MapSpec(fds[0], &spec)) {
    ReportSpawnFailure(ctl, request.id, ChildStage::kSpawnRequest,
                       spawned->n >= SpawnTable::kMax ? EAGAIN : EINVAL);
    return done();
  }
  ChildPlan q = p;
  q.machine = false;
  q.spawn_id = request.id;
  q.path = spec.argv[0];
  q.argv = spec.argv;
  q.envp = spec.envp;
  q.cwd = spec.cwd;
  q.run_in_place = (request.flags & SpawnRequest::kInPlace) ? p.run_in_place : nullptr;
  if (terminal) {
    if (int err = OpenTerminal(p, request.cols, request.rows, &master, &slave); err != 0) {
      master = slave = -1;
      ReportSpawnFailure(ctl, request.id, ChildStage::kTerminal, err);
      return done();
    }
    q.stdin_fd = q.stdout_fd = q.stderr_fd = slave;
    q.terminal_master = master;
    q.channel_fd = channel ? fds[1] : -1;
  } else {
    q.stdin_fd = fds[1];
    q.stdout_fd = fds[2];
    q.stderr_fd = fds[3];
    q.channel_fd = channel ? fds[4] : -1;
  }
  ChildRlimit rlimits[16];
  int n_rlimits = 0;
  for (int i = 0; i < p.n_rlimits && n_rlimits < 16; ++i) {
    rlimits[n_rlimits] = p.rlimits[i];
    if (rlimits[n_rlimits].resource == RLIMIT_CPU && request.cpu_seconds > 0) {
      rlimits[n_rlimits].soft = static_cast<rlim_t>(request.cpu_seconds);
      rlimits[n_rlimits].hard = static_cast<rlim_t>(request.cpu_seconds) + 1;
    }
    ++n_rlimits;
  }
  q.rlimits = rlimits;
  q.n_rlimits = n_rlimits;

#if defined(__SANITIZE_ADDRESS__)
  // ASan's bookkeeping cannot follow a child that borrows this process's
  // memory on a stack of its own: sanitizer builds spawn by a real fork.
  constexpr bool kBorrowMemory = false;
#else
  constexpr bool kBorrowMemory = true;
#endif
  pid_t pid;
  if (q.run_in_place || !kBorrowMemory) {
    // The warm program runs in a copy of this process's memory: a real fork.
    pid = static_cast<pid_t>(syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0));
    if (pid == 0) PayloadMain(q);
  } else {
    // No copy of the page tables of a process that is a clone of the
    // daemon (or of a zygote): the child borrows them until its execve,
    // and this thread waits for that (CLONE_VFORK).
    pid = clone(SpawnedMain, stack + stack_size, CLONE_VM | CLONE_VFORK | SIGCHLD, &q);
  }
  if (pid < 0) {
    ReportSpawnFailure(ctl, request.id, ChildStage::kForkPayload, errno);
  } else {
    spawned->pid[spawned->n] = pid;
    spawned->id[spawned->n] = request.id;
    ++spawned->n;
  }
  done();
}

// struct clone_args from <linux/sched.h> (Linux 5.5+), spelled out here:
// that header's CLONE_* macros clash with glibc's <sched.h>.
struct CloneArgs {
  uint64_t flags;
  uint64_t pidfd;
  uint64_t child_tid;
  uint64_t parent_tid;
  uint64_t exit_signal;
  uint64_t stack;
  uint64_t stack_size;
  uint64_t tls;
  uint64_t set_tid;
  uint64_t set_tid_size;
  uint64_t cgroup;
};
constexpr uint64_t kClonePidfd = 0x00001000;

// The sandbox's way out (sandbox/egress_gate.h): a listener on its own
// loopback, made before any program of the sandbox runs (so none can take
// the port first) and handed to the supervisor; the init keeps no copy.
void OpenEgressListener(const ChildPlan& p) {
  const int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) Fail(p.control_fd, ChildStage::kEgress, errno);
  const int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  struct sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(p.egress_port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(s, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)) != 0 || listen(s, 128) != 0) {
    Fail(p.control_fd, ChildStage::kEgress, errno);
  }
  ControlMessage msg;
  msg.type = ControlMessage::kEgressListener;
  Send(p.control_fd, msg, s);
  close(s);
}

}  // namespace

int BringUpLoopback() {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return errno;
  struct ifreq ifr = {};
  memcpy(ifr.ifr_name, "lo", 3);
  int rc = ioctl(s, SIOCGIFFLAGS, &ifr);
  if (rc == 0) {
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    rc = ioctl(s, SIOCSIFFLAGS, &ifr);
  }
  int err = rc == 0 ? 0 : errno;
  close(s);
  return err;
}

long CloneSandboxInit(bool as_sibling, int* pidfd, bool fresh_net_ipc_uts, uid_t owner_uid) {
  CloneArgs args = {};
  args.flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | kClonePidfd |
               (fresh_net_ipc_uts ? CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS : 0) |
               (as_sibling ? CLONE_PARENT : 0);
  args.pidfd = reinterpret_cast<uint64_t>(pidfd);
  // With CLONE_PARENT the kernel takes the caller's own exit signal and
  // refuses any other.
  args.exit_signal = as_sibling ? 0 : SIGCHLD;
  // A user namespace's owner is its creator's effective uid. Credentials
  // are the thread's own in the kernel: a raw setresuid changes this
  // thread's only (glibc's would change every thread's). The real and
  // saved uids stay root, so the effective uid comes back without any
  // privilege; while it is not root the thread's effective capabilities are
  // empty, which clone3 of a new user namespace does not need (the child
  // gets every capability in its new namespace whatever its ids). The
  // child starts with this effective uid, which its id map then names as
  // its namespace's root, and becomes init_uid (SandboxInitMain). Changing
  // the effective uid makes the process not dumpable, as setfsuid
  // (ScopedFsIds) already does; nothing here relies on it being dumpable.
  const bool own_owner = owner_uid != 0 && syscall(SYS_geteuid) == 0 && syscall(SYS_getuid) == 0;
  if (own_owner && syscall(SYS_setresuid, -1, owner_uid, -1) != 0) return -1;
  const long pid = syscall(SYS_clone3, &args, sizeof(args));
  if (pid != 0 && own_owner) {
    const int saved = errno;
    // Cannot fail: the real uid is root. Should it, the thread must not go
    // on unprivileged: the daemon stops here rather than act as another user.
    if (syscall(SYS_setresuid, -1, 0, -1) != 0) abort();
    errno = saved;
  }
  return pid;
}

[[noreturn]] void SandboxInitMain(const ChildPlan& p) {
  const int ctl = p.control_fd;

  // Nothing of the supervisor's (its stdio, its files, its umask) carries
  // over; the bind sources it opened stay until the mounts are built.
  if (p.n_bind_trees < 0 || p.n_bind_trees > kMaxMountOps) Fail(ctl, ChildStage::kMounts, E2BIG);
  int keep[kMaxKeptFds] = {ctl, p.stdin_fd, p.stdout_fd, p.stderr_fd, p.channel_fd};
  for (int i = 0; i < p.n_bind_trees; ++i) keep[5 + i] = p.bind_trees[i];
  CloseAllExcept(keep, 5 + p.n_bind_trees);
  umask(022);

  // From here `ps`, `pidof` and `kill` see this process as what it is, not
  // as the daemon (or fork server) it is a clone of (process_title.h). A
  // fork server's program, run in place, must not inherit overwritten
  // argument strings.
  ProcessTitle title;
  const bool may_overwrite = p.run_in_place == nullptr;
  TitleSandboxInit(p.layout, p.label, may_overwrite, &title);

  // The supervisor writes our uid/gid maps and moves us into our cgroup,
  // then says go. EOF means it died: leave quietly.
  char go = 0;
  ssize_t n;
  do {
    n = read(ctl, &go, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1) _exit(kSetupFailedExit);

  // Become our mapped id. The host root we were cloned as is not mapped in
  // this namespace, so this keeps every capability in it (see
  // capabilities(7), "Effect of user ID changes on capabilities").
  if (int err = SetIds(p.init_uid, p.init_gid); err != 0) {
    Fail(ctl, ChildStage::kInitIdentity, err);
  }
  // We die with the supervisor *process*: when it goes, its end of the
  // control socket closes and we see the hang-up (below, and in our poll
  // loop), and our exit takes the whole pid namespace with it. Not
  // PR_SET_PDEATHSIG: that follows the *thread* that cloned us, and the
  // daemon clones from threads that come and go. If it is already gone,
  // leave now. Not dumpable: the program cannot read our memory.
  struct pollfd hup = {ctl, 0, 0};
  if (poll(&hup, 1, 0) == 1 && (hup.revents & (POLLHUP | POLLERR))) _exit(kSetupFailedExit);
  prctl(PR_SET_DUMPABLE, 0);

  // Our cgroup namespace is rooted at our own cgroup: /proc/self/cgroup
  // shows "/" and nothing of the host's hierarchy.
  if (unshare(CLONE_NEWCGROUP) != 0) Fail(ctl, ChildStage::kCgroupNamespace, errno);

  // The network namespace is empty but for loopback, private to us. A
  // prepared one (RecyclePool) has its hostname and loopback set already;
  // it belongs to the host's user namespace, so they are not ours to touch.
  if (!p.namespaces_prepared) {
    if (sethostname(p.hostname, strlen(p.hostname)) != 0) Fail(ctl, ChildStage::kHostname, errno);
    if (int err = BringUpLoopback(); err != 0) Fail(ctl, ChildStage::kLoopback, err);
  }

  // Drop the supplementary groups inherited from the supervisor (as root:
  // host gid 0), which would otherwise still grant group access to files.
  if (p.clear_groups && syscall(SYS_setgroups, 0, nullptr) != 0) {
    Fail(ctl, ChildStage::kGroups, errno);
  }

  // A fresh tmpfs root, read-only binds, /proc, /dev, /tmp, the workspace;
  // pivot_root into it and detach the host's tree.
  int failed_op = -1;
  if (int rc = ApplyMountPlan(*p.mounts, p.bind_trees, p.n_bind_trees, "/tmp", &failed_op); rc != 0) {
    Fail(ctl, ChildStage::kMounts, -rc, failed_op);
  }

  // SIGCHLD is read from a signalfd, polled together with the control
  // socket; the program gets an empty signal mask back (PayloadMain).
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, nullptr);
  const int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) Fail(ctl, ChildStage::kForkPayload, errno);

  if (p.egress_port != 0) OpenEgressListener(p);

  // A machine has no program of its own: it reports that its sandbox is
  // built and then starts processes on request, each on this stack.
  pid_t payload = -1;
  char* spawn_stack = nullptr;
  constexpr size_t kSpawnStack = 256 << 10;
  if (p.machine) {
    void* stack = mmap(nullptr, kSpawnStack, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) Fail(ctl, ChildStage::kForkPayload, errno);
    spawn_stack = static_cast<char*>(stack);
    ControlMessage ready;
    ready.type = ControlMessage::kPayloadReady;
    Send(ctl, ready);
  } else {
    payload = StartPayload(p);
  }
  SpawnTable spawned;

  // PID 1: reap everything, report each program's end, and take commands.
  // We outlive the program, so its workspace stays reachable (and a fresh
  // program can be started in the same sandbox) until the supervisor kills
  // us or goes away. The pipes and the channel stay open here for the same
  // reason; nothing relies on their EOF.
  for (;;) {
    struct pollfd fds[2] = {{ctl, POLLIN, 0}, {sfd, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      _exit(kSetupFailedExit);
    }
    if (fds[1].revents & POLLIN) {
      struct signalfd_siginfo info;
      while (read(sfd, &info, sizeof(info)) > 0) {
      }
      ReapChildren(ctl, &payload, &spawned, /*block=*/false);
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      // A command byte, a SpawnRequest or a RetitleRequest.
      char message[sizeof(SpawnRequest) > sizeof(RetitleRequest) ? sizeof(SpawnRequest)
                                                                 : sizeof(RetitleRequest)];
      int passed[kMaxPassedFds];
      int n_passed = 0;
      ssize_t n = ReceiveWithFds(ctl, message, sizeof(message), 0, passed, &n_passed);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) _exit(0);  // the supervisor is gone
      const char command = message[0];
      if (command == kSpawn && p.machine && n == static_cast<ssize_t>(sizeof(SpawnRequest))) {
        SpawnRequest request;
        memcpy(&request, message, sizeof(request));
        Spawn(p, request, passed, n_passed, &spawned, spawn_stack, kSpawnStack);
        continue;
      }
      for (int i = 0; i < n_passed; ++i) close(passed[i]);
      if (command == kRetitle && n == static_cast<ssize_t>(sizeof(RetitleRequest))) {
        RetitleRequest request;
        memcpy(&request, message, sizeof(request));
        request.label[sizeof(request.label) - 1] = '\0';
        TitleSandboxInit(p.layout, request.label, may_overwrite, &title);
        continue;
      }
      if (command == kKillProgram || command == kRespawn) {
        // Every process of the namespace but us.
        kill(-1, SIGKILL);
      }
      if (command == kRespawn && !p.machine) {
        ReapChildren(ctl, &payload, &spawned, /*block=*/true);
        payload = StartPayload(p);
      }
    }
  }
}

}  // namespace warden
