// warden-keeper: holds wardend's live sandboxes while wardend restarts or
// crashes, and starts wardend again (docs/keeper-design.md).
//
//   warden-keeper --socket PATH [--buffer-bytes N] [--start-timeout SECONDS]
//                 [--max-failed-starts N] -- /usr/bin/wardend [ARGS...]
//
// Two processes: the keeper proper, which is a child subreaper (orphaned
// sandbox inits of a dead wardend become its children), holds a copy of each
// session sandbox's descriptors, buffers what the sandboxes write while no
// wardend is attached, and answers on PATH (root only, one peer at a time);
// and the launcher, its child, forked before the keeper hardens itself,
// which only fork+execs wardend on the keeper's word and reports its exit.
// wardend is the launcher's child, so the keeper is its nearest subreaper
// ancestor. The keeper itself is not dumpable, has no_new_privs and runs
// under a seccomp allowlist; it never opens a file after start.
//
// Signals: SIGHUP restarts wardend (it detaches, keeping its sessions);
// SIGTERM, SIGINT and SIGUSR1 stop for real: wardend is told to end every
// session (SIGUSR1 to it), anything still held is killed, and both exit.
//
// Under systemd (Type=notify): READY=1 goes to $NOTIFY_SOCKET once wardend
// says it serves (SERVING), never before. A wardend that exits before it
// ever served, or that fails to reach SERVING --max-failed-starts times in a
// row (exiting, or killed after --start-timeout), makes the keeper give up:
// it ends what it holds and exits 1, so that `systemctl start` fails and the
// unit is not active while nothing serves.
//
// On cgroup v2 the keeper first moves itself into the leaf <its cgroup>/keeper
// so that the unit's cgroup holds no process and wardend can enable the
// controllers its sandboxes need there (the no-internal-processes rule);
// wardend learns the unit's cgroup from WARDEN_KEEPER_CGROUP and makes its
// own leaf and subtree in it (docs/keeper-design.md, "cgroups").
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/systemd_notify.h"
#include "keeper/protocol.h"
#include "sandbox/cgroup.h"
#include "sandbox/fd_passing.h"
#include "sandbox/unique_fd.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

