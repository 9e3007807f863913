// warden-run from the outside, as an operator uses it: its JSON result,
// its exit status, stdin passthrough, limits flags and --check.
#include <stdio.h>
#include <sys/wait.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace {

struct Output {
  int status = -1;  // exit status of warden-run
  std::string out;
};

// Runs a shell command; returns its exit status and stdout.
Output RunCommand(const std::string& command) {
  Output o;
  FILE* p = popen(command.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) o.out.append(buf, n);
  int status = pclose(p);
  o.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

// Runs warden-run with `args` (already shell-quoted) and `input` on stdin.
Output WardenRun(const std::string& args, const std::string& input = "") {
  std::string command = absl::StrCat(WARDEN_BIN_DIR, "/warden-run ", args);
  if (!input.empty()) command = absl::StrCat("printf '%s' '", input, "' | ", command);
  return RunCommand(command + " 2>/dev/null");
}

nlohmann::json Json(const Output& o) {
  auto j = nlohmann::json::parse(o.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << o.out;
  return j;
}

TEST(WardenRunTest, JsonHasEveryDocumentedKey) {
  Output o = WardenRun("--json -- /bin/sh -c 'echo out; echo err >&2'");
  ASSERT_EQ(o.status, 0) << o.out;
  auto j = Json(o);
  for (const char* key : {"outcome", "exit_code", "signal", "stdout", "stderr", "wall_ms", "cpu_ms",
                          "peak_memory_bytes", "stdout_truncated", "stderr_truncated", "violation"}) {
    EXPECT_TRUE(j.contains(key)) << key << " missing in " << o.out;
  }
  EXPECT_EQ(j["outcome"], "OK");
  EXPECT_EQ(j["stdout"], "out\n");
  EXPECT_EQ(j["stderr"], "err\n");
  EXPECT_TRUE(j["violation"].is_null());
}

TEST(WardenRunTest, ExitsZeroWhenTheProgramFailsButTheSandboxRan) {
  Output o = WardenRun("--json -- /bin/sh -c 'exit 5'");
  EXPECT_EQ(o.status, 0);
  auto j = Json(o);
  EXPECT_EQ(j["outcome"], "NONZERO_EXIT");
  EXPECT_EQ(j["exit_code"], 5);
}

TEST(WardenRunTest, ExitsNonzeroWhenWardenItselfFails) {
  Output o = WardenRun("--json -- /no/such/program");
  EXPECT_EQ(o.status, 3);
  EXPECT_EQ(Json(o)["outcome"], "SETUP_ERROR");
}

TEST(WardenRunTest, BadUsageIsExitTwo) {
  EXPECT_EQ(WardenRun("--memory-mb lots -- /bin/true").status, 2);
  EXPECT_EQ(WardenRun("--no-such-flag 1 -- /bin/true").status, 2);
  EXPECT_EQ(WardenRun("").status, 2);
}

TEST(WardenRunTest, PassesStdinThrough) {
  Output o = WardenRun("--json -- /usr/bin/tr a-z A-Z", "hello sandbox");
  EXPECT_EQ(Json(o)["stdout"], "HELLO SANDBOX");
}

TEST(WardenRunTest, LimitFlagsApply) {
  EXPECT_EQ(Json(WardenRun("--json --wall-ms 300 -- /bin/sleep 5"))["outcome"], "WALL_TIMEOUT");
  EXPECT_EQ(Json(WardenRun("--json --cpu-ms 200 -- /bin/sh -c 'while :; do :; done'"))["outcome"],
            "CPU_TIMEOUT");
  EXPECT_EQ(Json(WardenRun("--json --memory-mb 32 -- /usr/bin/python3 -c 'b=bytearray(100<<20)'"))
                ["outcome"],
            "MEMORY_LIMIT");
  auto flood = Json(WardenRun("--json --output-bytes 100 -- /usr/bin/yes"));
  EXPECT_EQ(flood["outcome"], "OUTPUT_LIMIT");
  EXPECT_EQ(flood["stdout"].get<std::string>().size(), 100u);
  EXPECT_EQ(flood["stdout_truncated"], true);
}

TEST(WardenRunTest, ViolationNamesTheSyscall) {
  auto j = Json(WardenRun(
      "--json -- /usr/bin/python3 -c 'import ctypes; ctypes.CDLL(None).ptrace(0, 0, 0, 0)'"));
  EXPECT_EQ(j["outcome"], "VIOLATION");
  EXPECT_EQ(j["violation"], "ptrace");
}

TEST(WardenRunTest, InvalidUtf8OutputStillGivesValidJson) {
  auto j = Json(WardenRun("--json -- /usr/bin/printf '\\377\\376ok'"));
  EXPECT_EQ(j["outcome"], "OK");
  EXPECT_NE(j["stdout"].get<std::string>().find("ok"), std::string::npos);
}

TEST(WardenRunTest, CheckReportsThisHostAndSucceeds) {
  Output o = WardenRun("--check");
  EXPECT_EQ(o.status, 0) << o.out;
  for (const char* item : {"user namespaces", "seccomp", "pidfd", "cgroups", "cgroup v"}) {
    EXPECT_NE(o.out.find(item), std::string::npos) << item << " missing in:\n" << o.out;
  }
  EXPECT_NE(o.out.find("can be built"), std::string::npos) << o.out;
}

}  // namespace

namespace {

// `wardend --check`: what the host supports and whether the configuration
// can be honoured, with an exit status operators can script.
Output WardendCheck(const std::string& args) {
  return RunCommand(absl::StrCat(WARDEN_BIN_DIR, "/wardend --check ", args, " 2>&1"));
}

TEST(WardendCheckTest, ReportsTheCgroupVersionAndAcceptsTheDefaults) {
  Output o = WardendCheck("");
  EXPECT_EQ(o.status, 0) << o.out;
  EXPECT_NE(o.out.find("cgroup v1"), std::string::npos) << o.out;  // this host is v1
  EXPECT_NE(o.out.find("configuration: ok"), std::string::npos) << o.out;
  // The start-up probe: a worker of each language of the default pools.
  for (const char* language : {"python", "javascript", "bash"}) {
    EXPECT_NE(o.out.find(absl::StrCat("\n  ", language, ": ok, started in ")), std::string::npos)
        << language << " in:\n" << o.out;
  }
}

TEST(WardendCheckTest, FailsOnAConfigurationItCannotHonour) {
  Output o = WardendCheck("--listen 0.0.0.0:7000");
  EXPECT_NE(o.status, 0) << o.out;
  EXPECT_NE(o.out.find("INVALID"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("tls"), std::string::npos) << o.out;
}

}  // namespace
