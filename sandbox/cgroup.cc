// cgroup.cc: the v1 and v2 backends of CgroupManager and Cgroup.
//
// Detection reads /proc/self/mountinfo and /proc/self/cgroup; every path the
// backends touch is `fs_root` + a path found there, and directories are made
// and removed through CgroupDirectoryOps, so the whole file runs unchanged
// against a fake tree in a temporary directory. Only absl and libc are used.
#include "sandbox/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "sandbox/unique_fd.h"

namespace warden {

const char* CgroupVersionName(CgroupVersion v) {
  switch (v) {
    case CgroupVersion::kV1:
      return "v1";
    case CgroupVersion::kV2:
      return "v2";
  }
  return "unknown";
}

namespace {

// The v1 controllers a sandbox needs, in the order paths are reported.
constexpr const char* kV1Controllers[] = {"memory", "pids", "cpu", "cpuacct", "freezer"};
// CFS period used for cpu_percent. 100 ms is the kernel default; quota is a
// share of it (Documentation/scheduler/sched-bwc.rst).
constexpr int64_t kCfsPeriodUs = 100'000;
// How long a freezer may take to report FROZEN before we kill anyway.
constexpr absl::Duration kFreezeTimeout = absl::Seconds(1);
// How long Destroy waits for killed tasks to leave the group before rmdir.
constexpr absl::Duration kDrainTimeout = absl::Seconds(2);

// ---------------------------------------------------------------------------
// Files.

std::string JoinPath(absl::string_view dir, absl::string_view name) {
  if (absl::EndsWith(dir, "/")) return absl::StrCat(dir, name);
  return absl::StrCat(dir, "/", name);
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("read ", path));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Control files are written with one write(2): cgroupfs parses each write as
// a whole. Never creates the file; a missing control file is an error.
absl::Status WriteFile(const std::string& path, absl::string_view value) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
  if (!fd) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path, " for writing"));
  ssize_t n;
  do {
    n = ::write(fd.get(), value.data(), value.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("write '", value, "' to ", path));
  if (static_cast<size_t>(n) != value.size()) {
    return absl::InternalError(absl::StrCat("short write of '", value, "' to ", path));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CgroupDirectoryOps::WriteControl(const std::string& path, absl::string_view value) {
  return WriteFile(path, value);
}

namespace {

absl::StatusOr<int64_t> ReadInt(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  int64_t value;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &value)) {
    return absl::DataLossError(absl::StrCat("expected an integer in ", path, ", got '",
                                            absl::StripAsciiWhitespace(text), "'"));
  }
  return value;
}

// Reads `key value` lines (cpu.stat, memory.events, memory.oom_control).
// NotFound when the key is absent.
absl::StatusOr<int64_t> ReadKeyedInt(const std::string& path, absl::string_view key) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() != 2 || f[0] != key) continue;
    int64_t value;
    if (!absl::SimpleAtoi(f[1], &value)) {
      return absl::DataLossError(absl::StrCat("bad '", key, "' line in ", path, ": ", line));
    }
    return value;
  }
  return absl::NotFoundError(absl::StrCat("no '", key, "' in ", path));
}

// The union of the pids listed in `<dir>/cgroup.procs` for each dir; a dir
// that no longer exists contributes nothing.
absl::StatusOr<std::set<pid_t>> ReadProcs(const std::vector<std::string>& dirs) {
  std::set<pid_t> pids;
  for (const std::string& dir : dirs) {
    absl::StatusOr<std::string> text = ReadFile(JoinPath(dir, "cgroup.procs"));
    if (absl::IsNotFound(text.status())) continue;
    if (!text.ok()) return text.status();
    for (absl::string_view token :
         absl::StrSplit(*text, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
      pid_t pid;
      if (!absl::SimpleAtoi(token, &pid) || pid <= 0) {
        return absl::DataLossError(absl::StrCat("bad pid '", token, "' in ", dir, "/cgroup.procs"));
      }
      pids.insert(pid);
    }
  }
  return pids;
}

std::set<std::string> ReadTokens(const std::string& path) {
  std::set<std::string> out;
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return out;
  for (absl::string_view t : absl::StrSplit(*text, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
    out.insert(std::string(absl::StripPrefix(t, "+")));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> ListSubdirectories(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return absl::ErrnoToStatus(errno, absl::StrCat("opendir ", dir));
  std::vector<std::string> out;
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    if (::stat(JoinPath(dir, name).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) out.push_back(name);
  }
  ::closedir(d);
  return out;
}

// Every cgroup beneath `dir` (nested groups), children before their parents:
// the order in which they can be removed.
absl::StatusOr<std::vector<std::string>> Descendants(const std::string& dir) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, ListSubdirectories(dir));
  std::vector<std::string> out;
  for (const std::string& name : names) {
    const std::string child = JoinPath(dir, name);
    ASSIGN_OR_RETURN(std::vector<std::string> below, Descendants(child));
    out.insert(out.end(), below.begin(), below.end());
    out.push_back(child);
  }
  return out;
}

// Polls `done` with a short backoff until it is true or `timeout` passes.
// Kernel state changes (freezing, tasks leaving a group) have no portable
// notification on v1, so a bounded poll is the honest way to wait.
absl::StatusOr<bool> PollUntil(const std::function<absl::StatusOr<bool>()>& done,
                               absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration backoff = absl::Milliseconds(1);
  for (;;) {
    ASSIGN_OR_RETURN(bool ok, done());
    if (ok) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Milliseconds(50));
  }
}

absl::Status ValidateName(absl::string_view what, absl::string_view name) {
  if (name.empty() || name == "." || name == ".." || absl::StrContains(name, '/') ||
      absl::StrContains(name, "..") || absl::StrContains(name, '\0') || name.size() > 200) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid cgroup ", what, " '", name,
                     "': must be non-empty, at most 200 bytes, without '/' or '..'"));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Killing.

// SIGKILLs every process listed in the groups' cgroup.procs. Each pid is
// pinned with a pidfd and then checked against a second read of cgroup.procs,
// so a pid that was recycled by a process outside the group in between is
// never signalled (pidfd_open(2), Linux 5.3).
absl::Status KillListedProcesses(const std::vector<std::string>& dirs) {
  ASSIGN_OR_RETURN(std::set<pid_t> listed, ReadProcs(dirs));
  std::vector<std::pair<pid_t, UniqueFd>> pinned;
  for (pid_t pid : listed) {
    int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (fd < 0) {
      if (errno == ESRCH) continue;  // already gone
      return absl::ErrnoToStatus(errno, absl::StrCat("pidfd_open ", pid, " (needs Linux 5.3+)"));
    }
    pinned.emplace_back(pid, UniqueFd(fd));
  }
  ASSIGN_OR_RETURN(std::set<pid_t> still_listed, ReadProcs(dirs));
  for (auto& [pid, fd] : pinned) {
    if (!still_listed.contains(pid)) continue;
    if (::syscall(SYS_pidfd_send_signal, fd.get(), SIGKILL, nullptr, 0) < 0 && errno != ESRCH) {
      return absl::ErrnoToStatus(errno, absl::StrCat("kill ", pid));
    }
  }
  return absl::OkStatus();
}

// Freezes through `state_file`, kills every listed task, and thaws again even
// when killing fails. A frozen group cannot fork, so one pass sees every task;
// SIGKILL takes effect once the group is thawed. If freezing does not finish
// in time (a task stuck in the kernel) we kill anyway.
absl::Status FreezeKillThaw(const std::vector<std::string>& dirs, const std::string& state_file,
                            absl::string_view freeze, absl::string_view thaw,
                            const std::function<absl::StatusOr<bool>()>& frozen) {
  RETURN_IF_ERROR(WriteFile(state_file, freeze));
  absl::StatusOr<bool> done = PollUntil(frozen, kFreezeTimeout);
  absl::Status killed = done.ok() ? KillListedProcesses(dirs) : done.status();
  absl::Status thawed = WriteFile(state_file, thaw);
  RETURN_IF_ERROR(killed);
  return thawed;
}

// ---------------------------------------------------------------------------
// Groups.

