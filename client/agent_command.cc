// `warden agent`: one Agent.Run, printed as it streams - model text as it
// arrives, each execution with its code and output, errors, and the final
// answer - or, with --json, one JSON object per event per line.
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cancel_on_signal.h"
#include "client/cli_output.h"
#include "client/commands.h"
#include "client/connection.h"
#include "client/exit_codes.h"

namespace warden::cli {
namespace {

constexpr absl::Duration kAgentDeadline = absl::Hours(2);  // the server's budgets end runs sooner

std::string StopReasonName(v1::StopReason reason) {
  std::string name = v1::StopReason_Name(reason);
  return name.rfind("STOP_REASON_", 0) == 0 ? name.substr(12) : name;
}

nlohmann::json UsageJson(const v1::TokenUsage& u) {
  return {{"prompt_tokens", u.prompt_tokens()},
          {"completion_tokens", u.completion_tokens()},
          {"total_tokens", u.total_tokens()}};
}

nlohmann::json EventToJson(const v1::AgentEvent& event) {
  using Json = nlohmann::json;
  switch (event.event_case()) {
    case v1::AgentEvent::kMessage: {
      Json calls = Json::array();
      for (const auto& c : event.message().tool_calls()) {
        calls.push_back({{"id", c.id()}, {"name", c.name()}, {"arguments", c.arguments()}});
      }
      return {{"type", "message"},
              {"iteration", event.message().iteration()},
              {"content", event.message().content()},
              {"tool_calls", calls},
              {"usage", UsageJson(event.message().usage())}};
    }
    case v1::AgentEvent::kDelta:
      return {{"type", "delta"}, {"iteration", event.delta().iteration()}, {"text", event.delta().text()}};
    case v1::AgentEvent::kExecution: {
      const auto& e = event.execution();
      return {{"type", "execution"},     {"iteration", e.iteration()}, {"purpose", e.purpose()},
              {"code", e.code()},        {"language", LanguageName(e.language())},
              {"succeeded", e.succeeded()}, {"rolled_back", e.rolled_back()},
              {"result", ExecuteResponseToJson(e.result())}};
    }
    case v1::AgentEvent::kError:
      return {{"type", "error"}, {"iteration", event.error().iteration()}, {"message", event.error().message()}};
    case v1::AgentEvent::kFunctionCall:
      return {{"type", "function_call"},
              {"call_id", event.function_call().call_id()},
              {"name", event.function_call().name()},
              {"arguments", event.function_call().arguments()}};
    case v1::AgentEvent::kFileChange: {
      const auto& c = event.file_change();
      return {{"type", "file_change"}, {"iteration", c.iteration()}, {"paths", c.paths()},
              {"diff", c.diff()},      {"rolled_back", c.rolled_back()}, {"reason", c.reason()}};
    }
    case v1::AgentEvent::kFinal: {
      const auto& f = event.final();
      Json outputs = Json::array();
      for (const auto& o : f.outputs()) outputs.push_back(ExecuteResponseToJson(o));
      Json tests = Json::array();
      for (const auto& t : f.tests()) {
        tests.push_back({{"name", t.name()}, {"outcome", t.outcome()}, {"message", t.message()}});
      }
      Json out = {{"type", "final"},
                  {"answer", f.answer()},
                  {"all_succeeded", f.all_succeeded()},
                  {"iterations", f.iterations()},
                  {"stop_reason", StopReasonName(f.stop_reason())},
                  {"stop_detail", f.stop_detail()},
                  {"code_blocks", f.code_blocks()},
                  {"outputs", outputs},
                  {"usage", UsageJson(f.usage())},
                  {"tests", tests},
                  {"diff", f.diff()},
                  {"session_id", f.session_id()}};
      return out;
    }
    default:
      return {{"type", "unknown"}};
  }
}

// People: text as it streams, then each step in a few lines.
class TextPrinter {
 public:
  TextPrinter(std::ostream& out, std::ostream& err) : out_(out), err_(err) {}