namespace warden::keeper {
namespace {

void Log(const std::string& line) {
  const std::string text = "warden-keeper: " + line + "\n";
  (void)!write(STDERR_FILENO, text.data(), text.size());
}

// ---------------------------------------------------------------------------
// The launcher: the keeper's unhardened hand for starting wardend.

enum Command : char { kStart = 's', kTerminate = 't', kStopForReal = 'u', kKill = 'k', kQuit = 'q' };

struct Report {
  int32_t kind;  // 1: started, 2: exited
  int32_t pid;
  int32_t status;
};

[[noreturn]] void LauncherMain(int commands, int reports, const std::vector<std::string>& argv,
                               const std::string& socket_path, const std::string& delegated_cgroup) {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  const int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
  pid_t wardend = -1;
  bool quit = false;
  auto report = [&](int32_t kind, int32_t pid, int32_t status) {
    Report r{kind, pid, status};
    (void)!write(reports, &r, sizeof(r));
  };
  for (;;) {
    if (quit && wardend < 0) {
      unlink(socket_path.c_str());  // the keeper may not touch files
      _exit(0);
    }
    struct pollfd fds[2] = {{commands, POLLIN, 0}, {sfd, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) continue;
    if (fds[1].revents & POLLIN) {
      struct signalfd_siginfo info;
      (void)!read(sfd, &info, sizeof(info));
      int status = 0;
      pid_t pid;
      while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        if (pid == wardend) {
          wardend = -1;
          report(2, pid, status);
        }
      }
    }
    if (fds[0].revents & (POLLIN | POLLHUP)) {
      char c;
      if (read(commands, &c, 1) != 1) {
        // The keeper is gone: its sandboxes are too; wardend follows.
        if (wardend > 0) kill(wardend, SIGTERM);
        quit = true;
        commands = -1;
        continue;
      }
      if (c == kStart && wardend < 0 && !quit) {
        const pid_t pid = fork();
        if (pid == 0) {
          sigset_t none;
          sigemptyset(&none);
          sigprocmask(SIG_SETMASK, &none, nullptr);
          setenv("WARDEN_KEEPER_SOCKET", socket_path.c_str(), 1);
          if (!delegated_cgroup.empty()) setenv("WARDEN_KEEPER_CGROUP", delegated_cgroup.c_str(), 1);
          std::vector<char*> args;
          for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
          args.push_back(nullptr);
          execv(args[0], args.data());
          fprintf(stderr, "warden-keeper: cannot run %s: %s\n", args[0], strerror(errno));
          _exit(127);
        }
        if (pid > 0) {
          wardend = pid;
          report(1, pid, 0);
        } else {
          report(2, -1, 127 << 8);
        }
      } else if (c == kTerminate && wardend > 0) {
        kill(wardend, SIGTERM);
      } else if (c == kStopForReal && wardend > 0) {
        kill(wardend, SIGUSR1);
      } else if (c == kKill && wardend > 0) {
        kill(wardend, SIGKILL);
      } else if (c == kQuit) {
        quit = true;
      }
    }
  }
}

// ---------------------------------------------------------------------------
// The keeper proper.

struct Held {
  UniqueFd fds[kHandleCount];
  uint32_t mask = 0;
  bool ended = false;
  int status = 0;
  // While detached: what each stream wrote, the oldest dropped beyond the cap.
  std::string buffered[3];
  int64_t dropped[3] = {0, 0, 0};
  bool eof[3] = {false, false, false};
};

struct KeeperOptions {
  size_t buffer_bytes = kDefaultBufferBytes;
  // A started wardend that neither serves nor exits within this is killed.
  absl::Duration start_timeout = absl::Seconds(180);
  // Consecutive starts that did not reach SERVING before the keeper gives up.
  int max_failed_starts = 5;
};

class Keeper {
 public:
  Keeper(UniqueFd listener, UniqueFd signals, int commands, UniqueFd reports, pid_t launcher,
         const KeeperOptions& options, SystemdNotifier systemd)
      : listener_(std::move(listener)),
        signals_(std::move(signals)),
        commands_(commands),
        reports_(std::move(reports)),
        launcher_(launcher),
        buffer_bytes_(options.buffer_bytes),
        options_(options),
        systemd_(std::move(systemd)) {}

  // The keeper's exit status: 0 after a stop, 1 when it gave up.
  int Run();

 private:
  void Command(char c) { (void)!write(commands_, &c, 1); }
  void OnSignal();
  void OnReport();
  void OnAccept();
  void OnMessage();
  void Adopt();
  void Drop(const std::string& id);
  void KillAll();
  void Buffer(Held& held, int stream);
  void OnServing();
  void GiveUp(const std::string& why);
  void Status(const std::string& status) { systemd_.Notify("STATUS=" + status); }
  void CheckEnded(Held& held);
  bool Send(const Header& header, const void* payload, size_t n, const int* fds, int n_fds);
  void Disconnect() {
    conn_.Reset();
    adopted_ = false;
  }
  bool buffering() const { return !(conn_ && adopted_); }

  UniqueFd listener_, signals_;
  int commands_;
  UniqueFd reports_;
  pid_t launcher_;
  const size_t buffer_bytes_;
  const KeeperOptions options_;
  const SystemdNotifier systemd_;

