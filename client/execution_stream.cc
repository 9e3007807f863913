#include "client/execution_stream.h"

#include "client/cli_output.h"

namespace warden::cli {

void ExecutionCollector::Add(const v1::ExecuteEvent& event) {
  switch (event.event_case()) {
    case v1::ExecuteEvent::kStdout:
      stdout_ += event.stdout();
      break;
    case v1::ExecuteEvent::kStderr:
      stderr_ += event.stderr();
      break;
    case v1::ExecuteEvent::kDisplay:
      *streamed_.add_results() = event.display();
      break;
    case v1::ExecuteEvent::kResult:
      *streamed_.add_results() = event.result();
      break;
    case v1::ExecuteEvent::kError:
      *streamed_.mutable_error() = event.error();
      break;
    case v1::ExecuteEvent::kSummary:
      summary_ = event.summary();
      has_summary_ = true;
      break;
    case v1::ExecuteEvent::EVENT_NOT_SET:
      break;
  }
}

v1::ExecuteResponse ExecutionCollector::Response() const {
  v1::ExecuteResponse response = summary_;
  if (response.stdout().empty()) response.set_stdout(stdout_);
  if (response.stderr().empty()) response.set_stderr(stderr_);
  if (response.results().empty()) *response.mutable_results() = streamed_.results();
  if (!response.has_error() && streamed_.has_error()) {
    *response.mutable_error() = streamed_.error();
  }
  return response;
}

void LiveTextPrinter::WriteOut(const std::string& data) {
  out_.write(data.data(), static_cast<std::streamsize>(data.size()));
  out_.flush();
}

void LiveTextPrinter::WriteErr(const std::string& data) {
  if (data.empty()) return;
  err_.write(data.data(), static_cast<std::streamsize>(data.size()));
  err_.flush();
  err_at_line_start_ = data.back() == '\n';
}

void LiveTextPrinter::Print(const v1::ExecuteEvent& event) {
  switch (event.event_case()) {
    case v1::ExecuteEvent::kStdout:
      streamed_stdout_ = true;
      WriteOut(event.stdout());
      break;
    case v1::ExecuteEvent::kStderr:
      streamed_stderr_ = true;
      WriteErr(event.stderr());
      break;
    case v1::ExecuteEvent::kDisplay:
    case v1::ExecuteEvent::kResult:
      streamed_results_ = true;
      WriteOut(RenderResultText(event.has_display() ? event.display() : event.result()));
      break;
    case v1::ExecuteEvent::kError:
      streamed_error_ = true;
      if (!err_at_line_start_) WriteErr("\n");
      WriteErr(RenderErrorText(event.error()));
      break;
    case v1::ExecuteEvent::kSummary:
    case v1::ExecuteEvent::EVENT_NOT_SET:
      break;
  }
}

void LiveTextPrinter::Finish(const v1::ExecuteResponse& response) {
  if (!streamed_stdout_) WriteOut(response.stdout());
  if (!streamed_stderr_) WriteErr(response.stderr());
  if (!streamed_results_) {
    for (const v1::Result& result : response.results()) WriteOut(RenderResultText(result));
  }
  std::string notes;
  if (!streamed_error_ && response.has_error()) notes += RenderErrorText(response.error());
  notes += RenderOutcomeNotes(response);
  if (notes.empty()) return;
  if (!err_at_line_start_) WriteErr("\n");
  WriteErr(notes);
}

}  // namespace warden::cli
