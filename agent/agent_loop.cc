#include "agent/agent_loop.h"

#include <fnmatch.h>

#include <algorithm>
#include <regex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/code_blocks.h"
#include "agent/observation.h"
#include "agent/tool_arguments.h"
#include "agent/unified_diff.h"
#include "common/status_macros.h"

namespace warden::agent {
namespace {

using Json = nlohmann::json;

constexpr char kTestsMarker[] = "__WARDEN_TESTS__";
constexpr char kVerifyMarker[] = "__WARDEN_VERIFY__";
constexpr char kTestFile[] = "test_solution.py";
constexpr char kSolutionFile[] = "solution.py";
constexpr char kRolledBackNote[] =
    "(This step failed, so the session was rolled back to its state before it: the variables and files it "
    "changed are as they were. Do not rely on anything it did.)";
const std::set<std::string>& BuiltinTools() {
  static const auto* names = new std::set<std::string>{"execute_code", "write_file", "read_file", "list_files",
                                                       "apply_patch",  "run_tests",  "run_verification"};
  return *names;
}

std::string LanguageName(v1::Language language) {
  switch (language) {
    case v1::LANGUAGE_JAVASCRIPT: return "javascript";
    case v1::LANGUAGE_BASH: return "bash";
    default: return "python";
  }
}

v1::AgentMode ModeOf(const v1::RunAgentRequest& r) {
  return r.mode() == v1::AGENT_MODE_UNSPECIFIED ? v1::AGENT_MODE_SOLVE : r.mode();
}

// A Python string literal (JSON's escapes are Python's).
std::string PyString(const std::string& s) { return Json(s).dump(-1, ' ', false, Json::error_handler_t::replace); }

// The harness cell that runs pytest in the workspace in a fresh process and
// reports each test (from its JUnit XML) on a marker line.
std::string PytestCell() {
  return absl::StrCat(R"PY(def __warden_pytest():
    import json, os, subprocess, sys, xml.etree.ElementTree as ET
    report = "/tmp/.warden-pytest.xml"
    if os.path.exists(report):
        os.remove(report)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-o", "junit_family=xunit1", "--junitxml=" + report],
                          capture_output=True, text=True)
    tests = []
    if os.path.exists(report):
        for case in ET.parse(report).getroot().iter("testcase"):
            file = case.get("file") or (case.get("classname", "").split(".")[0] + ".py")
            outcome, message = "passed", ""
            for tag, name in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
                node = case.find(tag)
                if node is not None:
                    outcome, message = name, (node.get("message") or node.text or "")[:1000]
                    break
            tests.append({"name": file + "::" + case.get("name", ""), "outcome": outcome, "message": message})
    print(proc.stdout[-6000:] + proc.stderr[-2000:])
    print(")PY", kTestsMarker, R"PY(" + json.dumps({"exit": proc.returncode, "tests": tests}))
__warden_pytest()
del __warden_pytest
)PY");
}

std::string VerifyCell(const std::string& command) {
  return absl::StrCat(R"PY(def __warden_verify():
    import json, subprocess
    proc = subprocess.run()PY", PyString(command), R"PY(, shell=True, capture_output=True, text=True)
    print((proc.stdout + proc.stderr)[-6000:])
    print(")PY", kVerifyMarker, R"PY(" + json.dumps({"exit": proc.returncode}))
__warden_verify()
del __warden_verify
)PY");
}

// Takes the marker line out of the cell's stdout and parses it.
std::optional<Json> TakeMarker(v1::ExecuteResponse* result, const char* marker) {
  std::string* out = result->mutable_stdout();
  const size_t at = out->rfind(marker);
  if (at == std::string::npos) return std::nullopt;
  size_t end = out->find('\n', at);
  if (end == std::string::npos) end = out->size();
  Json j = Json::parse(out->substr(at + strlen(marker), end - at - strlen(marker)), nullptr, false);
  out->erase(at, end - at + (end < out->size() ? 1 : 0));
  if (j.is_discarded()) return std::nullopt;
  return j;
}

int CountBefore(const std::string& text, const char* word) {
  // pytest's "3 failed, 2 passed" and unittest-ish "2 errors".
  std::regex re(absl::StrCat("(\\d+) ", word));
  int total = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) {
    int n = 0;
    if (absl::SimpleAtoi((*it)[1].str(), &n)) total = n;  // the summary line comes last
  }
  return total;
}

bool SafeRelativePath(const std::string& path) {
  if (path.empty() || path.front() == '/') return false;
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part == ".." || part.empty()) return false;
  }
  return true;
}

std::string ToolList(const std::vector<ToolSpec>& tools) {
  std::vector<std::string> names;
  for (const ToolSpec& t : tools) names.push_back(t.name);
  return absl::StrJoin(names, ", ");
}

}  // namespace

