#include "sandbox/fork_server.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "sandbox/fd_passing.h"
#include "sandbox/mount_plan.h"
#include "sandbox/sandbox_plan.h"

namespace warden {
namespace {

// Requests are one SOCK_SEQPACKET message each: this header, the encoded
// plan, and the child's fds (SCM_RIGHTS) in ChildFds order, the absent
// channel left out, then the prepared namespaces (net, ipc, uts) if any,
// the bind trees last. Replies: a Reply and, on success,
// the init's pidfd.
constexpr uint32_t kRequestMagic = 0x77617264;  // "ward"
constexpr size_t kMaxMessage = 4 << 20;
constexpr int kChildFds = 5;       // control, stdin, stdout, stderr, channel
constexpr int kNamespaceFds = 3;   // net, ipc, uts
static_assert(kMaxPassedFds >= kChildFds + kNamespaceFds + kMaxMountOps);

struct RequestHeader {
  uint32_t magic = kRequestMagic;
  uint32_t has_channel = 0;
  int32_t n_bind_trees = -1;  // -1: the sandbox opens its bind sources itself
  uint32_t has_namespaces = 0;
};

// Enters the prepared namespaces for one clone and returns to the server's
// own afterwards. Single-threaded server: the whole process moves.
class PreparedNamespaces {
 public:
  // 0 or the errno of the setns that failed (then nothing is entered).
  int Enter(int net, int ipc, int uts) {
    if (!own_net_) {
      own_net_.Reset(open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC));
      own_ipc_.Reset(open("/proc/self/ns/ipc", O_RDONLY | O_CLOEXEC));
      own_uts_.Reset(open("/proc/self/ns/uts", O_RDONLY | O_CLOEXEC));
      if (!own_net_ || !own_ipc_ || !own_uts_) return errno;
    }
    if (setns(net, CLONE_NEWNET) != 0 || setns(ipc, CLONE_NEWIPC) != 0 ||
        setns(uts, CLONE_NEWUTS) != 0) {
      const int e = errno;
      Leave();
      return e;
    }
    return 0;
  }
  // Back to the server's own; a server that cannot get back would clone
  // the next fresh sandbox into this one's namespaces, so it exits.
  void Leave() {
    if (setns(own_net_.get(), CLONE_NEWNET) != 0 || setns(own_ipc_.get(), CLONE_NEWIPC) != 0 ||
        setns(own_uts_.get(), CLONE_NEWUTS) != 0) {
      _exit(1);
    }
  }

 private:
  UniqueFd own_net_, own_ipc_, own_uts_;
};

struct Reply {
  int32_t error = 0;  // errno of the failed step, 0 on success
  int32_t pid = -1;
};

// Receives one message into `buffer[0, capacity)` and its fds; the length,
// 0 at EOF, or -1 with errno.
ssize_t Receive(int socket, char* buffer, size_t capacity, std::vector<UniqueFd>* fds) {
  int raw[kMaxPassedFds];
  int n_fds = 0;
  const ssize_t n = ReceiveWithFds(socket, buffer, capacity, 0, raw, &n_fds);
  for (int i = 0; i < n_fds; ++i) fds->emplace_back(raw[i]);
  return n;
}

// The fork server's receive area: allocated once and never cleared. Its
// pages are shared copy-on-write with every live clone, so each byte the
// server writes to one costs a page copy (10-30 us on a VM with a software
// MMU, docs/benchmarks.md); only the bytes the kernel delivers are written, never the whole 4 MiB (a std::string::resize
// zero-filled it before each request: 1,024 copy-on-write faults).
char* ReceiveArea() {
  static char* const area = static_cast<char*>(malloc(kMaxMessage));  // untouched until used
  return area;
}

// Waits until `fd` is readable or `deadline`; false on timeout.
bool WaitReadable(int fd, absl::Time deadline) {
  for (;;) {
    const int64_t ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
    struct pollfd p = {fd, POLLIN, 0};
    const int rc = poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 60'000)));
    if (rc > 0) return true;
    if (rc == 0 && absl::Now() >= deadline) return false;
    if (rc < 0 && errno != EINTR) return true;  // let the read report it
  }
}

}  // namespace

int CountThreads() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  int n = 0;
  while (struct dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n;
}

