#include "server/state_dir.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "server/read_file.h"

namespace warden {
namespace {

constexpr char kLockFile[] = "wardend.lock";
constexpr char kRecordFile[] = "wardend.state";
constexpr char kRecordVersion[] = "warden-state 1";
// How long a SIGKILLed helper may take to exit before Reclaim reports it.
constexpr absl::Duration kExitTimeout = absl::Seconds(5);

absl::Status BadRecord(absl::string_view why) {
  return absl::DataLossError(absl::StrCat("bad state record: ", why));
}

// SIGKILLs `process` if it is still the one recorded and waits for it to
// go. Its pidfd pins it between the check and the signal.
absl::Status KillRecordedProcess(const ProcessRecord& process, bool* killed) {
  *killed = false;
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, process.pid, 0));
  if (fd < 0) {
    if (errno == ESRCH) return absl::OkStatus();
    return absl::ErrnoToStatus(errno, absl::StrCat("pidfd_open ", process.pid));
  }
  UniqueFd pidfd(fd);
  absl::StatusOr<uint64_t> start = ProcessStartTime(process.pid);
  if (!start.ok() || *start != process.start_time) return absl::OkStatus();  // another process now
  if (::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0) != 0) {
    if (errno == ESRCH) return absl::OkStatus();
    return absl::ErrnoToStatus(errno, absl::StrCat("kill ", process.what, " (pid ", process.pid, ")"));
  }
  *killed = true;
  // A pidfd polls readable once its process has exited (pidfd_open(2)).
  struct pollfd p = {pidfd.get(), POLLIN, 0};
  const absl::Time deadline = absl::Now() + kExitTimeout;
  for (;;) {
    const int ms = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (ms <= 0) {
      return absl::DeadlineExceededError(
          absl::StrCat(process.what, " (pid ", process.pid, ") did not exit after SIGKILL"));
    }
    const int n = ::poll(&p, 1, ms);
    if (n > 0) return absl::OkStatus();
    if (n < 0 && errno != EINTR) return absl::ErrnoToStatus(errno, "poll pidfd");
  }
}

}  // namespace

std::string StateRecord::Encode() const {
  std::string out = absl::StrCat(kRecordVersion, "\n", "daemon ", daemon_pid, "\n");
  if (!cgroup_subtree.empty()) absl::StrAppend(&out, "cgroup ", cgroup_subtree, "\n");
  for (const std::string& held : held_subtrees) absl::StrAppend(&out, "held-cgroup ", held, "\n");
  for (const ProcessRecord& p : processes) {
    absl::StrAppend(&out, "process ", p.pid, " ", p.start_time, " ", p.what, "\n");
  }
  for (const std::string& s : sockets) absl::StrAppend(&out, "socket ", s, "\n");
  return out;
}

absl::StatusOr<StateRecord> StateRecord::Decode(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  if (lines.empty() || lines.front() != kRecordVersion) {
    return BadRecord(absl::StrCat("it does not start with '", kRecordVersion, "'"));
  }
  StateRecord record;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::pair<std::string, std::string> kv = absl::StrSplit(lines[i], absl::MaxSplits(' ', 1));
    const std::string& value = kv.second;
    if (kv.first == "daemon") {
      if (!absl::SimpleAtoi(value, &record.daemon_pid)) return BadRecord(lines[i]);
    } else if (kv.first == "cgroup") {
      record.cgroup_subtree = value;
    } else if (kv.first == "held-cgroup") {
      if (value.empty()) return BadRecord(lines[i]);
      record.held_subtrees.push_back(value);
    } else if (kv.first == "process") {
      std::vector<std::string> f = absl::StrSplit(value, absl::MaxSplits(' ', 2));
      ProcessRecord p;
      if (f.size() != 3 || !absl::SimpleAtoi(f[0], &p.pid) || p.pid <= 1 ||
          !absl::SimpleAtoi(f[1], &p.start_time)) {
        return BadRecord(lines[i]);
      }
      p.what = f[2];
      record.processes.push_back(p);
    } else if (kv.first == "socket") {
      if (value.empty() || value.front() != '/') return BadRecord(lines[i]);
      record.sockets.push_back(value);
    } else {
      return BadRecord(absl::StrCat("unknown line '", lines[i], "'"));
    }
  }
  return record;
}

absl::StatusOr<uint64_t> ProcessStartTime(pid_t pid) {
  absl::StatusOr<std::string> stat = ReadWholeFile(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat.ok()) return absl::NotFoundError(absl::StrCat("no process ", pid));
  // The command name (field 2) is in parentheses and may hold anything, so
  // count fields from the last ')'.
  const size_t close = stat->rfind(')');
  if (close == std::string::npos) return absl::DataLossError("bad /proc/PID/stat");
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(*stat).substr(close + 1), ' ', absl::SkipEmpty());
  // fields[0] is field 3 (state), so field 22 (starttime) is fields[19].
  uint64_t start = 0;
  if (fields.size() < 20 || !absl::SimpleAtoi(fields[19], &start)) {
    return absl::DataLossError("bad /proc/PID/stat");
  }
  return start;
}

