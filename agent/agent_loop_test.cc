// The loop against the fake LLM server (real HTTP) and a fake executor: what
// the model is sent, how runs stop, stagnation, budgets, client functions.
// tests/agent_e2e_test.cc runs the same loop over gRPC with real sandboxes.
#include "agent/agent_loop.h"

#include <map>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fake_llm_server.h"

namespace warden::agent {
namespace {

using ::testing::HasSubstr;
using warden::testing::FakeLlmServer;
using warden::testing::TextStep;
using warden::testing::ToolCallStep;
using Json = nlohmann::json;

// Code containing "raise" fails with a ZeroDivisionError; anything else
// succeeds and prints "ran: <code>".
class FakeExecutor : public ExecutorPort {
 public:
  absl::StatusOr<std::string> CreateSession(v1::Language, const v1::Limits&) override {
    ++sessions_created;
    return std::string("s1");
  }
  absl::StatusOr<v1::ExecuteResponse> Execute(const std::string& session_id, const std::string& code,
                                              const v1::Limits&, RunControl*) override {
    executed.push_back(code);
    executed_in.push_back(session_id);
    v1::ExecuteResponse r;
    if (absl::StrContains(code, "raise")) {
      r.set_outcome(v1::OUTCOME_ERROR);
      r.mutable_error()->set_name("ZeroDivisionError");
      r.mutable_error()->set_value("division by zero");
      r.mutable_error()->add_traceback("Traceback (most recent call last):");
      r.mutable_error()->add_traceback("  File \"<cell>\", line 1, in <module>");
      r.mutable_error()->add_traceback("ZeroDivisionError: division by zero");
    } else {
      r.set_outcome(v1::OUTCOME_OK);
      r.set_stdout("ran: " + code + "\n");
    }
    return r;
  }
  absl::Status WriteFile(const std::string&, const std::string& path, const std::string& data) override {
    files[path] = data;
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ReadFile(const std::string&, const std::string& path) override {
    auto it = files.find(path);
    if (it == files.end()) return absl::NotFoundError(path);
    return it->second;
  }
  absl::StatusOr<std::vector<std::string>> ListFiles(const std::string&) override {
    std::vector<std::string> out;
    for (auto& [p, d] : files) out.push_back(p);
    return out;
  }
  absl::Status CloseSession(const std::string& session_id) override {
    ++sessions_closed;
    closed.push_back(session_id);
    return absl::OkStatus();
  }
  // Forks are named "fork<n>"; `fork_error` refuses them, `left_out` is
  // what each one could not copy.
  absl::StatusOr<Fork> ForkSession(const std::string& session_id) override {
    forked_from.push_back(session_id);
    if (!fork_error.ok()) return fork_error;
    return Fork{"fork" + std::to_string(forked_from.size()), left_out};
  }

  std::vector<std::string> executed, executed_in, closed, forked_from;
  absl::Status fork_error;
  std::map<std::string, std::string> left_out;
  std::map<std::string, std::string> files;
  int sessions_created = 0, sessions_closed = 0;
};

class AgentLoopTest : public ::testing::Test {
 protected:
  void Serve(const Json& steps) {
    auto server = FakeLlmServer::Start(steps);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    LlmOptions o;
    o.base_url = server_->base_url();
    o.model = "fake-model";
    o.initial_backoff_ms = 5;
    llm_ = std::make_unique<LlmClient>(o);
  }
  v1::FinalEvent Run(v1::RunAgentRequest request, AgentRun::FunctionFn functions = nullptr) {
    EXPECT_TRUE(ValidateAgentRequest(request, options_).ok());
    AgentRun run(*llm_, executor_, options_, request, [this](v1::AgentEvent e) { events_.push_back(e); },
                 std::move(functions), &control_);
    auto final = run.Run();
    EXPECT_TRUE(final.ok()) << final.status();
    EXPECT_FALSE(events_.empty());
    if (!events_.empty()) {
      EXPECT_TRUE(events_.back().has_final());
    }
    return final.ok() ? *final : v1::FinalEvent();
  }
  static v1::RunAgentRequest Task(const std::string& task) {
    v1::RunAgentRequest r;
    r.set_task(task);
    return r;
  }
  // The messages of the model's n-th request.
  Json Sent(size_t n) { return server_->Requests()[n]["body"]["messages"]; }