class RealDirectoryOps : public CgroupDirectoryOps {
 public:
  absl::Status MakeDirectory(const std::string& path) override {
    if (::mkdir(path.c_str(), 0755) == 0) return absl::OkStatus();
    return DirError(errno, "mkdir", path);
  }
  absl::Status RemoveDirectory(const std::string& path) override {
    if (::rmdir(path.c_str()) == 0) return absl::OkStatus();
    return DirError(errno, "rmdir", path);
  }

 private:
  static absl::Status DirError(int err, absl::string_view op, const std::string& path) {
    // A read-only cgroupfs is "not writable" for our purposes, like EACCES.
    if (err == EROFS)
      return absl::PermissionDeniedError(absl::StrCat(op, " ", path, ": read-only"));
    return absl::ErrnoToStatus(err, absl::StrCat(op, " ", path));
  }
};

// Test-only fault injection (docs/operations.md, "Fault injection"): with
// WARDEN_TEST_FAIL_CGROUP_CREATE_PERCENT=N in wardend's environment, read
// once when the manager is created, N% of the directories made for
// sandboxes' groups fail as if mkdir(2) had returned ENOSPC (the kernel's
// answer past cgroup limits). On v1 a group is one directory per hierarchy,
// so more than N% of groups fail, some half-made. The subtree itself, made at start, never
// fails. Off (0) unless the variable is set; the soak (scripts/soak.py)
// uses it to prove that a failed group creation is answered with a status.
class FaultInjectingDirectoryOps : public CgroupDirectoryOps {
 public:
  FaultInjectingDirectoryOps(std::shared_ptr<CgroupDirectoryOps> real, int percent)
      : real_(std::move(real)), percent_(percent), random_(std::random_device{}()) {}

  // Faults start once the manager's own subtree exists.
  void Arm() { armed_ = true; }

  absl::Status MakeDirectory(const std::string& path) override {
    if (armed_ && Roll()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "mkdir ", path, ": No space left on device (injected by WARDEN_TEST_FAIL_CGROUP_CREATE_PERCENT)"));
    }
    return real_->MakeDirectory(path);
  }
  absl::Status RemoveDirectory(const std::string& path) override { return real_->RemoveDirectory(path); }
  absl::Status WriteControl(const std::string& path, absl::string_view value) override {
    return real_->WriteControl(path, value);
  }

 private:
  bool Roll() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::uniform_int_distribution<int>(0, 99)(random_) < percent_;
  }

  const std::shared_ptr<CgroupDirectoryOps> real_;
  const int percent_;
  std::atomic<bool> armed_{false};
  std::mutex mu_;
  std::mt19937 random_;
};

// WARDEN_TEST_FAIL_CGROUP_CREATE_PERCENT, 0 when unset or not 1..100.
int InjectedCgroupFaultPercent() {
  const char* value = std::getenv("WARDEN_TEST_FAIL_CGROUP_CREATE_PERCENT");
  int percent = 0;
  if (value == nullptr || !absl::SimpleAtoi(value, &percent) || percent < 1 || percent > 100) return 0;
  return percent;
}

// Shared lifecycle of one sandbox's group: a list of directories (one per
// v1 hierarchy, or the single v2 directory) that are joined, drained and
// removed together. Subclasses know the control files.
class GroupBase : public Cgroup {
 public:
  GroupBase(std::vector<std::string> dirs, std::shared_ptr<CgroupDirectoryOps> ops)
      : dirs_(std::move(dirs)), ops_(std::move(ops)) {}
  ~GroupBase() override = default;