absl::Status ValidateAgentRequest(const v1::RunAgentRequest& r, const LoopOptions& o) {
  const v1::AgentMode mode = ModeOf(r);
  if (!v1::AgentMode_IsValid(r.mode())) return absl::InvalidArgumentError("unknown agent mode");
  if (r.task().empty() && mode != v1::AGENT_MODE_DEBUG && mode != v1::AGENT_MODE_TEST) {
    return absl::InvalidArgumentError("the task is empty: say what the agent should do");
  }
  const bool python = r.language() == v1::LANGUAGE_UNSPECIFIED || r.language() == v1::LANGUAGE_PYTHON;
  if ((mode == v1::AGENT_MODE_TEST || mode == v1::AGENT_MODE_TDD || mode == v1::AGENT_MODE_REPAIR) && !python) {
    return absl::InvalidArgumentError("test, tdd and repair modes run pytest or a shell command from Python: "
                                      "use language python");
  }
  if (r.rollback_failed_steps() && !python) {
    return absl::InvalidArgumentError(
        "rollback_failed_steps needs language python: rolling back forks the session, and only Python's "
        "interpreter state can be copied (JavaScript and bash sessions cannot be forked)");
  }
  if ((mode == v1::AGENT_MODE_TEST || mode == v1::AGENT_MODE_DEBUG) && r.code().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(mode == v1::AGENT_MODE_TEST ? "test" : "debug",
                                                   " mode needs `code`: the code to ",
                                                   mode == v1::AGENT_MODE_TEST ? "test" : "fix"));
  }
  if (mode == v1::AGENT_MODE_REPAIR && r.verify_command().empty()) {
    return absl::InvalidArgumentError("repair mode needs verify_command, e.g. \"python3 -m pytest -q\"");
  }
  if (r.budget().max_iterations() < 0 || r.budget().max_iterations() > o.max_iterations) {
    return absl::InvalidArgumentError(
        absl::StrCat("budget.max_iterations must be 0 (the default) to ", o.max_iterations));
  }
  if (r.budget().max_wall_ms() < 0 || r.budget().max_wall_ms() > o.max_wall_ms) {
    return absl::InvalidArgumentError(absl::StrCat("budget.max_wall_ms must be 0 (the default) to ", o.max_wall_ms));
  }
  if (r.budget().max_tokens() < 0 || r.budget().max_tokens() > o.max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("budget.max_tokens must be 0 (the default) to ", o.max_tokens));
  }
  if (r.max_response_tokens() < 0) return absl::InvalidArgumentError("max_response_tokens must not be negative");
  std::set<std::string> names;
  static const std::regex kName("[a-zA-Z0-9_-]{1,64}");
  for (const v1::ClientFunction& f : r.functions()) {
    if (!std::regex_match(f.name(), kName)) {
      return absl::InvalidArgumentError(absl::StrCat("function name '", f.name(), "' must match [a-zA-Z0-9_-]{1,64}"));
    }
    if (BuiltinTools().count(f.name()) || !names.insert(f.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat("function name '", f.name(), "' is taken: rename it"));
    }
    if (!f.parameters_json().empty()) {
      Json schema = Json::parse(f.parameters_json(), nullptr, false);
      if (!schema.is_object()) {
        return absl::InvalidArgumentError(
            absl::StrCat("function ", f.name(), ": parameters_json must be a JSON Schema object"));
      }
    }
  }
  for (const v1::File& f : r.files()) {
    if (!SafeRelativePath(f.path())) {
      return absl::InvalidArgumentError(absl::StrCat("file path '", f.path(), "' must be relative, without '..'"));
    }
  }
  return absl::OkStatus();
}

AgentRun::AgentRun(LlmClient& llm, ExecutorPort& executor, LoopOptions options, v1::RunAgentRequest request,
                   EmitFn emit, FunctionFn call_function, RunControl* control)
    : llm_(llm),
      executor_(executor),
      options_(options),
      request_(std::move(request)),
      mode_(ModeOf(request_)),
      emit_(std::move(emit)),
      call_function_(std::move(call_function)),
      control_(control) {
  native_tools_ = options_.tools != LoopOptions::Tools::kText;
}

absl::StatusOr<v1::FinalEvent> AgentRun::Run() {
  start_ = absl::Now();
  const v1::AgentBudget& b = request_.budget();
  budget_.iterations = b.max_iterations() > 0 ? b.max_iterations() : options_.default_max_iterations;
  budget_.wall = absl::Milliseconds(b.max_wall_ms() > 0 ? b.max_wall_ms() : options_.default_max_wall_ms);
  budget_.tokens = b.max_tokens() > 0 ? b.max_tokens() : options_.default_max_tokens;

  const v1::Language language =
      request_.language() == v1::LANGUAGE_UNSPECIFIED ? v1::LANGUAGE_PYTHON : request_.language();
  ASSIGN_OR_RETURN(session_id_, executor_.CreateSession(language, request_.cell_limits()));
  absl::StatusOr<std::string> first = SetUp();
  if (first.ok()) {
    messages_.push_back({"system", SystemPrompt(), {}, ""});
    messages_.push_back({"user", *first, {}, ""});
    Loop();
  } else if (control_->cancelled()) {
    Finish(v1::STOP_REASON_CANCELLED, "the client cancelled the run", "");
  } else {
    fault_ = first.status();
  }
  const bool keep = request_.keep_session() && !control_->cancelled() && fault_.ok();
  if (!keep) (void)executor_.CloseSession(session_id_);
  if (!fault_.ok()) return fault_;
  if (keep) final_.set_session_id(session_id_);
  v1::AgentEvent event;
  *event.mutable_final() = final_;
  emit_(std::move(event));
  return final_;
}

absl::StatusOr<std::string> AgentRun::SetUp() {
  for (const v1::File& f : request_.files()) RETURN_IF_ERROR(executor_.WriteFile(session_id_, f.path(), f.content()));
  std::string task = request_.task();
  switch (mode_) {
    case v1::AGENT_MODE_TEST:
      RETURN_IF_ERROR(executor_.WriteFile(session_id_, kSolutionFile, request_.code()));
      return absl::StrCat("Write pytest unit tests for the code in ", kSolutionFile,
                          " (import it with `from solution import ...`). Cover normal cases, edge cases and errors; "
                          "a test that exposes a bug in the code should fail, do not change the code under test.",
                          task.empty() ? "" : absl::StrCat("\n\nAlso: ", task), "\n\n", kSolutionFile,
                          ":\n```python\n", request_.code(), "\n```");
    case v1::AGENT_MODE_DEBUG: {
      ASSIGN_OR_RETURN(v1::ExecuteResponse result, RunCell(request_.code()));
      EmitExecution("reproduce", request_.code(), result, Succeeded(result));
      return absl::StrCat("This code ", request_.error().empty() ? "is reported to fail" : "fails", ":\n```",
                          LanguageName(request_.language()), "\n", request_.code(), "\n```\n",
                          request_.error().empty() ? "" : absl::StrCat("The reported error:\n", request_.error(), "\n"),
                          "\nRunning it in your session gave:\n",
                          FormatObservation(result, options_.max_observation_bytes),
                          task.empty() ? "" : absl::StrCat("\nContext: ", task, "\n"),
                          "\nFind the root cause, fix the code, run the fixed code to prove it works, then explain "
                          "what was wrong.");
    }
    case v1::AGENT_MODE_TDD:
      return absl::StrCat("Specification:\n", task, "\n\nWork test-first: write pytest tests for the specification to ",
                          kTestFile, " first (they will fail: nothing is implemented yet), then implement it in ",
                          kSolutionFile, " until every test passes.");
    case v1::AGENT_MODE_REPAIR: {
      ASSIGN_OR_RETURN(std::vector<std::string> files, executor_.ListFiles(session_id_));
      std::string observation = RunVerification(&score_);
      if (control_->cancelled()) return absl::CancelledError("cancelled");
      std::string allowed = request_.allowed_paths().empty()
                                ? std::string("any file in the workspace")
                                : absl::StrJoin(request_.allowed_paths(), ", ");
      return absl::StrCat("Task: ", task, "\n\nThe workspace holds:\n  ", absl::StrJoin(files, "\n  "),
                          "\n\nThe verification command is `", request_.verify_command(), "`. It currently gives:\n",
                          observation, "\nRead the files you need, then change them with unified diffs (apply_patch) "
                          "until verification passes. You may change only: ", allowed,
                          ". A patch that makes verification worse is rolled back.");
    }
    default:
      return task;
  }
}

