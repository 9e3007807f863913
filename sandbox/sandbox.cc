// The supervisor side of a sandbox run: prepares the child's plan, clones the
// sandbox's init into new namespaces, writes its id maps, puts it in its
// cgroup, then watches it - output, deadlines, CPU, seccomp violations - until
// the main process ends, and tears everything down.
#include "sandbox/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "sandbox/sandbox_child.h"
#include "sandbox/status_macros.h"
#include "sandbox/unique_fd.h"

namespace warden {
namespace {

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

// The sandbox's init as seen from the supervisor: owns its pidfd, and kills
// and reaps it (and so its whole pid namespace) when destroyed.
class SandboxProcess {
 public:
  SandboxProcess(pid_t pid, UniqueFd pidfd) : pid_(pid), pidfd_(std::move(pidfd)) {}
  SandboxProcess(const SandboxProcess&) = delete;
  SandboxProcess& operator=(const SandboxProcess&) = delete;
  ~SandboxProcess() { KillAndReap(); }

  pid_t pid() const { return pid_; }
  int pidfd() const { return pidfd_.get(); }

  // SIGKILL to a pid namespace's init kills every process in it; the reap
  // returns only after the kernel has torn all of them down.
  void KillAndReap() {
    if (reaped_) return;
    syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
    siginfo_t info;
    while (waitid(static_cast<idtype_t>(P_PIDFD), pidfd_.get(), &info, WEXITED) != 0 &&
           errno == EINTR) {
    }
    reaped_ = true;
  }

 private:
  pid_t pid_;
  UniqueFd pidfd_;
  bool reaped_ = false;
};

absl::Status WriteFile(const std::string& path, absl::string_view data) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  if (write(fd.get(), data.data(), data.size()) != static_cast<ssize_t>(data.size())) {
    return absl::ErrnoToStatus(errno, absl::StrCat("write ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ResolveProgram(const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("the program name is empty");
  if (name.find('/') != std::string::npos) {
    if (name[0] != '/') {
      return absl::InvalidArgumentError(
          absl::StrCat("program '", name, "' must be an absolute path or a bare name"));
    }
    return name;
  }
  for (const char* dir : {"/usr/local/bin", "/usr/bin", "/bin"}) {
    std::string path = absl::StrCat(dir, "/", name);
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return absl::NotFoundError(
      absl::StrCat("program '", name, "' is not in /usr/local/bin, /usr/bin or /bin"));
}

// Reads one control message (and any fd passed with it).
bool ReceiveControl(int fd, ControlMessage* msg, UniqueFd* passed) {
  struct iovec iov = {msg, sizeof(*msg)};
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  struct msghdr hdr = {};
  hdr.msg_iov = &iov;
  hdr.msg_iovlen = 1;
  hdr.msg_control = control;
  hdr.msg_controllen = sizeof(control);
  ssize_t n = recvmsg(fd, &hdr, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  if (n != sizeof(*msg)) return false;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&hdr); c != nullptr; c = CMSG_NXTHDR(&hdr, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int received;
      memcpy(&received, CMSG_DATA(c), sizeof(int));
      passed->Reset(received);
    }
  }
  return true;
}

// Reads a pending seccomp notification; returns the syscall's name.
std::optional<std::string> ReceiveViolation(int listener) {
  struct seccomp_notif_sizes sizes = {};
  if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) != 0) return std::nullopt;
  std::string buf(std::max<size_t>(sizes.seccomp_notif, sizeof(seccomp_notif)), '\0');
  auto* notif = reinterpret_cast<struct seccomp_notif*>(buf.data());
  if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, notif) != 0) return std::nullopt;
  return SyscallName(notif->data.nr, notif->data.arch);
}

struct Capture {
  UniqueFd fd;
  std::string data;
  bool truncated = false;
  // Reads what is available; returns false once past the cap.
  bool ReadAvailable(int64_t cap) {
    char buf[65536];
    while (fd) {
      ssize_t n = read(fd.get(), buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (n == 0 || errno != EAGAIN) fd.Reset();
        break;
      }
      int64_t room = cap - static_cast<int64_t>(data.size());
      if (n > room) {
        data.append(buf, static_cast<size_t>(std::max<int64_t>(room, 0)));
        truncated = true;
        return false;
      }
      data.append(buf, static_cast<size_t>(n));
    }
    return true;
  }
};

void EnsureStdioOpen() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) < 0) {
      int null = open("/dev/null", O_RDWR);
      if (null >= 0 && null != fd) {
        dup2(null, fd);
        close(null);
      }
    }
  }
}

}  // namespace

