// The supervisor side of a sandbox run: prepares the child's plan, clones the
// sandbox's init into new namespaces, writes its id maps, puts it in its
// cgroup, then watches it - output, deadlines, CPU, seccomp violations - until
// the main process ends, and tears everything down.
#include "sandbox/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/openat2.h>
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
#include <tuple>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "sandbox/sandbox_child.h"
#include "sandbox/sandbox_plan.h"
#include "sandbox/unique_fd.h"

namespace warden {
namespace {

// The capabilities this process lacks (of those it takes) for giving each
// sandbox's user namespace an owner of its own, "" if none. Such an owner,
// not being wardend's effective uid, gives wardend no capability inside the
// namespace beyond those it holds on the host; root as the owner gave it
// every one. Setting a sandbox up takes the same either way (SYS_ADMIN,
// SETUID - also for CloneSandboxInit's setresuid - and SETGID); ending it
// takes CAP_KILL too: the kernel lets a process signal another whose uid
// and saved uid are not its own only with CAP_KILL in that process's user
// namespace (kernel/signal.c, kill_ok_by_cred). With the four capabilities
// the container manifests used to grant, every SIGKILL to a sandbox's init
// failed with EPERM and its teardown waited for it forever (fleet_swarm: no
// node became ready; tests/container_capabilities.sh reproduces it).
std::string MissingForOwnOwners() {
  __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &header, data) != 0) return absl::StrCat("capget: ", strerror(errno));
  std::string missing;
  for (const auto& [cap, name] : {std::pair{CAP_SYS_ADMIN, "CAP_SYS_ADMIN"}, std::pair{CAP_SETUID, "CAP_SETUID"},
                                  std::pair{CAP_SETGID, "CAP_SETGID"}, std::pair{CAP_KILL, "CAP_KILL"}}) {
    if ((data[cap / 32].effective & (1u << (cap % 32))) == 0) {
      absl::StrAppend(&missing, missing.empty() ? "" : ", ", name);
    }
  }
  return missing;
}

absl::Status WriteFile(const std::string& path, absl::string_view data) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  if (write(fd.get(), data.data(), data.size()) != static_cast<ssize_t>(data.size())) {
    return absl::ErrnoToStatus(errno, absl::StrCat("write ", path));
  }
  return absl::OkStatus();
}

// A bare name is looked up in /usr/local/bin, /usr/bin and /bin: the host's,
// or a template's (`root`), resolved as inside the sandbox (symlinks within
// the template's root).
absl::StatusOr<std::string> ResolveProgram(const std::string& name, const std::string& root) {
  if (name.empty()) return absl::InvalidArgumentError("the program name is empty");
  if (name.find('/') != std::string::npos) {
    if (name[0] != '/') {
      return absl::InvalidArgumentError(
          absl::StrCat("program '", name, "' must be an absolute path or a bare name"));
    }
    return name;
  }
  UniqueFd root_fd;
  if (!root.empty()) {
    root_fd.Reset(open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!root_fd) return absl::ErrnoToStatus(errno, absl::StrCat("open the template's root ", root));
  }
  for (const char* dir : {"/usr/local/bin", "/usr/bin", "/bin"}) {
    std::string path = absl::StrCat(dir, "/", name);
    if (root.empty()) {
      if (access(path.c_str(), X_OK) == 0) return path;
      continue;
    }
    struct open_how how = {};
    how.flags = O_PATH | O_CLOEXEC;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
    UniqueFd fd(static_cast<int>(syscall(SYS_openat2, root_fd.get(), path.c_str(), &how, sizeof(how))));
    struct stat st;
    if (fd && fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111)) return path;
  }
  return absl::NotFoundError(absl::StrCat("program '", name, "' is not in /usr/local/bin, /usr/bin or /bin",
                                          root.empty() ? "" : " of the template"));
}