std::string AgentRun::SystemPrompt() const {
  const std::string language = LanguageName(request_.language());
  std::string prompt = absl::StrCat(
      "You are a careful software engineer working in a sandboxed ", language,
      " session (a persistent interpreter, like a Jupyter kernel: variables, imports and files persist between "
      "executions; the working directory is the workspace). Work in small steps: write code, run it, read the "
      "result, fix what is wrong. Do not guess outputs: run code to find out.");
  switch (mode_) {
    case v1::AGENT_MODE_TEST:
      absl::StrAppend(&prompt, " Your job is to write pytest tests. Write them to ", kTestFile,
                      " with write_file; they run automatically and you get each test's result. When the tests "
                      "are right, answer with a short report of what passes and what fails, without code.");
      break;
    case v1::AGENT_MODE_DEBUG:
      absl::StrAppend(&prompt, " Your job is to debug: find the root cause of the failure, fix it, run the fixed "
                               "code to prove it works, then answer with what was wrong and how you fixed it.");
      break;
    case v1::AGENT_MODE_TDD:
      absl::StrAppend(&prompt, " Work test-first. Write the tests to ", kTestFile, " before any implementation, "
                      "then the implementation to ", kSolutionFile,
                      " (tests run after every write_file). When all tests pass, answer with a short summary.");
      break;
    case v1::AGENT_MODE_REPAIR:
      absl::StrAppend(&prompt, " You are repairing a code base. Read files with read_file, change them only with "
                               "apply_patch (unified diffs with ---/+++ headers and @@ hunks, context lines exact), "
                               "never whole rewrites. Verification runs after each patch. When it passes, answer "
                               "with a summary of the changes.");
      break;
    default:
      absl::StrAppend(&prompt, " When the task is done and your last execution succeeded, answer with the final "
                               "answer and no further code.");
  }
  if (!native_tools_) {
    if (mode_ == v1::AGENT_MODE_REPAIR) {
      absl::StrAppend(&prompt, "\n\nTo change files, write a patch in a ```diff fenced block. To read a file, "
                               "write a ```python block that prints it. Each block is carried out and you get the "
                               "results.");
    } else {
      absl::StrAppend(&prompt, "\n\nTo run code, put it in a ```", language,
                      " fenced block (or <execute_python>...</execute_python>). To write a file instead, make the "
                      "block's first line `# file: PATH`. Every block in your reply is carried out and you get "
                      "the results. When you are done, reply with the answer and no code blocks.");
    }
  }
  return prompt;
}

std::vector<ToolSpec> AgentRun::Tools() const {
  std::vector<ToolSpec> tools;
  const Json path_param = {{"type", "string"}, {"description", "path relative to the workspace"}};
  if (mode_ != v1::AGENT_MODE_REPAIR) {
    tools.push_back({"execute_code",
                     absl::StrCat("Run code in the persistent ", LanguageName(request_.language()),
                                  " session and get its stdout, stderr, result value and error."),
                     {{"type", "object"},
                      {"properties",
                       {{"code", {{"type", "string"}, {"description", "the code to run"}}},
                        {"language", {{"type", "string"}, {"enum", {LanguageName(request_.language())}}}}}},
                      {"required", {"code"}}}});
    tools.push_back({"write_file",
                     mode_ == v1::AGENT_MODE_TEST || mode_ == v1::AGENT_MODE_TDD
                         ? "Write a file in the workspace; afterwards the tests run and you get each result."
                         : "Write a file in the workspace.",
                     {{"type", "object"},
                      {"properties", {{"path", path_param}, {"content", {{"type", "string"}}}}},
                      {"required", {"path", "content"}}}});
  }
  tools.push_back({"read_file", "Read a file from the workspace.",
                   {{"type", "object"}, {"properties", {{"path", path_param}}}, {"required", {"path"}}}});
  tools.push_back({"list_files", "List the files in the workspace.", {{"type", "object"}, {"properties", Json::object()}}});
  if (mode_ == v1::AGENT_MODE_TEST || mode_ == v1::AGENT_MODE_TDD) {
    tools.push_back({"run_tests", "Run pytest in the workspace and get each test's result.",
                     {{"type", "object"}, {"properties", Json::object()}}});
  }
  if (mode_ == v1::AGENT_MODE_REPAIR) {
    tools.push_back({"apply_patch",
                     "Change files with a unified diff (--- a/PATH, +++ b/PATH, @@ hunks; --- /dev/null creates a "
                     "file). Verification runs afterwards; a patch that makes it worse is rolled back.",
                     {{"type", "object"},
                      {"properties", {{"patch", {{"type", "string"}, {"description", "the unified diff"}}}}},
                      {"required", {"patch"}}}});
    tools.push_back({"run_verification", "Run the verification command and get its output.",
                     {{"type", "object"}, {"properties", Json::object()}}});
  }
  for (const v1::ClientFunction& f : request_.functions()) {
    Json schema = f.parameters_json().empty() ? Json{{"type", "object"}, {"properties", Json::object()}}
                                              : Json::parse(f.parameters_json(), nullptr, false);
    tools.push_back({f.name(), f.description(), schema});
  }
  return tools;
}

absl::StatusOr<ChatResponse> AgentRun::Ask(const ChatRequest& request) {
  return llm_.Complete(
      request,
      [this](absl::string_view text) {
        v1::AgentEvent event;
        event.mutable_delta()->set_iteration(iteration_);
        event.mutable_delta()->set_text(std::string(text));
        emit_(std::move(event));
      },
      control_, [this](const std::string& what) { EmitError(absl::StrCat("LLM: ", what)); });
}

