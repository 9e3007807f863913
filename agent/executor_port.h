// ExecutorPort: how the agent reaches execution - sessions, cells and
// workspace files in one tenant - without knowing who provides them. The
// daemon provides EnginePort (over its Engine, no gRPC loop-back); tests
// provide fakes. Results are the API's ExecuteResponse so the agent can
// stream them as they are.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/run_control.h"
#include "warden/v1/executor.pb.h"

namespace warden::agent {

class ExecutorPort {
 public:
  virtual ~ExecutorPort() = default;

  // A new session; returns its id.
  virtual absl::StatusOr<std::string> CreateSession(v1::Language language, const v1::Limits& limits) = 0;
  // Runs one cell. What the code did (an exception, a timeout) is in the
  // response's outcome; an error status means Warden could not run it, and
  // CANCELLED that `control` was cancelled (the cell is interrupted).
  virtual absl::StatusOr<v1::ExecuteResponse> Execute(const std::string& session_id, const std::string& code,
                                                      const v1::Limits& limits, RunControl* control) = 0;
  virtual absl::Status WriteFile(const std::string& session_id, const std::string& path,
                                 const std::string& data) = 0;
  // NOT_FOUND when there is no such file.
  virtual absl::StatusOr<std::string> ReadFile(const std::string& session_id, const std::string& path) = 0;
  // Regular files, relative to the workspace, recursively.
  virtual absl::StatusOr<std::vector<std::string>> ListFiles(const std::string& session_id) = 0;
  virtual absl::Status CloseSession(const std::string& session_id) = 0;

  struct Fork {
    std::string session_id;
    // What the source held that the fork could not get (name -> why).
    std::map<std::string, std::string> left_out;
  };
  // A new session holding a copy of the session's variables and files; the
  // source is not changed. UNIMPLEMENTED where forking is not provided.
  virtual absl::StatusOr<Fork> ForkSession(const std::string& /*session_id*/) {
    return absl::UnimplementedError("this executor cannot fork sessions");
  }
};

}  // namespace warden::agent
