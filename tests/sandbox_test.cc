// End-to-end tests of the sandbox layer through Executor::Run: results,
// limits and accounting, binds, lifecycle and cleanup, concurrency, and the
// refusal to run without cgroups unless degraded mode is asked for.
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace warden {
namespace {

using testing::Describe;
using testing::PythonSpec;
using testing::SpecFor;
using testing::TestExecutor;

int CountEntries(const std::string& dir) {
  int n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') ++n;
    }
    closedir(d);
  }
  return n;
}

// The mounts of this (the host's) mount namespace a sandbox's would be if
// they propagated back: its root is built at /tmp (ApplyMountPlan's staging
// directory), so /tmp itself or /tmp/usr, /tmp/proc, ... Counting every
// mount instead counted the machine's: another test's dockerd or network
// namespaces came and went meanwhile (76 mounts before, 66 after).
std::vector<std::string> SandboxShapedMounts() {
  static const std::set<std::string> kRootEntries = {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32",
                                                      "etc", "proc", "dev", "tmp", "workspace", "home",
                                                      "opt", "run", "var", "sys", "testbin"};
  std::vector<std::string> out;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    // mountinfo: ID PARENT MAJ:MIN ROOT MOUNT_POINT ...
    std::vector<std::string> fields = absl::StrSplit(line, ' ');
    if (fields.size() < 5) continue;
    const std::string& point = fields[4];
    if (point == "/tmp") {
      out.push_back(line);
    } else if (absl::StartsWith(point, "/tmp/")) {
      const std::string first = point.substr(5, point.find('/', 5) - 5);
      if (kRootEntries.count(first) > 0) out.push_back(line);
    }
  }
  return out;
}

// Processes whose host uid is in `range` (by default: this test process's).
std::vector<int> SandboxProcesses(testing::IdRange range = testing::TestIdRange()) {
  std::vector<int> pids;
  DIR* d = opendir("/proc");
  while (dirent* e = readdir(d)) {
    int pid = atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("Uid:", 0) == 0) {
        std::vector<std::string> f = absl::StrSplit(line, '\t', absl::SkipEmpty());
        long uid = f.size() > 1 ? atol(f[1].c_str()) : 0;
        if (range.Contains(uid)) pids.push_back(pid);
        break;
      }
    }
  }
  closedir(d);
  return pids;
}

int SubdirectoryCount() {
  int n = 0;
  for (const std::string& dir : TestExecutor().cgroups()->SubtreePaths()) {
    if (DIR* d = opendir(dir.c_str())) {
      while (dirent* e = readdir(d)) {
        if (e->d_type == DT_DIR && e->d_name[0] != '.') ++n;
      }
      closedir(d);
    }
  }
  return n;
}

TEST(SandboxTest, CapturesStdoutAndStderrSeparately) {
  Result r = testing::Run(PythonSpec("import sys; print('out'); print('err', file=sys.stderr)"));
  ASSERT_EQ(r.outcome, Outcome::kOk) << Describe(r);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.stdout_data, "out\n");
  EXPECT_EQ(r.stderr_data, "err\n");
  EXPECT_FALSE(r.stdout_truncated);
}