void AgentRun::Loop() {
  while (!stopped_) {
    if (control_->cancelled()) return Finish(v1::STOP_REASON_CANCELLED, "the client cancelled the run", "");
    if (iteration_ >= budget_.iterations) {
      return AskForFinalAnswer(v1::STOP_REASON_MAX_ITERATIONS,
                               absl::StrCat("the budget of ", budget_.iterations, " turns is used up"));
    }
    if (absl::Now() - start_ >= budget_.wall) {
      return AskForFinalAnswer(v1::STOP_REASON_MAX_TIME,
                               absl::StrCat("the time budget of ", absl::FormatDuration(budget_.wall), " is used up"));
    }
    if (prompt_tokens_ + completion_tokens_ >= budget_.tokens) {
      return AskForFinalAnswer(v1::STOP_REASON_MAX_TOKENS,
                               absl::StrCat("the budget of ", budget_.tokens, " tokens is used up"));
    }
    ++iteration_;
    ChatRequest chat;
    chat.messages = messages_;
    if (native_tools_) chat.tools = Tools();
    chat.model = request_.model();
    chat.max_tokens = request_.max_response_tokens();
    absl::StatusOr<ChatResponse> reply = Ask(chat);
    if (!reply.ok() && options_.tools == LoopOptions::Tools::kAuto && native_tools_ &&
        reply.status().code() == absl::StatusCode::kInvalidArgument &&
        absl::StrContains(absl::AsciiStrToLower(reply.status().message()), "tool")) {
      // The server (or model) does not do tool calling: fall back to text.
      EmitError(absl::StrCat("the LLM server refused tool calling (", reply.status().message(),
                             "); continuing with code in fenced blocks"));
      native_tools_ = false;
      messages_.front().content = SystemPrompt();
      chat.messages = messages_;
      chat.tools.clear();
      reply = Ask(chat);
    }
    if (!reply.ok()) {
      if (control_->cancelled() || reply.status().code() == absl::StatusCode::kCancelled) {
        return Finish(v1::STOP_REASON_CANCELLED, "the client cancelled the run", "");
      }
      EmitError(std::string(reply.status().message()));
      return Finish(v1::STOP_REASON_LLM_ERROR, std::string(reply.status().message()), "");
    }
    prompt_tokens_ += reply->usage.prompt;
    completion_tokens_ += reply->usage.completion;
    for (size_t i = 0; i < reply->tool_calls.size(); ++i) {
      if (reply->tool_calls[i].id.empty()) reply->tool_calls[i].id = absl::StrCat("call_", iteration_, "_", i);
    }
    {
      v1::AgentEvent event;
      v1::ModelMessage* m = event.mutable_message();
      m->set_iteration(iteration_);
      m->set_content(reply->content);
      for (const ToolCall& c : reply->tool_calls) {
        v1::ToolCall* t = m->add_tool_calls();
        t->set_id(c.id);
        t->set_name(c.name);
        t->set_arguments(c.arguments);
      }
      m->mutable_usage()->set_prompt_tokens(reply->usage.prompt);
      m->mutable_usage()->set_completion_tokens(reply->usage.completion);
      m->mutable_usage()->set_total_tokens(reply->usage.prompt + reply->usage.completion);
      emit_(std::move(event));
    }
    messages_.push_back({"assistant", reply->content, reply->tool_calls, ""});

    bool acted = false;
    action_failure_.clear();
    if (!reply->tool_calls.empty()) {
      model_used_tools_ = true;
      acted = true;
      for (const ToolCall& call : reply->tool_calls) {
        std::string observation = Invoke(call.name, call.arguments, call.id);
        if (control_->cancelled()) return Finish(v1::STOP_REASON_CANCELLED, "the client cancelled the run", "");
        if (stopped_) return;
        messages_.push_back({"tool", observation, {}, call.id});
      }
    } else {
      const bool text_actions = options_.tools == LoopOptions::Tools::kText || !native_tools_ ||
                                (options_.tools == LoopOptions::Tools::kAuto && !model_used_tools_);
      if (text_actions) {
        std::vector<CodeBlock> blocks = ExtractCodeBlocks(reply->content);
        // A final answer that repeats code which already ran is an answer.
        const bool all_done_before =
            !blocks.empty() && Verified() && std::all_of(blocks.begin(), blocks.end(), [&](const CodeBlock& b) {
              return b.kind == CodeBlock::Kind::kCode && succeeded_code_.count(b.text);
            });
        if (!blocks.empty() && !all_done_before) {
          acted = true;
          std::string results = TextBlocksAsActions(reply->content);
          if (control_->cancelled()) return Finish(v1::STOP_REASON_CANCELLED, "the client cancelled the run", "");
          if (stopped_) return;
          messages_.push_back({"user", results, {}, ""});
        }
      }
    }
    if (!acted) {
      if (Verified()) return Finish(v1::STOP_REASON_DONE, "", reply->content);
      messages_.push_back({"user", NotVerifiedYet(), {}, ""});
      continue;
    }
    // Stagnation: the same error after every attempt.
    if (action_failure_.empty()) {
      previous_signature_.clear();
      repeats_ = 0;
    } else {
      repeats_ = action_failure_ == previous_signature_ ? repeats_ + 1 : 1;
      previous_signature_ = action_failure_;
      if (repeats_ >= 3) {
        EmitError(absl::StrCat("the same error three times in a row: ", action_failure_));
        return Finish(v1::STOP_REASON_STUCK, absl::StrCat("the same error three times in a row: ", action_failure_),
                      reply->content);
      }
      if (repeats_ == 2) {
        const std::string nudge = absl::StrCat(
            "The same error happened twice in a row (", action_failure_,
            "). Repeating the approach will not work: step back, find the root cause, and try a different approach.");
        EmitError(nudge);
        messages_.push_back({"user", nudge, {}, ""});
      }
    }
  }
}

