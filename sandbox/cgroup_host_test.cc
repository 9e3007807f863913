// Tests of CgroupManager / Cgroup against this machine's real cgroup
// hierarchy (v1 or v2, whichever is detected). Needs root. Groups are only
// created inside the cgroup this test process already runs in, under a
// subtree named for the test's pid, and only processes the test forked are
// ever added or killed. The host's cgroup mounts are never touched.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sandbox/cgroup.h"

namespace warden {
namespace {

using ::testing::HasSubstr;

std::string SubtreePrefix() { return absl::StrCat("warden-hosttest-", ::getpid(), "-"); }

// Every directory a subtree was created in, checked for leftovers at exit.
std::set<std::string>& SubtreeParents() {
  static auto* parents = new std::set<std::string>;
  return *parents;
}

std::string ReadTrimmed(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(ss.str()));
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Waits for `condition` with a deadline; the kernel gives no notification
// for "the counter moved", so this polls with a short backoff.
bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration backoff = absl::Milliseconds(1);
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Milliseconds(50));
  }
  return true;
}

// A forked child that runs `body` once Release() is called (so it can be put
// in a cgroup first). SIGKILLed and reaped on scope exit if still running.
class Child {
 public:
  explicit Child(const std::function<void()>& body) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(fds[1]);
      char c;
      ssize_t n;
      do {
        n = ::read(fds[0], &c, 1);
      } while (n < 0 && errno == EINTR);
      if (n != 1) ::_exit(1);
      body();
      ::_exit(0);
    }
    ::close(fds[0]);
    go_ = fds[1];
  }
  ~Child() {
    if (go_ >= 0) ::close(go_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  pid_t pid() const { return pid_; }
  void Release() {
    ASSERT_EQ(::write(go_, "x", 1), 1);
    ::close(go_);
    go_ = -1;
  }
  // Blocks until the child exits; returns the signal that killed it (0 if none).
  int WaitForTermSignal() {
    int status = 0;
    EXPECT_EQ(::waitpid(pid_, &status, 0), pid_);
    pid_ = -1;
    return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  }
  bool Alive() const {
    siginfo_t info{};
    return ::waitid(P_PID, pid_, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == 0;
  }

 private:
  pid_t pid_ = -1;
  int go_ = -1;
};

void Pause() {
  for (;;) ::pause();
}

void Spin() {
  volatile uint64_t x = 0;
  for (;;) x = x + 1;
}

class CgroupHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::geteuid(), 0u) << "the host cgroup tests need root to create cgroups";
    static int counter = 0;
    CgroupOptions options;
    options.subtree_name = absl::StrCat(SubtreePrefix(), counter++);
    auto manager = CgroupManager::Create(options);
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = std::move(*manager);
    subtrees_ = manager_->SubtreePaths();
    for (const std::string& dir : subtrees_) {
      SubtreeParents().insert(dir.substr(0, dir.rfind('/')));
    }
  }

  void TearDown() override {
    manager_.reset();
    for (const std::string& dir : subtrees_) EXPECT_FALSE(Exists(dir)) << dir << " left behind";
  }

  bool v1() const { return manager_->version() == CgroupVersion::kV1; }

  // The directory of `group` holding `file` (v1: the hierarchy that has it).
  static std::string FileOf(const Cgroup& group, const std::string& file) {
    for (const std::string& dir : group.Paths()) {
      if (Exists(dir + "/" + file)) return dir + "/" + file;
    }
    return "<no " + file + ">";
  }

  std::unique_ptr<Cgroup> NewGroup(const std::string& name, const CgroupLimits& limits) {
    auto group = manager_->CreateGroup(name, limits);
    EXPECT_TRUE(group.ok()) << group.status();
    return group.ok() ? std::move(*group) : nullptr;
  }

  std::unique_ptr<CgroupManager> manager_;
  std::vector<std::string> subtrees_;
};

TEST_F(CgroupHostTest, SubtreeLivesInsideTheCurrentCgroup) {
  // Each subtree's parent is where /proc/self/cgroup says we are.
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  std::vector<std::string> current;
  while (std::getline(in, line))
    current.push_back(line.substr(line.find(':', line.find(':') + 1) + 1));
  for (const std::string& dir : subtrees_) {
    const std::string parent = dir.substr(0, dir.rfind('/'));
    bool matched = false;
    for (const std::string& path : current) {
      matched = matched || absl::EndsWith(parent, path == "/" ? "" : path);
    }
    EXPECT_TRUE(matched) << dir;
    EXPECT_TRUE(absl::StartsWith(dir, "/sys/fs/cgroup/")) << dir;
  }
  std::fprintf(stderr, "%s", manager_->Describe().c_str());
}