  std::unique_ptr<FakeLlmServer> server_;
  std::unique_ptr<LlmClient> llm_;
  FakeExecutor executor_;
  LoopOptions options_;
  RunControl control_;
  std::vector<v1::AgentEvent> events_;
};

TEST_F(AgentLoopTest, FixesAFailureAndFeedsTheTracebackBack) {
  Serve({ToolCallStep("x = 1/0  # raise"), ToolCallStep("x = 42\nprint(x)"), TextStep("The answer is 42.")});
  v1::FinalEvent final = Run(Task("compute 42"));
  EXPECT_EQ(final.stop_reason(), v1::STOP_REASON_DONE);
  EXPECT_TRUE(final.all_succeeded());
  EXPECT_EQ(final.answer(), "The answer is 42.");
  EXPECT_EQ(final.iterations(), 3);
  ASSERT_EQ(final.code_blocks_size(), 2);
  EXPECT_EQ(final.outputs(0).outcome(), v1::OUTCOME_ERROR);
  EXPECT_EQ(final.outputs(1).outcome(), v1::OUTCOME_OK);
  EXPECT_GT(final.usage().total_tokens(), 0);
  // The second request carried the traceback as the tool result, matched by id.
  Json second = Sent(1);
  const Json& call = second[second.size() - 2];
  const Json& result = second.back();
  EXPECT_EQ(call["role"], "assistant");
  EXPECT_EQ(result["role"], "tool");
  EXPECT_EQ(result["tool_call_id"], call["tool_calls"][0]["id"]);
  EXPECT_THAT(result["content"].get<std::string>(), HasSubstr("ZeroDivisionError: division by zero"));
  EXPECT_THAT(result["content"].get<std::string>(), HasSubstr("Traceback (most recent call last)"));
  EXPECT_EQ(executor_.sessions_created, 1);
  EXPECT_EQ(executor_.sessions_closed, 1);
}

TEST_F(AgentLoopTest, InvalidToolArgumentsGoBackToTheModel) {
  Serve({{{"tool_calls", {{{"name", "execute_code"}, {"arguments", "{\"code\": \"print(1)"}}}}},
         ToolCallStep("print(1)"), TextStep("1")});
  v1::FinalEvent final = Run(Task("print 1"));
  EXPECT_EQ(final.stop_reason(), v1::STOP_REASON_DONE);
  EXPECT_EQ(executor_.executed.size(), 1u);
  Json second = Sent(1);
  EXPECT_EQ(second.back()["role"], "tool");
  EXPECT_THAT(second.back()["content"].get<std::string>(), HasSubstr("not valid JSON"));
  bool error_event = false;
  for (auto& e : events_) error_event |= e.has_error() && absl::StrContains(e.error().message(), "invalid arguments");
  EXPECT_TRUE(error_event);
}

// Found by fuzzing the same parser in the configuration files: a number
// nlohmann cannot hold throws out_of_range, not parse_error, and used to
// end the daemon from a model's reply.
TEST_F(AgentLoopTest, ToolArgumentsWithANumberTooLargeGoBackToTheModel) {
  Serve({{{"tool_calls", {{{"name", "execute_code"}, {"arguments", "{\"code\": 1e99999}"}}}}},
         ToolCallStep("print(1)"), TextStep("1")});
  v1::FinalEvent final = Run(Task("print 1"));
  EXPECT_EQ(final.stop_reason(), v1::STOP_REASON_DONE);
  EXPECT_EQ(executor_.executed.size(), 1u);
  Json second = Sent(1);
  EXPECT_EQ(second.back()["role"], "tool");
  EXPECT_THAT(second.back()["content"].get<std::string>(), HasSubstr("not valid JSON"));
}

TEST_F(AgentLoopTest, ModelsWithoutToolsUseFencedBlocks) {
  options_.tools = LoopOptions::Tools::kText;
  Serve({TextStep("Let me try:\n```python\nprint(6*7)\n```"), TextStep("It prints 42.")});
  v1::FinalEvent final = Run(Task("what is 6*7"));
  EXPECT_EQ(final.stop_reason(), v1::STOP_REASON_DONE);
  EXPECT_TRUE(final.all_succeeded());
  ASSERT_EQ(executor_.executed.size(), 1u);
  EXPECT_EQ(executor_.executed[0], "print(6*7)");
  EXPECT_FALSE(server_->Requests()[0]["body"].contains("tools"));
  Json second = Sent(1);
  EXPECT_EQ(second.back()["role"], "user");
  EXPECT_THAT(second.back()["content"].get<std::string>(), HasSubstr("ran: print(6*7)"));
}

TEST_F(AgentLoopTest, AutoModeRunsExecutePythonTagsFromAModelThatNeverCallsTools) {
  Serve({TextStep("<execute_python>print('tag')</execute_python>"), TextStep("done")});
  v1::FinalEvent final = Run(Task("t"));
  EXPECT_EQ(final.stop_reason(), v1::STOP_REASON_DONE);
  ASSERT_EQ(executor_.executed.size(), 1u);
  EXPECT_EQ(executor_.executed[0], "print('tag')");
}

TEST_F(AgentLoopTest, AServerThatRefusesToolsGetsTheTextForm) {
  Serve({{{"status", 400}, {"body", {{"error", {{"message", "this model does not support tools"}}}}}},
         TextStep("```python\nprint(1)\n```"), TextStep("ok")});
  v1::FinalEvent final = Run(Task("t"));
  EXPECT_EQ(final.stop_reason(), v1::STOP_REASON_DONE);
  Json requests = server_->Requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_TRUE(requests[0]["body"].contains("tools"));
  EXPECT_FALSE(requests[1]["body"].contains("tools"));
  EXPECT_THAT(requests[1]["body"]["messages"][0]["content"].get<std::string>(), HasSubstr("fenced block"));
}

TEST_F(AgentLoopTest, AnAnswerWithoutVerifiedWorkIsSentBack) {
  Serve({TextStep("It is 42, trust me."), ToolCallStep("print(42)"), TextStep("42")});
  v1::FinalEvent final = Run(Task("t"));
  EXPECT_EQ(final.stop_reason(), v1::STOP_REASON_DONE);
  EXPECT_EQ(final.answer(), "42");
  EXPECT_THAT(Sent(1).back()["content"].get<std::string>(), HasSubstr("Nothing has been run yet"));
}

TEST_F(AgentLoopTest, TheIterationBudgetEndsWithABestAnswer) {
  Serve({ToolCallStep("raise 1"), ToolCallStep("print(2)  # raise? no"), TextStep("best guess: 2")});
  v1::RunAgentRequest request = Task("t");
  request.mutable_budget()->set_max_iterations(2);
  v1::FinalEvent final = Run(request);
  EXPECT_EQ(final.stop_reason(), v1::STOP_REASON_MAX_ITERATIONS);
  EXPECT_EQ(final.answer(), "best guess: 2");
  EXPECT_EQ(final.iterations(), 2);
  EXPECT_FALSE(final.all_succeeded());
  Json last = server_->Requests()[2]["body"];
  EXPECT_FALSE(last.contains("tools"));  // the final request offers no tools
  EXPECT_THAT(last["messages"].back()["content"].get<std::string>(), HasSubstr("best final answer"));
}

TEST_F(AgentLoopTest, TheTokenBudgetEndsTheRun) {
  Json big = ToolCallStep("print(1)");
  big["usage"] = {{"prompt_tokens", 900}, {"completion_tokens", 200}};
  Serve({big, TextStep("partial")});
  v1::RunAgentRequest request = Task("t");
  request.mutable_budget()->set_max_tokens(1000);
  v1::FinalEvent final = Run(request);
  EXPECT_EQ(final.stop_reason(), v1::STOP_REASON_MAX_TOKENS);
  EXPECT_EQ(final.iterations(), 1);
  EXPECT_GE(final.usage().total_tokens(), 1100);
}

TEST_F(AgentLoopTest, TheSameErrorThreeTimesIsStuck) {
  Serve({ToolCallStep("raise A"), ToolCallStep("raise B"), ToolCallStep("raise C"), TextStep("unused")});
  v1::FinalEvent final = Run(Task("t"));
  EXPECT_EQ(final.stop_reason(), v1::STOP_REASON_STUCK);
  EXPECT_EQ(executor_.executed.size(), 3u);
  // After the second identical error the model was told to change course.
  Json third = Sent(2);
  EXPECT_EQ(third.back()["role"], "user");
  EXPECT_THAT(third.back()["content"].get<std::string>(), HasSubstr("try a different approach"));
  EXPECT_THAT(Sent(1).back()["content"].get<std::string>(), Not(HasSubstr("different approach")));
}

TEST_F(AgentLoopTest, ClientFunctionsRoundTrip) {
  Serve({{{"tool_calls", {{{"id", "call_q"}, {"name", "query_database"}, {"arguments", "{\"sql\": \"select 1\"}"}}}}},
         ToolCallStep("print(1)"), TextStep("one row")});
  v1::RunAgentRequest request = Task("ask the db");
  v1::ClientFunction* f = request.add_functions();
  f->set_name("query_database");
  f->set_parameters_json(R"({"type":"object","properties":{"sql":{"type":"string"}}})");
  std::vector<v1::FunctionCall> calls;
  v1::FinalEvent final = Run(request, [&](const v1::FunctionCall& call) -> absl::StatusOr<v1::FunctionResult> {
    calls.push_back(call);
    v1::FunctionResult r;
    r.set_call_id(call.call_id());
    r.set_content("[[1]]");
    return r;
  });
  EXPECT_EQ(final.stop_reason(), v1::STOP_REASON_DONE);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].call_id(), "call_q");
  EXPECT_EQ(calls[0].arguments(), "{\"sql\": \"select 1\"}");
  Json tools = server_->Requests()[0]["body"]["tools"];
  bool offered = false;
  for (auto& t : tools) offered |= t["function"]["name"] == "query_database";
  EXPECT_TRUE(offered);
  Json second = Sent(1);
  EXPECT_EQ(second.back()["tool_call_id"], "call_q");
  EXPECT_EQ(second.back()["content"], "[[1]]");
}

TEST_F(AgentLoopTest, CancellationBeforeAnyTurnClosesTheSession) {
  Serve({TextStep("never")});
  control_.Cancel();
  v1::FinalEvent final = Run(Task("t"));
  EXPECT_EQ(final.stop_reason(), v1::STOP_REASON_CANCELLED);
  EXPECT_EQ(executor_.sessions_closed, 1);
}

std::vector<v1::CodeExecution> Executions(const std::vector<v1::AgentEvent>& events) {
  std::vector<v1::CodeExecution> out;
  for (const auto& e : events) {
    if (e.has_execution()) out.push_back(e.execution());
  }
  return out;
}

TEST_F(AgentLoopTest, RollbackContinuesOnThePreStepForkAfterAFailureAndKeepsASuccess) {
  Serve({ToolCallStep("x = 1"), ToolCallStep("x = 2  # raise"), ToolCallStep("print(x)"), TextStep("x is 1")});
  v1::RunAgentRequest request = Task("t");
  request.set_rollback_failed_steps(true);
  request.set_keep_session(true);
  v1::FinalEvent final = Run(request);
  EXPECT_EQ(final.stop_reason(), v1::STOP_REASON_DONE);
  // Each step was forked from the session the run was in at the time.
  EXPECT_EQ(executor_.forked_from, std::vector<std::string>({"s1", "s1", "fork2"}));
  // The failed step ran in s1, which was closed; the run went on in its fork.
  EXPECT_EQ(executor_.executed_in, std::vector<std::string>({"s1", "s1", "fork2"}));
  // Spare forks of the successful steps closed; the failed session closed; the last one kept.
  EXPECT_EQ(executor_.closed, std::vector<std::string>({"fork1", "s1", "fork3"}));
  EXPECT_EQ(final.session_id(), "fork2");
  std::vector<v1::CodeExecution> executions = Executions(events_);
  ASSERT_EQ(executions.size(), 3u);
  EXPECT_FALSE(executions[0].rolled_back());
  EXPECT_TRUE(executions[1].rolled_back());
  EXPECT_FALSE(executions[2].rolled_back());
  // The model was told.
  EXPECT_THAT(Sent(2).back()["content"].get<std::string>(), HasSubstr("rolled back to its state before it"));
}

TEST_F(AgentLoopTest, WithoutRollbackNothingIsForked) {
  Serve({ToolCallStep("x = 2  # raise"), ToolCallStep("print(1)"), TextStep("1")});
  Run(Task("t"));
  EXPECT_TRUE(executor_.forked_from.empty());
  EXPECT_EQ(executor_.executed_in, std::vector<std::string>({"s1", "s1"}));
  for (const auto& e : Executions(events_)) EXPECT_FALSE(e.rolled_back());
}

TEST_F(AgentLoopTest, AStepWithoutACompleteForkRunsWithoutARollbackPointAndSaysWhy) {
  Serve({ToolCallStep("x = 2  # raise"), ToolCallStep("print(1)"), TextStep("1")});
  executor_.left_out = {{"conn", "a socket cannot be copied"}};
  v1::RunAgentRequest request = Task("t");
  request.set_rollback_failed_steps(true);
  Run(request);
  EXPECT_EQ(executor_.executed_in, std::vector<std::string>({"s1", "s1"}));  // never rolled back onto a fork
  EXPECT_EQ(executor_.closed, std::vector<std::string>({"fork1", "fork2", "s1"}));  // incomplete forks closed
  for (const auto& e : Executions(events_)) EXPECT_FALSE(e.rolled_back());
  int said = 0;
  for (const auto& e : events_) {
    said += e.has_error() && absl::StrContains(e.error().message(), "no rollback point") &&
            absl::StrContains(e.error().message(), "conn (a socket cannot be copied)");
  }
  EXPECT_EQ(said, 2);
}

TEST_F(AgentLoopTest, AForkThatFailsLeavesTheStepToRunInPlace) {
  Serve({ToolCallStep("x = 2  # raise"), TextStep("gave up")});
  executor_.fork_error = absl::ResourceExhaustedError("the tenant's session quota is used up");
  v1::RunAgentRequest request = Task("t");
  request.set_rollback_failed_steps(true);
  request.mutable_budget()->set_max_iterations(1);
  Run(request);
  EXPECT_EQ(executor_.executed_in, std::vector<std::string>({"s1"}));
  EXPECT_EQ(executor_.closed, std::vector<std::string>({"s1"}));
  bool said = false;
  for (const auto& e : events_) said |= e.has_error() && absl::StrContains(e.error().message(), "quota is used up");
  EXPECT_TRUE(said);
}

TEST(AgentRequestTest, RollbackIsRefusedForLanguagesThatCannotFork) {
  LoopOptions o;
  v1::RunAgentRequest r;
  r.set_task("t");
  r.set_rollback_failed_steps(true);
  EXPECT_TRUE(ValidateAgentRequest(r, o).ok());
  r.set_language(v1::LANGUAGE_PYTHON);
  EXPECT_TRUE(ValidateAgentRequest(r, o).ok());
  for (v1::Language language : {v1::LANGUAGE_JAVASCRIPT, v1::LANGUAGE_BASH}) {
    r.set_language(language);
    absl::Status status = ValidateAgentRequest(r, o);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("rollback_failed_steps needs language python"));
  }
}

TEST(AgentRequestTest, ValidationSaysWhatIsMissing) {
  LoopOptions o;
  v1::RunAgentRequest r;
  EXPECT_THAT(ValidateAgentRequest(r, o).message(), HasSubstr("task is empty"));
  r.set_task("t");
  r.set_mode(v1::AGENT_MODE_REPAIR);
  EXPECT_THAT(ValidateAgentRequest(r, o).message(), HasSubstr("verify_command"));
  r.set_mode(v1::AGENT_MODE_SOLVE);
  r.mutable_budget()->set_max_iterations(1000);
  EXPECT_THAT(ValidateAgentRequest(r, o).message(), HasSubstr("max_iterations"));
  r.mutable_budget()->set_max_iterations(0);
  r.add_functions()->set_name("execute_code");
  EXPECT_THAT(ValidateAgentRequest(r, o).message(), HasSubstr("taken"));
}

}  // namespace
}  // namespace warden::agent
