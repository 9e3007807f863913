// SystemdNotifier against a real datagram socket standing in for systemd's
// (a path one and an abstract one), as $NOTIFY_SOCKET names them.
#include "common/systemd_notify.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace warden {
namespace {

// A bound SOCK_DGRAM socket: what systemd listens on.
class FakeSystemd {
 public:
  explicit FakeSystemd(const std::string& name) : name_(name) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr = {};
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, name.data(), name.size());
    if (name[0] == '@') addr.sun_path[0] = '\0';
    const socklen_t len = static_cast<socklen_t>(offsetof(struct sockaddr_un, sun_path) + name.size());
    EXPECT_EQ(bind(fd_, reinterpret_cast<struct sockaddr*>(&addr), len), 0) << strerror(errno);
    struct timeval tv = {10, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~FakeSystemd() {
    close(fd_);
    if (name_[0] == '/') unlink(name_.c_str());
  }
  std::string Receive() {
    char buffer[4096];
    const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
    return n < 0 ? "(nothing: " + std::string(strerror(errno)) + ")" : std::string(buffer, n);
  }

 private:
  std::string name_;
  int fd_ = -1;
};

TEST(SystemdNotifierTest, SendsToAPathSocket) {
  const std::string path = "/tmp/notify_test." + std::to_string(getpid());
  FakeSystemd systemd(path);
  setenv("NOTIFY_SOCKET", path.c_str(), 1);
  SystemdNotifier notifier = SystemdNotifier::FromEnvironment();
  ASSERT_TRUE(notifier.active());
  EXPECT_STREQ(getenv("NOTIFY_SOCKET"), path.c_str()) << "kept unless asked to unset it";
  EXPECT_TRUE(notifier.Notify("READY=1\nSTATUS=serving"));
  EXPECT_EQ(systemd.Receive(), "READY=1\nSTATUS=serving");
  unsetenv("NOTIFY_SOCKET");
}

TEST(SystemdNotifierTest, SendsToAnAbstractSocketAndUnsetsTheEnvironment) {
  const std::string name = "@warden-notify-test-" + std::to_string(getpid());
  FakeSystemd systemd(name);
  setenv("NOTIFY_SOCKET", name.c_str(), 1);
  setenv("WATCHDOG_USEC", "1000000", 1);
  SystemdNotifier notifier = SystemdNotifier::FromEnvironment(/*unset_environment=*/true);
  EXPECT_EQ(getenv("NOTIFY_SOCKET"), nullptr);
  EXPECT_EQ(getenv("WATCHDOG_USEC"), nullptr);
  SystemdNotifier moved = std::move(notifier);
  ASSERT_TRUE(moved.active());
  EXPECT_FALSE(notifier.active());
  EXPECT_TRUE(moved.Notify("STOPPING=1"));
  EXPECT_EQ(systemd.Receive(), "STOPPING=1");
}

TEST(SystemdNotifierTest, InactiveWithoutASocket) {
  unsetenv("NOTIFY_SOCKET");
  EXPECT_FALSE(SystemdNotifier::FromEnvironment().active());
  setenv("NOTIFY_SOCKET", "relative/path", 1);
  EXPECT_FALSE(SystemdNotifier::FromEnvironment().active());
  setenv("NOTIFY_SOCKET", "/nonexistent/notify", 1);
  EXPECT_FALSE(SystemdNotifier::FromEnvironment().active());
  unsetenv("NOTIFY_SOCKET");
  EXPECT_TRUE(SystemdNotifier().Notify("READY=1")) << "an inactive notifier sends nothing and succeeds";
}

}  // namespace
}  // namespace warden
