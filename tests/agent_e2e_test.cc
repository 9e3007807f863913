// The Agent service end to end: an in-process wardend (real sandboxes and
// kernels) with the Agent service, a fake OpenAI-compatible server playing
// scripted conversations over HTTP on loopback, and a gRPC client.
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "agent/agent_service.h"
#include "agent/tool_arguments.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "server/daemon.h"
#include "tests/fake_llm_server.h"
#include "warden/v1/agent.grpc.pb.h"

namespace warden {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::FakeLlmServer;
using testing::TextStep;
using testing::ToolCallStep;
using Json = nlohmann::json;

Json ToolStep(const std::string& name, const Json& args) {
  return {{"tool_calls", {{{"name", name}, {"arguments", args.dump()}}}}};
}

DaemonOptions TestOptions() {
  DaemonOptions options;
  options.listen = {"127.0.0.1:0"};
  options.allow_insecure_loopback = true;
  options.pools = {{"python", 1, {}}, {"javascript", 0, {}}, {"bash", 0, {}}};
  options.executor.host_id_base = static_cast<uid_t>(5'000'000 + (getpid() % 4096) * 512);
  options.executor.host_id_count = 512;
  options.shutdown_grace_ms = 2'000;
  return options;
}

struct RunResult {
  std::vector<v1::AgentEvent> events;
  grpc::Status status;
  v1::FinalEvent final() const {
    return !events.empty() && events.back().has_final() ? events.back().final() : v1::FinalEvent();
  }
  std::vector<v1::CodeExecution> executions() const {
    std::vector<v1::CodeExecution> out;
    for (const auto& e : events) {
      if (e.has_execution()) out.push_back(e.execution());
    }
    return out;
  }
};

// Why a run against a model server went wrong, when the server is to
// blame: its death (its signal or exit status and the end of its stderr)
// and the run's stop; "" while it runs. A test whose model server died
// says so, rather than what the server's absence made go wrong ("the
// model wrote no fenced code"). After a model server's failure, a dying
// server is given 10 s to be seen dead.
template <typename Server>
std::string ModelServerDeath(Server& model, const RunResult& run) {
  const bool failed = run.final().stop_reason() == v1::STOP_REASON_LLM_ERROR ||
                      absl::StrContains(run.final().stop_detail(), "no final answer");
  std::string death = model.Death(failed ? absl::Seconds(10) : absl::ZeroDuration());
  if (death.empty()) return "";
  return absl::StrCat("the model server died: ", absl::StripTrailingAsciiWhitespace(death), "\n(the run stopped ",
                      v1::StopReason_Name(run.final().stop_reason()), ": ", run.final().stop_detail(), ")");
}

class AgentE2eTest : public ::testing::Test {
 protected:
  void Start(const Json& script, bool configured = true) {
    auto server = FakeLlmServer::Start(script);
    ASSERT_TRUE(server.ok()) << server.status();
    DaemonOptions options = TestOptions();
    if (configured) {
      options.agent.llm.base_url = (*server)->base_url();
      options.agent.llm.model = "fake-model";
    }
    StartWith(std::move(*server), options);
  }
  // The daemon with its agent, `llm` (recording what the model is sent) as the model server.
  void StartWith(std::unique_ptr<FakeLlmServer> llm, const DaemonOptions& options) {
    llm_ = std::move(llm);
    auto daemon = Daemon::Create(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    auto agent = agent::AgentService::Create(options.agent, daemon_->engine(), daemon_->tenancy(),
                                             daemon_->tasks());
    ASSERT_TRUE(agent.ok()) << agent.status();
    daemon_->AddService(std::move(*agent));
    ASSERT_TRUE(daemon_->Start().ok());
    auto channel = grpc::CreateChannel(daemon_->listening().front(), grpc::InsecureChannelCredentials());
    stub_ = v1::Agent::NewStub(channel);
  }
  void TearDown() override {
    if (daemon_) daemon_->Shutdown(absl::Seconds(5));
  }

  // Runs the request; `on_event` may answer function calls through `write`.
  RunResult Run(const v1::RunAgentRequest& request,
                std::function<void(const v1::AgentEvent&, grpc::ClientReaderWriter<v1::AgentRequest, v1::AgentEvent>*)>
                    on_event = nullptr,
                grpc::ClientContext* ctx = nullptr, int deadline_s = 120) {
    grpc::ClientContext own;
    if (!ctx) ctx = &own;
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(deadline_s));
    auto stream = stub_->Run(ctx);
    v1::AgentRequest first;
    *first.mutable_start() = request;
    EXPECT_TRUE(stream->Write(first));
    if (!on_event) stream->WritesDone();
    RunResult result;
    v1::AgentEvent event;
    while (stream->Read(&event)) {
      result.events.push_back(event);
      if (on_event) on_event(event, stream.get());
      if (event.has_final() && on_event) stream->WritesDone();
    }
    result.status = stream->Finish();
    return result;
  }

  int AgentSessions() { return static_cast<int>(daemon_->engine().ListSessions("default", {}).size()); }

  // Waits (up to 60 s) for a condition on the daemon.
  bool WaitFor(const std::function<bool()>& condition) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline) {
      if (condition()) return true;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  }

