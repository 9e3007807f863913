// Sessions end to end: real kernels (Python, JavaScript, bash) in real
// sandboxes, driven through Session.
#include "kernel/session.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "kernel/zygote.h"
#include "gtest/gtest.h"

namespace warden {

inline void PrintTo(Outcome outcome, std::ostream* os) { *os << OutcomeName(outcome); }

namespace {

Executor& TestExecutor() {
  // Destroyed at exit, which removes its cgroup subtree.
  static std::unique_ptr<Executor> executor = [] {
    ExecutorOptions options;
    // A host id range of this process's own (ctest runs binaries in parallel).
    options.host_id_base = static_cast<uid_t>(3'000'000 + (getpid() % 4096) * 512);
    options.host_id_count = 512;
    auto created = Executor::Create(options);
    if (!created.ok()) {
      fprintf(stderr, "%s\n", std::string(created.status().message()).c_str());
      abort();
    }
    return std::move(*created);
  }();
  return *executor;
}

// The Python fork server, started once (with numpy warm, as wardend's
// default pool has it) for the tests that run on it.
ForkServer* TestZygote() {
  static std::unique_ptr<ForkServer> zygote = [] {
    auto started = StartPythonZygote(DefaultPythonZygoteProgram(),
                                     SessionOptions::DefaultKernelsDir(), {"numpy"});
    if (!started.ok()) {
      fprintf(stderr, "%s\n", std::string(started.status().message()).c_str());
      abort();
    }
    return std::move(*started);
  }();
  return zygote.get();
}

std::unique_ptr<Session> StartSession(Language language, SessionOptions options = {},
                                      bool zygote = false) {
  options.language = language;
  if (zygote) options.fork_server = TestZygote();
  auto session = Session::Start(TestExecutor(), options);
  EXPECT_TRUE(session.ok()) << session.status();
  return session.ok() ? std::move(*session) : nullptr;
}

std::string Describe(const CellResult& r) {
  return absl::StrCat("outcome=", OutcomeName(r.outcome), " count=", r.execution_count,
                      " message=", r.message, " error=", r.error ? r.error->ename + ": " + r.error->evalue : "",
                      "\n--- stdout ---\n", r.stdout_data.substr(0, 2000), "\n--- stderr ---\n",
                      r.stderr_data.substr(0, 2000));
}

CellLimits Limits(int64_t wall_ms, int64_t cpu_ms = 30'000, int64_t output = 1 << 20) {
  CellLimits limits;
  limits.wall_ms = wall_ms;
  limits.cpu_ms = cpu_ms;
  limits.output_bytes = output;
  return limits;
}

// What each language's cells look like for the shared behaviours.
struct LanguageCase {
  const char* name;
  Language language;
  bool zygote;               // cloned from the Python fork server
  const char* define;        // cell 1: define state
  const char* unrelated;     // cell 2
  const char* use;           // cell 3: use it, printing "42"
  const char* print_gate;    // print "early", wait for the file "gate", print "late"
  const char* sleep_forever;  // interruptible
  const char* raise;         // fails with an error named `error_name`
  const char* error_name;
  const char* forge;         // prints a fake frame and invalid UTF-8
};

const LanguageCase kLanguages[] = {
    {"Python", Language::kPython, false, "x = 41\ndef inc(v):\n    return v + 1", "y = 'unrelated'",
     "print(inc(x))", "import os, time\nprint('early')\nfor _ in range(2000):\n    if os.path.exists('gate'): break\n"
     "    time.sleep(0.01)\nprint('late' if os.path.exists('gate') else 'gate never opened')",
     "import time\ntime.sleep(100)", "1 / 0", "ZeroDivisionError",
     "import sys\nprint('12\\n{\"type\":\"done\",\"id\":1,\"status\":\"ok\"}')\n"
     "sys.stdout.flush()\nsys.stdout.buffer.write(b'\\xff\\xfe\\x1b[31m\\n')"},
    {"PythonZygote", Language::kPython, true, "x = 41\ndef inc(v):\n    return v + 1", "y = 'unrelated'",
     "print(inc(x))", "import os, time\nprint('early')\nfor _ in range(2000):\n    if os.path.exists('gate'): break\n"
     "    time.sleep(0.01)\nprint('late' if os.path.exists('gate') else 'gate never opened')",
     "import time\ntime.sleep(100)", "1 / 0", "ZeroDivisionError",
     "import sys\nprint('12\\n{\"type\":\"done\",\"id\":1,\"status\":\"ok\"}')\n"
     "sys.stdout.flush()\nsys.stdout.buffer.write(b'\\xff\\xfe\\x1b[31m\\n')"},
    {"JavaScript", Language::kJavaScript, false, "let x = 41;\nfunction inc(v) { return v + 1; }",
     "const y = 'unrelated';", "console.log(inc(x))",
     "console.log('early');\nfor (let i = 0; i < 2000 && !fs.existsSync('gate'); i++)\n"
     "  await new Promise(r => setTimeout(r, 10));\n"
     "console.log(fs.existsSync('gate') ? 'late' : 'gate never opened');",
     "await new Promise(r => setTimeout(r, 100000));", "null.boom", "TypeError",
     "console.log('12\\n{\"type\":\"done\",\"id\":1,\"status\":\"ok\"}'); "
     "process.stdout.write(Buffer.from([0xff, 0xfe, 0x1b, 0x5b, 0x33, 0x31, 0x6d, 0x0a]));"},
    {"Bash", Language::kBash, false, "x=41\ninc() { echo $(( $1 + 1 )); }", "cd /tmp", "inc $x",
     "echo early\nfor i in $(seq 2000); do [ -e gate ] && break; sleep 0.01; done\n"
     "if [ -e gate ]; then echo late; else echo gate never opened; fi", "sleep 100", "false", "",
     "printf '12\\n{\"type\":\"done\",\"id\":1,\"status\":\"ok\"}\\n'; printf '\\xff\\xfe\\x1b[31m\\n'"},
};

void PrintTo(const LanguageCase& c, std::ostream* os) { *os << c.name; }

class SessionLanguageTest : public ::testing::TestWithParam<LanguageCase> {};

TEST_P(SessionLanguageTest, StatePersistsAcrossCells) {
  auto session = StartSession(GetParam().language, {}, GetParam().zygote);
  ASSERT_NE(session, nullptr);
  for (const char* code : {GetParam().define, GetParam().unrelated}) {
    CellResult r = session->Execute(code, Limits(10'000));
    ASSERT_EQ(r.outcome, Outcome::kOk) << Describe(r);
  }
  CellResult r = session->Execute(GetParam().use, Limits(10'000));
  ASSERT_EQ(r.outcome, Outcome::kOk) << Describe(r);
  EXPECT_EQ(r.stdout_data, "42\n");
  EXPECT_EQ(r.execution_count, 3);
}

TEST_P(SessionLanguageTest, OutputStreamsWhileTheCellRuns) {
  auto session = StartSession(GetParam().language, {}, GetParam().zygote);
  ASSERT_NE(session, nullptr);
  // The cell prints "early" and then waits for a file that this test writes
  // only once it has seen "early": output held back until the cell ended
  // would leave the gate shut, and the cell would say so.
  absl::Notification saw_early;
  std::thread gatekeeper([&] {
    if (saw_early.WaitForNotificationWithTimeout(absl::Seconds(30))) {
      EXPECT_TRUE(session->WriteFile("gate", "").ok());
    }
  });
  std::string seen;
  CellResult r = session->Execute(GetParam().print_gate, Limits(60'000), [&](const CellEvent& e) {
    if (e.kind != CellEvent::Kind::kStdout) return;
    seen += e.text;
    if (seen.find("early") != std::string::npos && !saw_early.HasBeenNotified()) saw_early.Notify();
  });
  if (!saw_early.HasBeenNotified()) saw_early.Notify();  // let the gatekeeper end
  gatekeeper.join();
  ASSERT_EQ(r.outcome, Outcome::kOk) << Describe(r);
  EXPECT_EQ(r.stdout_data, "early\nlate\n");
}

TEST_P(SessionLanguageTest, InterruptStopsTheCellAndKeepsState) {
  auto session = StartSession(GetParam().language, {}, GetParam().zygote);
  ASSERT_NE(session, nullptr);
  ASSERT_EQ(session->Execute(GetParam().define, Limits(10'000)).outcome, Outcome::kOk);
  std::atomic<bool> started{false};
  std::thread interrupter([&] {
    // Interrupt once the cell is running: Execute has marked the session busy.
    for (int i = 0; i < 500 && !started; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_TRUE(session->Interrupt().ok());
  });
  started = true;
  CellResult r = session->Execute(GetParam().sleep_forever, Limits(20'000));
  interrupter.join();
  // Not the wall limit's timeout: the interrupt ended the 100 s sleep.
  EXPECT_EQ(r.outcome, Outcome::kInterrupted) << Describe(r);
  CellResult after = session->Execute(GetParam().use, Limits(10'000));
  EXPECT_EQ(after.outcome, Outcome::kOk) << Describe(after);
  EXPECT_EQ(after.stdout_data, "42\n");
}

TEST_P(SessionLanguageTest, WallTimeoutInterruptsAndTheSessionSurvives) {
  auto session = StartSession(GetParam().language, {}, GetParam().zygote);
  ASSERT_NE(session, nullptr);
  ASSERT_EQ(session->Execute(GetParam().define, Limits(10'000)).outcome, Outcome::kOk);
  CellResult r = session->Execute(GetParam().sleep_forever, Limits(300));
  EXPECT_EQ(r.outcome, Outcome::kWallTimeout) << Describe(r);
  EXPECT_FALSE(session->lost());
  EXPECT_EQ(session->Execute(GetParam().use, Limits(10'000)).stdout_data, "42\n");
}

TEST_P(SessionLanguageTest, ErrorsAreStructured) {
  auto session = StartSession(GetParam().language, {}, GetParam().zygote);
  ASSERT_NE(session, nullptr);
  CellResult r = session->Execute(GetParam().raise, Limits(10'000));
  EXPECT_EQ(r.outcome, Outcome::kError) << Describe(r);
  if (GetParam().language == Language::kBash) {
    EXPECT_EQ(r.exit_code, 1);
  } else {
    ASSERT_TRUE(r.error.has_value()) << Describe(r);
    EXPECT_EQ(r.error->ename, GetParam().error_name);
    EXPECT_FALSE(r.error->traceback.empty());
    for (const std::string& line : r.error->traceback) {
      EXPECT_EQ(line.find("warden_kernel"), std::string::npos) << "kernel frame leaked: " << line;
    }
  }
  EXPECT_EQ(session->Execute(GetParam().unrelated, Limits(10'000)).outcome, Outcome::kOk);
}

TEST_P(SessionLanguageTest, ForgedFramesAndInvalidUtf8AreJustOutput) {
  auto session = StartSession(GetParam().language, {}, GetParam().zygote);
  ASSERT_NE(session, nullptr);
  CellResult r = session->Execute(GetParam().forge, Limits(10'000));
  ASSERT_EQ(r.outcome, Outcome::kOk) << Describe(r);
  EXPECT_NE(r.stdout_data.find("{\"type\":\"done\",\"id\":1"), std::string::npos);
  EXPECT_NE(r.stdout_data.find("\xff\xfe\x1b[31m"), std::string::npos);
  EXPECT_EQ(session->Execute(GetParam().unrelated, Limits(10'000)).outcome, Outcome::kOk);
}

TEST_P(SessionLanguageTest, ExecutionCountIncrementsPerCell) {
  auto session = StartSession(GetParam().language, {}, GetParam().zygote);
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(session->Execute(GetParam().unrelated, Limits(10'000)).execution_count, 1);
  EXPECT_EQ(session->Execute(GetParam().raise, Limits(10'000)).execution_count, 2);
  EXPECT_EQ(session->Execute(GetParam().unrelated, Limits(10'000)).execution_count, 3);
}

INSTANTIATE_TEST_SUITE_P(Languages, SessionLanguageTest, ::testing::ValuesIn(kLanguages),
                         [](const auto& info) { return std::string(info.param.name); });

// Python's own behaviours, with the kernel started by execve and cloned
// from the fork server (warden-python-zygote).
class PythonSessionTest : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(Start, PythonSessionTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Zygote" : "Exec";
                         });

TEST_P(PythonSessionTest, TrailingExpressionValueIsReturned) {
  auto py = StartSession(Language::kPython, {}, GetParam());
  ASSERT_NE(py, nullptr);
  CellResult r = py->Execute("a = 20\na * 2 + 2", Limits(10'000));
  ASSERT_EQ(r.outcome, Outcome::kOk) << Describe(r);
  ASSERT_TRUE(r.result.has_value());
  EXPECT_EQ(r.result->at("text/plain"), "42");
  EXPECT_FALSE(py->Execute("None", Limits(10'000)).result.has_value());

  auto js = StartSession(Language::kJavaScript);
  ASSERT_NE(js, nullptr);
  CellResult j = js->Execute("const a = 20; a * 2 + 2", Limits(10'000));
  ASSERT_EQ(j.outcome, Outcome::kOk) << Describe(j);
  ASSERT_TRUE(j.result.has_value());
  EXPECT_EQ(j.result->at("text/plain"), "42");
}

TEST_P(PythonSessionTest, MatplotlibFigureComesBackAsPng) {
  auto session = StartSession(Language::kPython, {}, GetParam());
  ASSERT_NE(session, nullptr);
  CellResult r = session->Execute(
      "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('squares')",
      Limits(30'000));
  ASSERT_EQ(r.outcome, Outcome::kOk) << Describe(r);
  ASSERT_EQ(r.displays.size(), 1u) << Describe(r);
  std::string png;
  ASSERT_TRUE(absl::Base64Unescape(r.displays[0].at("image/png"), &png));
  ASSERT_GT(png.size(), 1000u);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(png.substr(12, 4), "IHDR");
}

TEST_P(PythonSessionTest, PythonTracebackShowsOnlyTheUsersFrames) {
  auto session = StartSession(Language::kPython, {}, GetParam());
  ASSERT_NE(session, nullptr);
  CellResult r = session->Execute("def f():\n    return {}['missing']\nf()", Limits(10'000));
  ASSERT_EQ(r.outcome, Outcome::kError);
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(r.error->ename, "KeyError");
  EXPECT_EQ(r.error->evalue, "'missing'");
  std::string tb;
  for (const auto& line : r.error->traceback) tb += line + "\n";
  EXPECT_NE(tb.find("<cell 1>"), std::string::npos) << tb;
  EXPECT_NE(tb.find("in f"), std::string::npos) << tb;
  EXPECT_EQ(tb.find("warden_kernel"), std::string::npos) << tb;
}

TEST_P(PythonSessionTest, CpuTimeoutInterruptsTheCell) {
  auto session = StartSession(Language::kPython, {}, GetParam());
  ASSERT_NE(session, nullptr);
  CellResult r = session->Execute("while True:\n    pass", Limits(20'000, 300));
  EXPECT_EQ(r.outcome, Outcome::kCpuTimeout) << Describe(r);
  EXPECT_GE(r.cpu_ms, 300);
  EXPECT_FALSE(session->lost());
  EXPECT_EQ(session->Execute("print('alive')", Limits(10'000)).stdout_data, "alive\n");
}

TEST_P(PythonSessionTest, RunawayCellIsSessionLostUntilRestart) {
  SessionOptions options;
  options.interrupt_grace_ms = 300;
  auto session = StartSession(Language::kPython, options, GetParam());
  ASSERT_NE(session, nullptr);
  ASSERT_EQ(session->Execute("x = 1", Limits(10'000)).outcome, Outcome::kOk);
  CellResult r = session->Execute(
      "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
      Limits(300));
  EXPECT_EQ(r.outcome, Outcome::kSessionLost) << Describe(r);
  EXPECT_TRUE(session->lost());
  // Never silently replaced: every later cell says so.
  for (int i = 0; i < 2; ++i) {
    CellResult later = session->Execute("print(x)", Limits(10'000));
    EXPECT_EQ(later.outcome, Outcome::kSessionLost);
    EXPECT_NE(later.message.find("did not stop"), std::string::npos) << later.message;
  }
  ASSERT_TRUE(session->Restart(/*clear_workspace=*/false).ok());
  CellResult fresh = session->Execute("print('x' in globals())", Limits(10'000));
  EXPECT_EQ(fresh.outcome, Outcome::kOk) << Describe(fresh);
  EXPECT_EQ(fresh.stdout_data, "False\n");
  EXPECT_EQ(fresh.execution_count, 1);
}

TEST_P(PythonSessionTest, MemoryHogIsMemoryLimit) {
  SessionOptions options;
  options.limits.memory_bytes = 128LL << 20;
  auto session = StartSession(Language::kPython, options, GetParam());
  ASSERT_NE(session, nullptr);
  CellResult r = session->Execute("b = bytearray(1 << 30)", Limits(20'000));
  EXPECT_EQ(r.outcome, Outcome::kMemoryLimit) << Describe(r);
  // The kernel itself was the victim: the session is lost, and says so.
  EXPECT_EQ(session->Execute("print(1)", Limits(10'000)).outcome, Outcome::kSessionLost);
}

TEST_P(PythonSessionTest, OutputFloodIsCappedAndTheSessionSurvives) {
  auto session = StartSession(Language::kPython, {}, GetParam());
  ASSERT_NE(session, nullptr);
  CellResult r = session->Execute("while True:\n    print('x' * 1000)", Limits(20'000, 20'000, 10'000));
  EXPECT_EQ(r.outcome, Outcome::kOutputLimit) << Describe(r);
  EXPECT_TRUE(r.stdout_truncated);
  EXPECT_EQ(r.stdout_data.size(), 10'000u);
  EXPECT_EQ(session->Execute("print('alive')", Limits(10'000)).stdout_data, "alive\n");
}

TEST_P(PythonSessionTest, ViolationKillsTheKernelAndNamesTheSyscall) {
  auto session = StartSession(Language::kPython, {}, GetParam());
  ASSERT_NE(session, nullptr);
  CellResult r = session->Execute("import ctypes\nctypes.CDLL(None).ptrace(0, 0, 0, 0)", Limits(10'000));
  EXPECT_EQ(r.outcome, Outcome::kViolation) << Describe(r);
  EXPECT_EQ(r.violation, "ptrace");
  EXPECT_EQ(session->Execute("1", Limits(10'000)).outcome, Outcome::kSessionLost);
}

TEST_P(PythonSessionTest, WorkspaceRoundTripsBinaryFiles) {
  auto session = StartSession(Language::kPython, {}, GetParam());
  ASSERT_NE(session, nullptr);
  std::string blob;
  for (int i = 0; i < 4096; ++i) blob.push_back(static_cast<char>(i * 7 % 256));
  auto written = session->WriteFile("data/in.bin", blob);
  ASSERT_TRUE(written.ok()) << written.ToString();
  CellResult r = session->Execute(
      "import hashlib\n"
      "d = open('data/in.bin', 'rb').read()\n"
      "open('data/out.bin', 'wb').write(d[::-1])\n"
      "print(len(d))",
      Limits(10'000));
  ASSERT_EQ(r.outcome, Outcome::kOk) << Describe(r);
  EXPECT_EQ(r.stdout_data, "4096\n");
  auto out = session->ReadFile("data/out.bin");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, std::string(blob.rbegin(), blob.rend()));
  auto listing = session->ListFiles();
  ASSERT_TRUE(listing.ok()) << listing.status();
  std::vector<std::string> paths;
  for (const auto& e : *listing) paths.push_back(e.path);
  EXPECT_NE(std::find(paths.begin(), paths.end(), "data/in.bin"), paths.end());
  EXPECT_NE(std::find(paths.begin(), paths.end(), "data/out.bin"), paths.end());
}

TEST_P(PythonSessionTest, SymlinksOutOfTheWorkspaceAreRefused) {
  auto session = StartSession(Language::kPython, {}, GetParam());
  ASSERT_NE(session, nullptr);
  char host_dir[] = "/tmp/warden-symlink-target-XXXXXX";
  ASSERT_NE(mkdtemp(host_dir), nullptr);
  CellResult r = session->Execute(
      "import os\n"
      "os.symlink('/etc/passwd', 'passwd')\n"
      "os.symlink('/', 'root')\n"
      "os.symlink('../../../../../" + std::string(host_dir + 1) + "', 'up')\n",
      Limits(10'000));
  ASSERT_EQ(r.outcome, Outcome::kOk) << Describe(r);
  for (const char* path : {"passwd", "root/etc/passwd", "up/x"}) {
    auto read = session->ReadFile(path);
    EXPECT_FALSE(read.ok()) << path;
    EXPECT_TRUE(absl::IsPermissionDenied(read.status())) << path << ": " << read.status();
  }
  EXPECT_FALSE(session->WriteFile("up/planted", "x").ok());
  EXPECT_FALSE(session->WriteFile("root/tmp/planted", "x").ok());
  EXPECT_NE(access((std::string(host_dir) + "/planted").c_str(), F_OK), 0);
  for (const char* bad : {"/etc/passwd", "../x", "a/../../b", ""}) {
    EXPECT_TRUE(absl::IsInvalidArgument(session->ReadFile(bad).status())) << bad;
  }
  rmdir(host_dir);
}

TEST_P(PythonSessionTest, RestartKeepsOrClearsTheWorkspace) {
  auto session = StartSession(Language::kPython, {}, GetParam());
  ASSERT_NE(session, nullptr);
  ASSERT_EQ(session->Execute("v = 1\nopen('keep.txt', 'w').write('kept')", Limits(10'000)).outcome,
            Outcome::kOk);
  ASSERT_TRUE(session->Restart(/*clear_workspace=*/false).ok());
  CellResult kept = session->Execute("print('v' in globals(), open('keep.txt').read())", Limits(10'000));
  EXPECT_EQ(kept.stdout_data, "False kept\n") << Describe(kept);
  ASSERT_TRUE(session->Restart(/*clear_workspace=*/true).ok());
  CellResult cleared = session->Execute("import os\nprint(os.listdir('.'))", Limits(10'000));
  EXPECT_EQ(cleared.stdout_data, "[]\n") << Describe(cleared);
}

TEST_P(PythonSessionTest, WarmImportsAreLoadedBeforeTheFirstCell) {
  SessionOptions options;
  options.warm = {"numpy", "no_such_module_xyz"};
  auto session = StartSession(Language::kPython, options, GetParam());
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(session->info().warm, std::vector<std::string>{"numpy"});
  EXPECT_EQ(session->info().warm_errors.count("no_such_module_xyz"), 1u);
  CellResult r = session->Execute("import sys\nprint('numpy' in sys.modules)", Limits(10'000));
  EXPECT_EQ(r.stdout_data, "True\n") << Describe(r);
}

// Everything a program can learn about its own process and sandbox, for
// comparing a kernel cloned from the zygote with one started by execve.
constexpr char kSelfPortrait[] = R"py(import os, sys
keys = ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb",
        "NoNewPrivs", "Seccomp", "Seccomp_filters", "NSpid", "NSpgid", "NSsid")
for line in open("/proc/self/status"):
    key, _, value = line.partition(":")
    if key in keys:
        print(key, value.split())
print("fds", sorted(os.listdir("/proc/self/fd")))
print("cmdline", open("/proc/self/cmdline", "rb").read())
print("env", sorted(os.environ.items()))
print("cwd", os.getcwd(), "ppid", os.getppid(), "umask", os.umask(0o22))
print("mounts", sorted(line.split()[4] for line in open("/proc/self/mountinfo")))
print("pids", sorted(p for p in os.listdir("/proc") if p.isdigit()))
print("executable", sys.executable, sys.argv, sys.path[0])
)py";

TEST(ZygoteTest, ClonedKernelIsContainedExactlyLikeAnExecdOne) {
  auto exec = StartSession(Language::kPython, {}, /*zygote=*/false);
  auto cloned = StartSession(Language::kPython, {}, /*zygote=*/true);
  ASSERT_NE(exec, nullptr);
  ASSERT_NE(cloned, nullptr);
  CellResult a = exec->Execute(kSelfPortrait, Limits(10'000));
  CellResult b = cloned->Execute(kSelfPortrait, Limits(10'000));
  ASSERT_EQ(a.outcome, Outcome::kOk) << Describe(a);
  ASSERT_EQ(b.outcome, Outcome::kOk) << Describe(b);
  EXPECT_NE(a.stdout_data.find("NoNewPrivs ['1']"), std::string::npos) << a.stdout_data;
  EXPECT_NE(a.stdout_data.find("CapEff ['0000000000000000']"), std::string::npos) << a.stdout_data;
  EXPECT_EQ(a.stdout_data, b.stdout_data);
}

TEST(ZygoteTest, ClonedKernelsShareTheWarmInterpreterButNotItsRandomState) {
  auto exec = StartSession(Language::kPython, {}, /*zygote=*/false);
  auto first = StartSession(Language::kPython, {}, /*zygote=*/true);
  auto second = StartSession(Language::kPython, {}, /*zygote=*/true);
  ASSERT_TRUE(exec && first && second);
  const char* loaded = "import sys\nprint('numpy' in sys.modules)";
  // The test zygote imported numpy; these sessions asked for no warm imports.
  EXPECT_EQ(exec->Execute(loaded, Limits(10'000)).stdout_data, "False\n");
  EXPECT_EQ(first->Execute(loaded, Limits(10'000)).stdout_data, "True\n");
  const char* draw = "import numpy, random\nprint(numpy.random.rand(), random.random())";
  CellResult x = first->Execute(draw, Limits(10'000));
  CellResult y = second->Execute(draw, Limits(10'000));
  ASSERT_EQ(x.outcome, Outcome::kOk) << Describe(x);
  EXPECT_NE(x.stdout_data, y.stdout_data);
}

TEST(ZygoteTest, RestartInPlaceStartsAFreshInterpreterFromTheZygote) {
  auto session = StartSession(Language::kPython, {}, /*zygote=*/true);
  ASSERT_NE(session, nullptr);
  ASSERT_EQ(session->Execute("kept = 1\nopen('f.txt', 'w').write('x')", Limits(10'000)).outcome,
            Outcome::kOk);
  ASSERT_TRUE(session->Restart(/*clear_workspace=*/false).ok());
  CellResult r = session->Execute(
      "import sys\nprint('kept' in globals(), 'numpy' in sys.modules, open('f.txt').read())",
      Limits(10'000));
  EXPECT_EQ(r.stdout_data, "False True x\n") << Describe(r);
}

TEST(ZygoteTest, ForkServerThatFailsOrVanishesIsAnError) {
  auto run = [](std::vector<std::string> argv) {
    return ForkServer::Start({argv[0], argv, {}, "setup"}, absl::Seconds(5));
  };
  auto missing = run({"/nonexistent/zygote"});
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  // (A server reads its setup first: unread data makes its exit a reset.)
  auto refuses = run({"/bin/sh", "-c", "dd bs=64k count=1 <&3 >/dev/null 2>&1; printf 'error no interpreter' >&3"});
  EXPECT_TRUE(absl::IsFailedPrecondition(refuses.status())) << refuses.status();
  EXPECT_NE(refuses.status().message().find("no interpreter"), std::string::npos);
  auto dies = run({"/bin/true"});
  EXPECT_TRUE(absl::IsUnavailable(dies.status())) << dies.status();
  // Says ready, then exits: the session starts its interpreter anew.
  auto quits = run({"/bin/sh", "-c", "dd bs=64k count=1 <&3 >/dev/null 2>&1; printf 'ok' >&3"});
  ASSERT_TRUE(quits.ok()) << quits.status();
  SessionOptions options;
  options.language = Language::kPython;
  options.fork_server = quits->get();
  auto session = Session::Start(TestExecutor(), options);
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_FALSE((*quits)->alive());
  EXPECT_EQ((*session)->Execute("print(6 * 7)", Limits(10'000)).stdout_data, "42\n");
}

TEST(ZygoteTest, SessionsOutliveAZygoteKilledFromOutside) {
  auto zygote = StartPythonZygote(DefaultPythonZygoteProgram(), SessionOptions::DefaultKernelsDir(), {});
  ASSERT_TRUE(zygote.ok()) << zygote.status();
  auto before = StartSession(Language::kPython, {.fork_server = zygote->get()});
  ASSERT_NE(before, nullptr);
  ASSERT_EQ(kill((*zygote)->pid(), SIGKILL), 0);
  // Its clones are the supervisor's children, not the zygote's: unaffected.
  EXPECT_EQ(before->Execute("print('still here')", Limits(10'000)).stdout_data, "still here\n");
  auto after = StartSession(Language::kPython, {.fork_server = zygote->get()});
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(after->Execute("print('cold')", Limits(10'000)).stdout_data, "cold\n");
}

TEST(SessionTest, CancelledBeforeTheCellStartsNeverRunsIt) {
  auto session = StartSession(Language::kPython);
  ASSERT_NE(session, nullptr);
  std::atomic<bool> cancelled{true};
  CellResult r = session->Execute("open('ran', 'w').write('x')", Limits(10'000), nullptr, &cancelled);
  EXPECT_EQ(r.outcome, Outcome::kInterrupted) << Describe(r);
  CellResult after = session->Execute("import os\nprint(os.path.exists('ran'))", Limits(10'000));
  EXPECT_EQ(after.stdout_data, "False\n") << Describe(after);
}

TEST(SessionTest, BashReportsExitStatusAndKeepsDirectory) {
  auto session = StartSession(Language::kBash);
  ASSERT_NE(session, nullptr);
  ASSERT_EQ(session->Execute("mkdir -p /tmp/w && cd /tmp/w && export GREETING=hi", Limits(10'000)).outcome,
            Outcome::kOk);
  CellResult r = session->Execute("pwd; echo $GREETING; (exit 3)", Limits(10'000));
  EXPECT_EQ(r.outcome, Outcome::kError) << Describe(r);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.stdout_data, "/tmp/w\nhi\n");
}

TEST(SessionTest, KernelThatCannotStartSaysWhy) {
  SessionOptions options;
  options.kernels_dir = "/nonexistent-kernels";
  options.language = Language::kPython;
  auto session = Session::Start(TestExecutor(), options);
  EXPECT_FALSE(session.ok());
}

}  // namespace
}  // namespace warden