absl::StatusOr<std::unique_ptr<ForkServer>> ForkServer::Start(const Program& program,
                                                               absl::Duration timeout) {
  const std::string& path = program.path;
  if (path.empty() || path[0] != '/' || program.argv.empty()) {
    return absl::InvalidArgumentError("the fork server program must be an absolute path with an argv");
  }
  if (access(path.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("fork server program ", path, ": ", strerror(errno)));
  }
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    return absl::ErrnoToStatus(errno, "socketpair");
  }
  UniqueFd mine(pair[0]), theirs(pair[1]);
  const int buffer = static_cast<int>(kMaxMessage);
  setsockopt(mine.get(), SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
  setsockopt(theirs.get(), SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));

  std::vector<char*> args, envp;
  for (const std::string& a : program.argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string& e : program.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  int pidfd = -1;
  // A plain fork+exec (CLONE_PIDFD for a race-free handle); between the two
  // only system calls, since the caller may have threads.
  const long pid = syscall(SYS_clone, CLONE_PIDFD | SIGCHLD, 0, &pidfd, 0, 0);
  if (pid < 0) return absl::ErrnoToStatus(errno, "starting the fork server");
  if (pid == 0) {
    const int fd = theirs.get();
    if (fd == kForkServerFd) {
      fcntl(fd, F_SETFD, 0);
    } else if (dup2(fd, kForkServerFd) < 0) {
      _exit(127);
    }
    syscall(SYS_close_range, kForkServerFd + 1, ~0U, 0);
    // A clean slate of signals: the daemon blocks its shutdown signals and
    // ignores SIGPIPE; neither belongs in the server.
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve(path.c_str(), args.data(), envp.data());
    _exit(127);
  }
  theirs.Reset();

  auto server = std::unique_ptr<ForkServer>(new ForkServer());
  server->pid_ = static_cast<pid_t>(pid);
  server->pidfd_.Reset(pidfd);
  server->socket_ = std::move(mine);

  std::string hello(64 << 10, '\0');
  std::vector<UniqueFd> no_fds;
  const int socket = server->socket_.get();
  // Queued for it even before it runs; a server gone already fails below.
  SendWithFds(socket, program.setup.data(), program.setup.size(), nullptr, 0, nullptr, 0);
  if (!WaitReadable(socket, absl::Now() + timeout)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "the fork server ", path, " did not report ready within ", absl::FormatDuration(timeout)));
  }
  const ssize_t n = Receive(socket, hello.data(), hello.size(), &no_fds);
  if (n <= 0) {
    return absl::UnavailableError(absl::StrCat("the fork server ", path, " exited while starting"));
  }
  hello.resize(static_cast<size_t>(n));
  if (!absl::StartsWith(hello, "ok")) {
    return absl::FailedPreconditionError(absl::StrCat("the fork server ", path, " failed: ",
                                                      absl::StripPrefix(hello, "error ")));
  }
  server->description_ = std::string(absl::StripLeadingAsciiWhitespace(absl::StripPrefix(hello, "ok")));
  return server;
}

ForkServer::~ForkServer() {
  {
    absl::MutexLock lock(&mu_);
    socket_.Reset();  // the server sees EOF and exits
  }
  if (pidfd_) {
    // It exits at once when idle; a wedged one is ours to kill.
    struct pollfd p = {pidfd_.get(), POLLIN, 0};
    if (poll(&p, 1, 2000) != 1) syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
    siginfo_t info;
    while (waitid(static_cast<idtype_t>(P_PIDFD), pidfd_.get(), &info, WEXITED) != 0 &&
           errno == EINTR) {
    }
  }
}

bool ForkServer::alive() const {
  absl::MutexLock lock(&mu_);
  return !dead_ && socket_.valid();
}

absl::StatusOr<ForkServer::Cloned> ForkServer::Clone(const std::string& encoded_plan,
                                                     const ChildFds& fds) {
  absl::MutexLock lock(&mu_);
  if (dead_ || !socket_) return absl::UnavailableError("the fork server is gone");
  const int socket = socket_.get();
  RequestHeader header;
  header.has_channel = fds.channel >= 0;
  int sent_fds[kMaxPassedFds] = {fds.control, fds.stdin_read, fds.stdout_write, fds.stderr_write,
                                 fds.channel};
  int n_fds = header.has_channel ? 5 : 4;
  if (fds.net >= 0) {
    header.has_namespaces = 1;
    for (int ns : {fds.net, fds.ipc, fds.uts}) sent_fds[n_fds++] = ns;
  }
  if (fds.bind_trees != nullptr) {
    if (fds.bind_trees->size() > static_cast<size_t>(kMaxMountOps)) {
      return absl::InvalidArgumentError("too many bind mounts for one fork request");
    }
    header.n_bind_trees = static_cast<int32_t>(fds.bind_trees->size());
    for (int tree : *fds.bind_trees) sent_fds[n_fds++] = tree;
  }
  if (SendWithFds(socket, &header, sizeof(header), encoded_plan.data(), encoded_plan.size(),
                  sent_fds, n_fds) < 0) {
    const int e = errno;
    dead_ = e == EPIPE || e == ECONNRESET;
    return absl::UnavailableError(absl::StrCat("sending to the fork server: ", strerror(e)));
  }
  // A clone takes milliseconds; a server that does not answer is wedged.
  if (!WaitReadable(socket, absl::Now() + absl::Seconds(10))) {
    dead_ = true;
    syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
    return absl::UnavailableError("the fork server did not answer within 10 s; it was killed");
  }
  Reply reply;
  std::vector<UniqueFd> received;
  const ssize_t n = Receive(socket, reinterpret_cast<char*>(&reply), sizeof(reply), &received);
  if (n != static_cast<ssize_t>(sizeof(Reply))) {
    dead_ = true;
    return absl::UnavailableError("the fork server exited");
  }
  if (reply.error != 0) {
    return absl::ErrnoToStatus(reply.error, "the fork server could not clone the sandbox");
  }
  if (received.size() != 1 || reply.pid <= 0) {
    return absl::InternalError("the fork server's reply carried no pidfd");
  }
  Cloned cloned;
  cloned.pid = reply.pid;
  cloned.pidfd = std::move(received[0]);
  return cloned;
}