std::vector<std::string> SandboxSpec::DefaultEnvironment() {
  return {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/workspace", "TMPDIR=/tmp",
          "LANG=C.UTF-8", "USER=sandbox", "MPLBACKEND=Agg", "PYTHONDONTWRITEBYTECODE=1"};
}

absl::StatusOr<std::unique_ptr<Executor>> Executor::Create(const ExecutorOptions& options) {
  auto executor = std::unique_ptr<Executor>(new Executor());
  executor->options_ = options;
  executor->rootless_ = geteuid() != 0;
  if (executor->options_.cgroup.subtree_name.empty()) {
    executor->options_.cgroup.subtree_name = absl::StrCat("warden-", getpid());
  }
  auto cgroups = CgroupManager::Create(executor->options_.cgroup);
  if (cgroups.ok()) {
    executor->cgroups_ = *std::move(cgroups);
  } else if (!options.allow_degraded) {
    return absl::FailedPreconditionError(absl::StrCat(
        cgroups.status().message(),
        ". Without cgroups Warden cannot enforce memory, pids and CPU limits; to run anyway with "
        "rlimits only, pass --allow-degraded (not for hostile code)."));
  }
  ASSIGN_OR_RETURN(executor->seccomp_, BuildSeccompPolicy(options.seccomp));
  EnsureStdioOpen();
  // Writing to a pipe whose reader is gone must be an error, not a signal
  // that kills the supervisor. The payload resets it to the default.
  signal(SIGPIPE, SIG_IGN);
  return executor;
}

Executor::~Executor() = default;