TEST_F(CgroupHostTest, WritesLimitsTheKernelReportsBack) {
  CgroupLimits limits{.memory_bytes = 64 << 20, .pids = 16, .cpu_percent = 50};
  auto group = NewGroup("limits", limits);
  ASSERT_NE(group, nullptr);
  if (v1()) {
    EXPECT_EQ(ReadTrimmed(FileOf(*group, "memory.limit_in_bytes")), "67108864");
    if (Exists(FileOf(*group, "memory.memsw.limit_in_bytes"))) {
      EXPECT_EQ(ReadTrimmed(FileOf(*group, "memory.memsw.limit_in_bytes")), "67108864");
    }
    EXPECT_EQ(ReadTrimmed(FileOf(*group, "cpu.cfs_period_us")), "100000");
    EXPECT_EQ(ReadTrimmed(FileOf(*group, "cpu.cfs_quota_us")), "50000");
  } else {
    EXPECT_EQ(ReadTrimmed(FileOf(*group, "memory.max")), "67108864");
    EXPECT_EQ(ReadTrimmed(FileOf(*group, "memory.oom.group")), "0");
    EXPECT_EQ(ReadTrimmed(FileOf(*group, "cpu.max")), "50000 100000");
  }
  EXPECT_EQ(ReadTrimmed(FileOf(*group, "pids.max")), "16");
}

TEST_F(CgroupHostTest, CountsCpuTimeOfAnAddedChild) {
  auto group = NewGroup("cpu", {});
  ASSERT_NE(group, nullptr);
  Child child(Spin);
  ASSERT_TRUE(group->AddProcess(child.pid()).ok());
  child.Release();
  int64_t seen = 0;
  EXPECT_TRUE(WaitFor(
      [&] {
        auto usage = group->Usage();
        if (usage.ok()) seen = usage->cpu_usage_ns;
        return seen >= 50'000'000;  // 50 ms of CPU
      },
      absl::Seconds(20)))
      << "cpu usage stayed at " << seen << " ns";
  ASSERT_TRUE(group->KillAll().ok());
  EXPECT_EQ(child.WaitForTermSignal(), SIGKILL);
}

TEST_F(CgroupHostTest, OomKillsAChildBeyondTheMemoryLimit) {
  constexpr int64_t kLimit = 32 << 20;
  auto group = NewGroup("oom", {.memory_bytes = kLimit, .pids = 8});
  ASSERT_NE(group, nullptr);
  Child child([] {
    for (int i = 0; i < 512; ++i) {  // 512 MiB, touched
      char* p = static_cast<char*>(::malloc(1 << 20));
      if (p == nullptr) ::_exit(3);
      ::memset(p, 1, 1 << 20);
    }
    ::_exit(0);
  });
  ASSERT_TRUE(group->AddProcess(child.pid()).ok());
  child.Release();
  EXPECT_EQ(child.WaitForTermSignal(), SIGKILL);
  CgroupUsage usage;
  EXPECT_TRUE(WaitFor(
      [&] {
        auto u = group->Usage();
        if (u.ok()) usage = *u;
        return usage.oom_kills >= 1;
      },
      absl::Seconds(5)));
  EXPECT_GE(usage.oom_kills, 1);
  EXPECT_GE(usage.peak_memory_bytes, kLimit / 2);
  EXPECT_LE(usage.peak_memory_bytes, kLimit);
}