TEST(SandboxTest, PassesStdinDataAndClosesIt) {
  SandboxSpec spec = SpecFor({"/bin/cat"});
  spec.stdin_data = std::string(200'000, 'x') + "end";  // more than a pipe buffer
  Result r = testing::Run(spec);
  ASSERT_EQ(r.outcome, Outcome::kOk) << Describe(r);
  EXPECT_EQ(r.stdout_data, spec.stdin_data);
}

TEST(SandboxTest, NonzeroExitCarriesTheCode) {
  Result r = testing::Run(SpecFor({"/bin/sh", "-c", "exit 7"}));
  EXPECT_EQ(r.outcome, Outcome::kNonzeroExit) << Describe(r);
  EXPECT_EQ(r.exit_code, 7);
}

TEST(SandboxTest, DeathBySignalIsSignaled) {
  Result r = testing::Run(PythonSpec("import os, signal; os.kill(os.getpid(), signal.SIGABRT)"));
  EXPECT_EQ(r.outcome, Outcome::kSignaled) << Describe(r);
  EXPECT_EQ(r.signal, SIGABRT);
  EXPECT_EQ(r.exit_code, -1);
}

TEST(SandboxTest, CpuTimeCountsEveryThreadAndChild) {
  // Two processes each burn about 300 ms of CPU; all of it is accounted.
  Limits limits;
  limits.cpu_percent = 200;
  Result r = testing::Run(PythonSpec(
      "import os, time\n"
      "def burn():\n"
      "    t = time.process_time()\n"
      "    while time.process_time() - t < 0.3: pass\n"
      "pid = os.fork()\n"
      "burn()\n"
      "if pid: os.waitpid(pid, 0)\n",
      limits));
  ASSERT_EQ(r.outcome, Outcome::kOk) << Describe(r);
  EXPECT_GE(r.cpu_ms, 550) << Describe(r);
}

TEST(SandboxTest, CpuLimitCountsChildrenToo) {
  // Each of four children stays under the per-process RLIMIT_CPU backstop,
  // but together they pass the limit: the cgroup total ends the run.
  Limits limits;
  limits.cpu_ms = 600;
  limits.cpu_percent = 400;
  Result r = testing::Run(PythonSpec(
      "import os\n"
      "for _ in range(4):\n"
      "    if os.fork() == 0:\n"
      "        while True: pass\n"
      "os.wait()\n",
      limits));
  EXPECT_EQ(r.outcome, Outcome::kCpuTimeout) << Describe(r);
  EXPECT_GE(r.cpu_ms, 600);
}

TEST(SandboxTest, PeakMemoryIsReported) {
  Result r = testing::Run(PythonSpec("b = bytearray(100 << 20); b[::4096] = b'x' * len(b[::4096])"));
  ASSERT_EQ(r.outcome, Outcome::kOk) << Describe(r);
  EXPECT_GE(r.peak_memory_bytes, 100LL << 20);
  EXPECT_LT(r.peak_memory_bytes, 512LL << 20);
}

TEST(SandboxTest, MemoryLimitIsDetectedFromOomEventsNotExitCode) {
  Limits limits;
  limits.memory_bytes = 64LL << 20;
  // The hog is a child; the main process survives, sees the child killed,
  // and exits 0 itself: only the cgroup's OOM events can tell.
  Result r = testing::Run(PythonSpec(
      "import subprocess, sys\n"
      "p = subprocess.run([sys.executable, '-c', 'b = bytearray(200 << 20)'])\n"
      "print(p.returncode)\n",
      limits));
  EXPECT_EQ(r.outcome, Outcome::kMemoryLimit) << Describe(r);
  EXPECT_EQ(r.stdout_data, "-9\n");
}

TEST(SandboxTest, WorkspaceIsTheWritableWorkingDirectory) {
  Result r = testing::Run(SpecFor({"/bin/sh", "-c", "pwd; echo hi > f; cat f; echo $HOME"}));
  ASSERT_EQ(r.outcome, Outcome::kOk) << Describe(r);
  EXPECT_EQ(r.stdout_data, "/workspace\nhi\n/workspace\n");
}

TEST(SandboxTest, ExtraBindsAreReadOnlyOrWritableAsConfigured) {
  char ro_dir[] = "/tmp/warden-ro-XXXXXX";
  char rw_dir[] = "/tmp/warden-rw-XXXXXX";
  ASSERT_NE(mkdtemp(ro_dir), nullptr);
  ASSERT_NE(mkdtemp(rw_dir), nullptr);
  chmod(ro_dir, 0755);
  chmod(rw_dir, 0777);
  std::ofstream(std::string(ro_dir) + "/data.txt") << "payload";
  SandboxSpec spec = SpecFor({"/bin/sh", "-c",
                              "cat /in/data.txt; echo; echo x > /in/new 2>/dev/null || echo ro; "
                              "echo written > /out/result && echo rw"});
  spec.filesystem.binds = {{ro_dir, "/in", false}, {rw_dir, "/out", true}};
  Result r = testing::Run(spec);
  ASSERT_EQ(r.outcome, Outcome::kOk) << Describe(r);
  EXPECT_EQ(r.stdout_data, "payload\nro\nrw\n");
  std::ifstream result(std::string(rw_dir) + "/result");
  std::string text;
  std::getline(result, text);
  EXPECT_EQ(text, "written");
  EXPECT_NE(access((std::string(ro_dir) + "/new").c_str(), F_OK), 0);
  system(absl::StrCat("rm -rf ", ro_dir, " ", rw_dir).c_str());
}

// A checkout under a home directory only its owner may enter (Debian 12's
// default 0700), or under `mktemp -d`: the sandbox's unprivileged ids cannot
// traverse the parents, yet every bind source - read-only, writable, the
// workspace - is reachable, because the supervisor opens them. The sources'
// own permissions still hold: a file the sandbox's ids may not read stays
// unreadable.
TEST(SandboxTest, BindSourcesAreReachableUnderDirectoriesOnlyTheirOwnerMayEnter) {
  char top[] = "/tmp/warden-private-XXXXXX";
  ASSERT_NE(mkdtemp(top), nullptr);  // 0700, root's
  const std::string home = std::string(top) + "/home";
  ASSERT_EQ(mkdir(home.c_str(), 0700), 0);
  ASSERT_EQ(chown(home.c_str(), 4242, 4242), 0);  // another user's home
  const std::string in = home + "/in", out = home + "/out", ws = home + "/ws";
  ASSERT_EQ(mkdir(in.c_str(), 0755), 0);
  ASSERT_EQ(mkdir(out.c_str(), 0777), 0);
  ASSERT_EQ(mkdir(ws.c_str(), 0777), 0);
  chmod(out.c_str(), 0777);  // past the umask
  chmod(ws.c_str(), 0777);
  std::ofstream(in + "/data.txt") << "payload";
  std::ofstream(in + "/secret.txt") << "root only";
  chmod((in + "/data.txt").c_str(), 0644);
  chmod((in + "/secret.txt").c_str(), 0600);

  SandboxSpec spec = SpecFor({"/bin/sh", "-c",
                              "cat /in/data.txt; echo; cat /in/secret.txt 2>/dev/null || echo denied; "
                              "echo x > /in/new 2>/dev/null || echo ro; "
                              "echo written > /out/result && echo rw; echo kept > w && echo ws"});
  spec.filesystem.binds = {{in, "/in", false}, {out, "/out", true}};
  spec.filesystem.workspace_source = ws;
  Result r = testing::Run(spec);
  EXPECT_EQ(r.outcome, Outcome::kOk) << Describe(r);
  EXPECT_EQ(r.stdout_data, "payload\ndenied\nro\nrw\nws\n") << Describe(r);
  std::string text;
  std::getline(std::ifstream(out + "/result"), text);
  EXPECT_EQ(text, "written");
  std::getline(std::ifstream(ws + "/w"), text);
  EXPECT_EQ(text, "kept");
  EXPECT_NE(access((in + "/new").c_str(), F_OK), 0);
  system(absl::StrCat("rm -rf ", top).c_str());
}

TEST(SandboxTest, BadSpecsAreSetupErrorsThatSayWhatIsWrong) {
  Result missing = testing::Run(SpecFor({"no-such-program-xyz"}));
  EXPECT_EQ(missing.outcome, Outcome::kSetupError);
  EXPECT_NE(missing.message.find("no-such-program-xyz"), std::string::npos) << missing.message;

  Limits bad;
  bad.memory_bytes = 1;
  Result limits = testing::Run(SpecFor({"/bin/true"}, bad));
  EXPECT_EQ(limits.outcome, Outcome::kSetupError);
  EXPECT_NE(limits.message.find("memory_bytes"), std::string::npos) << limits.message;

  SandboxSpec cwd = SpecFor({"/bin/true"});
  cwd.cwd = "/no/such/dir";
  Result r = testing::Run(cwd);
  EXPECT_EQ(r.outcome, Outcome::kSetupError) << Describe(r);
  EXPECT_NE(r.message.find("chdir"), std::string::npos) << r.message;

  Result empty = testing::Run(SpecFor({}));
  EXPECT_EQ(empty.outcome, Outcome::kSetupError);
}

TEST(SandboxTest, ConsecutiveRunsLeaveNoProcessFdMountOrCgroupBehind) {
  // The 10,000-run check, scaled down for CI; bench/ runs the full count.
  // What the recycle pool keeps for the next run is not a leak: its own set
  // of the host's namespaces (made with the executor, before the counts),
  // 3 fds (net, ipc, uts) per idle namespace set, and each idle cgroup's
  // directories. Anything beyond those is.
  const RecyclePool* pool = TestExecutor().recycle_pool();
  const int groups = SubdirectoryCount();
  const int fds = CountEntries("/proc/self/fd");
  const std::vector<std::string> mounts = SandboxShapedMounts();
  const int idle_sets = pool ? pool->Stats().idle_namespaces : 0;
  const int idle_group_dirs = pool ? static_cast<int>(pool->IdleCgroupPaths().size()) : 0;
  for (int i = 0; i < 300; ++i) {
    Result r = testing::Run(SpecFor({"/bin/true"}));
    ASSERT_EQ(r.outcome, Outcome::kOk) << "run " << i << ": " << Describe(r);
  }
  int pooled_fds = 0, pooled_groups = 0;
  if (pool != nullptr) {
    pooled_fds = 3 * (pool->Stats().idle_namespaces - idle_sets);
    pooled_groups = static_cast<int>(pool->IdleCgroupPaths().size()) - idle_group_dirs;
  }
  EXPECT_EQ(CountEntries("/proc/self/fd"), fds + pooled_fds);
  EXPECT_EQ(SandboxShapedMounts(), mounts);
  EXPECT_EQ(SubdirectoryCount(), groups + pooled_groups);
  EXPECT_TRUE(SandboxProcesses().empty());
}

TEST(SandboxTest, ConcurrentRunsFromManyThreadsDoNotMix) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([t, &failures] {
      for (int i = 0; i < 5; ++i) {
        const std::string token = absl::StrCat("thread", t, "-run", i);
        Result r = testing::Run(SpecFor({"/bin/sh", "-c", "echo " + token + "; ls /workspace | wc -l; "
                                                 "touch /workspace/mine /tmp/mine"}));
        if (r.outcome != Outcome::kOk || r.stdout_data != token + "\n0\n") {
          ++failures;
          ADD_FAILURE() << Describe(r);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_TRUE(SandboxProcesses().empty());
}

TEST(SandboxTest, SandboxDiesWithItsSupervisor) {
  // The supervisor we kill is a child process with an id range of its own.
  const testing::IdRange kChildRange{testing::TestIdRange().first + testing::TestIdRange().count, 512};
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t supervisor = fork();
  ASSERT_GE(supervisor, 0);
  if (supervisor == 0) {
    // A supervisor of our own: runs a program that says so, then sleeps.
    close(ready[0]);
    ExecutorOptions options;
    options.host_id_base = kChildRange.first;
    options.host_id_count = kChildRange.count;
    auto executor = Executor::Create(options);
    if (!executor.ok()) _exit(2);
    SandboxSpec spec = SpecFor({"/bin/sh", "-c", "sleep 1000 & sleep 1000"});
    spec.limits.wall_ms = 60'000;
    dup2(ready[1], 99);
    // The sandbox's stdout is ours to watch only through the result, so
    // tell the parent via the pipe once the sandbox processes exist.
    std::thread notifier([kChildRange] {
      for (int i = 0; i < 5000; ++i) {
        if (SandboxProcesses(kChildRange).size() >= 3) {
          (void)!write(99, "r", 1);
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    });
    (*executor)->Run(spec);
    _exit(0);
  }
  close(ready[1]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1) << "the sandbox never started";
  close(ready[0]);
  ASSERT_FALSE(SandboxProcesses(kChildRange).empty());
  kill(supervisor, SIGKILL);
  waitpid(supervisor, nullptr, 0);

  // PR_SET_PDEATHSIG kills the init, and with it the pid namespace.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!SandboxProcesses(kChildRange).empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(SandboxProcesses(kChildRange).empty());

  // The dead supervisor's (now empty) cgroups are ours to remove.
  for (const std::string& sub : TestExecutor().cgroups()->SubtreePaths()) {
    const std::string parent = sub.substr(0, sub.rfind('/'));
    const std::string prefix = absl::StrCat("warden-", supervisor, "-");
    DIR* top = opendir(parent.c_str());
    ASSERT_NE(top, nullptr) << parent;
    while (dirent* t = readdir(top)) {
      if (std::string(t->d_name).rfind(prefix, 0) != 0) continue;
      const std::string stale = parent + "/" + t->d_name;
      if (DIR* d = opendir(stale.c_str())) {
        while (dirent* e = readdir(d)) {
          if (e->d_type == DT_DIR && e->d_name[0] != '.') rmdir((stale + "/" + e->d_name).c_str());
        }
        closedir(d);
      }
      EXPECT_EQ(rmdir(stale.c_str()), 0) << stale << ": " << strerror(errno);
    }
    closedir(top);
  }
}

TEST(SandboxTest, RefusesToRunWithoutCgroupsUnlessDegradedIsAsked) {
  char empty[] = "/tmp/warden-nocg-XXXXXX";
  ASSERT_NE(mkdtemp(empty), nullptr);
  ExecutorOptions options;
  options.cgroup.fs_root = empty;  // no cgroup hierarchy at all
  auto refused = Executor::Create(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--allow-degraded"), std::string::npos)
      << refused.status();

  options.allow_degraded = true;
  auto degraded = Executor::Create(options);
  ASSERT_TRUE(degraded.ok()) << degraded.status();
  EXPECT_TRUE((*degraded)->degraded());
  Result r = (*degraded)->Run(SpecFor({"/bin/echo", "still isolated"}));
  EXPECT_EQ(r.outcome, Outcome::kOk) << Describe(r);
  EXPECT_EQ(r.stdout_data, "still isolated\n");
  EXPECT_NE(r.message.find("degraded"), std::string::npos) << r.message;
  rmdir(empty);
}

TEST(SandboxTest, RootlessRunsUseUserNamespacesAndRefuseWithoutCgroups) {
  // An unprivileged caller cannot write the host's cgroups: Warden says so
  // and refuses; in explicit degraded mode it still builds the sandbox.
  int result[2];
  ASSERT_EQ(pipe(result), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(result[0]);
    if (setgroups(0, nullptr) != 0 || setresgid(65534, 65534, 65534) != 0 ||
        setresuid(65534, 65534, 65534) != 0) {
      _exit(10);
    }
    // A process that changed uid is not dumpable (its /proc files, and its
    // clones' uid_map, belong to root); a user's own processes are.
    prctl(PR_SET_DUMPABLE, 1);
    std::string report;
    auto refused = Executor::Create(ExecutorOptions{});
    report += refused.ok() ? "created;" : "refused;";
    ExecutorOptions options;
    options.allow_degraded = true;
    auto degraded = Executor::Create(options);
    if (degraded.ok()) {
      Result r = (*degraded)->Run(SandboxSpec{{"/bin/sh", "-c", "id -u; cat /proc/self/uid_map"}});
      report += absl::StrCat(OutcomeName(r.outcome), ";", r.stdout_data, r.message);
    } else {
      report += std::string(degraded.status().message());
    }
    (void)!write(result[1], report.data(), report.size());
    _exit(0);
  }
  close(result[1]);
  std::string report;
  char buf[4096];
  ssize_t n;
  while ((n = read(result[0], buf, sizeof(buf))) > 0) report.append(buf, n);
  close(result[0]);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(report.rfind("refused;OK;1000\n", 0), 0u) << report;
  EXPECT_NE(report.find("1000      65534"), std::string::npos) << report;
}

}  // namespace
}  // namespace warden

namespace warden {
namespace {

std::string ReadProcFile(pid_t pid, const std::string& name) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/", name), std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// What `ps`, `pidof` and `kill` see (sandbox/process_title.h): the init as
// warden-sandbox and what it is for, renamed when asked, never as the
// process it was cloned from; its program as what it runs.
TEST(SandboxTest, TheInitIsNamedForWhatItIsNotForTheProcessItWasClonedFrom) {
  SandboxSpec spec = SpecFor({"/bin/sleep", "30"});
  spec.name = "s-0123";
  auto worker = TestExecutor().Spawn(spec);
  ASSERT_TRUE(worker.ok()) << worker.status();
  const pid_t init = (*worker)->init_pid();
  // `read()` of what the kernel shows, once it equals `wanted` or after 10 s.
  auto eventually = [](const std::string& wanted, auto read) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    std::string seen = read();
    while (seen != wanted && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));
      seen = read();
    }
    return seen;
  };
  auto cmdline = [init] { return ReadProcFile(init, "cmdline"); };
  EXPECT_EQ(eventually(std::string("warden-sandbox s-0123\0", 22), cmdline),
            std::string("warden-sandbox s-0123\0", 22));
  EXPECT_EQ(ReadProcFile(init, "comm"), "warden-sandbox\n");
  ASSERT_TRUE((*worker)->Retitle("s-4567").ok());
  EXPECT_EQ(eventually(std::string("warden-sandbox s-4567\0", 22), cmdline),
            std::string("warden-sandbox s-4567\0", 22));
  // Its program is what it runs.
  auto program = [init] {
    const std::string children = ReadProcFile(init, absl::StrCat("task/", init, "/children"));
    return children.empty() ? std::string() : ReadProcFile(std::stoi(children), "comm");
  };
  EXPECT_EQ(eventually("sleep\n", program), "sleep\n");
}

TEST(SandboxTest, SandboxOutlivesTheThreadThatStartedIt) {
  // The daemon starts sandboxes from threads that come and go; a sandbox
  // must live as long as its Worker, not as long as that thread.
  std::unique_ptr<Worker> worker;
  std::thread starter([&worker] {
    auto spawned = TestExecutor().Spawn(testing::SpecFor({"/bin/sleep", "30"}));
    ASSERT_TRUE(spawned.ok()) << spawned.status();
    worker = std::move(*spawned);
  });
  starter.join();
  ASSERT_NE(worker, nullptr);
  // Nothing may end it within this window (it would end at once if killed).
  const unsigned ready = worker->Wait(absl::Now() + absl::Milliseconds(300));
  EXPECT_FALSE(ready & Worker::kEnded) << "ended: " << worker->main_status();
  EXPECT_TRUE(worker->Signal(0).ok());
}

}  // namespace
}  // namespace warden

#include <linux/nsfs.h>
#include <sys/ioctl.h>

namespace warden {
namespace {

TEST(SandboxTest, EachSandboxsUserNamespaceIsOwnedByItsOwnHostIdNeverRoot) {
  // The kernel charges every per-user count made inside a user namespace
  // (inotify instances and watches, pending signals, locked memory, ...)
  // to its owner on the host too (kernel/ucount.c): root as the owner made
  // every sandbox's counts root's. Each must be owned by its init's host id,
  // its own: two sandboxes, two owners, neither root.
  std::vector<std::unique_ptr<Worker>> workers;
  std::set<uid_t> owners;
  for (int i = 0; i < 2; ++i) {
    auto spawned = TestExecutor().Spawn(SpecFor({"/bin/sleep", "30"}));
    ASSERT_TRUE(spawned.ok()) << spawned.status();
    const std::string ns = absl::StrCat("/proc/", (*spawned)->init_pid(), "/ns/user");
    const int fd = open(ns.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0) << ns << ": " << strerror(errno);
    uid_t owner = 0;
    const int rc = ioctl(fd, NS_GET_OWNER_UID, &owner);
    const int err = errno;
    close(fd);
    ASSERT_EQ(rc, 0) << strerror(err);
    EXPECT_NE(owner, 0u);
    EXPECT_TRUE(testing::TestIdRange().Contains(owner)) << owner;
    // Its own: the id its namespace's root (the init) maps to.
    EXPECT_EQ(owner, (*spawned)->program_host_uid() - 1);
    owners.insert(owner);
    workers.push_back(*std::move(spawned));
  }
  EXPECT_EQ(owners.size(), 2u);
  // This thread got its root identity back after each clone.
  EXPECT_EQ(geteuid(), 0u);
  EXPECT_EQ(syscall(SYS_geteuid), 0);
}

}  // namespace
}  // namespace warden