  absl::Status AddProcess(pid_t pid) override {
    for (const std::string& dir : dirs_) {
      RETURN_IF_ERROR(ops_->WriteControl(JoinPath(dir, "cgroup.procs"), absl::StrCat(pid)));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<bool> Empty() const override {
    ASSIGN_OR_RETURN(std::set<pid_t> pids, ReadProcs(dirs_));
    return pids.empty();
  }

  absl::StatusOr<int> ProcessCount() const override {
    ASSIGN_OR_RETURN(std::set<pid_t> pids, ReadProcs(dirs_));
    return static_cast<int>(pids.size());
  }

  absl::Status Destroy() override {
    if (destroyed_) return absl::OkStatus();
    bool any = false;
    for (const std::string& dir : dirs_) any = any || Exists(dir);
    if (!any) {
      destroyed_ = true;
      return absl::OkStatus();
    }
    // Children first: cgroupfs refuses to rmdir a group that has any.
    RETURN_IF_ERROR(DestroyChildren());
    RETURN_IF_ERROR(KillAll());
    ASSIGN_OR_RETURN(bool empty, PollUntil([this] { return Empty(); }, kDrainTimeout));
    if (!empty) {
      ASSIGN_OR_RETURN(std::set<pid_t> left, ReadProcs(dirs_));
      return absl::DeadlineExceededError(
          absl::StrCat("cgroup ", dirs_.front(), " still holds pids ", absl::StrJoin(left, ","),
                       " ", absl::FormatDuration(kDrainTimeout), " after SIGKILL; not removed"));
    }
    absl::Status first_error;
    for (const std::string& dir : dirs_) {
      absl::Status s = ops_->RemoveDirectory(dir);
      if (!s.ok() && !absl::IsNotFound(s) && first_error.ok()) first_error = s;
    }
    destroyed_ = first_error.ok();
    return first_error;
  }

  std::vector<std::string> Paths() const override { return dirs_; }

  absl::StatusOr<std::unique_ptr<Cgroup>> CreateChild(absl::string_view name,
                                                      const CgroupLimits& limits) override {
    RETURN_IF_ERROR(ValidateName("group name", name));
    RETURN_IF_ERROR(PrepareForChildren());
    return Materialize(MakeChild(std::string(name)), limits);
  }

  // For a group whose directories could not all be made: its destructor must
  // not touch paths that may belong to another group of the same name.
  void Disown() { destroyed_ = true; }

  // Makes `group`'s directories and writes its limits. On failure nothing
  // it made is left behind.
  static absl::StatusOr<std::unique_ptr<Cgroup>> Materialize(std::unique_ptr<GroupBase> group,
                                                             const CgroupLimits& limits) {
    std::vector<std::string> made;
    for (const std::string& dir : group->dirs_) {
      absl::Status s = group->ops_->MakeDirectory(dir);
      if (!s.ok()) {
        for (const std::string& m : made) (void)group->ops_->RemoveDirectory(m);
        group->Disown();
        return s;
      }
      made.push_back(dir);
    }
    // From here the group owns its directories and removes them on failure.
    RETURN_IF_ERROR(group->SetLimits(limits));
    return std::unique_ptr<Cgroup>(std::move(group));
  }

 protected:
  virtual absl::Status SetLimits(const CgroupLimits& limits) = 0;
  // The group nested in this one under `name`; makes no directory.
  virtual std::unique_ptr<GroupBase> MakeChild(const std::string& name) const = 0;
  // Readies this group to hold groups instead of processes.
  virtual absl::Status PrepareForChildren() { return absl::OkStatus(); }

  // This group's directories and those of every group nested in it.
  std::vector<std::string> TreeDirs() const {
    std::vector<std::string> all;
    for (const std::string& dir : dirs_) {
      absl::StatusOr<std::vector<std::string>> below = Descendants(dir);
      if (below.ok()) all.insert(all.end(), below->begin(), below->end());
    }
    all.insert(all.end(), dirs_.begin(), dirs_.end());
    return all;
  }

  // Called from the subclasses' destructors, while KillAll is still theirs.
  void DestroyLoggingErrors() {
    absl::Status s = Destroy();
    if (!s.ok()) std::fprintf(stderr, "warden: destroying cgroup: %s\n", s.ToString().c_str());
  }

  const std::vector<std::string> dirs_;
  const std::shared_ptr<CgroupDirectoryOps> ops_;

 private:
  absl::Status DestroyChildren() {
    std::set<std::string> names;
    for (const std::string& dir : dirs_) {
      absl::StatusOr<std::vector<std::string>> found = ListSubdirectories(dir);
      if (found.ok()) names.insert(found->begin(), found->end());
    }
    absl::Status first_error;
    for (const std::string& name : names) {
      absl::Status s = MakeChild(name)->Destroy();
      if (!s.ok() && first_error.ok()) first_error = s;
    }
    return first_error;
  }

  bool destroyed_ = false;
};

// v1: one directory in each of the memory, pids, cpu, cpuacct and freezer
// hierarchies (fewer when some are co-mounted).
class CgroupV1 : public GroupBase {
 public:
  // `by_controller` maps each of kV1Controllers to this group's directory.
  CgroupV1(std::map<std::string, std::string> by_controller, std::vector<std::string> dirs,
           std::shared_ptr<CgroupDirectoryOps> ops)
      : GroupBase(std::move(dirs), std::move(ops)), by_controller_(std::move(by_controller)) {}
  ~CgroupV1() override { DestroyLoggingErrors(); }

  // The group `name` beneath the groups (or subtrees) in `parents`, which
  // maps each of kV1Controllers to a directory; makes no directory.
  static std::unique_ptr<CgroupV1> Nested(const std::map<std::string, std::string>& parents,
                                          const std::string& name,
                                          const std::shared_ptr<CgroupDirectoryOps>& ops) {
    std::map<std::string, std::string> by_controller;
    std::vector<std::string> dirs;
    for (const auto& [controller, parent] : parents) {
      by_controller[controller] = JoinPath(parent, name);
    }
    for (const char* controller : kV1Controllers) {
      const std::string& dir = by_controller.at(controller);
      if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
    }
    return std::make_unique<CgroupV1>(std::move(by_controller), std::move(dirs), ops);
  }

 protected:
  absl::Status SetLimits(const CgroupLimits& limits) override {
    const std::string& memory = by_controller_.at("memory");
    if (limits.memory_bytes > 0) {
      // memsw (memory+swap) must stay >= the memory limit, so the memory limit
      // goes first; memsw = the same value keeps the sandbox out of swap. The
      // file exists only with swap accounting (CONFIG_MEMCG_SWAP, swapaccount=1).
      const std::string value = absl::StrCat(limits.memory_bytes);
      RETURN_IF_ERROR(WriteFile(JoinPath(memory, "memory.limit_in_bytes"), value));
      const std::string memsw = JoinPath(memory, "memory.memsw.limit_in_bytes");
      if (Exists(memsw)) RETURN_IF_ERROR(WriteFile(memsw, value));
    }
    if (limits.pids > 0) {
      RETURN_IF_ERROR(
          WriteFile(JoinPath(by_controller_.at("pids"), "pids.max"), absl::StrCat(limits.pids)));
    }
    if (limits.cpu_percent > 0) {
      const std::string& cpu = by_controller_.at("cpu");
      RETURN_IF_ERROR(WriteFile(JoinPath(cpu, "cpu.cfs_period_us"), absl::StrCat(kCfsPeriodUs)));
      RETURN_IF_ERROR(WriteFile(JoinPath(cpu, "cpu.cfs_quota_us"),
                                absl::StrCat(kCfsPeriodUs * limits.cpu_percent / 100)));
    }
    return absl::OkStatus();
  }

  std::unique_ptr<GroupBase> MakeChild(const std::string& name) const override {
    return Nested(by_controller_, name, ops_);
  }

 public:
  bool Reusable() const override { return true; }

  absl::Status Reuse(const CgroupLimits& limits) override {
    ASSIGN_OR_RETURN(bool empty, Empty());
    if (!empty) return absl::FailedPreconditionError("the cgroup still holds processes");
    const std::string& memory = by_controller_.at("memory");
    // Unlimited first (memsw before memory: memsw >= memory at all times),
    // then SetLimits lowers them to the run's.
    const std::string memsw = JoinPath(memory, "memory.memsw.limit_in_bytes");
    if (Exists(memsw)) RETURN_IF_ERROR(WriteFile(memsw, "-1"));
    RETURN_IF_ERROR(WriteFile(JoinPath(memory, "memory.limit_in_bytes"), "-1"));
    RETURN_IF_ERROR(WriteFile(JoinPath(by_controller_.at("pids"), "pids.max"), "max"));
    RETURN_IF_ERROR(WriteFile(JoinPath(by_controller_.at("cpu"), "cpu.cfs_quota_us"), "-1"));
    RETURN_IF_ERROR(SetLimits(limits));
    // Writing 0 resets the watermark to the current usage and the CPU
    // total to zero (cgroup-v1/memory.rst 5.7, cpuacct.rst). What stays
    // charged is page cache the last run read in (reclaimable; its anonymous
    // memory and tmpfs died with it). Not memory.force_empty: it drains
    // every CPU's LRU cache and waits for them, 100 ms on a busy host.
    RETURN_IF_ERROR(WriteFile(JoinPath(memory, "memory.max_usage_in_bytes"), "0"));
    RETURN_IF_ERROR(WriteFile(JoinPath(by_controller_.at("cpuacct"), "cpuacct.usage"), "0"));
    // The OOM kill count cannot be reset: Usage() reports it from here.
    absl::StatusOr<int64_t> ooms = ReadKeyedInt(JoinPath(memory, "memory.oom_control"), "oom_kill");
    oom_kills_before_ = ooms.ok() ? *ooms : 0;
    return absl::OkStatus();
  }

  absl::StatusOr<CgroupUsage> Usage() const override {
    CgroupUsage usage;
    ASSIGN_OR_RETURN(usage.cpu_usage_ns,
                     ReadInt(JoinPath(by_controller_.at("cpuacct"), "cpuacct.usage")));
    const std::string& memory = by_controller_.at("memory");
    ASSIGN_OR_RETURN(usage.peak_memory_bytes,
                     ReadInt(JoinPath(memory, "memory.max_usage_in_bytes")));
    if (const std::string current = JoinPath(memory, "memory.usage_in_bytes"); Exists(current)) {
      ASSIGN_OR_RETURN(usage.memory_bytes, ReadInt(current));
    }
    // The oom_kill line appeared in Linux 4.13; older kernels report 0.
    absl::StatusOr<int64_t> ooms = ReadKeyedInt(JoinPath(memory, "memory.oom_control"), "oom_kill");
    if (ooms.ok()) {
      usage.oom_kills = *ooms - oom_kills_before_;
    } else if (!absl::IsNotFound(ooms.status())) {
      return ooms.status();
    }
    return usage;
  }

  absl::Status KillAll() override {
    // Freezing costs milliseconds on v1 even for an empty group, and the
    // usual caller has already reaped the sandbox's whole pid namespace.
    // The v1 freezer freezes nested groups with their parent; cgroup.procs
    // lists only a group's own tasks, so every nested group is read.
    const std::vector<std::string> tree = TreeDirs();
    ASSIGN_OR_RETURN(std::set<pid_t> pids, ReadProcs(tree));
    if (pids.empty()) return absl::OkStatus();
    const std::string state = JoinPath(by_controller_.at("freezer"), "freezer.state");
    return FreezeKillThaw(tree, state, "FROZEN", "THAWED", [&state]() -> absl::StatusOr<bool> {
      ASSIGN_OR_RETURN(std::string s, ReadFile(state));
      return absl::StripAsciiWhitespace(s) == "FROZEN";
    });
  }

  absl::Status SetFrozen(bool frozen) override {
    // The v1 freezer freezes nested groups with their parent.
    const std::string state = JoinPath(by_controller_.at("freezer"), "freezer.state");
    const char* want = frozen ? "FROZEN" : "THAWED";
    RETURN_IF_ERROR(WriteFile(state, want));
    ASSIGN_OR_RETURN(bool done, PollUntil(
                                    [&state, want]() -> absl::StatusOr<bool> {
                                      ASSIGN_OR_RETURN(std::string s, ReadFile(state));
                                      return absl::StripAsciiWhitespace(s) == want;
                                    },
                                    kFreezeTimeout));
    if (!done) return absl::DeadlineExceededError(absl::StrCat("the cgroup did not become ", want));
    return absl::OkStatus();
  }

 private:
  const std::map<std::string, std::string> by_controller_;
  int64_t oom_kills_before_ = 0;  // memory.oom_control's oom_kill when last reused
};

// v2: one directory in the unified hierarchy.
class CgroupV2 : public GroupBase {
 public:
  CgroupV2(std::string dir, std::shared_ptr<CgroupDirectoryOps> ops)
      : GroupBase({std::move(dir)}, std::move(ops)) {}
  ~CgroupV2() override { DestroyLoggingErrors(); }

 protected:
  absl::Status SetLimits(const CgroupLimits& limits) override {
    const std::string& dir = dirs_.front();
    if (limits.memory_bytes > 0) {
      RETURN_IF_ERROR(WriteFile(JoinPath(dir, "memory.max"), absl::StrCat(limits.memory_bytes)));
    }
    // Swap is never part of a sandbox's budget. memory.swap.max exists only
    // with swap accounting compiled in.
    const std::string swap = JoinPath(dir, "memory.swap.max");
    if (Exists(swap)) RETURN_IF_ERROR(WriteFile(swap, "0"));
    // At the limit the kernel kills the program, the OOM killer's first
    // choice (oom_score_adj 1000, sandbox_child.cc), and never the init, as
    // on v1; the supervisor then kills the rest. Not memory.oom.group: it
    // kills every task of the group but those at oom_score_adj -1000, the
    // init too, so the program's end is lost - on a stock Debian 12 host
    // (Linux 6.1) a one-shot at its memory limit then ended as WALL_TIMEOUT
    // instead of MEMORY_LIMIT (make test-host). Written, not left to the
    // default, so a group made by someone else cannot differ.
    const std::string oom_group = JoinPath(dir, "memory.oom.group");
    if (Exists(oom_group)) RETURN_IF_ERROR(WriteFile(oom_group, "0"));
    if (limits.pids > 0) {
      RETURN_IF_ERROR(WriteFile(JoinPath(dir, "pids.max"), absl::StrCat(limits.pids)));
    }
    if (limits.cpu_percent > 0) {
      const std::string cpu_max = JoinPath(dir, "cpu.max");
      if (!Exists(cpu_max)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "cpu_percent needs the cgroup v2 cpu controller, which is not enabled for ", dir,
            ": delegate it to wardend (systemd: Delegate=yes) or set cpu_percent to 0"));
      }
      RETURN_IF_ERROR(WriteFile(
          cpu_max, absl::StrCat(kCfsPeriodUs * limits.cpu_percent / 100, " ", kCfsPeriodUs)));
    }
    return absl::OkStatus();
  }