std::string ReceiveForkServerSetup() {
  std::vector<UniqueFd> fds;
  const ssize_t n = Receive(kForkServerFd, ReceiveArea(), kMaxMessage, &fds);
  return n > 0 ? std::string(ReceiveArea(), static_cast<size_t>(n)) : std::string();
}

[[noreturn]] void ServeForkRequests(const std::string& hello, const ForkServerHooks& hooks) {
  const int socket = kForkServerFd;
  if (SendWithFds(socket, hello.data(), hello.size(), nullptr, 0, nullptr, 0) < 0) _exit(1);
  if (!absl::StartsWith(hello, "ok")) _exit(1);

  char* const buffer = ReceiveArea();
  PreparedNamespaces prepared;
  // The clones' inits show their own command line (process_title.h), which
  // needs this process's layout; without it, their name only.
  const absl::StatusOr<ProcessLayout> layout = ReadProcessLayout();
  for (;;) {
    std::vector<UniqueFd> fds;
    fds.reserve(kMaxPassedFds);
    const ssize_t n = Receive(socket, buffer, kMaxMessage, &fds);
    if (n == 0) _exit(0);  // the supervisor closed its end
    Reply reply;
    if (n < 0) {
      if (errno != EMSGSIZE) _exit(1);
      reply.error = EMSGSIZE;
      SendWithFds(socket, &reply, sizeof(reply), nullptr, 0, nullptr, 0);
      continue;
    }
    RequestHeader header;
    absl::StatusOr<SandboxPlan> plan = absl::InvalidArgumentError("short request");
    if (static_cast<size_t>(n) >= sizeof(header)) {
      memcpy(&header, buffer, sizeof(header));
      plan = SandboxPlan::Decode(absl::string_view(buffer + sizeof(header), n - sizeof(header)));
    }
    // No sandbox cloned later finds this request's bytes in its copy of the
    // area. The pages were just written by the receive (copied already), so
    // clearing them costs no further copy-on-write fault.
    memset(buffer, 0, static_cast<size_t>(n));
    const size_t n_child_fds = header.has_channel ? 5 : 4;
    const size_t n_ns = header.has_namespaces ? kNamespaceFds : 0;
    const size_t n_trees = header.n_bind_trees > 0 ? static_cast<size_t>(header.n_bind_trees) : 0;
    if (header.magic != kRequestMagic || !plan.ok() || header.n_bind_trees < -1 ||
        header.n_bind_trees > kMaxMountOps ||
        fds.size() != n_child_fds + n_ns + n_trees) {
      reply.error = EINVAL;
      SendWithFds(socket, &reply, sizeof(reply), nullptr, 0, nullptr, 0);
      continue;
    }
    ChildPlan child = plan->View();
    child.control_fd = fds[0].get();
    child.stdin_fd = fds[1].get();
    child.stdout_fd = fds[2].get();
    child.stderr_fd = fds[3].get();
    child.channel_fd = header.has_channel ? fds[4].get() : -1;
    int trees[kMaxMountOps];
    for (size_t i = 0; i < n_trees; ++i) trees[i] = fds[n_child_fds + n_ns + i].get();
    if (header.n_bind_trees >= 0) {
      child.bind_trees = trees;
      child.n_bind_trees = header.n_bind_trees;
    }
    child.run_in_place = hooks.run_in_place;
    child.layout = layout.ok() ? &*layout : nullptr;

    child.namespaces_prepared = header.has_namespaces != 0;
    if (child.namespaces_prepared) {
      const int ns = static_cast<int>(n_child_fds);
      if (int e = prepared.Enter(fds[ns].get(), fds[ns + 1].get(), fds[ns + 2].get()); e != 0) {
        reply.error = e;
        SendWithFds(socket, &reply, sizeof(reply), nullptr, 0, nullptr, 0);
        continue;
      }
    }

    if (hooks.before_clone) hooks.before_clone();
    int pidfd = -1;
    const long pid = CloneSandboxInit(/*as_sibling=*/true, &pidfd,
                                      /*fresh_net_ipc_uts=*/!child.namespaces_prepared, child.owner_uid);
    if (pid == 0) SandboxInitMain(child);
    const int error = pid < 0 ? errno : 0;
    if (hooks.after_clone) hooks.after_clone();
    if (child.namespaces_prepared) prepared.Leave();

    reply.error = error;
    reply.pid = static_cast<int32_t>(pid);
    if (pid > 0) {
      SendWithFds(socket, &reply, sizeof(reply), nullptr, 0, &pidfd, 1);
      close(pidfd);
    } else {
      SendWithFds(socket, &reply, sizeof(reply), nullptr, 0, nullptr, 0);
    }
  }
}

}  // namespace warden
