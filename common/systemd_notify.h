// SystemdNotifier: the service side of systemd's notification protocol
// (sd_notify(3)): datagrams of "KEY=VALUE" lines to the socket named by
// $NOTIFY_SOCKET, which Type=notify units get. Written here rather than
// linking libsystemd: the protocol is a documented, stable datagram with a
// reference implementation in sd_notify(3), and warden-keeper must open and
// connect its socket before it hardens itself (its seccomp allowlist has no
// socket() or connect(), which libsystemd's sd_notify calls each time).
// libc only.
#pragma once

#include <string_view>

namespace warden {

class SystemdNotifier {
 public:
  // Connects to $NOTIFY_SOCKET (a path, or "@name" in the abstract
  // namespace); inactive when it is unset or unusable. With
  // `unset_environment`, NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID are
  // removed from the environment so that children do not talk to systemd.
  static SystemdNotifier FromEnvironment(bool unset_environment = false);

  SystemdNotifier() = default;
  SystemdNotifier(SystemdNotifier&& other) noexcept;
  SystemdNotifier& operator=(SystemdNotifier&& other) noexcept;
  SystemdNotifier(const SystemdNotifier&) = delete;
  SystemdNotifier& operator=(const SystemdNotifier&) = delete;
  ~SystemdNotifier();

  bool active() const { return fd_ >= 0; }
  // Sends `state` ("READY=1", "STATUS=...", newline-separated assignments)
  // in one datagram with sendmsg(2). False (errno set) if it could not be
  // sent; true and nothing sent when inactive.
  bool Notify(std::string_view state) const;

 private:
  explicit SystemdNotifier(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace warden