std::string AgentRun::TextBlocksAsActions(const std::string& content) {
  std::vector<std::string> results;
  int n = 0;
  for (const CodeBlock& block : ExtractCodeBlocks(content)) {
    ++n;
    std::string observation;
    if (block.kind == CodeBlock::Kind::kPatch) {
      observation = Invoke("apply_patch", Json{{"patch", block.text}}.dump());
    } else if (block.kind == CodeBlock::Kind::kFile) {
      observation = mode_ == v1::AGENT_MODE_REPAIR
                        ? Failure("whole-file rewrite", "error: in repair mode change files with ```diff patches")
                        : Invoke("write_file", Json{{"path", block.path}, {"content", block.text}}.dump());
    } else if (mode_ == v1::AGENT_MODE_TEST) {
      observation = Invoke("write_file", Json{{"path", kTestFile}, {"content", block.text}}.dump());
    } else if (mode_ == v1::AGENT_MODE_TDD) {
      observation = Failure("block without a file",
                            absl::StrCat("error: start each block with `# file: ", kTestFile, "` or `# file: ",
                                         kSolutionFile, "`"));
    } else if (mode_ == v1::AGENT_MODE_REPAIR) {
      // Reading and exploring is fine; changes go through patches.
      observation = ExecuteCode(Json{{"code", block.text}});
    } else {
      observation = Invoke("execute_code", Json{{"code", block.text}}.dump());
    }
    if (stopped_ || control_->cancelled()) return "";
    results.push_back(absl::StrCat("[block ", n, "]\n", observation));
  }
  return absl::StrCat("Results:\n\n", absl::StrJoin(results, "\n"));
}

std::string AgentRun::Failure(std::string signature, std::string observation) {
  action_failure_ = std::move(signature);
  return observation;
}

std::string AgentRun::Invoke(const std::string& name, const std::string& arguments, const std::string& call_id) {
  action_failure_.clear();
  const std::vector<ToolSpec> tools = Tools();
  if (std::none_of(tools.begin(), tools.end(), [&](const ToolSpec& t) { return t.name == name; })) {
    EmitError(absl::StrCat("the model called an unknown tool '", name, "'"));
    return Failure(absl::StrCat("unknown tool ", name),
                   absl::StrCat("error: there is no tool named '", name, "'; the tools are: ", ToolList(Tools())));
  }
  for (const v1::ClientFunction& f : request_.functions()) {
    if (f.name() == name) {
      return CallFunction(call_id.empty() ? absl::StrCat("call_", iteration_, "_", name) : call_id, name, arguments);
    }
  }
  Json args = ParseToolArguments(arguments.empty() ? "{}" : arguments);
  if (!args.is_object()) {
    std::string why;
    try {
      Json ignored = Json::parse(arguments);
      (void)ignored;
      why = "they are not a JSON object";
    } catch (const Json::exception& e) {  // parse_error, or out_of_range for a number too large
      why = e.what();
    }
    EmitError(absl::StrCat("invalid arguments for ", name, ": ", why));
    return Failure(absl::StrCat("invalid arguments for ", name),
                   absl::StrCat("error: the arguments of ", name, " are not valid JSON (", why,
                                "). Call it again with a JSON object, e.g. {\"code\": \"print(1)\"}; remember to "
                                "escape newlines and quotes inside strings."));
  }
  if (name == "execute_code") return ExecuteCode(args);
  if (name == "write_file") return WriteFile(args);
  if (name == "read_file") return ReadFile(args);
  if (name == "list_files") return ListFiles();
  if (name == "apply_patch") return ApplyPatch(args);
  if (name == "run_tests") return RunTests();
  if (name == "run_verification") {
    VerifyScore score;
    std::string observation = RunVerification(&score);
    score_ = score;
    return observation;
  }
  return Failure("unknown tool", "error: unknown tool");
}

absl::StatusOr<v1::ExecuteResponse> AgentRun::RunCell(const std::string& code) {
  return executor_.Execute(session_id_, code, request_.cell_limits(), control_);
}

void AgentRun::EmitExecution(const std::string& purpose, const std::string& code, const v1::ExecuteResponse& result,
                             bool succeeded, bool rolled_back) {
  v1::AgentEvent event;
  v1::CodeExecution* e = event.mutable_execution();
  e->set_iteration(iteration_);
  e->set_purpose(purpose);
  e->set_code(code);
  e->set_language(request_.language() == v1::LANGUAGE_UNSPECIFIED ? v1::LANGUAGE_PYTHON : request_.language());
  *e->mutable_result() = result;
  e->set_succeeded(succeeded);
  e->set_rolled_back(rolled_back);
  final_.add_code_blocks(code);
  *final_.add_outputs() = result;
  emit_(std::move(event));
}

void AgentRun::EmitError(const std::string& message) {
  v1::AgentEvent event;
  event.mutable_error()->set_iteration(iteration_);
  event.mutable_error()->set_message(message);
  emit_(std::move(event));
}

std::string AgentRun::ExecuteCode(const Json& args) {
  if (!args.contains("code") || !args["code"].is_string()) {
    return Failure("execute_code without code", "error: execute_code needs {\"code\": \"...\"}");
  }
  const std::string code = args["code"].get<std::string>();
  const std::string language = LanguageName(request_.language());
  if (args.contains("language") && args["language"].is_string()) {
    std::string asked = absl::AsciiStrToLower(args["language"].get<std::string>());
    const bool same = asked == language || (language == "python" && (asked == "py" || asked == "python3")) ||
                      (language == "javascript" && (asked == "js" || asked == "node")) ||
                      (language == "bash" && (asked == "sh" || asked == "shell"));
    if (!same) {
      return Failure("wrong language", absl::StrCat("error: this session runs ", language, ", not ", asked,
                                                    "; write the code in ", language));
    }
  }
  const std::optional<std::string> rollback_point = ForkBeforeStep();
  absl::StatusOr<v1::ExecuteResponse> result = RunCell(code);
  if (!result.ok()) {
    if (control_->cancelled()) {
      EndStep(rollback_point, /*failed=*/false);  // the run ends; its session is closed with it
      return "";
    }
    const bool rolled_back = EndStep(rollback_point, /*failed=*/true);
    EmitError(absl::StrCat("execution failed: ", result.status().message(),
                           rolled_back ? "; the session was rolled back to its state before this step" : ""));
    return Failure("warden failure", absl::StrCat("error: Warden could not run the code: ", result.status().message(),
                                                  rolled_back ? absl::StrCat("\n", kRolledBackNote) : ""));
  }
  const bool ok = Succeeded(*result);
  const bool rolled_back = EndStep(rollback_point, /*failed=*/!ok);
  EmitExecution("code", code, *result, ok, rolled_back);
  if (mode_ == v1::AGENT_MODE_SOLVE || mode_ == v1::AGENT_MODE_DEBUG) last_execution_ok_ = ok;
  if (ok) succeeded_code_.insert(code);
  std::string observation = FormatObservation(*result, options_.max_observation_bytes);
  if (rolled_back) absl::StrAppend(&observation, "\n", kRolledBackNote);
  return ok ? observation : Failure(ErrorSignature(*result), observation);
}

