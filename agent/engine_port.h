// EnginePort: the agent's ExecutorPort over the daemon's Engine, in one
// tenant - sessions, cells and files go straight to the engine, never back
// through gRPC. The run's cancellation interrupts the running cell.
#pragma once

#include <string>

#include "agent/executor_port.h"
#include "server/engine.h"

namespace warden::agent {

class EnginePort : public ExecutorPort {
 public:
  // `engine` is not owned and outlives the port.
  EnginePort(Engine& engine, std::string tenant) : engine_(engine), tenant_(std::move(tenant)) {}

  absl::StatusOr<std::string> CreateSession(v1::Language language, const v1::Limits& limits) override;
  absl::StatusOr<v1::ExecuteResponse> Execute(const std::string& session_id, const std::string& code,
                                              const v1::Limits& limits, RunControl* control) override;
  absl::Status WriteFile(const std::string& session_id, const std::string& path, const std::string& data) override;
  absl::StatusOr<std::string> ReadFile(const std::string& session_id, const std::string& path) override;
  absl::StatusOr<std::vector<std::string>> ListFiles(const std::string& session_id) override;
  absl::Status CloseSession(const std::string& session_id) override;
  absl::StatusOr<Fork> ForkSession(const std::string& session_id) override;

 private:
  Engine& engine_;
  const std::string tenant_;
};

}  // namespace warden::agent