Result Executor::Run(const SandboxSpec& spec) {
  Result result;
  auto fail = [&result](Outcome outcome, absl::string_view message) -> Result {
    result.outcome = outcome;
    result.message = std::string(message);
    return std::move(result);
  };

  // ---- Prepare everything the child needs, before it exists. ----
  if (auto s = spec.limits.Validate(); !s.ok()) return fail(Outcome::kSetupError, s.message());
  if (spec.argv.empty()) return fail(Outcome::kSetupError, "no program given");
  auto path = ResolveProgram(spec.argv[0]);
  if (!path.ok()) return fail(Outcome::kSetupError, path.status().message());
  if (auto s = ValidateSandboxPath(spec.cwd); !s.ok()) return fail(Outcome::kSetupError, s.message());
  FilesystemSpec fs = spec.filesystem;
  fs.tmpfs_bytes = spec.limits.tmpfs_bytes;
  auto mounts = BuildMountPlan(fs);
  if (!mounts.ok()) return fail(Outcome::kSetupError, mounts.status().message());

  std::vector<char*> argv, envp;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  const Limits& limits = spec.limits;
  const rlim_t cpu_seconds = static_cast<rlim_t>(limits.cpu_ms / 1000 + 1);
  std::vector<ChildRlimit> rlimits = {
      {RLIMIT_CORE, 0, 0},
      {RLIMIT_FSIZE, static_cast<rlim_t>(limits.file_size_bytes),
       static_cast<rlim_t>(limits.file_size_bytes)},
      {RLIMIT_NOFILE, static_cast<rlim_t>(limits.open_files), static_cast<rlim_t>(limits.open_files)},
      // Counted per user namespace (ucounts), so this is per sandbox.
      {RLIMIT_NPROC, static_cast<rlim_t>(limits.pids), static_cast<rlim_t>(limits.pids)},
      {RLIMIT_MSGQUEUE, 0, 0},
      {RLIMIT_RTPRIO, 0, 0},
      // A per-process backstop; the real CPU limit is the cgroup's total.
      {RLIMIT_CPU, cpu_seconds, cpu_seconds + 1},
  };
  if (degraded()) {
    rlimits.push_back({RLIMIT_AS, static_cast<rlim_t>(limits.memory_bytes),
                       static_cast<rlim_t>(limits.memory_bytes)});
  }

  const uint64_t run = next_run_.fetch_add(1);
  std::unique_ptr<Cgroup> cgroup;
  if (cgroups_) {
    auto cg = cgroups_->CreateGroup(absl::StrCat("run-", run),
                                    {limits.memory_bytes, limits.pids, limits.cpu_percent});
    if (!cg.ok()) return fail(Outcome::kInternal, cg.status().message());
    cgroup = *std::move(cg);
  }

  int in[2], out[2], err[2], ctl[2];
  if (pipe2(in, O_CLOEXEC) != 0) return fail(Outcome::kInternal, "pipe2 failed");
  UniqueFd in_r(in[0]), in_w(in[1]);
  if (pipe2(out, O_CLOEXEC) != 0) return fail(Outcome::kInternal, "pipe2 failed");
  UniqueFd out_r(out[0]), out_w(out[1]);
  if (pipe2(err, O_CLOEXEC) != 0) return fail(Outcome::kInternal, "pipe2 failed");
  UniqueFd err_r(err[0]), err_w(err[1]);
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) != 0) {
    return fail(Outcome::kInternal, "socketpair failed");
  }
  UniqueFd ctl_parent(ctl[0]), ctl_child(ctl[1]);

  ChildPlan plan;
  plan.mounts = &*mounts;
  plan.seccomp.len = static_cast<unsigned short>(seccomp_.instructions.size());
  plan.seccomp.filter = const_cast<sock_filter*>(seccomp_.instructions.data());
  plan.path = path->c_str();
  plan.argv = argv.data();
  plan.envp = envp.data();
  plan.cwd = spec.cwd.c_str();
  plan.hostname = fs.hostname.c_str();
  plan.uid = fs.sandbox_uid;
  plan.gid = fs.sandbox_gid;
  // As root the init runs as the namespace's uid 0 and the program as the
  // sandbox uid, each mapped to its own unprivileged host id. Rootless, only
  // the caller's own id can be mapped, so both share it.
  plan.init_uid = rootless_ ? fs.sandbox_uid : 0;
  plan.init_gid = rootless_ ? fs.sandbox_gid : 0;
  plan.clear_groups = !rootless_;
  plan.rlimits = rlimits.data();
  plan.n_rlimits = static_cast<int>(rlimits.size());
  plan.control_fd = ctl_child.get();
  plan.stdin_fd = in_r.get();
  plan.stdout_fd = out_w.get();
  plan.stderr_fd = err_w.get();

  // ---- Clone the sandbox's init into its new namespaces. ----
  // The cgroup namespace is entered by the init itself once it is inside its
  // cgroup, so that the namespace is rooted there.
  int pidfd = -1;
  CloneArgs args = {};
  args.flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC |
               CLONE_NEWUTS | kClonePidfd;
  args.pidfd = reinterpret_cast<uint64_t>(&pidfd);
  args.exit_signal = SIGCHLD;
  long pid = syscall(SYS_clone3, &args, sizeof(args));
  if (pid == 0) SandboxInitMain(plan);
  if (pid < 0) {
    int e = errno;
    return fail(Outcome::kSetupError,
                absl::StrCat("clone3 into new namespaces failed: ", strerror(e),
                             e == EPERM || e == ENOSPC
                                 ? " (are unprivileged user namespaces disabled? check "
                                   "/proc/sys/user/max_user_namespaces and "
                                   "kernel.unprivileged_userns_clone)"
                                 : ""));
  }
  SandboxProcess init(static_cast<pid_t>(pid), UniqueFd(pidfd));
  in_r.Reset();
  out_w.Reset();
  err_w.Reset();
  ctl_child.Reset();

  // ---- Identity maps and cgroup, then let it go. ----
  const std::string proc = absl::StrCat("/proc/", pid);
  std::string uid_map = absl::StrCat(fs.sandbox_uid, " ", geteuid(), " 1\n");
  std::string gid_map = absl::StrCat(fs.sandbox_gid, " ", getegid(), " 1\n");
  if (!rootless_) {
    // Two consecutive host ids per run: the init's (inside 0) and the program's.
    const uint32_t pairs = std::max<uint32_t>(options_.host_id_count / 2, 1);
    const uid_t host = options_.host_id_base + 2 * static_cast<uid_t>(run % pairs);
    uid_map = absl::StrCat("0 ", host, " 1\n", fs.sandbox_uid, " ", host + 1, " 1\n");
    gid_map = absl::StrCat("0 ", host, " 1\n", fs.sandbox_gid, " ", host + 1, " 1\n");
  }
  absl::Status status = WriteFile(proc + "/uid_map", uid_map);
  if (status.ok() && rootless_) status = WriteFile(proc + "/setgroups", "deny");
  if (status.ok()) status = WriteFile(proc + "/gid_map", gid_map);
  if (status.ok() && cgroup) status = cgroup->AddProcess(static_cast<pid_t>(pid));
  if (!status.ok()) return fail(Outcome::kSetupError, status.message());
  if (write(ctl_parent.get(), "g", 1) != 1) return fail(Outcome::kInternal, "cannot signal the sandbox");

  for (int fd : {out_r.get(), err_r.get(), in_w.get()}) fcntl(fd, F_SETFL, O_NONBLOCK);
  if (spec.stdin_fd < 0 && spec.stdin_data.empty()) in_w.Reset();

  // ---- Supervise. ----
  const absl::Time start = absl::Now();
  const absl::Time wall_deadline = start + absl::Milliseconds(limits.wall_ms);
  const int64_t cpu_limit_ns = limits.cpu_ms * 1'000'000;
  absl::Time next_cpu_check = start;
  enum class Stop { kNone, kWall, kCpu, kOutput, kViolation, kInitExited, kSetupFailed };
  Stop stop = Stop::kNone;
  Capture out_cap{std::move(out_r)}, err_cap{std::move(err_r)};
  UniqueFd listener;
  bool main_exited = false;
  int main_status = 0;
  ControlMessage failure;
  size_t stdin_offset = 0;
  std::string stdin_chunk;  // from spec.stdin_fd
  bool stdin_source_open = spec.stdin_fd >= 0;

  while (stop == Stop::kNone && !main_exited) {
    const absl::Time now = absl::Now();
    if (now >= wall_deadline) {
      stop = Stop::kWall;
      break;
    }
    if (cgroup && now >= next_cpu_check) {
      auto usage = cgroup->Usage();
      if (usage.ok()) {
        if (usage->cpu_usage_ns >= cpu_limit_ns) {
          stop = Stop::kCpu;
          break;
        }
        // The group cannot burn CPU faster than its quota, so nothing can
        // change before this much wall time has passed.
        const int64_t remaining_ns = cpu_limit_ns - usage->cpu_usage_ns;
        next_cpu_check = now + std::max(absl::Milliseconds(2),
                                        absl::Nanoseconds(remaining_ns * 100 / limits.cpu_percent));
      }
    }
    absl::Time wake = wall_deadline;
    if (cgroup) wake = std::min(wake, next_cpu_check);
    int timeout_ms = static_cast<int>(
        std::clamp<int64_t>(absl::ToInt64Milliseconds(wake - now) + 1, 1, 1000));

    // Which stdin direction is live: pumping our source, or writing out.
    const std::string& pending = spec.stdin_fd >= 0 ? stdin_chunk : spec.stdin_data;
    const bool have_pending = stdin_offset < pending.size();

    struct pollfd fds[6];
    int nfds = 0;
    auto add = [&](int fd, short events) -> int {
      if (fd < 0) return -1;
      fds[nfds] = {fd, events, 0};
      return nfds++;
    };
    const int i_ctl = add(ctl_parent.get(), POLLIN);
    const int i_pid = add(init.pidfd(), POLLIN);
    const int i_out = add(out_cap.fd.get(), POLLIN);
    const int i_err = add(err_cap.fd.get(), POLLIN);
    const int i_lis = add(listener.get(), POLLIN);
    int i_in = -1;
    if (in_w && have_pending) {
      i_in = add(in_w.get(), POLLOUT);
    } else if (in_w && stdin_source_open) {
      i_in = add(spec.stdin_fd, POLLIN);
    }
    int ready = poll(fds, nfds, timeout_ms);
    if (ready < 0 && errno != EINTR) {
      stop = Stop::kInitExited;
      break;
    }
    if (ready <= 0) continue;
    auto has = [&](int i, short mask) { return i >= 0 && (fds[i].revents & mask) != 0; };

    if (has(i_ctl, POLLIN | POLLHUP)) {
      ControlMessage msg;
      UniqueFd passed;
      while (ReceiveControl(ctl_parent.get(), &msg, &passed)) {
        if (msg.type == ControlMessage::kPayloadReady && passed) {
          listener = std::move(passed);
        } else if (msg.type == ControlMessage::kSetupFailed) {
          failure = msg;
          stop = Stop::kSetupFailed;
        } else if (msg.type == ControlMessage::kMainExited) {
          main_exited = true;
          main_status = msg.value;
        }
      }
    }
    if (has(i_lis, POLLIN)) {
      if (auto name = ReceiveViolation(listener.get())) {
        result.violation = *name;
        stop = Stop::kViolation;
      }
    } else if (has(i_lis, POLLHUP | POLLERR)) {
      listener.Reset();  // every process under the filter is gone
    }
    if (has(i_out, POLLIN | POLLHUP) && !out_cap.ReadAvailable(limits.output_bytes)) {
      stop = Stop::kOutput;
    }
    if (has(i_err, POLLIN | POLLHUP) && !err_cap.ReadAvailable(limits.output_bytes)) {
      stop = Stop::kOutput;
    }
    if (i_in >= 0 && fds[i_in].revents != 0) {
      if (have_pending) {
        ssize_t n = write(in_w.get(), pending.data() + stdin_offset, pending.size() - stdin_offset);
        if (n > 0) stdin_offset += static_cast<size_t>(n);
        if (n < 0 && errno != EAGAIN && errno != EINTR) in_w.Reset();  // reader gone
        if (spec.stdin_fd < 0 && stdin_offset >= pending.size()) in_w.Reset();  // EOF
      } else {
        char buf[65536];
        ssize_t n = read(spec.stdin_fd, buf, sizeof(buf));
        if (n > 0) {
          stdin_chunk.assign(buf, static_cast<size_t>(n));
          stdin_offset = 0;
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
          stdin_source_open = false;
          in_w.Reset();
        }
      }
    }
    if (has(i_pid, POLLIN) && !main_exited && stop == Stop::kNone) {
      // The init is gone without reporting the main process: drain the
      // control socket once more (the report may have raced the exit).
      ControlMessage msg;
      UniqueFd passed;
      while (ReceiveControl(ctl_parent.get(), &msg, &passed)) {
        if (msg.type == ControlMessage::kMainExited) {
          main_exited = true;
          main_status = msg.value;
        } else if (msg.type == ControlMessage::kSetupFailed) {
          failure = msg;
          stop = Stop::kSetupFailed;
        }
      }
      if (!main_exited && stop == Stop::kNone) stop = Stop::kInitExited;
    }
  }
  const absl::Time end = absl::Now();

  // A thread may have hit the policy while another ended the process.
  if (listener && !result.violation) {
    struct pollfd p = {listener.get(), POLLIN, 0};
    if (poll(&p, 1, 0) == 1 && (p.revents & POLLIN)) {
      if (auto name = ReceiveViolation(listener.get())) result.violation = *name;
    }
  }

  // ---- Tear down: everything left in the tree dies now. ----
  init.KillAndReap();
  // Every writer is gone; what is still buffered in the pipes is bounded.
  if (stop != Stop::kOutput) {
    if (!out_cap.ReadAvailable(limits.output_bytes) || !err_cap.ReadAvailable(limits.output_bytes)) {
      stop = stop == Stop::kNone ? Stop::kOutput : stop;
    }
  }
  CgroupUsage usage;
  if (cgroup) {
    auto u = cgroup->Usage();
    if (u.ok()) usage = *u;
    if (auto s = cgroup->Destroy(); !s.ok()) {
      fprintf(stderr, "warden: removing cgroup: %s\n", std::string(s.message()).c_str());
    }
  }

  result.wall_ms = absl::ToInt64Milliseconds(end - start);
  result.cpu_ms = usage.cpu_usage_ns / 1'000'000;
  result.peak_memory_bytes = usage.peak_memory_bytes;
  result.stdout_data = std::move(out_cap.data);
  result.stderr_data = std::move(err_cap.data);
  result.stdout_truncated = out_cap.truncated;
  result.stderr_truncated = err_cap.truncated;
  if (main_exited) {
    if (WIFEXITED(main_status)) result.exit_code = WEXITSTATUS(main_status);
    if (WIFSIGNALED(main_status)) result.signal = WTERMSIG(main_status);
  }
  if (degraded()) {
    result.message = "degraded mode: limits enforced by rlimits only, no cgroup accounting";
  }

  if (stop == Stop::kSetupFailed) {
    std::string where = ChildStageName(static_cast<ChildStage>(failure.stage));
    if (failure.op_index >= 0 && failure.op_index < static_cast<int>(mounts->ops.size())) {
      absl::StrAppend(&where, " (at /", mounts->ops[failure.op_index].target, ")");
    }
    return fail(Outcome::kSetupError, absl::StrCat(where, ": ", strerror(failure.error)));
  }
  if (result.violation) {
    result.outcome = Outcome::kViolation;
  } else if (stop == Stop::kOutput) {
    result.outcome = Outcome::kOutputLimit;
  } else if (stop == Stop::kCpu) {
    result.outcome = Outcome::kCpuTimeout;
  } else if (stop == Stop::kWall) {
    result.outcome = Outcome::kWallTimeout;
  } else if (usage.oom_kills > 0) {
    result.outcome = Outcome::kMemoryLimit;
  } else if (main_exited && WIFEXITED(main_status)) {
    result.outcome = result.exit_code == 0 ? Outcome::kOk : Outcome::kNonzeroExit;
  } else if (main_exited && WIFSIGNALED(main_status)) {
    result.outcome = result.signal == SIGXCPU ? Outcome::kCpuTimeout : Outcome::kSignaled;
  } else {
    result.outcome = Outcome::kInternal;
    result.message = "the sandbox's init exited before the program ended";
  }
  return result;
}

}  // namespace warden
