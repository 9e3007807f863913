// End-to-end tests of machines (sandbox/machine.h): many processes in one
// sandbox, each started by its init through the whole containment sequence,
// sharing its files and process table - and nothing with another machine.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "sandbox/machine.h"
#include "tests/test_util.h"

namespace warden {
namespace {

using testing::TestExecutor;

std::shared_ptr<Machine> StartMachine(bool terminals = false) {
  SandboxSpec spec;
  spec.filesystem.binds.push_back({WARDEN_TESTCASES_BIN, "/testbin", false});
  spec.filesystem.workspace = "/home/user";
  spec.filesystem.terminals = terminals;
  auto machine = Machine::Start(TestExecutor(), spec, {});
  EXPECT_TRUE(machine.ok()) << machine.status();
  return machine.ok() ? *machine : nullptr;
}

struct Ended {
  int status = -1;
  std::string out, err;
  std::optional<std::string> setup_error, violation;
  int64_t cpu_us = 0;
  pid_t pid = 0;
};

// Runs `argv` in the machine to its end, gathering its output.
Ended RunIn(Machine& machine, std::vector<std::string> argv, const std::string& cwd = "/home/user") {
  ProcessSpec spec;
  spec.argv = std::move(argv);
  spec.env = {"PATH=/usr/bin:/bin", "HOME=/home/user"};
  spec.cwd = cwd;
  auto process = machine.Spawn(spec);
  EXPECT_TRUE(process.ok()) << process.status();
  Ended out;
  if (!process.ok()) return out;
  MachineProcess& p = **process;
  p.CloseStdin();
  auto drain = [](int fd, std::string* into) {
    char buf[4096];
    ssize_t n;
    while (fd >= 0 && (n = read(fd, buf, sizeof(buf))) > 0) into->append(buf, static_cast<size_t>(n));
  };
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  for (;;) {
    const unsigned ready = p.Wait(deadline);
    drain(p.stdout_fd(), &out.out);
    drain(p.stderr_fd(), &out.err);
    if (ready & Program::kViolation) {
      out.violation = p.violation();
      p.Kill();
      while (!(p.Wait(deadline) & (Program::kEnded | Program::kTimedOut))) {
      }
      break;
    }
    if (ready & (Program::kEnded | Program::kTimedOut)) break;
  }
  out.status = p.main_exited() ? p.main_status() : -1;
  out.setup_error = p.setup_error();
  out.cpu_us = p.cpu_us();
  out.pid = p.sandbox_pid();
  return out;
}

TEST(MachineTest, ProcessesShareFilesAndSeeEachOther) {
  auto machine = StartMachine();
  ASSERT_NE(machine, nullptr);
  // One process leaves a file in /tmp and a sleeper behind; another finds both.
  ProcessSpec sleeper;
  sleeper.argv = {"/bin/sleep", "60"};
  sleeper.env = {"PATH=/usr/bin:/bin"};
  sleeper.cwd = "/";
  auto background = machine->Spawn(sleeper);
  ASSERT_TRUE(background.ok()) << background.status();
  while ((*background)->sandbox_pid() == 0) {
    ASSERT_FALSE((*background)->Wait(absl::Now() + absl::Seconds(30)) & (Program::kEnded | Program::kTimedOut));
  }
  const pid_t pid = (*background)->sandbox_pid();
  Ended wrote = RunIn(*machine, {"/bin/sh", "-c", "echo shared > /tmp/note; echo home > note"});
  ASSERT_TRUE(WIFEXITED(wrote.status) && WEXITSTATUS(wrote.status) == 0) << wrote.err;
  Ended read = RunIn(*machine, {"/bin/sh", "-c", absl::StrCat("cat /tmp/note /home/user/note; kill -0 ", pid,
                                                           " && ps -o args= -p ", pid)});
  EXPECT_EQ(read.out, "shared\nhome\n/bin/sleep 60\n") << read.err;
  // ... and may signal it: the sleeper dies of it, as on any machine.
  Ended killed = RunIn(*machine, {"/bin/kill", "-TERM", absl::StrCat(pid)});
  EXPECT_TRUE(WIFEXITED(killed.status) && WEXITSTATUS(killed.status) == 0) << killed.err;
  MachineProcess& p = **background;
  while (!(p.Wait(absl::Now() + absl::Seconds(30)) & (Program::kEnded | Program::kTimedOut))) {
  }
  ASSERT_TRUE(p.main_exited());
  EXPECT_TRUE(WIFSIGNALED(p.main_status()) && WTERMSIG(p.main_status()) == SIGTERM);
}

TEST(MachineTest, ReportsEachProcessesEndCpuAndPid) {
  auto machine = StartMachine();
  ASSERT_NE(machine, nullptr);
  Ended exited = RunIn(*machine, {"sh", "-c", "echo $$; exit 7"});  // found in PATH
  ASSERT_TRUE(WIFEXITED(exited.status)) << exited.status;
  EXPECT_EQ(WEXITSTATUS(exited.status), 7);
  EXPECT_EQ(absl::StripAsciiWhitespace(exited.out), absl::StrCat(exited.pid));
  EXPECT_GT(exited.pid, 1);
  Ended spun = RunIn(*machine, {"/bin/sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"});
  EXPECT_GT(spun.cpu_us, 10'000);  // its own CPU, from wait4's rusage
  Ended signaled = RunIn(*machine, {"/bin/sh", "-c", "kill -KILL $$"});
  EXPECT_TRUE(WIFSIGNALED(signaled.status) && WTERMSIG(signaled.status) == SIGKILL);
}

TEST(MachineTest, AFailedStartIsThatProcessesAlone) {
  auto machine = StartMachine();
  ASSERT_NE(machine, nullptr);
  Ended no_dir = RunIn(*machine, {"/bin/true"}, "/no/such/dir");
  ASSERT_TRUE(no_dir.setup_error.has_value());
  EXPECT_NE(no_dir.setup_error->find("chdir"), std::string::npos) << *no_dir.setup_error;
  Ended no_program = RunIn(*machine, {"no-such-program"});
  ASSERT_TRUE(no_program.setup_error.has_value());
  EXPECT_NE(no_program.setup_error->find("execve"), std::string::npos) << *no_program.setup_error;
  // The machine goes on.
  EXPECT_TRUE(machine->Alive());
  EXPECT_EQ(RunIn(*machine, {"/bin/echo", "ok"}).out, "ok\n");
}

TEST(MachineTest, EachProcessRunsUnderTheSeccompPolicyAndReportsItsViolation) {
  auto machine = StartMachine();
  ASSERT_NE(machine, nullptr);
  Ended mounted = RunIn(*machine, {"/testbin/syscall_mount"});
  ASSERT_TRUE(mounted.violation.has_value()) << mounted.out << mounted.err;
  EXPECT_EQ(*mounted.violation, "mount");
  EXPECT_TRUE(machine->Alive());
  // As the sandbox's user, with no capabilities and no new privileges.
  Ended id = RunIn(*machine, {"/bin/sh", "-c", "id -u; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status"});
  EXPECT_EQ(id.out, "1000\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\n") << id.err;
}

TEST(MachineTest, MachinesDoNotSeeEachOther) {
  auto a = StartMachine();
  auto b = StartMachine();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ProcessSpec sleeper;
  sleeper.argv = {"/bin/sleep", "60"};
  sleeper.cwd = "/";
  auto in_a = a->Spawn(sleeper);
  ASSERT_TRUE(in_a.ok());
  while ((*in_a)->sandbox_pid() == 0) {
    ASSERT_FALSE((*in_a)->Wait(absl::Now() + absl::Seconds(30)) & (Program::kEnded | Program::kTimedOut));
  }
  ASSERT_EQ(RunIn(*a, {"/bin/sh", "-c", "echo a > /tmp/mine"}).status, 0);
  // b lists only its own processes, has no file of a's, and cannot signal
  // a's sleeper (its pid does not exist there).
  Ended seen = RunIn(*b, {"/bin/sh", "-c",
                        absl::StrCat("ps -e -o args=; cat /tmp/mine; kill -0 ", (*in_a)->sandbox_pid(), "; true")});
  EXPECT_EQ(seen.out.find("sleep"), std::string::npos) << seen.out;
  EXPECT_NE(seen.err.find("No such file"), std::string::npos) << seen.err;
  EXPECT_TRUE(a->Alive());
  EXPECT_TRUE((*in_a)->SandboxAlive());
  EXPECT_FALSE((*in_a)->Wait(absl::InfinitePast()) & Program::kEnded);
}

TEST(MachineTest, KillEndsEveryProcessAndLaterSpawnsFail) {
  auto machine = StartMachine();
  ASSERT_NE(machine, nullptr);
  ProcessSpec sleeper;
  sleeper.argv = {"/bin/sleep", "60"};
  sleeper.cwd = "/";
  auto p = machine->Spawn(sleeper);
  ASSERT_TRUE(p.ok());
  machine->Kill();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!((*p)->Wait(deadline) & (Program::kEnded | Program::kTimedOut))) {
  }
  EXPECT_TRUE((*p)->ended());
  EXPECT_FALSE(machine->Alive());
  EXPECT_TRUE(absl::IsFailedPrecondition(machine->Spawn(sleeper).status()));
}

TEST(MachineTest, ATerminalIsTheProcessesControllingTerminalAndResizes) {
  auto machine = StartMachine(/*terminals=*/true);
  ASSERT_NE(machine, nullptr);
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "tty; stty size; read line; stty size; echo got:$line"};
  spec.env = {"PATH=/usr/bin:/bin"};
  spec.cwd = "/";
  spec.terminal = std::make_pair(uint16_t{80}, uint16_t{24});
  auto process = machine->Spawn(spec);
  ASSERT_TRUE(process.ok()) << process.status();
  MachineProcess& p = **process;
  std::string out;
  bool resized = false;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  for (;;) {
    const unsigned ready = p.Wait(deadline);
    char buf[4096];
    ssize_t n;
    while (p.stdout_fd() >= 0 && (n = read(p.stdout_fd(), buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
    if (!resized && out.find("24 80") != std::string::npos) {
      ASSERT_TRUE(p.Resize(100, 30).ok());
      ASSERT_EQ(write(p.stdin_fd(), "hello\n", 6), 6);
      resized = true;
    }
    if (ready & (Program::kEnded | Program::kTimedOut)) break;
  }
  EXPECT_NE(out.find("/dev/pts/0"), std::string::npos) << out << p.setup_error().value_or("") << " status " << p.main_status() << " exited " << p.main_exited() << " ended " << p.ended() << " pid " << p.sandbox_pid();
  EXPECT_NE(out.find("30 100"), std::string::npos) << out;
  EXPECT_NE(out.find("got:hello"), std::string::npos) << out;
  EXPECT_TRUE(p.main_exited() && WIFEXITED(p.main_status()) && WEXITSTATUS(p.main_status()) == 0);
}

}  // namespace
}  // namespace warden