  std::unique_ptr<GroupBase> MakeChild(const std::string& name) const override {
    return std::make_unique<CgroupV2>(JoinPath(dirs_.front(), name), ops_);
  }

  // The no-internal-processes rule allows it: this group holds no process.
  absl::Status PrepareForChildren() override {
    const std::string& dir = dirs_.front();
    std::set<std::string> available = ReadTokens(JoinPath(dir, "cgroup.controllers"));
    std::vector<std::string> enable;
    for (const char* c : {"memory", "pids", "cpu"}) {
      if (available.contains(c)) enable.push_back(c);
    }
    if (!enable.empty()) {
      RETURN_IF_ERROR(ops_->WriteControl(JoinPath(dir, "cgroup.subtree_control"),
                                         absl::StrCat("+", absl::StrJoin(enable, " +"))));
    }
    // An OOM at this group's limit kills the task the kernel picked (a
    // program, oom_score_adj 1000), not every child: no memory.oom.group.
    const std::string oom_group = JoinPath(dir, "memory.oom.group");
    if (Exists(oom_group)) RETURN_IF_ERROR(WriteFile(oom_group, "0"));
    return absl::OkStatus();
  }

 public:
  absl::StatusOr<CgroupUsage> Usage() const override {
    const std::string& dir = dirs_.front();
    CgroupUsage usage;
    ASSIGN_OR_RETURN(int64_t usec, ReadKeyedInt(JoinPath(dir, "cpu.stat"), "usage_usec"));
    usage.cpu_usage_ns = usec * 1000;
    // memory.peak appeared in Linux 5.19; 0 means unknown.
    const std::string peak = JoinPath(dir, "memory.peak");
    if (Exists(peak)) {
      ASSIGN_OR_RETURN(usage.peak_memory_bytes, ReadInt(peak));
    }
    if (const std::string current = JoinPath(dir, "memory.current"); Exists(current)) {
      ASSIGN_OR_RETURN(usage.memory_bytes, ReadInt(current));
    }
    // memory.events, not memory.events.local: oom_kill counts the group's
    // processes killed by any OOM killer, whichever group's limit was hit,
    // and (unless cgroup2 is mounted with memory_localevents) its
    // descendants' too (cgroup-v2.rst, "memory.events"). A sandbox's group
    // is a leaf, where the two files agree.
    absl::StatusOr<int64_t> ooms = ReadKeyedInt(JoinPath(dir, "memory.events"), "oom_kill");
    if (ooms.ok()) {
      usage.oom_kills = *ooms;
    } else if (!absl::IsNotFound(ooms.status())) {
      return ooms.status();
    }
    return usage;
  }

  absl::Status KillAll() override {
    const std::string& dir = dirs_.front();
    // cgroup.kill (Linux 5.14) kills every task atomically, forks included.
    const std::string kill = JoinPath(dir, "cgroup.kill");
    if (Exists(kill)) return WriteFile(kill, "1");
    const std::string events = JoinPath(dir, "cgroup.events");
    return FreezeKillThaw(TreeDirs(), JoinPath(dir, "cgroup.freeze"), "1", "0",
                          [&events]() -> absl::StatusOr<bool> {
                            ASSIGN_OR_RETURN(int64_t frozen, ReadKeyedInt(events, "frozen"));
                            return frozen == 1;
                          });
  }

  absl::Status SetFrozen(bool frozen) override {
    const std::string& dir = dirs_.front();
    const std::string events = JoinPath(dir, "cgroup.events");
    RETURN_IF_ERROR(WriteFile(JoinPath(dir, "cgroup.freeze"), frozen ? "1" : "0"));
    ASSIGN_OR_RETURN(bool done, PollUntil(
                                    [&events, frozen]() -> absl::StatusOr<bool> {
                                      ASSIGN_OR_RETURN(int64_t state, ReadKeyedInt(events, "frozen"));
                                      return (state == 1) == frozen;
                                    },
                                    kFreezeTimeout));
    if (!done) return absl::DeadlineExceededError(frozen ? "the cgroup did not freeze" : "the cgroup did not thaw");
    return absl::OkStatus();
  }
};

// ---------------------------------------------------------------------------
// Detection: which hierarchies exist and where the current cgroup is in each.

struct Mount {
  std::string root;         // the hierarchy path mounted (field 4)
  std::string mount_point;  // where (field 5), unescaped
  std::string fstype;
  std::set<std::string> super_options;
};

// mountinfo escapes space, tab, newline and backslash as \ooo (proc(5)).
std::string UnescapeMountPath(absl::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      int v = 0;
      bool ok = true;
      for (size_t j = 1; j <= 3; ++j) {
        char c = s[i + j];
        if (c < '0' || c > '7') ok = false;
        v = v * 8 + (c - '0');
      }
      if (ok) {
        out.push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

absl::StatusOr<std::vector<Mount>> ParseMountInfo(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  std::vector<Mount> mounts;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    size_t sep = 6;
    while (sep < f.size() && f[sep] != "-") ++sep;
    if (f.size() < 6 || sep + 3 >= f.size()) {
      return absl::DataLossError(absl::StrCat("malformed line in ", path, ": ", line));
    }
    if (f[sep + 1] != "cgroup" && f[sep + 1] != "cgroup2") continue;
    Mount m;
    m.root = UnescapeMountPath(f[3]);
    m.mount_point = UnescapeMountPath(f[4]);
    m.fstype = std::string(f[sep + 1]);
    for (absl::string_view o : absl::StrSplit(f[sep + 3], ','))
      m.super_options.insert(std::string(o));
    mounts.push_back(std::move(m));
  }
  return mounts;
}

// One line of /proc/self/cgroup: "id:controller,list:/path" (cgroups(7)).
struct Membership {
  std::set<std::string> controllers;  // empty for the v2 line "0::/path"
  std::string path;
  bool unified = false;
};

absl::StatusOr<std::vector<Membership>> ParseSelfCgroup(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  std::vector<Membership> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3 || !absl::StartsWith(f[2], "/")) {
      return absl::DataLossError(absl::StrCat("malformed line in ", path, ": ", line));
    }
    Membership m;
    m.unified = f[0] == "0" && f[1].empty();
    for (absl::string_view c : absl::StrSplit(f[1], ',', absl::SkipEmpty())) {
      m.controllers.insert(std::string(c));
    }
    m.path = std::string(f[2]);
    out.push_back(std::move(m));
  }
  return out;
}