std::optional<std::string> AgentRun::ForkBeforeStep() {
  if (!request_.rollback_failed_steps()) return std::nullopt;
  absl::StatusOr<ExecutorPort::Fork> fork = executor_.ForkSession(session_id_);
  if (!fork.ok()) {
    EmitError(absl::StrCat("no rollback point for this step: the session could not be forked (",
                           fork.status().message(), "); it runs without one"));
    return std::nullopt;
  }
  if (!fork->left_out.empty()) {
    // Rolling back onto it would lose these too: not the failed step's doing.
    (void)executor_.CloseSession(fork->session_id);
    EmitError(absl::StrCat("no rollback point for this step: a fork could not copy ",
                           absl::StrJoin(fork->left_out, ", ",
                                         [](std::string* out, const auto& item) {
                                           absl::StrAppend(out, item.first, " (", item.second, ")");
                                         }),
                           "; it runs without one"));
    return std::nullopt;
  }
  return fork->session_id;
}

bool AgentRun::EndStep(const std::optional<std::string>& rollback_point, bool failed) {
  if (!rollback_point) return false;
  if (!failed) {
    (void)executor_.CloseSession(*rollback_point);
    return false;
  }
  (void)executor_.CloseSession(session_id_);  // the failed step's state goes with it
  session_id_ = *rollback_point;
  return true;
}

std::string AgentRun::WriteFile(const Json& args) {
  if (!args.contains("path") || !args["path"].is_string() || !args.contains("content") ||
      !args["content"].is_string()) {
    return Failure("write_file arguments", "error: write_file needs {\"path\": \"...\", \"content\": \"...\"}");
  }
  const std::string path = args["path"].get<std::string>();
  if (!SafeRelativePath(path)) return Failure("bad path", "error: the path must be relative, without '..'");
  const std::string base = path.substr(path.rfind('/') + 1);
  const bool is_test = absl::StartsWith(base, "test_") || absl::EndsWith(base, "_test.py");
  if (mode_ == v1::AGENT_MODE_TDD && !is_test && !tests_written_) {
    return Failure("tdd: implementation before tests",
                   absl::StrCat("error: test-driven development: write the tests first (", kTestFile,
                                "), see them fail, then implement"));
  }
  if (absl::Status s = executor_.WriteFile(session_id_, path, args["content"].get<std::string>()); !s.ok()) {
    return Failure("write failed", absl::StrCat("error: cannot write ", path, ": ", s.message()));
  }
  std::string observation = absl::StrCat("wrote ", path, " (", args["content"].get<std::string>().size(), " bytes)");
  if (mode_ == v1::AGENT_MODE_TEST || mode_ == v1::AGENT_MODE_TDD) {
    if (is_test) tests_written_ = true;
    else implementation_written_ = true;
    if (tests_written_) absl::StrAppend(&observation, "\n", RunTests());
  }
  return observation;
}

std::string AgentRun::ReadFile(const Json& args) {
  if (!args.contains("path") || !args["path"].is_string()) {
    return Failure("read_file arguments", "error: read_file needs {\"path\": \"...\"}");
  }
  const std::string path = args["path"].get<std::string>();
  absl::StatusOr<std::string> data = executor_.ReadFile(session_id_, path);
  if (!data.ok()) return Failure("read failed", absl::StrCat("error: cannot read ", path, ": ", data.status().message()));
  return Truncate(*data, options_.max_observation_bytes);
}

std::string AgentRun::ListFiles() {
  absl::StatusOr<std::vector<std::string>> files = executor_.ListFiles(session_id_);
  if (!files.ok()) return Failure("list failed", absl::StrCat("error: ", files.status().message()));
  return files->empty() ? "(the workspace is empty)" : absl::StrJoin(*files, "\n");
}

std::string AgentRun::RunTests() {
  absl::StatusOr<v1::ExecuteResponse> result = RunCell(PytestCell());
  if (!result.ok()) {
    if (control_->cancelled()) return "";
    return Failure("warden failure", absl::StrCat("error: Warden could not run the tests: ", result.status().message()));
  }
  std::optional<Json> report = TakeMarker(&*result, kTestsMarker);
  std::vector<v1::TestResult> tests;
  int exit_code = -1;
  if (report) {
    exit_code = report->value("exit", -1);
    for (const Json& t : (*report)["tests"]) {
      v1::TestResult r;
      r.set_name(t.value("name", ""));
      r.set_outcome(t.value("outcome", ""));
      r.set_message(t.value("message", ""));
      tests.push_back(std::move(r));
    }
  }
  const bool any_error = std::any_of(tests.begin(), tests.end(), [](auto& t) { return t.outcome() == "error"; });
  const bool all_passed = !tests.empty() && exit_code == 0 &&
                          std::all_of(tests.begin(), tests.end(), [](auto& t) { return t.outcome() == "passed"; });
  EmitExecution("tests", "python3 -m pytest -q", *result, all_passed);
  tests_ran_ = true;
  tests_ok_ = !tests.empty() && !any_error;
  tests_all_passed_ = all_passed;
  last_tests_ = tests;
  if (mode_ == v1::AGENT_MODE_TDD && tests_written_ && !implementation_written_ && !tests_failed_first_) {
    tests_failed_first_ = !all_passed;
  }
  std::string summary;
  for (const v1::TestResult& t : tests) {
    absl::StrAppend(&summary, absl::AsciiStrToUpper(t.outcome()), " ", t.name(),
                    t.message().empty() ? "" : absl::StrCat(": ", t.message().substr(0, 300)), "\n");
  }
  std::string observation = Truncate(
      absl::StrCat("pytest exit status ", exit_code, "\n", summary.empty() ? "no tests were collected\n" : summary,
                   "\noutput:\n", result->stdout(), result->stderr(),
                   result->error().name().empty() ? "" : absl::StrCat("error: ", result->error().name(), ": ",
                                                                        result->error().value(), "\n")),
      options_.max_observation_bytes);
  if (mode_ == v1::AGENT_MODE_TDD && tests_written_ && !implementation_written_ && !all_passed) {
    absl::StrAppend(&observation, "\nThe tests fail, as they should before the implementation exists. Now implement ",
                    kSolutionFile, ".");
  }
  // In test mode failing tests are findings; in tdd they are work to do.
  std::string failing;
  for (const v1::TestResult& t : tests) {
    if (t.outcome() == "error" || (mode_ == v1::AGENT_MODE_TDD && implementation_written_ && t.outcome() == "failed")) {
      absl::StrAppend(&failing, t.name(), ":", t.message().substr(0, 120), ";");
    }
  }
  if (tests.empty()) failing = absl::StrCat("no tests collected, exit ", exit_code);
  return failing.empty() ? observation : Failure(failing, observation);
}

