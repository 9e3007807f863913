#include "sandbox/port_dial.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"

namespace warden {
namespace {

bool Alive(int pidfd) {
  struct pollfd p = {pidfd, POLLIN, 0};
  return poll(&p, 1, 0) == 0;  // readable once the process exited
}

// Two sockets, IPv4 and IPv6, made inside the namespace `netns` by a thread
// that enters it and ends there.
absl::Status SocketsIn(int netns, UniqueFd* v4, UniqueFd* v6) {
  int err = 0, fd4 = -1, fd6 = -1;
  std::thread([&] {
    if (setns(netns, CLONE_NEWNET) != 0) {
      err = errno;
      return;
    }
    fd4 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    fd6 = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd4 < 0) err = errno;
  }).join();
  v4->Reset(fd4);
  v6->Reset(fd6);
  if (err != 0) return absl::ErrnoToStatus(err, "entering the sandbox's network namespace");
  return absl::OkStatus();
}

// 0 once connected, else the errno; ETIMEDOUT past the deadline.
int Connect(int fd, const sockaddr* addr, socklen_t len, absl::Time deadline) {
  if (connect(fd, addr, len) == 0) return 0;
  if (errno != EINPROGRESS) return errno;
  struct pollfd p = {fd, POLLOUT, 0};
  for (;;) {
    const int64_t ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
    const int rc = poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 60'000)));
    if (rc < 0 && errno == EINTR) continue;
    if (rc == 0) return ETIMEDOUT;
    break;
  }
  int error = 0;
  socklen_t n = sizeof(error);
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &n);
  return error;
}

absl::StatusOr<UniqueFd> OpenNetns(pid_t init_pid, int init_pidfd) {
  UniqueFd netns(open(absl::StrCat("/proc/", init_pid, "/ns/net").c_str(), O_RDONLY | O_CLOEXEC));
  // Opened first, checked after: if the init was alive after the open, the
  // namespace is its (a pid reused meanwhile would show a dead pidfd).
  if (!netns || !Alive(init_pidfd)) return absl::FailedPreconditionError("the sandbox is gone");
  return netns;
}

}  // namespace

absl::StatusOr<UniqueFd> ListenInSandbox(pid_t init_pid, int init_pidfd, uint16_t port) {
  absl::StatusOr<UniqueFd> netns = OpenNetns(init_pid, init_pidfd);
  if (!netns.ok()) return netns.status();
  int err = 0, fd = -1;
  std::thread([&] {
    if (setns(netns->get(), CLONE_NEWNET) != 0) {
      err = errno;
      return;
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      err = errno;
      return;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 128) != 0) {
      err = errno;
      close(fd);
      fd = -1;
    }
  }).join();
  if (fd < 0) return absl::ErrnoToStatus(err, absl::StrCat("listening on port ", port, " in the sandbox"));
  return UniqueFd(fd);
}

absl::StatusOr<UniqueFd> ConnectToSandboxPort(pid_t init_pid, int init_pidfd, uint16_t port, absl::Time deadline) {
  if (port == 0) return absl::InvalidArgumentError("port 0 is no port");
  absl::StatusOr<UniqueFd> netns = OpenNetns(init_pid, init_pidfd);
  if (!netns.ok()) return netns.status();
  UniqueFd v4, v6;
  if (absl::Status s = SocketsIn(netns->get(), &v4, &v6); !s.ok()) return s;
  sockaddr_in a4{};
  a4.sin_family = AF_INET;
  a4.sin_port = htons(port);
  a4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int err = Connect(v4.get(), reinterpret_cast<sockaddr*>(&a4), sizeof(a4), deadline);
  if (err == 0) {
    const int one = 1;
    setsockopt(v4.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return v4;
  }
  // A server listening on ::1 alone.
  if (err == ECONNREFUSED && v6) {
    sockaddr_in6 a6{};
    a6.sin6_family = AF_INET6;
    a6.sin6_port = htons(port);
    a6.sin6_addr = in6addr_loopback;
    if (Connect(v6.get(), reinterpret_cast<sockaddr*>(&a6), sizeof(a6), deadline) == 0) {
      const int one = 1;
      setsockopt(v6.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return v6;
    }
  }
  if (err == ECONNREFUSED) {
    return absl::UnavailableError(absl::StrCat("nothing listens on port ", port,
                                               " in the sandbox: start a server there (on 0.0.0.0 or 127.0.0.1)"));
  }
  return absl::UnavailableError(absl::StrCat("connecting to port ", port, " in the sandbox: ", strerror(err)));
}

}  // namespace warden