  static v1::RunAgentRequest Task(const std::string& task) {
    v1::RunAgentRequest r;
    r.set_task(task);
    return r;
  }

  std::unique_ptr<FakeLlmServer> llm_;
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<v1::Agent::Stub> stub_;
};

TEST_F(AgentE2eTest, SolveRecoversFromAnErrorAndKeepsState) {
  Start({ToolCallStep("print(1/0)", "Let me try."), ToolCallStep("x = 21 * 2\nprint(x)"),
         ToolCallStep("print(x + 1)"), TextStep("The answer is 42 (and x + 1 is 43).")});
  RunResult run = Run(Task("compute 21 * 2"));
  ASSERT_TRUE(run.status.ok()) << run.status.error_message();
  v1::FinalEvent final = run.final();
  EXPECT_EQ(final.stop_reason(), v1::STOP_REASON_DONE) << final.stop_detail();
  EXPECT_TRUE(final.all_succeeded());
  EXPECT_EQ(final.answer(), "The answer is 42 (and x + 1 is 43).");
  EXPECT_EQ(final.iterations(), 4);
  ASSERT_EQ(final.code_blocks_size(), 3);
  ASSERT_EQ(final.outputs_size(), 3);
  EXPECT_EQ(final.outputs(0).outcome(), v1::OUTCOME_ERROR);
  EXPECT_EQ(final.outputs(0).error().name(), "ZeroDivisionError");
  EXPECT_EQ(final.outputs(1).stdout(), "42\n");
  EXPECT_EQ(final.outputs(2).stdout(), "43\n");  // x survived from the step before
  EXPECT_GT(final.usage().total_tokens(), 0);
  // The model saw the real traceback in the tool result of its first call.
  Json second = llm_->Requests()[1]["body"]["messages"];
  EXPECT_EQ(second.back()["role"], "tool");
  EXPECT_THAT(second.back()["content"].get<std::string>(), HasSubstr("ZeroDivisionError: division by zero"));
  EXPECT_THAT(second.back()["content"].get<std::string>(), HasSubstr("Traceback"));
  // Streamed text arrived as deltas before the message.
  std::string deltas;
  for (const auto& e : run.events) {
    if (e.has_delta() && e.delta().iteration() == 1) deltas += e.delta().text();
  }
  EXPECT_EQ(deltas, "Let me try.");
  EXPECT_EQ(run.executions().size(), 3u);
  EXPECT_EQ(AgentSessions(), 0);  // closed at the end
}