// The directory of cgroup `cgroup_path` under `mount`: /proc/self/cgroup
// paths are relative to the hierarchy root, of which `mount.root` is mounted.
std::string CgroupDir(const std::string& fs_root, const Mount& mount,
                      const std::string& cgroup_path) {
  absl::string_view rel = cgroup_path;
  if (mount.root != "/" && absl::StartsWith(rel, mount.root)) rel.remove_prefix(mount.root.size());
  std::string dir = absl::StrCat(fs_root, mount.mount_point);
  if (!rel.empty() && rel != "/") dir = JoinPath(dir, absl::StripPrefix(rel, "/"));
  return dir;
}

struct Detected {
  // v2: the directory Warden's subtree goes in (the delegated cgroup, by
  // default this process's own), this process's own cgroup directory, the
  // hierarchy root, and why v2 is not usable (empty when it is).
  std::string v2_dir;
  std::string v2_self_dir;
  std::string v2_root;
  std::string v2_self_path;  // as /proc/self/cgroup names it
  std::string v2_problem;
  // v1: each required controller's current cgroup directory, and why v1 is
  // not usable (empty when it is).
  std::map<std::string, std::string> v1_dirs;
  std::string v1_problem;
};

absl::StatusOr<Detected> Detect(const CgroupOptions& options) {
  ASSIGN_OR_RETURN(std::vector<Mount> mounts,
                   ParseMountInfo(options.fs_root + options.mountinfo_path));
  ASSIGN_OR_RETURN(std::vector<Membership> members,
                   ParseSelfCgroup(options.fs_root + options.self_cgroup_path));
  Detected d;

  const Mount* unified = nullptr;
  for (const Mount& m : mounts) {
    if (m.fstype == "cgroup2") {
      unified = &m;
      break;
    }
  }
  const Membership* unified_member = nullptr;
  for (const Membership& m : members) {
    if (m.unified) unified_member = &m;
  }
  if (unified == nullptr) {
    d.v2_problem = "no cgroup2 filesystem is mounted";
  } else if (unified_member == nullptr) {
    d.v2_problem = "this process has no '0::' line in /proc/self/cgroup";
  } else {
    d.v2_self_path = unified_member->path;
    d.v2_self_dir = CgroupDir(options.fs_root, *unified, unified_member->path);
    d.v2_dir = d.v2_self_dir;
    d.v2_root = options.fs_root + unified->mount_point;
    const std::string& delegated = options.delegated_cgroup;
    if (!delegated.empty()) {
      const std::string& self = unified_member->path;
      const bool ancestor = delegated == "/" || self == delegated || absl::StartsWith(self, delegated + "/");
      if (!absl::StartsWith(delegated, "/") || absl::StrContains(delegated, "..") || !ancestor) {
        return absl::InvalidArgumentError(absl::StrCat(
            "delegated cgroup '", delegated, "' is not this process's cgroup (", self,
            ") or an ancestor of it: unset WARDEN_KEEPER_CGROUP, or start wardend through warden-keeper"));
      }
      d.v2_dir = CgroupDir(options.fs_root, *unified, delegated);
    }
    std::set<std::string> available = ReadTokens(JoinPath(d.v2_dir, "cgroup.controllers"));
    if (!available.contains("memory") || !available.contains("pids")) {
      d.v2_problem = absl::StrCat("cgroup v2 at ", d.v2_dir, " offers controllers [",
                                  absl::StrJoin(available, " "), "], needs memory and pids");
    }
  }

  for (const char* controller : kV1Controllers) {
    const Mount* mount = nullptr;
    for (const Mount& m : mounts) {
      if (m.fstype == "cgroup" && m.super_options.contains(controller)) {
        mount = &m;
        break;
      }
    }
    const Membership* member = nullptr;
    for (const Membership& m : members) {
      if (m.controllers.contains(controller)) member = &m;
    }
    if (mount == nullptr || member == nullptr) {
      d.v1_problem = absl::StrCat("cgroup v1 controller '", controller, "' is ",
                                  mount == nullptr ? "not mounted" : "not in /proc/self/cgroup");
      d.v1_dirs.clear();
      break;
    }
    d.v1_dirs[controller] = CgroupDir(options.fs_root, *mount, member->path);
  }
  return d;
}

absl::Status NotWritable(absl::string_view what, const std::string& path, const absl::Status& cause,
                         absl::string_view remedy) {
  return absl::PermissionDeniedError(absl::StrCat(what, " ", path, " is not writable by uid ",
                                                  ::geteuid(), ": ", remedy, " (", cause.message(),
                                                  ")"));
}

absl::Status CheckWritable(absl::string_view what, const std::string& path,
                           absl::string_view remedy) {
  if (::access(path.c_str(), W_OK) == 0) return absl::OkStatus();
  return NotWritable(what, path, absl::ErrnoToStatus(errno, absl::StrCat("access ", path)), remedy);
}

constexpr absl::string_view kV1Remedy =
    "run wardend as root, or give its uid a writable cgroup in each of the memory, pids, cpu, "
    "cpuacct and freezer hierarchies";
constexpr absl::string_view kV2Remedy = "run wardend under systemd with Delegate=yes, or as root";

// ---------------------------------------------------------------------------
// Managers.

// Removes whatever groups are still inside `subtrees` (destroyed through
// `make_group` so they are killed first), then the subtrees themselves.
void RemoveSubtrees(
    const std::vector<std::string>& subtrees, CgroupDirectoryOps& ops,
    const std::function<std::unique_ptr<GroupBase>(const std::string&)>& make_group) {
  std::set<std::string> leftovers;
  for (const std::string& dir : subtrees) {
    absl::StatusOr<std::vector<std::string>> names = ListSubdirectories(dir);
    if (names.ok()) leftovers.insert(names->begin(), names->end());
  }
  for (const std::string& name : leftovers) {
    std::unique_ptr<GroupBase> group = make_group(name);
    absl::Status s = group->Destroy();
    if (!s.ok()) {
      std::fprintf(stderr, "warden: removing leftover cgroup %s: %s\n", name.c_str(),
                   s.ToString().c_str());
    }
  }
  for (const std::string& dir : subtrees) {
    absl::Status s = ops.RemoveDirectory(dir);
    if (!s.ok() && !absl::IsNotFound(s)) {
      std::fprintf(stderr, "warden: removing cgroup subtree: %s\n", s.ToString().c_str());
    }
  }
}

// Checks a subtree name read back from a dead daemon's record before
// anything in it is killed or removed.
absl::Status ValidateReclaimable(absl::string_view name, absl::string_view own) {
  RETURN_IF_ERROR(ValidateName("subtree_name", name));
  if (!absl::StartsWith(name, "warden-") || absl::EndsWith(name, ".supervisor")) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' is not the name of a Warden cgroup subtree; not reclaimed"));
  }
  if (name == own) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' is this wardend's own cgroup subtree; not reclaimed"));
  }
  return absl::OkStatus();
}

