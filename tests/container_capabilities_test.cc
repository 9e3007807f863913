// Sandboxes built by a wardend that holds only what deploy/'s manifests
// give its container (tests/container_capabilities.sh runs this under
// capsh): each sandbox's user namespace is owned by a host id of its own,
// so the per-user kernel counts made inside it - inotify instances first -
// are its own and never the node's root's; and it still ends when killed.
// Without CAP_KILL root owns them, as the log says, and they still end.
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/nsfs.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "sandbox/sandbox.h"
#include "sandbox/worker.h"
#include "tests/test_util.h"

namespace warden {
namespace {

using testing::SpecFor;
using testing::TestExecutor;

// The capabilities the wrapper left us ("SYS_ADMIN,KILL,..."); the test
// proves nothing unless they are exactly what this process holds.
std::set<std::string> Granted() {
  const char* granted = getenv("WARDEN_CONTAINER_CAPABILITIES");
  if (granted == nullptr) return {};
  std::set<std::string> names;
  for (absl::string_view name : absl::StrSplit(granted, ',', absl::SkipEmpty())) names.emplace(name);
  return names;
}

uint64_t Effective() {
  __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &header, data) != 0) return ~0ull;
  return data[0].effective | (static_cast<uint64_t>(data[1].effective) << 32);
}

uint64_t Mask(const std::set<std::string>& names) {
  static const std::pair<const char*, int> kCaps[] = {{"SYS_ADMIN", CAP_SYS_ADMIN}, {"SYS_PTRACE", CAP_SYS_PTRACE},
                                                      {"SETUID", CAP_SETUID},       {"SETGID", CAP_SETGID},
                                                      {"KILL", CAP_KILL}};
  uint64_t mask = 0;
  for (const std::string& name : names) {
    bool known = false;
    for (const auto& [cap_name, cap] : kCaps) {
      if (name == cap_name) {
        mask |= 1ull << cap;
        known = true;
      }
    }
    if (!known) ADD_FAILURE() << "a capability the test does not know: " << name;
  }
  return mask;
}

void ExpectExactlyTheContainersCapabilities() {
  const std::set<std::string> granted = Granted();
  ASSERT_FALSE(granted.empty()) << "run under tests/container_capabilities.sh";
  ASSERT_EQ(Effective(), Mask(granted)) << "this process holds other capabilities than the manifests'";
  ASSERT_EQ(geteuid(), 0u);
}

uid_t NamespaceOwner(pid_t pid) {
  const std::string ns = absl::StrCat("/proc/", pid, "/ns/user");
  const int fd = open(ns.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return static_cast<uid_t>(-1);
  uid_t owner = static_cast<uid_t>(-1);
  if (ioctl(fd, NS_GET_OWNER_UID, &owner) != 0) owner = static_cast<uid_t>(-1);
  close(fd);
  return owner;
}

// One line of the program's standard output, within 30 s.
std::string ReadLine(Worker& worker) {
  std::string line;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  char c;
  while (absl::Now() < deadline) {
    struct pollfd p = {worker.stdout_fd(), POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = read(worker.stdout_fd(), &c, 1);
    if (n < 0 && errno == EAGAIN) continue;
    if (n <= 0 || c == '\n') break;
    line += c;
  }
  return line;
}

int64_t ReadSysctl(const char* path) {
  std::ifstream f(path);
  int64_t v = -1;
  f >> v;
  return v;
}

constexpr char kTakeEveryInstance[] = R"(
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
held = []
while True:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    held.append(fd)
print(len(held), ctypes.get_errno(), flush=True)
sys.stdin.read()
)";

TEST(ContainerCapabilitiesTest, EachSandboxsUserNamespaceAndInotifyInstancesAreItsOwn) {
  ExpectExactlyTheContainersCapabilities();
  ASSERT_TRUE(Granted().contains("KILL"));
  Executor& executor = TestExecutor();
  EXPECT_TRUE(executor.own_namespace_owners()) << executor.namespace_owners();

  // Alice takes every inotify instance the host allows one user, and holds them...
  auto alice = executor.Spawn(SpecFor({"/usr/bin/python3", "-c", kTakeEveryInstance}));
  ASSERT_TRUE(alice.ok()) << alice.status();
  const std::string held = ReadLine(**alice);
  EXPECT_EQ(held, absl::StrCat(ReadSysctl("/proc/sys/fs/inotify/max_user_instances"), " ", EMFILE))
      << "alice did not reach her own limit";
  // ...while root on the host and bob's sandbox still get theirs.
  const int mine = inotify_init1(IN_CLOEXEC);
  EXPECT_GE(mine, 0) << "root has no inotify instance left: " << strerror(errno);
  if (mine >= 0) close(mine);
  const Result bob = executor.Run(SpecFor(
      {"/usr/bin/python3", "-c",
       "import ctypes; print(ctypes.CDLL(None, use_errno=True).inotify_init1(0) >= 0)"}));
  EXPECT_EQ(bob.stdout_data, "True\n") << testing::Describe(bob);

  // Her namespace is owned by the host id its root maps to, not by root.
  const uid_t owner = NamespaceOwner((*alice)->init_pid());
  EXPECT_NE(owner, 0u);
  EXPECT_EQ(owner, (*alice)->program_host_uid() - 1);

  // And she ends when killed (with root's four capabilities alone the
  // kernel refused the SIGKILL and this waited forever).
  (*alice)->Kill();
  EXPECT_FALSE((*alice)->SandboxAlive());
}

TEST(ContainerCapabilitiesTest, WithoutKillRootOwnsTheNamespacesAndTheLogSaysWhy) {
  ExpectExactlyTheContainersCapabilities();
  ASSERT_FALSE(Granted().contains("KILL"));
  Executor& executor = TestExecutor();
  EXPECT_FALSE(executor.own_namespace_owners());
  EXPECT_NE(executor.namespace_owners().find("owned by root"), std::string::npos) << executor.namespace_owners();
  EXPECT_NE(executor.namespace_owners().find("lacks CAP_KILL"), std::string::npos) << executor.namespace_owners();
  auto worker = executor.Spawn(SpecFor({"/bin/sleep", "30"}));
  ASSERT_TRUE(worker.ok()) << worker.status();
  EXPECT_EQ(NamespaceOwner((*worker)->init_pid()), 0u);
  (*worker)->Kill();
  EXPECT_FALSE((*worker)->SandboxAlive());
}

}  // namespace
}  // namespace warden