std::string AgentRun::RunVerification(VerifyScore* score) {
  absl::StatusOr<v1::ExecuteResponse> result = RunCell(VerifyCell(request_.verify_command()));
  if (!result.ok()) {
    if (control_->cancelled()) return "";
    return Failure("warden failure", absl::StrCat("error: Warden could not run verification: ", result.status().message()));
  }
  std::optional<Json> report = TakeMarker(&*result, kVerifyMarker);
  score->exit_code = report ? report->value("exit", -1) : -1;
  score->passed = score->exit_code == 0;
  const std::string& out = result->stdout();
  score->failed = CountBefore(out, "failed") + CountBefore(out, "error");
  score->passed_count = CountBefore(out, "passed");
  if (!score->passed && score->failed == 0) score->failed = 1;
  EmitExecution("verify", request_.verify_command(), *result, score->passed);
  std::string observation = Truncate(absl::StrCat("$ ", request_.verify_command(), "\nexit status ", score->exit_code,
                                                  "\n", out, result->stderr()),
                                     options_.max_observation_bytes);
  if (score->passed) return observation;
  std::string tail(absl::StripAsciiWhitespace(out));
  if (size_t nl = tail.rfind('\n'); nl != std::string::npos) tail = tail.substr(nl + 1);
  return Failure(absl::StrCat("verification: ", tail.substr(0, 200)), observation);
}

std::optional<std::string> AgentRun::CurrentContent(const std::string& path) {
  absl::StatusOr<std::string> data = executor_.ReadFile(session_id_, path);
  if (!data.ok()) return std::nullopt;
  return *data;
}

absl::Status AgentRun::SetContent(const std::string& path, const std::optional<std::string>& content) {
  if (content) return executor_.WriteFile(session_id_, path, *content);
  absl::StatusOr<v1::ExecuteResponse> removed =
      executor_.Execute(session_id_, absl::StrCat("import os\nos.remove(", PyString(path), ")"), v1::Limits(), control_);
  if (!removed.ok()) return removed.status();
  if (!Succeeded(*removed)) return absl::InternalError(absl::StrCat("cannot remove ", path));
  return absl::OkStatus();
}

bool AgentRun::PathAllowed(const std::string& path) const {
  if (!SafeRelativePath(path)) return false;
  if (request_.allowed_paths().empty()) return true;
  for (const std::string& pattern : request_.allowed_paths()) {
    if (pattern == path) return true;
    if (!pattern.empty() && pattern.back() == '/' && absl::StartsWith(path, pattern)) return true;
    if (fnmatch(pattern.c_str(), path.c_str(), 0) == 0) return true;
  }
  return false;
}

std::string AgentRun::ApplyPatch(const Json& args) {
  if (!args.contains("patch") || !args["patch"].is_string()) {
    return Failure("apply_patch arguments", "error: apply_patch needs {\"patch\": \"<unified diff>\"}");
  }
  const std::string patch_text = args["patch"].get<std::string>();
  absl::StatusOr<std::vector<FilePatch>> patches = ParseUnifiedDiff(patch_text);
  if (!patches.ok()) {
    return Failure(absl::StrCat("bad patch: ", patches.status().message()),
                   absl::StrCat("error: the patch is not a valid unified diff: ", patches.status().message()));
  }
  std::vector<std::string> paths;
  for (const FilePatch& p : *patches) {
    for (const std::string& path : {p.old_path, p.new_path}) {
      if (path.empty()) continue;
      if (!PathAllowed(path)) {
        const std::string message = absl::StrCat(
            "error: the patch touches ", path, ", which this run may not change (allowed: ",
            request_.allowed_paths().empty() ? std::string("workspace files") : absl::StrJoin(request_.allowed_paths(), ", "),
            "); nothing was changed");
        EmitError(message.substr(7));
        return Failure(absl::StrCat("disallowed path ", path), message);
      }
    }
    paths.push_back(p.path());
  }
  // Apply everything in memory first: all or nothing.
  std::map<std::string, std::optional<std::string>> before, after;
  for (const FilePatch& p : *patches) {
    const std::string source = p.old_path.empty() ? p.new_path : p.old_path;
    if (!after.count(source)) before[source] = after[source] = CurrentContent(source);
    if (!p.new_path.empty() && p.new_path != source && !before.count(p.new_path)) {
      before[p.new_path] = CurrentContent(p.new_path);
    }
    absl::StatusOr<std::optional<std::string>> applied = ApplyFilePatch(p, after[source]);
    if (!applied.ok()) {
      return Failure(absl::StrCat("patch does not apply: ", applied.status().message()),
                     absl::StrCat("error: ", applied.status().message(), "; nothing was changed"));
    }
    if (p.new_path.empty() || p.new_path == source) {
      after[source] = *applied;
    } else {  // a rename
      after[source] = std::nullopt;
      after[p.new_path] = *applied;
    }
  }
  for (const auto& [path, content] : after) {
    if (!originals_.count(path)) originals_[path] = before[path];
    if (absl::Status s = SetContent(path, content); !s.ok()) {
      return Failure("write failed", absl::StrCat("error: ", s.message()));
    }
  }
  const VerifyScore old_score = score_;
  VerifyScore new_score;
  std::string verification = RunVerification(&new_score);
  if (control_->cancelled()) return "";
  const bool worse = (old_score.passed && !new_score.passed) || new_score.failed > old_score.failed ||
                     (new_score.failed == old_score.failed && new_score.passed_count < old_score.passed_count);
  v1::AgentEvent event;
  v1::FileChange* change = event.mutable_file_change();
  change->set_iteration(iteration_);
  for (const std::string& p : paths) change->add_paths(p);
  std::string diff;
  for (const auto& [path, content] : after) absl::StrAppend(&diff, MakeUnifiedDiff(path, before[path], content));
  change->set_diff(diff);
  if (worse) {
    for (const auto& [path, content] : before) (void)SetContent(path, content);
    const std::string reason =
        absl::StrCat("verification got worse (failures ", old_score.failed, " -> ", new_score.failed, ", passed ",
                     old_score.passed_count, " -> ", new_score.passed_count, ")");
    change->set_rolled_back(true);
    change->set_reason(reason);
    emit_(std::move(event));
    return Failure(absl::StrCat("rolled back: ", action_failure_),
                   absl::StrCat("The patch applied, but ", reason, ", so it was rolled back; the files are as before.\n",
                                verification));
  }
  emit_(std::move(event));
  score_ = new_score;
  return absl::StrCat("patched ", absl::StrJoin(paths, ", "), "\n", verification);
}