// Shared by both managers' ReclaimSubtree. `subtrees` are the dead
// subtree's directories that exist (one per v1 hierarchy), `extra` a group
// beside them to empty and remove too (the v2 leaf; may be null), and
// `make_group` builds one of the dead subtree's groups by name.
absl::StatusOr<CgroupManager::Reclaimed> ReclaimDirectories(
    const std::vector<std::string>& subtrees, std::unique_ptr<GroupBase> extra,
    CgroupDirectoryOps& ops,
    const std::function<std::unique_ptr<GroupBase>(const std::string&)>& make_group,
    const std::set<std::string>& keep) {
  // Groups (nested ones before their parents), then the subtrees: the order
  // of removal. Groups named in `keep` (adopted by the keeper) stay, with
  // everything in them.
  std::vector<std::string> all;
  std::set<std::string> names_to_remove;
  for (const std::string& dir : subtrees) {
    ASSIGN_OR_RETURN(std::vector<std::string> names, ListSubdirectories(dir));
    for (const std::string& name : names) {
      if (keep.contains(name)) continue;
      const std::string group = JoinPath(dir, name);
      ASSIGN_OR_RETURN(std::vector<std::string> below, Descendants(group));
      all.insert(all.end(), below.begin(), below.end());
      all.push_back(group);
      names_to_remove.insert(name);
    }
  }
  if (keep.empty()) all.insert(all.end(), subtrees.begin(), subtrees.end());
  if (extra != nullptr) {
    for (const std::string& dir : extra->Paths()) all.push_back(dir);
  }
  CgroupManager::Reclaimed reclaimed;
  ASSIGN_OR_RETURN(std::set<pid_t> pids, ReadProcs(all));
  if (pids.contains(::getpid())) {
    // Not even the leaf: destroying it would kill this process.
    if (extra != nullptr) extra->Disown();
    return absl::FailedPreconditionError(absl::StrCat(
        "this wardend runs inside the cgroup subtree it was asked to reclaim (",
        absl::StrJoin(all, ", "), "); start it from its service's own cgroup instead"));
  }
  reclaimed.processes = static_cast<int>(pids.size());
  if (extra != nullptr) {
    absl::Status s = extra->Destroy();
    if (!s.ok()) std::fprintf(stderr, "warden: reclaiming cgroup: %s\n", s.ToString().c_str());
  }
  if (keep.empty()) {
    RemoveSubtrees(subtrees, ops, make_group);
  } else {
    // Adopted groups stay, and so does the subtree holding them.
    for (const std::string& name : names_to_remove) {
      absl::Status s = make_group(name)->Destroy();
      if (!s.ok()) std::fprintf(stderr, "warden: reclaiming cgroup %s: %s\n", name.c_str(), s.ToString().c_str());
    }
  }
  std::vector<std::string> left;
  for (const std::string& dir : all) (Exists(dir) ? left : reclaimed.directories).push_back(dir);
  if (!left.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "could not reclaim cgroup ", absl::StrJoin(left, ", "),
        " (the log says why): remove it with rmdir once its processes are gone"));
  }
  return reclaimed;
}

std::string YesNo(bool b) { return b ? "yes" : "no"; }

class CgroupManagerV1 : public CgroupManager {
 public:
  CgroupManagerV1(std::shared_ptr<CgroupDirectoryOps> ops) : ops_(std::move(ops)) {}
  ~CgroupManagerV1() override {
    RemoveSubtrees(created_, *ops_, [this](const std::string& name) { return MakeGroup(name); });
  }

  absl::Status Init(const std::map<std::string, std::string>& current, const std::string& subtree) {
    current_by_controller_ = current;
    subtree_name_ = subtree;
    for (const char* controller : kV1Controllers) {
      const std::string dir = JoinPath(current.at(controller), subtree);
      subtree_by_controller_[controller] = dir;
      if (std::find(created_.begin(), created_.end(), dir) != created_.end())
        continue;  // co-mounted
      absl::Status s = ops_->MakeDirectory(dir);
      if (absl::IsPermissionDenied(s)) {
        return NotWritable(absl::StrCat("cgroup v1 ", controller, " hierarchy"),
                           current.at(controller), s, kV1Remedy);
      }
      if (absl::IsAlreadyExists(s)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "cgroup ", dir, " already exists: another wardend uses subtree name '", subtree,
            "', or a previous one crashed (remove it with rmdir once it is empty)"));
      }
      RETURN_IF_ERROR(s);
      created_.push_back(dir);
      RETURN_IF_ERROR(CheckWritable(absl::StrCat("cgroup v1 ", controller, " subtree"),
                                    JoinPath(dir, "cgroup.procs"), kV1Remedy));
    }
    return absl::OkStatus();
  }

  CgroupVersion version() const override { return CgroupVersion::kV1; }

  absl::StatusOr<std::unique_ptr<Cgroup>> CreateGroup(absl::string_view name,
                                                      const CgroupLimits& limits) override {
    RETURN_IF_ERROR(ValidateName("group name", name));
    return GroupBase::Materialize(MakeGroup(std::string(name)), limits);
  }

  std::string Describe() const override {
    std::string out = "cgroup v1 (controllers: memory pids cpu cpuacct freezer)\n";
    for (const char* controller : kV1Controllers) {
      const std::string& dir = subtree_by_controller_.at(controller);
      absl::StrAppend(&out, "  ", controller, ": ", dir);
      if (std::string(controller) == "memory") {
        absl::StrAppend(&out, " (memory.memsw.limit_in_bytes: ",
                        YesNo(Exists(JoinPath(dir, "memory.memsw.limit_in_bytes"))),
                        ", memory.max_usage_in_bytes: ",
                        YesNo(Exists(JoinPath(dir, "memory.max_usage_in_bytes"))), ")");
      }
      out += "\n";
    }
    out += "  cgroup.kill: no (v1 kills by freezing and signalling each task)\n";
    return out;
  }

  std::vector<std::string> SubtreePaths() const override { return created_; }

  absl::StatusOr<Reclaimed> ReclaimSubtree(absl::string_view subtree_name,
                                           const std::set<std::string>& keep) const override {
    RETURN_IF_ERROR(ValidateReclaimable(subtree_name, subtree_name_));
    std::map<std::string, std::string> dead_by_controller;
    std::vector<std::string> existing;
    for (const char* controller : kV1Controllers) {
      const std::string dir = JoinPath(current_by_controller_.at(controller), subtree_name);
      dead_by_controller[controller] = dir;
      if (Exists(dir) && std::find(existing.begin(), existing.end(), dir) == existing.end()) {
        existing.push_back(dir);
      }
    }
    return ReclaimDirectories(
        existing, nullptr, *ops_,
        [&](const std::string& name) { return CgroupV1::Nested(dead_by_controller, name, ops_); }, keep);
  }

  absl::StatusOr<std::unique_ptr<Cgroup>> OpenGroup(absl::string_view subtree_name,
                                                    absl::string_view group_name) const override {
    RETURN_IF_ERROR(ValidateName("subtree_name", subtree_name));
    RETURN_IF_ERROR(ValidateName("group name", group_name));
    std::map<std::string, std::string> subtrees;
    for (const char* controller : kV1Controllers) {
      subtrees[controller] = JoinPath(current_by_controller_.at(controller), subtree_name);
    }
    std::unique_ptr<CgroupV1> group = CgroupV1::Nested(subtrees, std::string(group_name), ops_);
    for (const std::string& dir : group->Paths()) {
      if (!Exists(dir)) {
        group->Disown();
        return absl::NotFoundError(absl::StrCat("cgroup ", dir, " does not exist"));
      }
    }
    return std::unique_ptr<Cgroup>(std::move(group));
  }

 private:
  std::unique_ptr<CgroupV1> MakeGroup(const std::string& name) const {
    return CgroupV1::Nested(subtree_by_controller_, name, ops_);
  }

  const std::shared_ptr<CgroupDirectoryOps> ops_;
  std::map<std::string, std::string> current_by_controller_;  // where we started
  std::string subtree_name_;
  std::map<std::string, std::string> subtree_by_controller_;
  std::vector<std::string> created_;  // distinct subtree dirs, in kV1Controllers order
};