// Collects one output stream up to a cap. The fd belongs to the Worker.
struct Capture {
  int fd;
  std::string data;
  bool truncated = false;
  bool eof = false;
  // Reads what is available; returns false once past the cap.
  bool ReadAvailable(int64_t cap) {
    char buf[65536];
    while (!eof) {
      ssize_t n = read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (n == 0 || errno != EAGAIN) eof = true;
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
  std::vector<std::string> env = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/workspace", "TMPDIR=/tmp",
                                  "LANG=C.UTF-8", "USER=sandbox", "MPLBACKEND=Agg",
                                  "PYTHONDONTWRITEBYTECODE=1"};
  // The only way out is the egress proxy on the sandbox's own loopback
  // (egress_gate.h): what pip, requests, curl, git and npm read, in both
  // spellings (curl takes only the lower-case http_proxy). The sandbox's
  // own servers are reached directly.
  const std::string proxy = absl::StrCat("http://127.0.0.1:", kEgressPort);
  for (const char* name : {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"}) {
    env.push_back(absl::StrCat(name, "=", proxy));
  }
  env.push_back("NO_PROXY=localhost,127.0.0.1,::1");
  env.push_back("no_proxy=localhost,127.0.0.1,::1");
  return env;
}

std::vector<std::string> MergeEnvironment(std::vector<std::string> base,
                                          const std::vector<std::string>& overrides) {
  for (const std::string& entry : overrides) {
    const std::string key = entry.substr(0, entry.find('=') + 1);
    auto same = std::find_if(base.begin(), base.end(),
                             [&key](const std::string& e) { return e.compare(0, key.size(), key) == 0; });
    if (same != base.end()) {
      *same = entry;
    } else {
      base.push_back(entry);
    }
  }
  return base;
}

absl::StatusOr<std::unique_ptr<Executor>> Executor::Create(const ExecutorOptions& options) {
  auto executor = std::unique_ptr<Executor>(new Executor());
  executor->options_ = options;
  executor->rootless_ = geteuid() != 0;
  if (executor->rootless_) {
    executor->namespace_owners_ = absl::StrCat(
        "sandboxes' user namespaces are owned by wardend's own uid ", geteuid(),
        " (not root: no other owner can be given): their per-user kernel counts (inotify instances and "
        "watches, queued signals, locked memory) add up in that uid's");
  } else if (const std::string missing = MissingForOwnOwners(); missing.empty()) {
    executor->own_owners_ = true;
    executor->namespace_owners_ =
        "each sandbox's user namespace is owned by a host id of its own: the per-user kernel counts made "
        "inside (inotify instances and watches, queued signals, locked memory) are the sandbox's, bounded "
        "by the host's per-user limits, never root's";
  } else {
    executor->namespace_owners_ = absl::StrCat(
        "sandboxes' user namespaces are owned by root, so the per-user kernel counts made inside them "
        "(inotify instances and watches, queued signals, locked memory) all add up in root's and one "
        "sandbox can take them from the host: wardend lacks ", missing,
        ", which ending a sandbox owned by another id takes (signals to another user's processes); "
        "grant it (deploy/'s manifests do) to give each sandbox its own");
  }
  if (executor->options_.cgroup.subtree_name.empty()) {
    // The pid alone could name a stale subtree of a dead process with a
    // recycled pid; the start time makes the name this process's own.
    executor->options_.cgroup.subtree_name =
        absl::StrCat("warden-", getpid(), "-", absl::ToUnixMicros(absl::Now()) % 1'000'000'000);
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
  if (absl::StatusOr<ProcessLayout> layout = ReadProcessLayout(); layout.ok()) {
    executor->layout_ = *layout;
  } else {
    fprintf(stderr, "warden: sandboxes' inits show the name warden-sandbox but not what they are for: %s\n",
            std::string(layout.status().message()).c_str());
  }
  // Not in degraded mode: reuse waits for the cgroup to read empty.
  if (options.recycle && !executor->rootless_ && executor->cgroups_) {
    auto pool = RecyclePool::Create();
    if (pool.ok()) {
      executor->recycle_ = *std::move(pool);
    } else {
      // Slower, not weaker: every sandbox gets fresh namespaces.
      fprintf(stderr, "warden: sandboxes get fresh namespaces, none recycled: %s\n",
              std::string(pool.status().message()).c_str());
    }
  }
  EnsureStdioOpen();
  // Writing to a pipe whose reader is gone must be an error, not a signal
  // that kills the supervisor. The payload resets it to the default.
  signal(SIGPIPE, SIG_IGN);
  return executor;
}

Executor::~Executor() = default;

absl::StatusOr<std::unique_ptr<Worker>> Executor::Spawn(const SandboxSpec& spec,
                                                        const SpawnOptions& options) {
  // ---- Prepare everything the child needs, before it exists. ----
  const absl::Time begin = absl::Now();
  RETURN_IF_ERROR(spec.limits.Validate());
  if (spec.argv.empty() && !options.machine) return absl::InvalidArgumentError("no program given");
  std::string path;
  if (!options.machine) {
    ASSIGN_OR_RETURN(path, ResolveProgram(spec.argv[0], spec.filesystem.root));
  }
  RETURN_IF_ERROR(ValidateSandboxPath(spec.cwd));
  FilesystemSpec fs = spec.filesystem;
  fs.tmpfs_bytes = spec.limits.tmpfs_bytes;
  if (fs.sandbox_uid == 0 || fs.sandbox_gid == 0) {
    return absl::InvalidArgumentError("the sandbox user must not be uid or gid 0");
  }
  SandboxPlan plan;
  ASSIGN_OR_RETURN(plan.mounts, BuildMountPlan(fs));
  plan.seccomp = seccomp_.instructions;
  plan.path = path;
  plan.argv = spec.argv;
  plan.env = spec.env;
  plan.cwd = spec.cwd;
  plan.hostname = fs.hostname;
  plan.uid = fs.sandbox_uid;
  plan.gid = fs.sandbox_gid;
  // As root the init runs as the namespace's uid 0 and the program as the
  // sandbox uid, each mapped to its own unprivileged host id. Rootless, only
  // the caller's own id can be mapped, so both share it.
  plan.init_uid = rootless_ ? fs.sandbox_uid : 0;
  plan.init_gid = rootless_ ? fs.sandbox_gid : 0;
  plan.clear_groups = !rootless_;
  plan.machine = options.machine;
  plan.label = spec.name;
  const uint64_t run = next_run_.fetch_add(1);
  const auto [program_host_uid, program_host_gid] = ProgramHostIds(options.identity_slot.value_or(run));
  // The namespace is owned by the init's own host id, not by root: every
  // per-user kernel count made inside is then this sandbox's alone
  // (CloneSandboxInit). Rootless, the caller owns it, as it must; without
  // CAP_KILL, root does (MissingForOwnOwners).
  plan.owner_uid = own_owners_ ? program_host_uid - 1 : 0;
  if (options.egress != nullptr) plan.egress_port = kEgressPort;

  const Limits& limits = spec.limits;
  const rlim_t cpu_seconds = static_cast<rlim_t>(limits.cpu_ms / 1000 + 1);
  plan.rlimits = {
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
    plan.rlimits.push_back({RLIMIT_AS, static_cast<rlim_t>(limits.memory_bytes),
                            static_cast<rlim_t>(limits.memory_bytes)});
  }

  // The host side of every bind, opened with our privileges (real root in
  // the host's namespaces): the sandbox's ids need not reach the sources'
  // parent directories. Rootless, the init opens them as the caller.
  std::vector<UniqueFd> bind_trees;
  if (!rootless_) {
    ASSIGN_OR_RETURN(bind_trees, OpenBindSources(plan.mounts));
  } else {
    for (const MountOp& op : plan.mounts.ops) {
      if (op.kind == MountOp::Kind::kBind &&
          (op.source_fd >= 0 || op.idmap == BindMount::Idmap::kRequired)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "/", op.target, " (", op.source, ") needs wardend to run as root: a rootless supervisor can "
            "bind only host paths, without idmapped mounts"));
      }
    }
  }
  std::vector<int> bind_fds;
  for (const UniqueFd& tree : bind_trees) bind_fds.push_back(tree.get());

  auto worker = std::unique_ptr<Worker>(new Worker());
  worker->egress_gate_ = options.egress;
  worker->stage_times_.begin = begin;
  worker->stage_times_.planned = absl::Now();
  for (const MountOp& op : plan.mounts.ops) worker->mount_targets_.push_back("/" + op.target);

  const CgroupLimits cgroup_limits = {limits.memory_bytes, limits.pids, limits.cpu_percent};
  if (recycle_) {
    worker->recycle_pool_ = recycle_;
    ASSIGN_OR_RETURN(worker->namespaces_, recycle_->TakeNamespaces(fs.hostname));
    // A group nested in a session's is the session's, never the pool's.
    worker->cgroup_recyclable_ = options.parent_cgroup == nullptr;
    if (cgroups_ && worker->cgroup_recyclable_) worker->cgroup_ = recycle_->TakeCgroup(cgroup_limits);
  }
  if (cgroups_ && !worker->cgroup_) {
    const std::string name = absl::StrCat("run-", run);
    ASSIGN_OR_RETURN(worker->cgroup_, options.parent_cgroup != nullptr
                                          ? options.parent_cgroup->CreateChild(name, cgroup_limits)
                                          : cgroups_->CreateGroup(name, cgroup_limits));
  }
  worker->stage_times_.cgroup = absl::Now();
  const PooledNamespaces& prepared = worker->namespaces_;

  // Pipes and sockets: the child's ends are close-on-exec and stay open in
  // it only as far as the containment sequence keeps them.
  int in[2], out[2], err[2], ctl[2], chan[2] = {-1, -1};
  if (pipe2(in, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe2");
  UniqueFd in_r(in[0]);
  worker->stdin_.Reset(in[1]);
  if (pipe2(out, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe2");
  worker->stdout_.Reset(out[0]);
  UniqueFd out_w(out[1]);
  if (pipe2(err, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe2");
  worker->stderr_.Reset(err[0]);
  UniqueFd err_w(err[1]);
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) != 0) {
    return absl::ErrnoToStatus(errno, "socketpair");
  }
  worker->control_.Reset(ctl[0]);
  UniqueFd ctl_child(ctl[1]);
  UniqueFd chan_child;
  if (options.channel) {
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, chan) != 0) {
      return absl::ErrnoToStatus(errno, "socketpair");
    }
    worker->channel_.Reset(chan[0]);
    chan_child.Reset(chan[1]);
  }

  // ---- Clone the sandbox's init into its new namespaces. ----
  long pid = -1;
  int pidfd = -1;
  if (options.fork_server != nullptr) {
    // The fork server clones it (as our child) from its warm memory.
    ForkServer::ChildFds fds;
    fds.control = ctl_child.get();
    fds.stdin_read = in_r.get();
    fds.stdout_write = out_w.get();
    fds.stderr_write = err_w.get();
    fds.channel = chan_child.get();
    fds.bind_trees = rootless_ ? nullptr : &bind_fds;
    if (prepared.valid()) {
      fds.net = prepared.net.get();
      fds.ipc = prepared.ipc.get();
      fds.uts = prepared.uts.get();
    }
    ASSIGN_OR_RETURN(ForkServer::Cloned cloned, options.fork_server->Clone(plan.Encode(), fds));
    pid = cloned.pid;
    pidfd = cloned.pidfd.Release();
  } else {
    ChildPlan child = plan.View();
    child.control_fd = ctl_child.get();
    child.stdin_fd = in_r.get();
    child.stdout_fd = out_w.get();
    child.stderr_fd = err_w.get();
    child.channel_fd = chan_child.get();
    if (!rootless_) {
      child.bind_trees = bind_fds.data();
      child.n_bind_trees = static_cast<int>(bind_fds.size());
    }
    child.namespaces_prepared = prepared.valid();
    child.layout = layout_ ? &*layout_ : nullptr;
    {
      // This thread enters the prepared namespaces for the clone only.
      ScopedNamespaces in(recycle_ ? recycle_->host() : prepared, prepared.net.get(),
                          prepared.ipc.get(), prepared.uts.get());
      if (in.error() != 0) return absl::ErrnoToStatus(in.error(), "setns into pooled namespaces");
      pid = CloneSandboxInit(/*as_sibling=*/false, &pidfd,
                             /*fresh_net_ipc_uts=*/!child.namespaces_prepared, plan.owner_uid);
      if (pid == 0) SandboxInitMain(child);
    }
    if (pid < 0) {
      int e = errno;
      return absl::FailedPreconditionError(absl::StrCat(
          "clone3 into new namespaces failed: ", strerror(e),
          e == EPERM || e == ENOSPC ? " (are user namespaces disabled? check "
                                      "/proc/sys/user/max_user_namespaces)"
                                    : ""));
    }
  }
  worker->init_pid_ = static_cast<pid_t>(pid);
  worker->init_pidfd_.Reset(pidfd);
  worker->stage_times_.cloned = absl::Now();

  // ---- Identity maps and cgroup, then let it go. ----
  const std::string proc = absl::StrCat("/proc/", pid);
  std::string uid_map = absl::StrCat(fs.sandbox_uid, " ", geteuid(), " 1\n");
  std::string gid_map = absl::StrCat(fs.sandbox_gid, " ", getegid(), " 1\n");
  worker->program_host_uid_ = program_host_uid;
  worker->program_host_gid_ = program_host_gid;
  if (!rootless_) {
    // Two consecutive host ids per slot: the init's (inside 0) and the program's.
    const uid_t host = worker->program_host_uid_ - 1;
    uid_map = absl::StrCat("0 ", host, " 1\n", fs.sandbox_uid, " ", host + 1, " 1\n");
    gid_map = absl::StrCat("0 ", host, " 1\n", fs.sandbox_gid, " ", host + 1, " 1\n");
  }
  RETURN_IF_ERROR(WriteFile(proc + "/uid_map", uid_map));
  if (rootless_) RETURN_IF_ERROR(WriteFile(proc + "/setgroups", "deny"));
  RETURN_IF_ERROR(WriteFile(proc + "/gid_map", gid_map));
  if (!rootless_ && NeedsIdmap(plan.mounts)) {
    // Now that the maps are there, the binds that ask for it see files
    // through them (before the init attaches any: it waits for "go").
    UniqueFd userns(open((proc + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC));
    if (!userns) return absl::ErrnoToStatus(errno, "open the sandbox's user namespace");
    RETURN_IF_ERROR(IdmapBindSources(plan.mounts, bind_trees, userns.get()));
  }
  if (worker->cgroup_) RETURN_IF_ERROR(worker->cgroup_->AddProcess(static_cast<pid_t>(pid)));
  if (write(worker->control_.get(), &kGo, 1) != 1) {
    return absl::ErrnoToStatus(errno, "signalling the sandbox to start");
  }
  worker->started_ = absl::Now();
  worker->stage_times_.released = worker->started_;
  for (int fd : {worker->stdout_.get(), worker->stderr_.get(), worker->stdin_.get()}) {
    fcntl(fd, F_SETFL, O_NONBLOCK);
  }
  return worker;
}

absl::StatusOr<std::unique_ptr<Cgroup>> Executor::CreateGroup(const CgroupLimits& limits) {
  if (!cgroups_) return nullptr;
  return cgroups_->CreateGroup(absl::StrCat("group-", next_run_.fetch_add(1)), limits);
}

std::pair<uid_t, gid_t> Executor::ProgramHostIds(uint64_t slot) const {
  if (rootless_) return {geteuid(), getegid()};
  const uint32_t pairs = std::max<uint32_t>(options_.host_id_count / 2, 1);
  const uid_t host = options_.host_id_base + 2 * static_cast<uid_t>(slot % pairs);
  return {host + 1, host + 1};
}

Result Executor::Run(const SandboxSpec& spec) {
  Result result;
  auto spawned = Spawn(spec);
  if (!spawned.ok()) {
    result.outcome = absl::IsInvalidArgument(spawned.status()) || absl::IsNotFound(spawned.status()) ||
                             absl::IsFailedPrecondition(spawned.status())
                         ? Outcome::kSetupError
                         : Outcome::kInternal;
    result.message = std::string(spawned.status().message());
    return result;
  }
  Worker& worker = **spawned;
  const Limits& limits = spec.limits;

  // ---- Supervise: output, stdin, the wall clock and the CPU total. ----
  const absl::Time start = worker.started();
  const absl::Time wall_deadline = start + absl::Milliseconds(limits.wall_ms);
  const int64_t cpu_limit_ns = limits.cpu_ms * 1'000'000;
  absl::Time next_cpu_check = start;
  enum class Stop { kNone, kWall, kCpu, kOutput };
  Stop stop = Stop::kNone;
  Capture out{worker.stdout_fd()}, err{worker.stderr_fd()};
  // Standard input: spec.stdin_data, or what we read from spec.stdin_fd.
  std::string pending = spec.stdin_fd >= 0 ? std::string() : spec.stdin_data;
  size_t offset = 0;
  bool source_open = spec.stdin_fd >= 0;
  if (pending.empty() && !source_open) worker.CloseStdin();

  while (stop == Stop::kNone) {
    const absl::Time now = absl::Now();
    if (now >= wall_deadline) {
      stop = Stop::kWall;
      break;
    }
    if (worker.has_cgroup() && now >= next_cpu_check) {
      if (auto usage = worker.Usage()) {
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
    const bool have_pending = offset < pending.size();
    const bool pump = worker.stdin_fd() >= 0 && !have_pending && source_open;
    const unsigned ready =
        worker.Wait(worker.has_cgroup() ? std::min(wall_deadline, next_cpu_check) : wall_deadline,
                    worker.stdin_fd() >= 0 && have_pending, pump ? spec.stdin_fd : -1);
    if (ready & (Worker::kEnded | Worker::kViolation)) break;
    if ((ready & Worker::kStdout) && !out.ReadAvailable(limits.output_bytes)) stop = Stop::kOutput;
    if ((ready & Worker::kStderr) && !err.ReadAvailable(limits.output_bytes)) stop = Stop::kOutput;
    if (ready & Worker::kStdinWritable) {
      ssize_t n = write(worker.stdin_fd(), pending.data() + offset, pending.size() - offset);
      if (n > 0) offset += static_cast<size_t>(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR) worker.CloseStdin();  // reader gone
      if (!source_open && offset >= pending.size()) worker.CloseStdin();   // EOF
    }
    if (pump && (ready & Worker::kExtra)) {
      char buf[65536];
      ssize_t n = read(spec.stdin_fd, buf, sizeof(buf));
      if (n > 0) {
        pending.assign(buf, static_cast<size_t>(n));
        offset = 0;
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        source_open = false;
        worker.CloseStdin();
      }
    }
  }
  const absl::Time end = absl::Now();

  // ---- Tear down: everything left in the tree dies now. ----
  worker.Kill();
  // Every writer is gone; what is still buffered in the pipes is bounded.
  if (!out.ReadAvailable(limits.output_bytes) || !err.ReadAvailable(limits.output_bytes)) {
    if (stop == Stop::kNone) stop = Stop::kOutput;
  }
  const CgroupUsage usage = worker.Usage().value_or(CgroupUsage{});

  result.wall_ms = absl::ToInt64Milliseconds(end - start);
  result.cpu_ms = usage.cpu_usage_ns / 1'000'000;
  result.peak_memory_bytes = usage.peak_memory_bytes;
  result.stdout_data = std::move(out.data);
  result.stderr_data = std::move(err.data);
  result.stdout_truncated = out.truncated;
  result.stderr_truncated = err.truncated;
  result.violation = worker.violation();
  const int status = worker.main_status();
  if (worker.main_exited()) {
    if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  }
  if (degraded()) {
    result.message = "degraded mode: limits enforced by rlimits only, no cgroup accounting";
  }

  if (worker.setup_error()) {
    result.outcome = Outcome::kSetupError;
    result.message = *worker.setup_error();
  } else if (result.violation) {
    result.outcome = Outcome::kViolation;
  } else if (stop == Stop::kOutput) {
    result.outcome = Outcome::kOutputLimit;
  } else if (stop == Stop::kCpu) {
    result.outcome = Outcome::kCpuTimeout;
  } else if (stop == Stop::kWall) {
    result.outcome = Outcome::kWallTimeout;
  } else if (usage.oom_kills > 0) {
    result.outcome = Outcome::kMemoryLimit;
  } else if (worker.main_exited() && WIFEXITED(status)) {
    result.outcome = result.exit_code == 0 ? Outcome::kOk : Outcome::kNonzeroExit;
  } else if (worker.main_exited() && WIFSIGNALED(status)) {
    result.outcome = result.signal == SIGXCPU ? Outcome::kCpuTimeout : Outcome::kSignaled;
  } else {
    result.outcome = Outcome::kInternal;
    result.message = "the sandbox's init exited before the program ended";
  }
  return result;
}

}  // namespace warden