TEST_F(CgroupHostTest, KillAllKillsEveryChildIncludingAStoppedOne) {
  auto group = NewGroup("kill", {});
  ASSERT_NE(group, nullptr);
  Child a(Pause), b(Pause), stopped(Pause), outsider(Pause);
  for (Child* c : {&a, &b, &stopped}) ASSERT_TRUE(group->AddProcess(c->pid()).ok());
  for (Child* c : {&a, &b, &stopped, &outsider}) c->Release();
  ASSERT_EQ(::kill(stopped.pid(), SIGSTOP), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(stopped.pid(), &status, WUNTRACED), stopped.pid());
  ASSERT_TRUE(WIFSTOPPED(status));
  EXPECT_EQ(group->Empty().value_or(true), false);

  ASSERT_TRUE(group->KillAll().ok());
  for (Child* c : {&a, &b, &stopped}) EXPECT_EQ(c->WaitForTermSignal(), SIGKILL);
  EXPECT_TRUE(outsider.Alive());
  EXPECT_TRUE(WaitFor([&] { return group->Empty().value_or(false); }, absl::Seconds(2)));
  if (v1()) {
    EXPECT_EQ(ReadTrimmed(FileOf(*group, "freezer.state")), "THAWED");
  }

  const std::vector<std::string> dirs = group->Paths();
  ASSERT_TRUE(group->Destroy().ok());
  for (const std::string& dir : dirs) EXPECT_FALSE(Exists(dir)) << dir;
}

TEST_F(CgroupHostTest, KillAllStopsAGroupThatKeepsForking) {
  // Orphaned grandchildren come back to us so they can be reaped.
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  auto group = NewGroup("forker", {.pids = 32});
  ASSERT_NE(group, nullptr);
  Child forker([] {
    for (;;) {
      pid_t p = ::fork();
      if (p == 0) Pause();
      if (p < 0) ::usleep(100);  // at pids.max; keep trying
    }
  });
  ASSERT_TRUE(group->AddProcess(forker.pid()).ok());
  forker.Release();
  ASSERT_TRUE(WaitFor(
      [&] {
        std::ifstream in(FileOf(*group, "cgroup.procs"));
        std::string line;
        int n = 0;
        while (std::getline(in, line)) ++n;
        return n >= 8;
      },
      absl::Seconds(10)));
  ASSERT_TRUE(group->Destroy().ok());
  EXPECT_EQ(forker.WaitForTermSignal(), SIGKILL);
  int status;
  while (::waitpid(-1, &status, 0) > 0) {  // every grandchild, all SIGKILLed
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  }
  EXPECT_EQ(errno, ECHILD);
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 0), 0);
}

TEST_F(CgroupHostTest, GroupDestructorKillsAndRemoves) {
  Child child(Pause);
  std::vector<std::string> dirs;
  {
    auto group = NewGroup("scoped", {});
    ASSERT_NE(group, nullptr);
    ASSERT_TRUE(group->AddProcess(child.pid()).ok());
    child.Release();
    dirs = group->Paths();
  }
  EXPECT_EQ(child.WaitForTermSignal(), SIGKILL);
  for (const std::string& dir : dirs) EXPECT_FALSE(Exists(dir)) << dir;
}

TEST_F(CgroupHostTest, ManagerRemovesItsSubtreeAndLeftoverGroups) {
  Child child(Pause);
  auto group = NewGroup("leftover", {});
  ASSERT_NE(group, nullptr);
  ASSERT_TRUE(group->AddProcess(child.pid()).ok());
  child.Release();
  manager_.reset();
  EXPECT_EQ(child.WaitForTermSignal(), SIGKILL);
  for (const std::string& dir : subtrees_) EXPECT_FALSE(Exists(dir)) << dir;
  EXPECT_TRUE(group->Destroy().ok());  // already gone: nothing to do
}

TEST_F(CgroupHostTest, DescribesTheHierarchy) {
  const std::string text = manager_->Describe();
  EXPECT_THAT(text, HasSubstr(absl::StrCat("cgroup ", CgroupVersionName(manager_->version()))));
  for (const std::string& dir : subtrees_) EXPECT_THAT(text, HasSubstr(dir));
}

// Fails the run if any subtree this process created is still on the host.
class NoLeftoversEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const std::string& parent : SubtreeParents()) {
      DIR* d = ::opendir(parent.c_str());
      if (d == nullptr) continue;
      while (struct dirent* e = ::readdir(d)) {
        if (absl::StartsWith(e->d_name, SubtreePrefix())) {
          ADD_FAILURE() << "left behind: " << parent << "/" << e->d_name;
        }
      }
      ::closedir(d);
    }
  }
};
const auto* const kNoLeftovers = ::testing::AddGlobalTestEnvironment(new NoLeftoversEnvironment);

}  // namespace
}  // namespace warden