// cgroup v2 and the no-internal-processes rule (cgroup-v2.rst, "No Internal
// Process Constraint"): a non-root cgroup with controllers enabled in its
// cgroup.subtree_control cannot hold processes. To give sandboxes memory,
// pids and cpu control, the delegated cgroup C (this process's own, or the
// one warden-keeper left for its leaf C/keeper) must enable them for its
// children, so - like nsjail - this process moves itself into the leaf
// C/<subtree_name>.supervisor first: always when it runs below C (in the
// keeper's leaf, which is not its own), else when C is not the root, lacks
// the controllers and holds processes. Sandboxes live in
// C/<subtree_name>/<name>. On destruction this is undone: back into the
// keeper's leaf; or, when no other child of C remains, back into C with the
// controllers it enabled disabled again.
class CgroupManagerV2 : public CgroupManager {
 public:
  CgroupManagerV2(std::shared_ptr<CgroupDirectoryOps> ops) : ops_(std::move(ops)) {}
  ~CgroupManagerV2() override {
    std::vector<std::string> subtrees;
    if (created_subtree_) subtrees.push_back(subtree_);
    RemoveSubtrees(subtrees, *ops_, [this](const std::string& name) { return MakeGroup(name); });
    Restore();
  }

  absl::Status Init(const std::string& current, const std::string& self, const std::string& root,
                    const std::string& subtree_name) {
    current_ = current;
    self_ = self;
    subtree_name_ = subtree_name;
    subtree_ = JoinPath(current, subtree_name);
    // A threaded subtree (cgroup-v2.rst, "Threads") takes only threaded
    // controllers: memory is not one, so sandboxes could get no memory limit
    // there. Kernels before 4.14 have no cgroup.type: domain.
    if (absl::StatusOr<std::string> type = ReadFile(JoinPath(current, "cgroup.type")); type.ok()) {
      const std::string kind(absl::StripAsciiWhitespace(*type));
      if (kind != "domain") {
        return absl::FailedPreconditionError(absl::StrCat(
            "cgroup ", current, " is of type '", kind, "' (a threaded subtree, cgroup-v2.rst \"Threads\"), "
            "where the memory controller cannot be enabled: run wardend in a domain cgroup, such as "
            "a systemd unit's with Delegate=yes"));
      }
    }
    delegated_ = ReadTokens(JoinPath(current, "cgroup.controllers"));
    for (const char* c : {"memory", "pids", "cpu"}) {
      if (delegated_.contains(c)) controllers_.push_back(c);
    }
    std::set<std::string> enabled = ReadTokens(JoinPath(current, "cgroup.subtree_control"));
    std::vector<std::string> missing;
    for (const std::string& c : controllers_) {
      if (!enabled.contains(c)) missing.push_back(c);
    }

    bool move = self != current;
    if (!move && !missing.empty() && current != root) {
      ASSIGN_OR_RETURN(std::set<pid_t> procs, ReadProcs({current}));
      move = !procs.empty();
    }
    if (move) {
      const std::string leaf = absl::StrCat(subtree_, ".supervisor");
      absl::Status s = ops_->MakeDirectory(leaf);
      if (absl::IsPermissionDenied(s)) return NotWritable("cgroup v2", current, s, kV2Remedy);
      RETURN_IF_ERROR(s);
      leaf_ = leaf;
      s = ops_->WriteControl(JoinPath(leaf, "cgroup.procs"), absl::StrCat(::getpid()));
      if (!s.ok()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "cannot move wardend out of ", self, " into ", leaf,
            " to free its cgroup for sandboxes: ", kV2Remedy, " (", s.message(), ")"));
      }
      moved_self_ = true;
    }
    if (!missing.empty()) {
      const std::string control = JoinPath(current, "cgroup.subtree_control");
      absl::Status s = ops_->WriteControl(control, absl::StrCat("+", absl::StrJoin(missing, " +")));
      if (absl::IsPermissionDenied(s)) return NotWritable("cgroup v2", control, s, kV2Remedy);
      if (!s.ok()) {
        std::string holders;
        if (absl::StatusOr<std::set<pid_t>> procs = ReadProcs({current}); procs.ok() && !procs->empty()) {
          holders = absl::StrCat(" (it holds pids ", absl::StrJoin(*procs, ","), ")");
        }
        return absl::FailedPreconditionError(absl::StrCat(
            "cannot enable ", absl::StrJoin(missing, " "), " in ", control,
            "; its cgroup holds other processes", holders,
            " (the cgroup v2 no-internal-processes rule): run wardend in a cgroup of its own, "
            "e.g. under systemd with Delegate=yes through warden-keeper, which moves itself into "
            "a leaf (", s.message(), ")"));
      }
      enabled_in_current_ = missing;
    }

    absl::Status s = ops_->MakeDirectory(subtree_);
    if (absl::IsPermissionDenied(s))
      return NotWritable("cgroup v2 subtree", subtree_, s, kV2Remedy);
    if (absl::IsAlreadyExists(s)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cgroup ", subtree_, " already exists: another wardend uses subtree name '", subtree_name,
          "', or a previous one crashed (remove it with rmdir once it is empty)"));
    }
    RETURN_IF_ERROR(s);
    created_subtree_ = true;
    RETURN_IF_ERROR(
        CheckWritable("cgroup v2 subtree", JoinPath(subtree_, "cgroup.procs"), kV2Remedy));
    s = ops_->WriteControl(JoinPath(subtree_, "cgroup.subtree_control"),
                           absl::StrCat("+", absl::StrJoin(controllers_, " +")));
    if (absl::IsPermissionDenied(s))
      return NotWritable("cgroup v2 subtree", subtree_, s, kV2Remedy);
    return s;
  }

  CgroupVersion version() const override { return CgroupVersion::kV2; }

  absl::StatusOr<std::unique_ptr<Cgroup>> CreateGroup(absl::string_view name,
                                                      const CgroupLimits& limits) override {
    RETURN_IF_ERROR(ValidateName("group name", name));
    return GroupBase::Materialize(MakeGroup(std::string(name)), limits);
  }

  std::string Describe() const override {
    std::string out = "cgroup v2\n";
    absl::StrAppend(&out, "  delegated cgroup: ", current_, "\n");
    absl::StrAppend(&out, "  delegated controllers: ", absl::StrJoin(delegated_, " "), "\n");
    absl::StrAppend(&out, "  subtree: ", subtree_, "\n");
    absl::StrAppend(&out, "  controllers: ", absl::StrJoin(controllers_, " "), "\n");
    if (std::find(controllers_.begin(), controllers_.end(), "cpu") == controllers_.end()) {
      absl::StrAppend(&out, "  (cpu is not delegated: sandboxes cannot get a CPU share limit; "
                            "delegate it: systemd's Delegate=yes does)\n");
    }
    if (moved_self_) absl::StrAppend(&out, "  wardend moved into leaf: ", leaf_, "\n");
    absl::StrAppend(&out, "  cgroup.kill: ", YesNo(Exists(JoinPath(subtree_, "cgroup.kill"))),
                    "\n");
    absl::StrAppend(&out, "  memory.peak: ", YesNo(Exists(JoinPath(subtree_, "memory.peak"))),
                    "\n");
    absl::StrAppend(
        &out, "  memory.swap.max: ", YesNo(Exists(JoinPath(subtree_, "memory.swap.max"))), "\n");
    return out;
  }

  std::vector<std::string> SubtreePaths() const override {
    if (!created_subtree_) return {};
    return {subtree_};
  }

  absl::StatusOr<Reclaimed> ReclaimSubtree(absl::string_view subtree_name,
                                           const std::set<std::string>& keep) const override {
    RETURN_IF_ERROR(ValidateReclaimable(subtree_name, subtree_name_));
    const std::string dead = JoinPath(current_, subtree_name);
    std::vector<std::string> existing;
    if (Exists(dead)) existing.push_back(dead);
    // The leaf the dead daemon had moved itself (and so its helpers) into.
    std::unique_ptr<GroupBase> leaf;
    const std::string leaf_dir = absl::StrCat(dead, ".supervisor");
    if (Exists(leaf_dir)) leaf = std::make_unique<CgroupV2>(leaf_dir, ops_);
    return ReclaimDirectories(
        existing, std::move(leaf), *ops_,
        [&](const std::string& name) { return std::make_unique<CgroupV2>(JoinPath(dead, name), ops_); },
        keep);
  }

  absl::StatusOr<std::unique_ptr<Cgroup>> OpenGroup(absl::string_view subtree_name,
                                                    absl::string_view group_name) const override {
    RETURN_IF_ERROR(ValidateName("subtree_name", subtree_name));
    RETURN_IF_ERROR(ValidateName("group name", group_name));
    const std::string dir = JoinPath(JoinPath(current_, subtree_name), group_name);
    if (!Exists(dir)) return absl::NotFoundError(absl::StrCat("cgroup ", dir, " does not exist"));
    return std::unique_ptr<Cgroup>(std::make_unique<CgroupV2>(dir, ops_));
  }

 private:
  std::unique_ptr<CgroupV2> MakeGroup(const std::string& name) const {
    return std::make_unique<CgroupV2>(JoinPath(subtree_, name), ops_);
  }

  // Undoes what Init did. Moved out of warden-keeper's leaf: back into it,
  // and the leaf goes (the controllers stay enabled in the delegated cgroup,
  // for the keeper's leaf and the next wardend). Else unless another child
  // of the current cgroup (a second manager, someone else's group) still
  // depends on it.
  void Restore() {
    auto log = [](const absl::Status& s) {
      if (!s.ok()) std::fprintf(stderr, "warden: restoring cgroup: %s\n", s.ToString().c_str());
    };
    if (moved_self_ && self_ != current_) {
      log(ops_->WriteControl(JoinPath(self_, "cgroup.procs"), absl::StrCat(::getpid())));
      log(ops_->RemoveDirectory(leaf_));
      return;
    }
    if (enabled_in_current_.empty() && !moved_self_) {
      if (!leaf_.empty()) (void)ops_->RemoveDirectory(leaf_);
      return;
    }
    absl::StatusOr<std::vector<std::string>> children = ListSubdirectories(current_);
    if (!children.ok()) return;
    for (const std::string& child : *children) {
      if (JoinPath(current_, child) != leaf_) return;
    }
    if (!enabled_in_current_.empty()) {
      log(ops_->WriteControl(JoinPath(current_, "cgroup.subtree_control"),
                             absl::StrCat("-", absl::StrJoin(enabled_in_current_, " -"))));
    }
    if (moved_self_) {
      log(ops_->WriteControl(JoinPath(current_, "cgroup.procs"), absl::StrCat(::getpid())));
      log(ops_->RemoveDirectory(leaf_));
    }
  }

  const std::shared_ptr<CgroupDirectoryOps> ops_;
  std::string current_;                          // the delegated cgroup the subtree goes in
  std::string self_;                             // the cgroup this process started in
  std::set<std::string> delegated_;              // current_'s cgroup.controllers
  std::string subtree_name_;
  std::string subtree_;                          // current_/<subtree_name>
  std::string leaf_;                             // where we moved ourselves, if made
  std::vector<std::string> controllers_;         // enabled for sandboxes
  std::vector<std::string> enabled_in_current_;  // what Init enabled in current_
  bool moved_self_ = false;
  bool created_subtree_ = false;
};

}  // namespace