// rollback_failed_steps over real forks: a step that changed a variable and
// files and then failed (an exception, then a timeout) leaves no trace; the
// successful steps around it stay; only the run's own session is left.
TEST_F(AgentE2eTest, RollbackUndoesFailedStepsAndKeepsSuccessfulOnes) {
  Start({ToolCallStep("x = 1\nopen('kept.txt', 'w').write('before')"),
         ToolCallStep("x = 2\nopen('kept.txt', 'w').write('after')\nopen('junk.txt', 'w').write('junk')\n"
                      "raise ValueError('boom')"),
         ToolCallStep("import time\nx = 3\nopen('kept.txt', 'w').write('sleeping')\ntime.sleep(60)"),
         ToolCallStep("y = x + 10"),
         ToolCallStep("import os\nprint(x, y, open('kept.txt').read(), os.path.exists('junk.txt'))"),
         TextStep("x is 1, y is 11")});
  v1::RunAgentRequest request = Task("keep x safe");
  request.set_rollback_failed_steps(true);
  request.set_keep_session(true);
  request.mutable_cell_limits()->set_wall_ms(3'000);
  RunResult run = Run(request);
  ASSERT_TRUE(run.status.ok()) << run.status.error_message();
  v1::FinalEvent final = run.final();
  EXPECT_EQ(final.stop_reason(), v1::STOP_REASON_DONE) << final.stop_detail();
  std::vector<v1::CodeExecution> executions = run.executions();
  ASSERT_EQ(executions.size(), 5u);
  EXPECT_FALSE(executions[0].rolled_back());
  EXPECT_EQ(executions[1].result().error().name(), "ValueError");
  EXPECT_TRUE(executions[1].rolled_back());
  EXPECT_EQ(executions[2].result().outcome(), v1::OUTCOME_WALL_TIMEOUT);
  EXPECT_TRUE(executions[2].rolled_back());
  EXPECT_FALSE(executions[3].rolled_back());
  EXPECT_TRUE(executions[4].succeeded());
  EXPECT_FALSE(executions[4].rolled_back());
  EXPECT_EQ(executions[4].result().stdout(), "1 11 before False\n");
  // No leaks: the failed steps' sessions and the successful steps' spare
  // forks are closed; the kept session is the one the run ended in.
  auto sessions = daemon_->engine().ListSessions("default", {});
  ASSERT_EQ(sessions.size(), 1u);
  EXPECT_EQ(sessions.front()->id, final.session_id());
  auto file = daemon_->engine().ReadFile("default", final.session_id(), "kept.txt");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*file, "before");
  EXPECT_EQ(daemon_->engine().ReadFile("default", final.session_id(), "junk.txt").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(AgentE2eTest, RollbackRunsLeaveNoSessionBehind) {
  Start({ToolCallStep("z = 5"), ToolCallStep("z = 6\nraise RuntimeError('no')"), ToolCallStep("print(z)"),
         TextStep("z is 5")});
  v1::RunAgentRequest request = Task("t");
  request.set_rollback_failed_steps(true);
  RunResult run = Run(request);
  ASSERT_TRUE(run.status.ok()) << run.status.error_message();
  ASSERT_EQ(run.executions().size(), 3u);
  EXPECT_EQ(run.executions()[2].result().stdout(), "5\n");
  EXPECT_EQ(AgentSessions(), 0);
}

TEST_F(AgentE2eTest, RollbackIsRefusedForBash) {
  Start({});
  v1::RunAgentRequest request = Task("t");
  request.set_language(v1::LANGUAGE_BASH);
  request.set_rollback_failed_steps(true);
  RunResult run = Run(request);
  EXPECT_EQ(run.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(run.status.error_message(), HasSubstr("only Python"));
  EXPECT_EQ(AgentSessions(), 0);
}

TEST_F(AgentE2eTest, KeepSessionLeavesItOpen) {
  Start({ToolCallStep("y = 7"), TextStep("done")});
  v1::RunAgentRequest request = Task("set y");
  request.set_keep_session(true);
  RunResult run = Run(request);
  ASSERT_TRUE(run.status.ok());
  EXPECT_FALSE(run.final().session_id().empty());
  EXPECT_EQ(AgentSessions(), 1);
}

TEST_F(AgentE2eTest, TheTimeBudgetEndsTheRunWithTheRightReason) {
  // The 1 ms budget is gone either while the session is created, and the
  // first question is for the final answer (0 turns); or, when the session
  // is created within the millisecond (as under ThreadSanitizer), during a
  // first turn that takes 20 ms (1 turn). Either way the last question asked
  // is for the final answer, and the fake model has one to give.
  Start({{{"content", "my best answer"}, {"delay_ms", 20}}, TextStep("my best answer")});
  v1::RunAgentRequest request = Task("anything");
  request.mutable_budget()->set_max_wall_ms(1);
  RunResult run = Run(request);
  ASSERT_TRUE(run.status.ok());
  EXPECT_EQ(run.final().stop_reason(), v1::STOP_REASON_MAX_TIME);
  EXPECT_EQ(run.final().answer(), "my best answer");
  EXPECT_FALSE(run.final().all_succeeded());
  Json requests = llm_->Requests();
  ASSERT_FALSE(requests.empty());
  EXPECT_THAT(requests.back()["body"]["messages"].back()["content"].get<std::string>(),
              HasSubstr("the time budget of 1ms is used up"));
}

TEST_F(AgentE2eTest, TheIterationBudgetEndsTheRunWithTheRightReason) {
  Start({ToolCallStep("a = 1"), TextStep("best so far")});
  v1::RunAgentRequest request = Task("anything");
  request.mutable_budget()->set_max_iterations(1);
  RunResult run = Run(request);
  ASSERT_TRUE(run.status.ok());
  EXPECT_EQ(run.final().stop_reason(), v1::STOP_REASON_MAX_ITERATIONS);
  EXPECT_EQ(run.final().iterations(), 1);
}

TEST_F(AgentE2eTest, TheSameErrorThreeTimesIsStuck) {
  Start({ToolCallStep("int('x')"), ToolCallStep("int('x')  # again"), ToolCallStep("int('x')  # and again"),
         TextStep("unused")});
  RunResult run = Run(Task("parse x"));
  ASSERT_TRUE(run.status.ok());
  EXPECT_EQ(run.final().stop_reason(), v1::STOP_REASON_STUCK);
  EXPECT_THAT(run.final().stop_detail(), HasSubstr("ValueError"));
  Json third = llm_->Requests()[2]["body"]["messages"];
  EXPECT_THAT(third.back()["content"].get<std::string>(), HasSubstr("try a different approach"));
}

TEST_F(AgentE2eTest, TestModeReportsEachTest) {
  const std::string tests =
      "from solution import add\n\ndef test_add_positive():\n    assert add(2, 3) == 5\n\n"
      "def test_add_zero():\n    assert add(0, 0) == 0\n";
  Start({ToolStep("write_file", {{"path", "test_solution.py"}, {"content", tests}}),
         TextStep("test_add_positive fails: add subtracts.")});
  v1::RunAgentRequest request;
  request.set_mode(v1::AGENT_MODE_TEST);
  request.set_code("def add(a, b):\n    return a - b\n");
  RunResult run = Run(request);
  ASSERT_TRUE(run.status.ok()) << run.status.error_message();
  v1::FinalEvent final = run.final();
  EXPECT_EQ(final.stop_reason(), v1::STOP_REASON_DONE) << final.stop_detail();
  ASSERT_EQ(final.tests_size(), 2) << llm_->Requests()[1]["body"]["messages"].back().dump();
  std::map<std::string, v1::TestResult> by_name;
  for (const auto& t : final.tests()) by_name[t.name()] = t;
  EXPECT_EQ(by_name["test_solution.py::test_add_positive"].outcome(), "failed");
  EXPECT_THAT(by_name["test_solution.py::test_add_positive"].message(), HasSubstr("assert"));
  EXPECT_EQ(by_name["test_solution.py::test_add_zero"].outcome(), "passed");
  EXPECT_TRUE(final.all_succeeded());
  EXPECT_THAT(llm_->Requests()[1]["body"]["messages"].back()["content"].get<std::string>(),
              HasSubstr("FAILED test_solution.py::test_add_positive"));
}

TEST_F(AgentE2eTest, DebugModeReproducesFixesAndProves) {
  const std::string buggy = "def mean(xs):\n    return sum(xs) / len(xs)\nprint(mean([]))\n";
  Start({ToolCallStep("def mean(xs):\n    return sum(xs) / len(xs) if xs else 0.0\nprint(mean([]))"),
         TextStep("mean() divided by len([]) == 0; it now returns 0.0 for an empty list.")});
  v1::RunAgentRequest request;
  request.set_mode(v1::AGENT_MODE_DEBUG);
  request.set_code(buggy);
  RunResult run = Run(request);
  ASSERT_TRUE(run.status.ok()) << run.status.error_message();
  auto executions = run.executions();
  ASSERT_EQ(executions.size(), 2u);
  EXPECT_EQ(executions[0].purpose(), "reproduce");
  EXPECT_FALSE(executions[0].succeeded());
  EXPECT_EQ(executions[1].purpose(), "code");
  EXPECT_EQ(executions[1].result().stdout(), "0.0\n");
  EXPECT_EQ(run.final().stop_reason(), v1::STOP_REASON_DONE);
  EXPECT_TRUE(run.final().all_succeeded());
  EXPECT_THAT(llm_->Requests()[0]["body"]["messages"][1]["content"].get<std::string>(),
              HasSubstr("ZeroDivisionError"));
}

TEST_F(AgentE2eTest, TddModeSeesTheTestsFailThenPass) {
  const std::string tests = "from solution import slug\n\ndef test_slug():\n    assert slug('Hello World') == 'hello-world'\n";
  Start({ToolStep("write_file", {{"path", "solution.py"}, {"content", "x = 1\n"}}),  // refused: tests first
         ToolStep("write_file", {{"path", "test_solution.py"}, {"content", tests}}),
         ToolStep("write_file", {{"path", "solution.py"},
                                 {"content", "def slug(s):\n    return '-'.join(s.lower().split())\n"}}),
         TextStep("slug() is implemented and its test passes.")});
  v1::RunAgentRequest request = Task("slug(s): lower-case words joined by '-'");
  request.set_mode(v1::AGENT_MODE_TDD);
  RunResult run = Run(request);
  ASSERT_TRUE(run.status.ok()) << run.status.error_message();
  v1::FinalEvent final = run.final();
  EXPECT_EQ(final.stop_reason(), v1::STOP_REASON_DONE) << final.stop_detail();
  EXPECT_TRUE(final.tests_failed_first());
  EXPECT_TRUE(final.all_succeeded());
  ASSERT_EQ(final.tests_size(), 1);
  EXPECT_EQ(final.tests(0).outcome(), "passed");
  EXPECT_THAT(llm_->Requests()[1]["body"]["messages"].back()["content"].get<std::string>(),
              HasSubstr("write the tests first"));
  auto executions = run.executions();
  ASSERT_EQ(executions.size(), 2u);  // red, then green
  EXPECT_FALSE(executions[0].succeeded());
  EXPECT_TRUE(executions[1].succeeded());
}

TEST_F(AgentE2eTest, RepairPatchesRollsBackAndStaysInAllowedPaths) {
  const std::string calc = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n";
  const std::string test_calc =
      "from calc import add, mul\n\ndef test_add():\n    assert add(2, 3) == 5\n\ndef test_mul():\n    assert mul(2, 3) == 6\n";
  const std::string cheat = "--- a/test_calc.py\n+++ b/test_calc.py\n@@ -3,2 +3,2 @@\n def test_add():\n-    assert add(2, 3) == 5\n+    assert True\n";
  const std::string worse = "--- a/calc.py\n+++ b/calc.py\n@@ -5,2 +5,2 @@\n def mul(a, b):\n-    return a * b\n+    return a + b\n";
  const std::string fix = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n";
  Start({ToolStep("read_file", {{"path", "calc.py"}}), ToolStep("apply_patch", {{"patch", cheat}}),
         ToolStep("apply_patch", {{"patch", worse}}), ToolStep("apply_patch", {{"patch", fix}}),
         TextStep("add() subtracted; it adds now.")});
  v1::RunAgentRequest request = Task("make the tests pass");
  request.set_mode(v1::AGENT_MODE_REPAIR);
  request.set_verify_command("python3 -m pytest -q -p no:cacheprovider");
  request.add_allowed_paths("calc.py");
  auto* f1 = request.add_files();
  f1->set_path("calc.py");
  f1->set_content(calc);
  auto* f2 = request.add_files();
  f2->set_path("test_calc.py");
  f2->set_content(test_calc);
  RunResult run = Run(request);
  ASSERT_TRUE(run.status.ok()) << run.status.error_message();
  v1::FinalEvent final = run.final();
  EXPECT_EQ(final.stop_reason(), v1::STOP_REASON_DONE) << final.stop_detail();
  EXPECT_TRUE(final.all_succeeded());
  EXPECT_EQ(final.diff(),
            "--- a/calc.py\n+++ b/calc.py\n@@ -1,5 +1,5 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n"
            " \n \n def mul(a, b):\n");
  std::vector<v1::FileChange> changes;
  for (const auto& e : run.events) {
    if (e.has_file_change()) changes.push_back(e.file_change());
  }
  ASSERT_EQ(changes.size(), 2u);  // the cheat never applied
  EXPECT_TRUE(changes[0].rolled_back());
  EXPECT_THAT(changes[0].reason(), HasSubstr("worse"));
  EXPECT_FALSE(changes[1].rolled_back());
  Json sent = llm_->Requests();
  EXPECT_THAT(sent[2]["body"]["messages"].back()["content"].get<std::string>(), HasSubstr("may not change"));
  EXPECT_THAT(sent[3]["body"]["messages"].back()["content"].get<std::string>(), HasSubstr("rolled back"));
  // Verification ran first (the baseline), then after each applied patch.
  int verifications = 0;
  for (const auto& e : run.executions()) verifications += e.purpose() == "verify";
  EXPECT_EQ(verifications, 3);
}

TEST_F(AgentE2eTest, ClientSideFunctionsRoundTripOnTheStream) {
  Start({{{"tool_calls", {{{"id", "call_db"}, {"name", "query_database"}, {"arguments", "{\"sql\":\"select n from t\"}"}}}}},
         ToolCallStep("rows = [[3], [4]]\nprint(sum(r[0] for r in rows))"), TextStep("The total is 7.")});
  v1::RunAgentRequest request = Task("sum the table");
  auto* f = request.add_functions();
  f->set_name("query_database");
  f->set_description("Runs SQL on the caller's database");
  f->set_parameters_json(R"({"type":"object","properties":{"sql":{"type":"string"}},"required":["sql"]})");
  int calls = 0;
  RunResult run = Run(request, [&](const v1::AgentEvent& e, auto* stream) {
    if (!e.has_function_call()) return;
    ++calls;
    EXPECT_EQ(e.function_call().name(), "query_database");
    EXPECT_EQ(e.function_call().arguments(), "{\"sql\":\"select n from t\"}");
    v1::AgentRequest answer;
    answer.mutable_function_result()->set_call_id(e.function_call().call_id());
    answer.mutable_function_result()->set_content("[[3], [4]]");
    EXPECT_TRUE(stream->Write(answer));
  });
  ASSERT_TRUE(run.status.ok()) << run.status.error_message();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(run.final().stop_reason(), v1::STOP_REASON_DONE);
  Json second = llm_->Requests()[1]["body"]["messages"];
  EXPECT_EQ(second.back()["role"], "tool");
  EXPECT_EQ(second.back()["tool_call_id"], "call_db");
  EXPECT_EQ(second.back()["content"], "[[3], [4]]");
}

TEST_F(AgentE2eTest, CancellingDuringExecutionInterruptsAndCleansUp) {
  Start({ToolCallStep("import time\ntime.sleep(600)"), TextStep("never")});
  grpc::ClientContext ctx;
  std::thread canceller([&] {
    EXPECT_TRUE(WaitFor([&] { return daemon_->engine().Stats().executing == 1; }));
    ctx.TryCancel();
  });
  RunResult run = Run(Task("sleep"), nullptr, &ctx);
  canceller.join();
  EXPECT_EQ(run.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitFor([&] { return AgentSessions() == 0 && daemon_->engine().Stats().executing == 0; }));
  EXPECT_EQ(llm_->Requests().size(), 1u);  // no further turn
}

TEST_F(AgentE2eTest, CancellingDuringTheModelRequestStopsIt) {
  Start({{{"content", "never"}, {"delay_ms", 600'000}}});
  grpc::ClientContext ctx;
  std::thread canceller([&] {
    EXPECT_TRUE(llm_->WaitFor([](const Json& r) { return r.size() == 1; }));
    ctx.TryCancel();
  });
  RunResult run = Run(Task("think"), nullptr, &ctx);
  canceller.join();
  EXPECT_EQ(run.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(llm_->WaitFor([](const Json& r) { return r.size() == 1 && r[0]["aborted"].get<bool>(); }));
  EXPECT_TRUE(WaitFor([&] { return AgentSessions() == 0; }));
}

// The model server crashes (SIGSEGV) in the middle of its first reply: the
// run ends LLM_ERROR, and its detail says the server broke off its reply.
TEST_F(AgentE2eTest, AModelServerThatDiesEndsTheRunWithLlmErrorSayingHow) {
  auto server = FakeLlmServer::Start(
      {{{"content", "Let me think."}, {"die", "SIGSEGV"}, {"die_after_chunks", 2}, {"chunked", true}}});
  ASSERT_TRUE(server.ok()) << server.status();
  DaemonOptions options = TestOptions();
  options.agent.llm.base_url = (*server)->base_url();
  options.agent.llm.model = "fake-model";
  options.agent.llm.max_retries = 0;
  StartWith(std::move(*server), options);
  RunResult run = Run(Task("think"));
  ASSERT_TRUE(run.status.ok()) << run.status.error_message();
  EXPECT_EQ(run.final().stop_reason(), v1::STOP_REASON_LLM_ERROR) << run.final().stop_detail();
  EXPECT_THAT(run.final().stop_detail(), HasSubstr("broke off its reply after"));
  EXPECT_THAT(run.final().stop_detail(), HasSubstr("has it crashed?"));
  EXPECT_EQ(run.final().iterations(), 1);
  EXPECT_TRUE(WaitFor([&] { return AgentSessions() == 0; }));
}

// AgentRealModelTest's path with a model server that really dies: behind
// the relay, which answers 502 saying how the upstream failed, and named
// by ModelServerDeath with its signal and its stderr.
TEST_F(AgentE2eTest, AModelServerThatDiesBehindTheRelayIsNamedWithItsSignalAndStderr) {
  auto model = FakeLlmServer::Start(
      {{{"content", "Let me think."}, {"die", "SIGSEGV"}, {"die_after_chunks", 2}, {"chunked", true}}});
  ASSERT_TRUE(model.ok()) << model.status();
  auto relay = FakeLlmServer::Relay((*model)->base_url());
  ASSERT_TRUE(relay.ok()) << relay.status();
  DaemonOptions options = TestOptions();
  options.agent.llm.base_url = (*relay)->base_url();
  options.agent.llm.model = "fake-model";
  options.agent.llm.max_retries = 0;
  StartWith(std::move(*relay), options);
  RunResult run = Run(Task("think"));
  ASSERT_TRUE(run.status.ok()) << run.status.error_message();
  EXPECT_EQ(run.final().stop_reason(), v1::STOP_REASON_LLM_ERROR) << run.final().stop_detail();
  EXPECT_THAT(run.final().stop_detail(), HasSubstr("HTTP 502"));
  EXPECT_THAT(run.final().stop_detail(), HasSubstr("the upstream server at " + (*model)->base_url()));
  const std::string death = ModelServerDeath(**model, run);
  EXPECT_THAT(death, HasSubstr("fake_openai_server.py was killed by signal 11 (SIGSEGV)"));
  EXPECT_THAT(death, HasSubstr("its stderr ends:\nfake_openai_server: dying (SIGSEGV) after 2 events"));
  EXPECT_THAT(death, HasSubstr("(the run stopped STOP_REASON_LLM_ERROR: the LLM server failed (HTTP 502)"));
  EXPECT_EQ(llm_->Death(), "");  // the relay lives on
}

TEST_F(AgentE2eTest, AnUnconfiguredAgentSaysHowToConfigureIt) {
  Start({}, /*configured=*/false);
  RunResult run = Run(Task("t"));
  EXPECT_EQ(run.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(run.status.error_message(), HasSubstr("--llm-base-url"));
}

TEST_F(AgentE2eTest, ABadRequestIsInvalidArgument) {
  Start({});
  v1::RunAgentRequest request = Task("t");
  request.set_mode(v1::AGENT_MODE_REPAIR);  // without verify_command
  RunResult run = Run(request);
  EXPECT_EQ(run.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(run.status.error_message(), HasSubstr("verify_command"));
}

// Runs the warden CLI against the daemon; returns its stdout and exit status.
std::pair<std::string, int> RunCli(const std::string& address, const std::string& args) {
  const std::string command = absl::StrCat(WARDEN_BIN_DIR "/warden --addr ", address, " ", args, " 2>/dev/null");
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  const int status = pclose(pipe);
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

TEST_F(AgentE2eTest, CliPrintsOneJsonObjectPerEventEndingWithTheFinal) {
  Start({ToolCallStep("print(1/0)"), ToolCallStep("print(6 * 7)"), TextStep("42")});
  auto [out, code] = RunCli(daemon_->listening().front(), "agent --json 'compute 6*7'");
  EXPECT_EQ(code, 0) << out;
  std::vector<Json> lines;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    lines.push_back(Json::parse(line, nullptr, false));
    ASSERT_FALSE(lines.back().is_discarded()) << line;
  }
  ASSERT_FALSE(lines.empty());
  const Json& final = lines.back();
  EXPECT_EQ(final["type"], "final");
  for (const char* key : {"answer", "all_succeeded", "iterations", "stop_reason", "code_blocks", "outputs"}) {
    EXPECT_TRUE(final.contains(key)) << key;
  }
  EXPECT_EQ(final["answer"], "42");
  EXPECT_EQ(final["all_succeeded"], true);
  EXPECT_EQ(final["stop_reason"], "DONE");
  EXPECT_EQ(final["iterations"], 3);
  EXPECT_EQ(final["code_blocks"], Json({"print(1/0)", "print(6 * 7)"}));
  EXPECT_EQ(final["outputs"][1]["stdout"], "42\n");
  int executions = 0;
  for (const Json& line : lines) executions += line["type"] == "execution";
  EXPECT_EQ(executions, 2);
}

TEST_F(AgentE2eTest, CliRollbackFlagRollsBackAndSaysSo) {
  Start({ToolCallStep("v = 1"), ToolCallStep("v = 2\nraise KeyError('k')"), ToolCallStep("print(v)"),
         TextStep("v is 1")});
  auto [out, code] = RunCli(daemon_->listening().front(), "agent --rollback 'keep v'");
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("KeyError"));
  EXPECT_THAT(out, HasSubstr("--- rolled back: the session is as it was before this step ---\n"));
  EXPECT_THAT(out, HasSubstr("--- ok ---\n1\n"));
  EXPECT_EQ(AgentSessions(), 0);
}

TEST_F(AgentE2eTest, CliPrintsStepsAsText) {
  Start({ToolCallStep("print('hello from the agent')", "Running it."), TextStep("It printed hello.")});
  auto [out, code] = RunCli(daemon_->listening().front(), "agent 'say hello'");
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("Running it.\n-> execute_code\n--- code (python) ---\nprint('hello from the agent')\n"
                             "--- ok ---\nhello from the agent\n"));
  EXPECT_THAT(out, HasSubstr("=== DONE after 2 turns"));
  EXPECT_THAT(out, HasSubstr("--- ok ---\nhello from the agent\nIt printed hello.\n=== DONE after 2 turns"));
}

// The same service against a real language model (SmolLM2-135M-Instruct in
// llama-cpp-python, tests/local_model_server.py), through a relay that
// records each request. What is asserted is the plumbing, never what the
// model solves: its tool calls and fenced code are parsed and run in a
// sandbox, the observation is in its next request, budgets and stagnation
// end the run. tool_choice forces the tool (a 135M model rarely calls one on
// its own); temperature 0 keeps its replies the same from run to run.
class AgentRealModelTest : public AgentE2eTest {
 protected:
  static void SetUpTestSuite() {
    auto server = testing::LocalModelServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    model_ = server->release();
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  void StartModel(const std::string& tools, const std::string& tool_choice) {
    ASSERT_NE(model_, nullptr);
    auto relay = FakeLlmServer::Relay(model_->base_url());
    ASSERT_TRUE(relay.ok()) << relay.status();
    DaemonOptions options = TestOptions();
    options.agent.llm.base_url = (*relay)->base_url();
    options.agent.llm.model = testing::LocalModelServer::kModel;
    options.agent.llm.tools = tools;
    options.agent.llm.tool_choice = tool_choice;
    options.agent.llm.temperature = 0;
    options.agent.llm.max_retries = 0;
    // A reply may take minutes when two of these tests share the 2 cores
    // (ctest -j2) with other work; the run's own deadline is RunSlowly's.
    options.agent.llm.request_timeout_ms = 600'000;
    StartWith(std::move(*relay), options);
  }
  void SetUp() override {
    ASSERT_NE(model_, nullptr);
    const std::string death = model_->Death();
    ASSERT_EQ(death, "") << "the model server died in an earlier test: " << death;
  }
  // A model on this machine's CPU: a turn can take most of a minute when
  // the machine is loaded (ctest -j2 beside other builds). A model server
  // that died during the run fails the test here, saying how it died.
  void RunSlowly(const v1::RunAgentRequest& request, RunResult* run) {
    *run = Run(request, nullptr, nullptr, 900);
    const std::string death = ModelServerDeath(*model_, *run);
    ASSERT_EQ(death, "");
  }
  static testing::PortPrintingServer* model_;
};
testing::PortPrintingServer* AgentRealModelTest::model_ = nullptr;

TEST_F(AgentRealModelTest, ToolCallsRunInASandboxAndTheirResultsReachTheNextRequest) {
  StartModel("native", "execute_code");
  v1::RunAgentRequest request = Task("Print the sum of the numbers from 1 to 10 with Python.");
  request.mutable_budget()->set_max_iterations(2);
  request.set_max_response_tokens(256);
  RunResult run;
  ASSERT_NO_FATAL_FAILURE(RunSlowly(request, &run));
  ASSERT_TRUE(run.status.ok()) << run.status.error_message();
  EXPECT_EQ(run.final().stop_reason(), v1::STOP_REASON_MAX_ITERATIONS) << run.final().stop_detail();
  EXPECT_EQ(run.final().iterations(), 2);
  EXPECT_GT(run.final().usage().prompt_tokens(), 0);  // the server's own count
  // Both turns called the tool (the reply after them, the final answer, was
  // asked for without tools); each call with valid arguments ran in a sandbox.
  std::vector<v1::ModelMessage> replies;
  for (const auto& e : run.events) {
    if (e.has_message()) replies.push_back(e.message());
  }
  ASSERT_EQ(replies.size(), 3u);
  std::vector<v1::ToolCall> calls;
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(replies[i].tool_calls_size(), 1) << replies[i].content();
    calls.push_back(replies[i].tool_calls(0));
  }
  EXPECT_EQ(replies[2].tool_calls_size(), 0);
  std::vector<v1::CodeExecution> executions = run.executions();
  size_t ran = 0;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(calls[i].name(), "execute_code");
    Json arguments = agent::ParseToolArguments(calls[i].arguments());  // as the agent reads them
    if (arguments.is_object() && arguments.contains("code")) {
      ASSERT_LT(ran, executions.size());
      EXPECT_EQ(executions[ran].code(), arguments["code"].get<std::string>());
      EXPECT_NE(executions[ran].result().outcome(), v1::OUTCOME_UNSPECIFIED);
      ++ran;
    }
  }
  // The first call's result is the tool message of the second request.
  Json requests = llm_->Requests();
  ASSERT_GE(requests.size(), 2u);
  const Json& messages = requests[1]["body"]["messages"];
  ASSERT_EQ(messages.back()["role"], "tool");
  EXPECT_EQ(messages.back()["tool_call_id"], calls[0].id());
  const std::string observation = messages.back()["content"].get<std::string>();
  EXPECT_FALSE(observation.empty());
  const Json first_arguments = agent::ParseToolArguments(calls[0].arguments());
  if (!executions.empty() && first_arguments.is_object() && executions[0].code() == first_arguments.value("code", "")) {
    const auto& first = executions[0].result();
    if (!first.stdout().empty()) {
      EXPECT_THAT(observation, HasSubstr(first.stdout().substr(0, 40)));
    }
    if (first.has_error()) {
      EXPECT_THAT(observation, HasSubstr(first.error().name()));
    }
  }
  // Out of turns, the model is asked once more, without tools, for its answer.
  EXPECT_FALSE(requests.back()["body"].contains("tools"));
  EXPECT_EQ(AgentSessions(), 0);
}

TEST_F(AgentRealModelTest, FencedCodeIsParsedRunAndFedBack) {
  StartModel("text", "auto");
  v1::RunAgentRequest request = Task(
      "Write a Python code block that prints the sum of the numbers from 1 to 10. Reply with only the code block.");
  request.mutable_budget()->set_max_iterations(2);
  request.set_max_response_tokens(200);
  RunResult run;
  ASSERT_NO_FATAL_FAILURE(RunSlowly(request, &run));
  ASSERT_TRUE(run.status.ok()) << run.status.error_message();
  const v1::FinalEvent final = run.final();
  EXPECT_NE(final.stop_reason(), v1::STOP_REASON_UNSPECIFIED);
  std::vector<v1::CodeExecution> executions = run.executions();
  ASSERT_FALSE(executions.empty()) << "the model wrote no fenced code: " << final.answer() << " (the run stopped "
                                   << v1::StopReason_Name(final.stop_reason()) << ": " << final.stop_detail() << ")";
  Json requests = llm_->Requests();
  ASSERT_GE(requests.size(), 2u);
  EXPECT_FALSE(requests[0]["body"].contains("tools"));  // text mode offers none
  // The results went back as the next user message.
  const Json& messages = requests[1]["body"]["messages"];
  EXPECT_EQ(messages.back()["role"], "user");
  const auto& first = executions[0].result();
  const std::string fed_back = messages.back()["content"].get<std::string>();
  if (!first.stdout().empty()) {
    EXPECT_THAT(fed_back, HasSubstr(first.stdout().substr(0, 40)));
  }
  if (first.has_error()) {
    EXPECT_THAT(fed_back, HasSubstr(first.error().name()));
  }
}

TEST_F(AgentRealModelTest, ArgumentsCutShortThreeTimesAreStuck) {
  // Replies of 4 tokens cut the forced call's JSON short each time: the same
  // failure ("invalid arguments") three times in a row ends the run.
  StartModel("native", "execute_code");
  v1::RunAgentRequest request = Task("Print hello.");
  request.mutable_budget()->set_max_iterations(6);
  request.set_max_response_tokens(4);
  RunResult run;
  ASSERT_NO_FATAL_FAILURE(RunSlowly(request, &run));
  ASSERT_TRUE(run.status.ok()) << run.status.error_message();
  EXPECT_EQ(run.final().stop_reason(), v1::STOP_REASON_STUCK) << run.final().stop_detail();
  EXPECT_THAT(run.final().stop_detail(), HasSubstr("invalid arguments for execute_code"));
  EXPECT_EQ(run.final().iterations(), 3);
  EXPECT_TRUE(run.executions().empty());
}

TEST_F(AgentRealModelTest, TheTokenBudgetEndsTheRun) {
  StartModel("native", "execute_code");
  v1::RunAgentRequest request = Task("Print hello.");
  request.mutable_budget()->set_max_tokens(50);  // less than the first prompt
  request.set_max_response_tokens(64);
  RunResult run;
  ASSERT_NO_FATAL_FAILURE(RunSlowly(request, &run));
  ASSERT_TRUE(run.status.ok()) << run.status.error_message();
  EXPECT_EQ(run.final().stop_reason(), v1::STOP_REASON_MAX_TOKENS) << run.final().stop_detail();
  EXPECT_EQ(run.final().iterations(), 1);
}

}  // namespace
}  // namespace warden
