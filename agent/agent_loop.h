// AgentRun: one run of the closed loop - generate, execute, analyze, fix -
// for one request, in one session it owns from start to end.
//
// Each turn: the model's reply; each tool call (or, for models without tool
// calling, each code block in its text) carried out in the session; the
// observations fed back. The run stops when the model answers without
// further code after verified work (the mode says what verified means), when
// a budget (turns, wall time, tokens) runs out - then the model is asked once
// for its best answer - when the same error comes back three times in a row
// (after the second, the model is told to try something else), on an LLM
// failure, or on cancellation. Everything that happens is emitted as an
// AgentEvent; the last is the FinalEvent that Run() also returns.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/executor_port.h"
#include "agent/llm_client.h"
#include "agent/run_control.h"
#include "nlohmann/json.hpp"
#include "warden/v1/agent.pb.h"

namespace warden::agent {

struct LoopOptions {
  // Budgets: the default where a request says 0, and the most it may ask.
  int default_max_iterations = 12;
  int max_iterations = 100;
  int64_t default_max_wall_ms = 600'000;
  int64_t max_wall_ms = 3'600'000;
  int64_t default_max_tokens = 200'000;
  int64_t max_tokens = 5'000'000;
  // Each observation the model is sent (stdout, traceback, test report) is
  // cut to this many bytes, keeping head and tail: enough for a traceback,
  // small enough for an 8k-context local model.
  size_t max_observation_bytes = 8'000;
  // kNative: OpenAI tool calling; kText: code in fenced blocks or
  // <execute_python> tags; kAuto: tool calling, with the text form accepted
  // from a model that never calls a tool, and a switch to it when the server
  // refuses tools.
  enum class Tools { kAuto, kNative, kText };
  Tools tools = Tools::kAuto;
  // How long a client-side function call may wait for the caller's answer.
  int64_t function_timeout_ms = 300'000;
};

// Checks what can be checked before any work: INVALID_ARGUMENT saying what
// is wrong.
absl::Status ValidateAgentRequest(const v1::RunAgentRequest& request, const LoopOptions& options);

class AgentRun {
 public:
  using EmitFn = std::function<void(v1::AgentEvent event)>;
  // Sends the call to the client and blocks for its answer: CANCELLED or
  // DEADLINE_EXCEEDED when none comes.
  using FunctionFn = std::function<absl::StatusOr<v1::FunctionResult>(const v1::FunctionCall& call)>;

  // `llm`, `executor` and `control` are not owned and outlive the run.
  AgentRun(LlmClient& llm, ExecutorPort& executor, LoopOptions options, v1::RunAgentRequest request,
           EmitFn emit, FunctionFn call_function, RunControl* control);

  // The final event (also emitted), or an error when Warden itself failed
  // (e.g. no session could be created).
  absl::StatusOr<v1::FinalEvent> Run();

 private:
  struct Budget {
    int iterations;
    absl::Duration wall;
    int64_t tokens;
  };
  struct VerifyScore {
    bool passed = false;
    int failed = 0;
    int passed_count = 0;
    int exit_code = -1;
  };

  absl::StatusOr<std::string> SetUp();  // the first user message
  void Loop();
  // One tool invocation (or its text-mode equivalent); returns what the
  // model is told.
  std::string Invoke(const std::string& name, const std::string& arguments, const std::string& call_id = "");
  std::string ExecuteCode(const nlohmann::json& args);
  std::string WriteFile(const nlohmann::json& args);
  std::string ReadFile(const nlohmann::json& args);
  std::string ListFiles();
  std::string ApplyPatch(const nlohmann::json& args);
  std::string RunTests();
  std::string RunVerification(VerifyScore* score);
  std::string CallFunction(const std::string& call_id, const std::string& name, const std::string& arguments);
  std::string TextBlocksAsActions(const std::string& content);

  std::vector<ToolSpec> Tools() const;
  std::string SystemPrompt() const;
  bool Verified() const;
  std::string NotVerifiedYet() const;
  void Finish(v1::StopReason reason, std::string detail, std::string answer);
  void AskForFinalAnswer(v1::StopReason reason, const std::string& why);
  absl::StatusOr<ChatResponse> Ask(const ChatRequest& request);
  void EmitExecution(const std::string& purpose, const std::string& code, const v1::ExecuteResponse& result,
                     bool succeeded, bool rolled_back = false);
  // rollback_failed_steps: a fork of the session from before the step (its
  // id), or nothing when the option is off or no complete fork could be made
  // (an AgentError says why).
  std::optional<std::string> ForkBeforeStep();
  // Ends a step: a failed one continues on its rollback point and closes the
  // session it ran in; a successful one closes the rollback point. Returns
  // whether it rolled back.
  bool EndStep(const std::optional<std::string>& rollback_point, bool failed);
  void EmitError(const std::string& message);
  absl::StatusOr<v1::ExecuteResponse> RunCell(const std::string& code);
  std::string Failure(std::string signature, std::string observation);
  std::optional<std::string> CurrentContent(const std::string& path);
  absl::Status SetContent(const std::string& path, const std::optional<std::string>& content);
  bool PathAllowed(const std::string& path) const;
  std::string CombinedDiff();

  LlmClient& llm_;
  ExecutorPort& executor_;
  const LoopOptions options_;
  const v1::RunAgentRequest request_;
  const v1::AgentMode mode_;
  EmitFn emit_;
  FunctionFn call_function_;
  RunControl* control_;

  Budget budget_{};
  absl::Time start_;
  std::string session_id_;  // rollback_failed_steps: changes to the fork on a rollback
  std::vector<ChatMessage> messages_;
  bool native_tools_ = true;
  bool model_used_tools_ = false;
  int iteration_ = 0;
  int64_t prompt_tokens_ = 0, completion_tokens_ = 0;
  bool stopped_ = false;
  v1::FinalEvent final_;
  absl::Status fault_;  // a Warden failure that ends the run with an error status

  // What the run has verified.
  std::optional<bool> last_execution_ok_;
  std::set<std::string> succeeded_code_;
  std::string action_failure_;  // the last action's error signature ("" if it succeeded)
  std::string previous_signature_;
  int repeats_ = 0;
  // test, tdd
  bool tests_ran_ = false, tests_ok_ = false, tests_all_passed_ = false;
  bool tests_written_ = false, implementation_written_ = false;
  std::optional<bool> tests_failed_first_;
  std::vector<v1::TestResult> last_tests_;
  // repair
  VerifyScore score_;
  std::map<std::string, std::optional<std::string>> originals_;  // content before the first change
};

}  // namespace warden::agent