  void Print(const v1::AgentEvent& event) {
    switch (event.event_case()) {
      case v1::AgentEvent::kDelta:
        out_ << event.delta().text();
        mid_line_ = !event.delta().text().empty() && event.delta().text().back() != '\n';
        streamed_ = true;
        break;
      case v1::AgentEvent::kMessage: {
        const auto& m = event.message();
        if (!streamed_ && !m.content().empty()) out_ << m.content();
        if (!m.content().empty() || mid_line_) EndLine(!m.content().empty() && m.content().back() != '\n');
        last_content_ = m.content();
        for (const auto& c : m.tool_calls()) out_ << "-> " << c.name() << "\n";
        streamed_ = false;
        break;
      }
      case v1::AgentEvent::kExecution: {
        const auto& e = event.execution();
        out_ << "--- " << e.purpose() << " (" << absl::AsciiStrToLower(LanguageName(e.language())) << ") ---\n"
             << e.code();
        if (!e.code().empty() && e.code().back() != '\n') out_ << "\n";
        const auto& r = e.result();
        out_ << "--- " << (e.succeeded() ? "ok" : OutcomeName(r.outcome())) << " ---\n";
        out_ << r.stdout() << r.stderr();
        for (const auto& result : r.results()) out_ << RenderResultText(result);
        if (!r.error().name().empty()) out_ << RenderErrorText(r.error());
        if (e.rolled_back()) out_ << "--- rolled back: the session is as it was before this step ---\n";
        out_.flush();
        break;
      }
      case v1::AgentEvent::kError:
        err_ << "warden: agent: " << event.error().message() << "\n";
        break;
      case v1::AgentEvent::kFileChange: {
        const auto& c = event.file_change();
        out_ << (c.rolled_back() ? "--- patch rolled back: " + c.reason() + " ---\n" : "--- patch applied ---\n")
             << c.diff();
        break;
      }
      case v1::AgentEvent::kFunctionCall:
        err_ << "warden: agent: the model called function " << event.function_call().name()
             << ", which the CLI does not provide\n";
        break;
      case v1::AgentEvent::kFinal: {
        const auto& f = event.final();
        out_ << "=== " << StopReasonName(f.stop_reason()) << " after " << f.iterations() << " turns, "
             << f.usage().total_tokens() << " tokens" << (f.all_succeeded() ? "" : " (not verified)") << " ===\n";
        if (!f.stop_detail().empty()) out_ << f.stop_detail() << "\n";
        for (const auto& t : f.tests()) out_ << t.outcome() << " " << t.name() << "\n";
        if (!f.diff().empty()) out_ << f.diff();
        if (f.answer() != last_content_) {  // else it was just shown
          out_ << f.answer();
          if (!f.answer().empty() && f.answer().back() != '\n') out_ << "\n";
        }
        if (!f.session_id().empty()) out_ << "session: " << f.session_id() << "\n";
        break;
      }
      default:
        break;
    }
    out_.flush();
  }

 private:
  void EndLine(bool needed) {
    if (needed || mid_line_) out_ << "\n";
    mid_line_ = false;
  }
  std::ostream& out_;
  std::ostream& err_;
  bool streamed_ = false, mid_line_ = false;
  std::string last_content_;
};

absl::StatusOr<std::string> ReadLocal(const std::string& path, std::istream& in) {
  std::stringstream ss;
  if (path == "-") {
    ss << in.rdbuf();
    return ss.str();
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  ss << file.rdbuf();
  return ss.str();
}

}  // namespace

int CommandRunner::operator()(const AgentCommand& command) {
  if (agent_stub_ == nullptr) return LocalFailed(absl::InternalError("no Agent stub"));
  v1::AgentRequest first;
  v1::RunAgentRequest* request = first.mutable_start();
  *request = command.request;
  if (!command.code_file.empty()) {
    auto code = ReadLocal(command.code_file, io_.in);
    if (!code.ok()) return LocalFailed(code.status());
    request->set_code(*code);
  }
  for (const std::string& spec : command.files) {
    std::pair<std::string, std::string> parts = absl::StrSplit(spec, absl::MaxSplits(':', 1));
    auto data = ReadLocal(parts.first, io_.in);
    if (!data.ok()) return LocalFailed(data.status());
    v1::File* file = request->add_files();
    file->set_path(parts.second.empty() ? parts.first.substr(parts.first.rfind('/') + 1) : parts.second);
    file->set_content(*data);
  }

  auto context = NewCallContext(kAgentDeadline);
  std::optional<CancelOnSignal> cancel;
  if (cancel_on_signals_) cancel.emplace(context.get());
  auto stream = agent_stub_->Run(context.get());
  stream->Write(first);
  stream->WritesDone();  // the CLI offers no client-side functions
  TextPrinter printer(io_.out, io_.err);
  v1::AgentEvent event;
  std::optional<v1::FinalEvent> final;
  while (stream->Read(&event)) {
    if (command.json) {
      io_.out << EventToJson(event).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      io_.out.flush();
    } else {
      printer.Print(event);
    }
    if (event.has_final()) final = event.final();
  }
  grpc::Status status = stream->Finish();
  if (cancel && cancel->received_signal() != 0) return kExitSignalBase + cancel->received_signal();
  if (!status.ok()) return RpcFailed(status);
  if (!final) return RpcFailed(grpc::Status(grpc::StatusCode::INTERNAL, "the run ended without a final event"));
  return final->all_succeeded() ? kExitOk : 1;
}

}  // namespace warden::cli