  UniqueFd conn_;
  bool adopted_ = false;
  std::map<std::string, Held> held_;
  pid_t wardend_ = -1;
  absl::Time wardend_started_;
  absl::Duration backoff_ = absl::ZeroDuration();
  absl::Time restart_at_ = absl::InfiniteFuture();
  bool stopping_ = false;
  bool launcher_gone_ = false;
  bool serving_ = false;        // the running wardend said SERVING
  bool ever_served_ = false;    // some wardend did, since the keeper started
  bool ready_sent_ = false;     // READY=1 went to systemd
  int failed_starts_ = 0;       // in a row, without SERVING
  absl::Time start_deadline_ = absl::InfiniteFuture();
  int exit_code_ = 0;
  uint64_t generation_ = 0;  // changes whenever held_ gains or loses an entry
};

int Keeper::Run() {
  Command(kStart);
  while (!launcher_gone_) {
    std::vector<struct pollfd> fds;
    fds.push_back({signals_.get(), POLLIN, 0});
    fds.push_back({reports_.get(), POLLIN, 0});
    fds.push_back({listener_.get(), POLLIN, 0});
    fds.push_back({conn_.get(), POLLIN, 0});
    struct Watch {
      Held* held;
      int stream;  // -1: the init's pidfd
    };
    std::vector<Watch> watches;
    for (auto& [id, held] : held_) {
      if (!held.ended && (held.mask & (1u << kInitPidfd))) {
        fds.push_back({held.fds[kInitPidfd].get(), POLLIN, 0});
        watches.push_back({&held, -1});
      }
      if (!buffering()) continue;
      const Handle handles[3] = {kStdout, kStderr, kChannel};
      for (int s = 0; s < 3; ++s) {
        if (held.eof[s] || !(held.mask & (1u << handles[s]))) continue;
        fds.push_back({held.fds[handles[s]].get(), POLLIN, 0});
        watches.push_back({&held, s});
      }
    }
    int timeout = -1;
    const absl::Time wake = std::min(restart_at_, start_deadline_);
    if (wake != absl::InfiniteFuture()) {
      timeout = static_cast<int>(std::max<int64_t>(
          0, absl::ToInt64Milliseconds(absl::Ceil(wake - absl::Now(), absl::Milliseconds(1)))));
    }
    const int rc = poll(fds.data(), fds.size(), timeout);
    if (rc < 0 && errno != EINTR) {
      Log(std::string("poll: ") + strerror(errno));
      return 1;
    }
    if (restart_at_ != absl::InfiniteFuture() && absl::Now() >= restart_at_) {
      restart_at_ = absl::InfiniteFuture();
      if (!stopping_) Command(kStart);
    }
    if (start_deadline_ != absl::InfiniteFuture() && absl::Now() >= start_deadline_) {
      start_deadline_ = absl::InfiniteFuture();
      if (wardend_ > 0 && !serving_ && !stopping_) {
        Log("wardend (pid " + std::to_string(wardend_) + ") did not serve within " +
            absl::FormatDuration(options_.start_timeout) + "; killing it");
        Command(kKill);
      }
    }
    if (rc <= 0) continue;
    const uint64_t generation = generation_;
    if (fds[0].revents & POLLIN) OnSignal();
    if (fds[1].revents & (POLLIN | POLLHUP)) OnReport();
    if (fds[2].revents & POLLIN) OnAccept();
    if (conn_ && (fds[3].revents & (POLLIN | POLLHUP | POLLERR))) OnMessage();
    // The watches point into held_, which may have changed meanwhile.
    if (generation != generation_) continue;
    for (size_t i = 0; i < watches.size(); ++i) {
      if (!(fds[4 + i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      if (watches[i].stream < 0) {
        CheckEnded(*watches[i].held);
      } else {
        Buffer(*watches[i].held, watches[i].stream);
      }
    }
  }
  return exit_code_;
}

void Keeper::OnSignal() {
  struct signalfd_siginfo info;
  while (read(signals_.get(), &info, sizeof(info)) == sizeof(info)) {
    switch (info.ssi_signo) {
      case SIGCHLD: {
        // Inits of a dead wardend are ours now: reap them through their
        // pidfds first, so their wait status is kept; then anything else.
        for (auto& [id, held] : held_) CheckEnded(held);
        int status;
        pid_t pid;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
          if (pid == launcher_) launcher_gone_ = true;
        }
        break;
      }
      case SIGHUP:
        Log("SIGHUP: restarting wardend; its sessions stay");
        Status("restarting wardend (reload); its sessions stay");
        Command(kTerminate);
        break;
      default:
        if (stopping_) break;
        Log("stopping: every session ends");
        systemd_.Notify("STOPPING=1\nSTATUS=stopping: every session ends");
        stopping_ = true;
        if (wardend_ > 0) {
          Command(kStopForReal);
        } else {
          KillAll();
          Command(kQuit);
        }
        break;
    }
  }
}

void Keeper::OnReport() {
  Report r;
  const ssize_t n = read(reports_.get(), &r, sizeof(r));
  if (n != sizeof(r)) {
    launcher_gone_ = true;  // it died: nothing can start wardend again
    KillAll();
    return;
  }
  if (r.kind == 1) {
    wardend_ = r.pid;
    wardend_started_ = absl::Now();
    serving_ = false;
    start_deadline_ = wardend_started_ + options_.start_timeout;
    Status("starting wardend (pid " + std::to_string(r.pid) + ")");
    return;
  }
  wardend_ = -1;
  start_deadline_ = absl::InfiniteFuture();
  if (stopping_) {
    KillAll();
    Command(kQuit);
    return;
  }
  // A wardend that dies right after start is not restarted in a tight loop.
  const bool early = absl::Now() - wardend_started_ < absl::Seconds(10);
  backoff_ = early ? std::min(std::max(backoff_ * 2, absl::Milliseconds(250)), absl::Seconds(30))
                   : absl::ZeroDuration();
  char what[96];
  if (WIFSIGNALED(r.status)) {
    snprintf(what, sizeof(what), "killed by signal %d", WTERMSIG(r.status));
  } else {
    snprintf(what, sizeof(what), "exited with status %d", WEXITSTATUS(r.status));
  }
  const std::string exited = "wardend (pid " + std::to_string(r.pid) + ") " + what;
  if (!serving_) {
    ++failed_starts_;
    if (!ever_served_) {
      GiveUp(exited + " before it served (its log says why)");
      return;
    }
    if (failed_starts_ >= options_.max_failed_starts) {
      GiveUp(exited + "; " + std::to_string(failed_starts_) + " starts in a row did not serve");
      return;
    }
  }
  serving_ = false;
  const std::string again = "starting it again" +
                            (backoff_ > absl::ZeroDuration() ? " in " + absl::FormatDuration(backoff_) : "");
  Log(exited + "; " + again + " (" + std::to_string(held_.size()) + " sandboxes held)");
  Status(exited + "; " + again + "; not serving meanwhile");
  restart_at_ = absl::Now() + backoff_;
}

void Keeper::OnServing() {
  serving_ = true;
  ever_served_ = true;
  failed_starts_ = 0;
  start_deadline_ = absl::InfiniteFuture();
  const std::string status = "wardend (pid " + std::to_string(wardend_) + ") serving; " +
                             std::to_string(held_.size()) + " session sandboxes held";
  if (!ready_sent_) {
    ready_sent_ = true;
    systemd_.Notify("READY=1\nSTATUS=" + status);
  } else {
    Status(status);
  }
}

// Nothing serves and nothing will: end what is held and exit 1, so that
// systemd sees the unit fail (and may start it afresh) rather than report
// an active unit that serves nothing.
void Keeper::GiveUp(const std::string& why) {
  Log(why + "; giving up (exit 1)");
  systemd_.Notify("STATUS=gave up: " + why);
  stopping_ = true;
  exit_code_ = 1;
  restart_at_ = absl::InfiniteFuture();
  KillAll();
  Command(kQuit);
}

void Keeper::OnAccept() {
  UniqueFd fd(accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!fd) return;
  struct ucred cred = {};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != geteuid()) {
    Log("refused a connection from uid " + std::to_string(cred.uid) + ": only wardend's user may connect");
    return;
  }
  if (conn_) {
    Log("refused a second connection (pid " + std::to_string(cred.pid) + "): a wardend is attached");
    return;
  }
  struct timeval tv = {5, 0};  // a wardend that stops reading does not wedge the keeper
  setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  conn_ = std::move(fd);
  adopted_ = false;
}

void Keeper::OnMessage() {
  char buffer[sizeof(Header) + kMaxPayload];
  int fds[kMaxPassedFds];
  int n_fds = 0;
  const ssize_t n = ReceiveWithFds(conn_.get(), buffer, sizeof(buffer), MSG_DONTWAIT, fds, &n_fds);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  std::vector<UniqueFd> received;
  for (int i = 0; i < n_fds; ++i) received.emplace_back(fds[i]);
  if (n < static_cast<ssize_t>(sizeof(Header))) {
    // EOF (wardend exited or was killed) or garbage: detach and buffer.
    Disconnect();
    return;
  }
  Header header;
  memcpy(&header, buffer, sizeof(header));
  const std::string id = header.id_string();
  switch (header.type) {
    case MessageType::kHold: {
      if (id.empty() || static_cast<int>(__builtin_popcount(header.mask)) != n_fds ||
          header.mask >= (1u << kHandleCount)) {
        Log("HOLD with a bad id or descriptor list: ignored");
        return;
      }
      ++generation_;
      Held& held = held_[id];
      held = Held();
      held.mask = header.mask;
      int next = 0;
      for (int h = 0; h < kHandleCount; ++h) {
        if (header.mask & (1u << h)) held.fds[h] = std::move(received[next++]);
      }
      for (Handle h : {kStdout, kStderr, kChannel}) {
        if (held.fds[h]) fcntl(held.fds[h].get(), F_SETFL, fcntl(held.fds[h].get(), F_GETFL) | O_NONBLOCK);
      }
      return;
    }
    case MessageType::kDrop:
      Drop(id);
      return;
    case MessageType::kAdopt:
      Adopt();
      return;
    case MessageType::kStop:
      stopping_ = true;
      KillAll();
      return;
    case MessageType::kServing:
      OnServing();
      return;
    default:
      Log("unknown message: ignored");
  }
}

bool Keeper::Send(const Header& header, const void* payload, size_t n, const int* fds, int n_fds) {
  if (SendWithFds(conn_.get(), &header, sizeof(header), payload, n, fds, n_fds) < 0) {
    Log(std::string("sending to wardend: ") + strerror(errno) + "; detached");
    Disconnect();
    return false;
  }
  return true;
}

void Keeper::Adopt() {
  ++generation_;  // no more buffering once this is sent
  for (auto& [id, held] : held_) {
    CheckEnded(held);
    if (buffering()) {
      for (int s = 0; s < 3; ++s) Buffer(held, s);  // what is pending, up to now
    }
    Header header{MessageType::kHeld};
    header.set_id(id);
    header.mask = held.mask;
    header.a = held.ended ? 1 : 0;
    header.b = held.status;
    int fds[kHandleCount];
    int n = 0;
    for (int h = 0; h < kHandleCount; ++h) {
      if (held.mask & (1u << h)) fds[n++] = held.fds[h].get();
    }
    if (!Send(header, nullptr, 0, fds, n)) return;
    for (int s = 0; s < 3; ++s) {
      const std::string& data = held.buffered[s];
      size_t off = 0;
      do {
        Header out{MessageType::kOutput};
        out.set_id(id);
        out.a = s;
        out.b = off == 0 ? held.dropped[s] : 0;
        const size_t len = std::min(kMaxPayload, data.size() - off);
        if ((len > 0 || held.dropped[s] > 0) && !Send(out, data.data() + off, len, nullptr, 0)) return;
        off += len;
      } while (off < data.size());
      held.buffered[s].clear();
      held.dropped[s] = 0;
    }
  }
  Header end{MessageType::kAdoptEnd};
  if (Send(end, nullptr, 0, nullptr, 0)) adopted_ = true;
}

void Keeper::Buffer(Held& held, int stream) {
  const Handle handles[3] = {kStdout, kStderr, kChannel};
  const int fd = held.fds[handles[stream]].get();
  if (fd < 0 || held.eof[stream]) return;
  char chunk[16384];
  for (;;) {
    const ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n > 0) {
      std::string& buf = held.buffered[stream];
      buf.append(chunk, static_cast<size_t>(n));
      if (buf.size() > buffer_bytes_) {
        const size_t excess = buf.size() - buffer_bytes_;
        buf.erase(0, excess);
        held.dropped[stream] += static_cast<int64_t>(excess);
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || errno != EAGAIN) held.eof[stream] = true;
    return;
  }
}

void Keeper::CheckEnded(Held& held) {
  if (held.ended || !held.fds[kInitPidfd]) return;
  struct pollfd p = {held.fds[kInitPidfd].get(), POLLIN, 0};
  if (poll(&p, 1, 0) != 1) return;
  held.ended = true;
  // Reaped here when the init is ours (its wardend died); else wardend reaps it.
  siginfo_t info = {};
  if (waitid(static_cast<idtype_t>(P_PIDFD), held.fds[kInitPidfd].get(), &info, WEXITED | WNOHANG) == 0 &&
      info.si_pid != 0) {
    held.status = info.si_code == CLD_EXITED ? (info.si_status << 8) : info.si_status;
  }
}

void Keeper::Drop(const std::string& id) {
  auto it = held_.find(id);
  if (it == held_.end()) return;
  ++generation_;
  if (it->second.fds[kInitPidfd]) {
    syscall(SYS_pidfd_send_signal, it->second.fds[kInitPidfd].get(), SIGKILL, nullptr, 0);
    CheckEnded(it->second);
  }
  held_.erase(it);
}

void Keeper::KillAll() {
  while (!held_.empty()) Drop(held_.begin()->first);
}

// Everything the keeper may do once started; anything else fails with EPERM.
bool InstallSeccomp() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
  if (ctx == nullptr) return false;
  const int allowed[] = {
      SCMP_SYS(read),        SCMP_SYS(write),         SCMP_SYS(close),        SCMP_SYS(poll),
      SCMP_SYS(ppoll),       SCMP_SYS(recvmsg),       SCMP_SYS(sendmsg),      SCMP_SYS(accept4),
      SCMP_SYS(getsockopt),  SCMP_SYS(setsockopt),    SCMP_SYS(fcntl),        SCMP_SYS(waitid),
      SCMP_SYS(wait4),       SCMP_SYS(pidfd_send_signal), SCMP_SYS(exit),     SCMP_SYS(exit_group),
      SCMP_SYS(rt_sigreturn), SCMP_SYS(rt_sigprocmask), SCMP_SYS(brk),        SCMP_SYS(mmap),
      SCMP_SYS(munmap),      SCMP_SYS(mremap),        SCMP_SYS(madvise),      SCMP_SYS(clock_gettime),
      SCMP_SYS(gettimeofday), SCMP_SYS(getpid),       SCMP_SYS(geteuid),      SCMP_SYS(futex),
      SCMP_SYS(restart_syscall), SCMP_SYS(fstat),     SCMP_SYS(newfstatat),
  };
  bool ok = true;
  for (int nr : allowed) ok = ok && seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0) == 0;
  ok = ok && seccomp_load(ctx) == 0;
  seccomp_release(ctx);
  return ok;
}

int Usage(const std::string& error) {
  fprintf(stderr,
          "warden-keeper: %s\n\nusage: warden-keeper --socket PATH [--buffer-bytes N] [--start-timeout SECONDS]\n"
          "                     [--max-failed-starts N] -- WARDEND [ARGS...]\n"
          "Holds wardend's sessions across its restarts and crashes (docs/operations.md).\n",
          error.c_str());
  return 2;
}

int Main(int argc, char** argv) {
  std::string socket_path;
  KeeperOptions options;
  std::vector<std::string> wardend;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {
      for (++i; i < argc; ++i) wardend.push_back(argv[i]);
    } else if (arg == "--socket" && i + 1 < argc) {
      socket_path = argv[++i];
    } else if (arg == "--buffer-bytes" && i + 1 < argc) {
      if (!absl::SimpleAtoi(argv[++i], &options.buffer_bytes) || options.buffer_bytes == 0) {
        return Usage("--buffer-bytes needs a positive number");
      }
    } else if (arg == "--start-timeout" && i + 1 < argc) {
      int seconds = 0;
      if (!absl::SimpleAtoi(argv[++i], &seconds) || seconds <= 0) {
        return Usage("--start-timeout needs a positive number of seconds");
      }
      options.start_timeout = absl::Seconds(seconds);
    } else if (arg == "--max-failed-starts" && i + 1 < argc) {
      if (!absl::SimpleAtoi(argv[++i], &options.max_failed_starts) || options.max_failed_starts <= 0) {
        return Usage("--max-failed-starts needs a positive number");
      }
    } else {
      return Usage("unknown option " + arg);
    }
  }
  if (socket_path.empty()) return Usage("--socket PATH is required (e.g. /run/warden/keeper.sock)");
  if (wardend.empty() || wardend[0].empty() || wardend[0][0] != '/') {
    return Usage("give wardend's absolute path after --");
  }
  struct sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path)) return Usage("--socket path is too long");
  memcpy(addr.sun_path, socket_path.c_str(), socket_path.size());

  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    perror("warden-keeper: PR_SET_CHILD_SUBREAPER");
    return 1;
  }
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGUSR1}) sigaddset(&mask, sig);
  sigprocmask(SIG_BLOCK, &mask, nullptr);
  signal(SIGPIPE, SIG_IGN);
  UniqueFd signals(signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));

  // The socket: only its owner may connect (the mode, then SO_PEERCRED).
  struct stat st;
  if (lstat(socket_path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) unlink(socket_path.c_str());
  UniqueFd listener(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  const mode_t old_umask = umask(0077);
  const bool bound = listener && bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  umask(old_umask);
  if (!bound || chmod(socket_path.c_str(), 0600) != 0 || listen(listener.get(), 4) != 0) {
    fprintf(stderr, "warden-keeper: cannot listen on %s: %s (is another keeper running?)\n",
            socket_path.c_str(), strerror(errno));
    return 1;
  }

  // cgroup v2: out of the unit's cgroup, into a leaf of the keeper's own,
  // before the launcher (and so every wardend) is forked. Not fatal: wardend
  // then says what stops it, and the keeper gives up.
  std::string delegated_cgroup;
  if (absl::StatusOr<std::string> left = CgroupManager::MoveIntoLeaf(CgroupOptions(), "keeper"); left.ok()) {
    delegated_cgroup = *left;
    if (!delegated_cgroup.empty()) {
      Log("moved into the cgroup leaf " + delegated_cgroup + "/keeper; wardend gets " + delegated_cgroup);
    }
  } else {
    Log("cannot leave its cgroup for a leaf of its own, so wardend cannot enable controllers there: " +
        std::string(left.status().message()));
  }
  // systemd's notification socket, connected now (the hardened keeper cannot
  // open one) and taken out of the environment: only the keeper speaks to
  // systemd; wardend tells the keeper.
  SystemdNotifier systemd = SystemdNotifier::FromEnvironment(/*unset_environment=*/true);

  int commands[2], reports[2];
  if (pipe2(commands, O_CLOEXEC) != 0 || pipe2(reports, O_CLOEXEC) != 0) {
    perror("warden-keeper: pipe2");
    return 1;
  }
  const pid_t launcher = fork();
  if (launcher < 0) {
    perror("warden-keeper: fork");
    return 1;
  }
  if (launcher == 0) {
    listener.Reset();
    signals.Reset();
    close(commands[1]);
    close(reports[0]);
    LauncherMain(commands[0], reports[1], wardend, socket_path, delegated_cgroup);
  }
  close(commands[0]);
  close(reports[1]);

  // ASan builds (make test-sanitize): LeakSanitizer's check at exit stops
  // the world with a tracer thread and ptrace, which the keeper's seccomp
  // filter refuses, so it runs here instead, once; this also turns the check
  // at exit off. Memory errors are still caught to the end.
#if defined(__SANITIZE_ADDRESS__)
  __lsan_do_leak_check();
#endif
  // ---- Hardening: from here on the keeper opens nothing by path. ----
  if (chdir("/") != 0 || prctl(PR_SET_DUMPABLE, 0) != 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      !InstallSeccomp()) {
    perror("warden-keeper: hardening");
    kill(launcher, SIGKILL);
    return 1;
  }
  Keeper keeper(std::move(listener), std::move(signals), commands[1], UniqueFd(reports[0]), launcher,
                options, std::move(systemd));
  return keeper.Run();
}

}  // namespace
}  // namespace warden::keeper

int main(int argc, char** argv) { return warden::keeper::Main(argc, argv); }
