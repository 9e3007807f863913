#include "common/systemd_notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <string>
#include <utility>

namespace warden {

SystemdNotifier SystemdNotifier::FromEnvironment(bool unset_environment) {
  const char* value = getenv("NOTIFY_SOCKET");
  const std::string path = value != nullptr ? value : "";
  if (unset_environment) {
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
  }
  struct sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (path.size() < 2 || path.size() >= sizeof(addr.sun_path) || (path[0] != '/' && path[0] != '@')) {
    return SystemdNotifier();
  }
  memcpy(addr.sun_path, path.data(), path.size());
  if (path[0] == '@') addr.sun_path[0] = '\0';  // the abstract namespace
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return SystemdNotifier();
  const socklen_t len = static_cast<socklen_t>(offsetof(struct sockaddr_un, sun_path) + path.size());
  if (connect(fd, reinterpret_cast<struct sockaddr*>(&addr), len) != 0) {
    close(fd);
    return SystemdNotifier();
  }
  return SystemdNotifier(fd);
}

SystemdNotifier::SystemdNotifier(SystemdNotifier&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

SystemdNotifier& SystemdNotifier::operator=(SystemdNotifier&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

SystemdNotifier::~SystemdNotifier() {
  if (fd_ >= 0) close(fd_);
}

bool SystemdNotifier::Notify(std::string_view state) const {
  if (fd_ < 0) return true;
  struct iovec iov = {const_cast<char*>(state.data()), state.size()};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  ssize_t n;
  do {
    n = sendmsg(fd_, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(state.size());
}

}  // namespace warden