absl::StatusOr<std::unique_ptr<StateDir>> StateDir::Claim(const std::string& dir) {
  if (dir.empty() || dir.front() != '/') {
    return absl::InvalidArgumentError(absl::StrCat("state_dir '", dir, "' must be an absolute path"));
  }
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot create the state directory ", dir));
  }
  auto state = std::unique_ptr<StateDir>(new StateDir());
  state->dir_ = dir;
  const std::string lock_path = absl::StrCat(dir, "/", kLockFile);
  state->lock_.Reset(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!state->lock_) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", lock_path));
  if (::flock(state->lock_.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) return absl::ErrnoToStatus(errno, absl::StrCat("flock ", lock_path));
    std::string owner = "another wardend";
    if (absl::StatusOr<std::string> text = ReadWholeFile(state->record_path()); text.ok()) {
      if (absl::StatusOr<StateRecord> r = StateRecord::Decode(*text); r.ok()) {
        owner = absl::StrCat("another wardend (pid ", r->daemon_pid, ")");
      }
    }
    return absl::FailedPreconditionError(absl::StrCat(
        owner, " owns the state directory ", dir, " (it holds the lock on ", lock_path,
        "): stop that one first (systemctl stop wardend), or give this one its own state_dir "
        "and listen address"));
  }

  // Ours now. A record still here was left by a daemon that did not shut
  // down. Trust it only if nobody but us could have written it.
  const std::string record = state->record_path();
  struct stat st;
  if (::lstat(record.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          record, " is not a regular file that only this user can write: remove it (nothing "
          "is reclaimed from it) and start again"));
    }
    ASSIGN_OR_RETURN(std::string text, ReadWholeFile(record));
    absl::StatusOr<StateRecord> previous = StateRecord::Decode(text);
    if (!previous.ok()) {
      return absl::DataLossError(absl::StrCat(
          record, " is unreadable (", previous.status().message(),
          "): remove it and start again; a previous wardend's cgroups may then be left behind"));
    }
    state->previous_ = *std::move(previous);
  }
  return state;
}

StateDir::~StateDir() = default;  // closing the lock fd releases the lock

std::string StateDir::record_path() const { return absl::StrCat(dir_, "/", kRecordFile); }

absl::Status WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = absl::StrCat(path, ".tmp");
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return absl::ErrnoToStatus(errno, absl::StrCat("cannot write ", tmp));
  // A failed write (a full disk) or rename leaves no temporary behind.
  auto fail = [&tmp](int err, const std::string& what) {
    ::unlink(tmp.c_str());
    return absl::ErrnoToStatus(err, what);
  };
  const ssize_t written = ::write(fd.get(), text.data(), text.size());
  if (written != static_cast<ssize_t>(text.size())) {
    return fail(written < 0 ? errno : ENOSPC, absl::StrCat("cannot write ", tmp));
  }
  if (::fsync(fd.get()) != 0) return fail(errno, absl::StrCat("cannot write ", tmp));
  fd.Reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return fail(errno, absl::StrCat("rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

absl::Status StateDir::Write(const StateRecord& record) {
  RETURN_IF_ERROR(WriteFileAtomically(record_path(), record.Encode()));
  wrote_ = true;
  return absl::OkStatus();
}

void StateDir::RemoveRecord() {
  if (wrote_) ::unlink(record_path().c_str());
}

std::string ReclaimReport::Summary() const {
  std::string out = absl::StrCat("reclaimed what wardend pid ", dead_daemon, " left behind: ",
                                 processes, " processes killed; cgroups removed: ",
                                 cgroups.empty() ? "none" : absl::StrJoin(cgroups, " "),
                                 "; files removed: ", files.empty() ? "none" : absl::StrJoin(files, " "),
                                 "; mounts: none (all were in the sandboxes' own mount namespaces)");
  if (!problems.empty()) absl::StrAppend(&out, "; NOT reclaimed: ", absl::StrJoin(problems, "; "));
  return out;
}

ReclaimReport Reclaim(const StateRecord& previous, const CgroupManager* cgroups,
                      const std::map<std::string, std::set<std::string>>& keep) {
  ReclaimReport report;
  report.dead_daemon = previous.daemon_pid;
  // Helpers first: a zygote left running could still clone into the subtree.
  for (const ProcessRecord& process : previous.processes) {
    bool killed = false;
    absl::Status s = KillRecordedProcess(process, &killed);
    if (!s.ok()) report.problems.push_back(std::string(s.message()));
    if (killed) ++report.processes;
  }
  std::vector<std::string> subtrees = previous.held_subtrees;
  if (!previous.cgroup_subtree.empty()) subtrees.insert(subtrees.begin(), previous.cgroup_subtree);
  for (const std::string& subtree : subtrees) {
    if (cgroups == nullptr) {
      report.problems.push_back(
          absl::StrCat("cgroup subtree ", subtree, ": this wardend runs without cgroups"));
      continue;
    }
    auto kept = keep.find(subtree);
    absl::StatusOr<CgroupManager::Reclaimed> r =
        cgroups->ReclaimSubtree(subtree, kept == keep.end() ? std::set<std::string>{} : kept->second);
    if (r.ok()) {
      report.processes += r->processes;
      report.cgroups.insert(report.cgroups.end(), r->directories.begin(), r->directories.end());
    } else {
      report.problems.push_back(std::string(r.status().message()));
    }
  }
  for (const std::string& socket : previous.sockets) {
    struct stat st;
    if (::lstat(socket.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    if (::unlink(socket.c_str()) == 0) {
      report.files.push_back(socket);
    } else {
      report.problems.push_back(absl::StrCat("unlink ", socket, ": ", strerror(errno)));
    }
  }
  return report;
}

}  // namespace warden