namespace {

// Whether Create would pick cgroup v2 on what Detect found.
bool ChoosesV2(const CgroupOptions& options, const Detected& d) {
  return options.force_version != 1 && d.v2_problem.empty();
}

}  // namespace

absl::StatusOr<std::string> CgroupManager::MoveIntoLeaf(const CgroupOptions& options,
                                                        absl::string_view leaf_name) {
  RETURN_IF_ERROR(ValidateName("leaf name", leaf_name));
  ASSIGN_OR_RETURN(Detected d, Detect(options));
  if (!ChoosesV2(options, d) || d.v2_self_dir == d.v2_root) return std::string();
  std::shared_ptr<CgroupDirectoryOps> ops = options.directory_ops;
  if (ops == nullptr) ops = std::make_shared<RealDirectoryOps>();
  const std::string leaf = JoinPath(d.v2_self_dir, leaf_name);
  absl::Status made = ops->MakeDirectory(leaf);
  if (!made.ok() && !absl::IsAlreadyExists(made)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot make the cgroup ", leaf, " to leave ", d.v2_self_dir,
        " to wardend (the cgroup v2 no-internal-processes rule): ", kV2Remedy, " (", made.message(), ")"));
  }
  absl::Status moved = ops->WriteControl(JoinPath(leaf, "cgroup.procs"), absl::StrCat(::getpid()));
  if (!moved.ok()) {
    if (made.ok()) (void)ops->RemoveDirectory(leaf);
    return absl::FailedPreconditionError(absl::StrCat("cannot move into the cgroup ", leaf, ": ",
                                                      moved.message()));
  }
  return d.v2_self_path;
}

std::string CgroupManager::SharedCgroupProblem(const CgroupOptions& options) {
  absl::StatusOr<Detected> d = Detect(options);
  if (!d.ok() || !ChoosesV2(options, *d) || d->v2_dir == d->v2_root) return "";
  const std::set<std::string> available = ReadTokens(JoinPath(d->v2_dir, "cgroup.controllers"));
  const std::set<std::string> enabled = ReadTokens(JoinPath(d->v2_dir, "cgroup.subtree_control"));
  bool missing = false;
  for (const char* c : {"memory", "pids", "cpu"}) missing = missing || (available.contains(c) && !enabled.contains(c));
  if (!missing) return "";
  absl::StatusOr<std::set<pid_t>> procs = ReadProcs({d->v2_dir});
  if (!procs.ok()) return "";
  procs->erase(::getpid());
  if (procs->empty()) return "";
  return absl::StrCat("this process's cgroup ", d->v2_dir, " holds ", procs->size(),
                      " other processes (pids ", absl::StrJoin(*procs, ","),
                      ") and has no controllers enabled for its children, so none can be enabled "
                      "there (the cgroup v2 no-internal-processes rule)");
}

absl::StatusOr<std::unique_ptr<CgroupManager>> CgroupManager::Create(const CgroupOptions& options) {
  RETURN_IF_ERROR(ValidateName("subtree_name", options.subtree_name));
  if (options.force_version != 0 && options.force_version != 1 && options.force_version != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("force_version must be 0, 1 or 2, not ", options.force_version));
  }
  std::shared_ptr<CgroupDirectoryOps> ops = options.directory_ops;
  if (ops == nullptr) ops = std::make_shared<RealDirectoryOps>();
  std::shared_ptr<FaultInjectingDirectoryOps> faults;
  if (const int percent = InjectedCgroupFaultPercent(); percent > 0) {
    faults = std::make_shared<FaultInjectingDirectoryOps>(ops, percent);
    ops = faults;
  }
  ASSIGN_OR_RETURN(Detected d, Detect(options));

  int version = options.force_version;
  if (version == 0) {
    if (d.v2_problem.empty()) {
      version = 2;
    } else if (d.v1_problem.empty()) {
      version = 1;
    } else {
      return absl::FailedPreconditionError(absl::StrCat(
          "no usable cgroup hierarchy: ", d.v2_problem, "; ", d.v1_problem,
          ". wardend needs cgroup v2 with the memory and pids controllers delegated to it, or "
          "cgroup v1 with memory, pids, cpu, cpuacct and freezer mounted"));
    }
  }
  if (version == 2) {
    if (!d.v2_problem.empty()) return absl::FailedPreconditionError(d.v2_problem);
    auto manager = std::make_unique<CgroupManagerV2>(ops);
    // On failure the manager's destructor undoes whatever Init did.
    RETURN_IF_ERROR(manager->Init(d.v2_dir, d.v2_self_dir, d.v2_root, options.subtree_name));
    if (faults) faults->Arm();
    return std::unique_ptr<CgroupManager>(std::move(manager));
  }
  if (!d.v1_problem.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(d.v1_problem, ": wardend needs memory, pids, cpu, cpuacct and freezer"));
  }
  auto manager = std::make_unique<CgroupManagerV1>(ops);
  RETURN_IF_ERROR(manager->Init(d.v1_dirs, options.subtree_name));
  if (faults) faults->Arm();
  return std::unique_ptr<CgroupManager>(std::move(manager));
}

}  // namespace warden