std::string AgentRun::CallFunction(const std::string& call_id, const std::string& name, const std::string& arguments) {
  v1::FunctionCall call;
  call.set_call_id(call_id);
  call.set_name(name);
  call.set_arguments(arguments);
  v1::AgentEvent event;
  *event.mutable_function_call() = call;
  emit_(std::move(event));
  absl::StatusOr<v1::FunctionResult> result = call_function_ ? call_function_(call)
                                                             : absl::UnavailableError("no caller to answer");
  if (!result.ok()) {
    if (control_->cancelled()) return "";
    EmitError(absl::StrCat("function ", name, ": ", result.status().message()));
    return Failure(absl::StrCat("function ", name, " unanswered"),
                   absl::StrCat("error: the function ", name, " did not answer: ", result.status().message()));
  }
  if (result->is_error()) return Failure(absl::StrCat(name, ": ", result->content().substr(0, 200)),
                                         absl::StrCat("error: ", result->content()));
  return result->content();
}

bool AgentRun::Verified() const {
  switch (mode_) {
    case v1::AGENT_MODE_TEST: return tests_ok_;
    case v1::AGENT_MODE_TDD: return tests_all_passed_ && implementation_written_;
    case v1::AGENT_MODE_REPAIR: return score_.passed;
    default: return last_execution_ok_.value_or(false);
  }
}

std::string AgentRun::NotVerifiedYet() const {
  switch (mode_) {
    case v1::AGENT_MODE_TEST:
      return tests_ran_ ? "Some tests could not run (errors, or none collected): fix the test code."
                        : absl::StrCat("No tests have run yet: write them to ", kTestFile, ".");
    case v1::AGENT_MODE_TDD:
      return !tests_written_ ? absl::StrCat("Write the tests to ", kTestFile, " first.")
                             : absl::StrCat("Not every test passes yet: implement ", kSolutionFile,
                                            " until they all do.");
    case v1::AGENT_MODE_REPAIR:
      return "Verification does not pass yet: keep reading and patching until it does.";
    default:
      return last_execution_ok_.has_value()
                 ? "Your last execution failed: fix the code and run it again before you answer."
                 : "Nothing has been run yet: run code that does the task before you answer.";
  }
}

void AgentRun::AskForFinalAnswer(v1::StopReason reason, const std::string& why) {
  EmitError(absl::StrCat("stopping: ", why));
  std::vector<ChatMessage> messages = messages_;
  messages.push_back({"user",
                      absl::StrCat("Stop here: ", why, ". Without calling tools or writing more code, give your best "
                                   "final answer from what you have found so far, and say what is unverified."),
                      {},
                      ""});
  ChatRequest chat;
  chat.messages = std::move(messages);
  chat.model = request_.model();
  chat.max_tokens = request_.max_response_tokens();
  absl::StatusOr<ChatResponse> reply = Ask(chat);
  std::string answer;
  std::string detail = why;
  if (reply.ok()) {
    prompt_tokens_ += reply->usage.prompt;
    completion_tokens_ += reply->usage.completion;
    answer = reply->content;
    v1::AgentEvent event;
    event.mutable_message()->set_iteration(iteration_);
    event.mutable_message()->set_content(answer);
    emit_(std::move(event));
  } else if (control_->cancelled()) {
    return Finish(v1::STOP_REASON_CANCELLED, "the client cancelled the run", "");
  } else {
    // The budget ended the run; the model server's failure is why there is
    // no answer, and says so where the stop is read.
    EmitError(absl::StrCat("no final answer: ", reply.status().message()));
    absl::StrAppend(&detail, "; no final answer: ", reply.status().message());
  }
  Finish(reason, detail, answer);
}

std::string AgentRun::CombinedDiff() {
  std::string diff;
  for (const auto& [path, original] : originals_) absl::StrAppend(&diff, MakeUnifiedDiff(path, original, CurrentContent(path)));
  return diff;
}

void AgentRun::Finish(v1::StopReason reason, std::string detail, std::string answer) {
  stopped_ = true;
  final_.set_answer(std::move(answer));
  final_.set_stop_reason(reason);
  final_.set_stop_detail(std::move(detail));
  final_.set_iterations(iteration_);
  final_.mutable_usage()->set_prompt_tokens(prompt_tokens_);
  final_.mutable_usage()->set_completion_tokens(completion_tokens_);
  final_.mutable_usage()->set_total_tokens(prompt_tokens_ + completion_tokens_);
  final_.set_all_succeeded(reason == v1::STOP_REASON_DONE && Verified());
  for (const v1::TestResult& t : last_tests_) *final_.add_tests() = t;
  if (mode_ == v1::AGENT_MODE_TDD) final_.set_tests_failed_first(tests_failed_first_.value_or(false));
  if (mode_ == v1::AGENT_MODE_REPAIR && reason != v1::STOP_REASON_CANCELLED) final_.set_diff(CombinedDiff());
}

}  // namespace warden::agent
