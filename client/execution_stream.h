// The events of one ExecuteStream call, turned into what the CLI shows:
// ExecutionCollector assembles the final ExecuteResponse, LiveTextPrinter
// writes output as it arrives (text mode).
#pragma once

#include <ostream>
#include <string>

#include "warden/v1/executor.pb.h"

namespace warden::cli {

// Collects the streamed events. The summary is the authority; what the
// stream carried fills in whatever the summary left empty (a server may
// stream output and not repeat it in the summary).
class ExecutionCollector {
 public:
  void Add(const v1::ExecuteEvent& event);
  bool has_summary() const { return has_summary_; }
  // The summary, completed from the streamed events.
  v1::ExecuteResponse Response() const;

 private:
  std::string stdout_;
  std::string stderr_;
  v1::ExecuteResponse streamed_;  // results and error, in order
  v1::ExecuteResponse summary_;
  bool has_summary_ = false;
};

// Prints events as they arrive: program stdout and rich results to `out`,
// program stderr and tracebacks to `err`, flushed at once. Finish() prints
// what the stream did not (output only in the summary, an error, and notes
// on the outcome). The streams are not owned.
class LiveTextPrinter {
 public:
  LiveTextPrinter(std::ostream& out, std::ostream& err) : out_(out), err_(err) {}

  void Print(const v1::ExecuteEvent& event);
  void Finish(const v1::ExecuteResponse& response);

 private:
  void WriteOut(const std::string& data);
  void WriteErr(const std::string& data);

  std::ostream& out_;
  std::ostream& err_;
  bool streamed_stdout_ = false;
  bool streamed_stderr_ = false;
  bool streamed_results_ = false;
  bool streamed_error_ = false;
  bool err_at_line_start_ = true;  // so our notes never share a line with the program's
};

}  // namespace warden::cli
