// AgentService: warden.v1.Agent over the gRPC callback API. Each Run is a
// bidirectional stream with its own reactor: the first message starts an
// AgentRun on a tracked task thread (never on gRPC's threads), events are
// written back one at a time as the run emits them, later messages answer
// client-side function calls, and the client's cancellation cancels the run
// (model request, running cell) and closes its session.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "agent/agent_loop.h"
#include "agent/llm_client.h"
#include "server/engine.h"
#include "server/options.h"
#include "server/tasks.h"
#include "server/tenancy.h"
#include "warden/v1/agent.grpc.pb.h"

namespace warden::agent {

// The agent's LLM client and loop settings from the daemon's configuration;
// reads the API key from its variable or file. Fails saying what to fix.
absl::StatusOr<LlmOptions> LlmOptionsFrom(const warden::LlmOptions& config);
LoopOptions LoopOptionsFrom(const AgentOptions& config);

class AgentService final : public v1::Agent::CallbackService {
 public:
  // `engine` and `tasks` are not owned and outlive the service. Without a
  // configured base_url every Run fails FAILED_PRECONDITION, saying how to
  // configure one.
  static absl::StatusOr<std::unique_ptr<AgentService>> Create(const AgentOptions& options, Engine& engine,
                                                              std::shared_ptr<const Tenancy> tenancy,
                                                              Tasks& tasks);

  grpc::ServerBidiReactor<v1::AgentRequest, v1::AgentEvent>* Run(grpc::CallbackServerContext* ctx) override;

 private:
  AgentService(Engine& engine, std::shared_ptr<const Tenancy> tenancy, Tasks& tasks)
      : engine_(engine), tenancy_(std::move(tenancy)), tasks_(tasks) {}

  Engine& engine_;
  std::shared_ptr<const Tenancy> tenancy_;
  Tasks& tasks_;
  std::unique_ptr<LlmClient> llm_;  // null: not configured
  LoopOptions loop_;
};

}  // namespace warden::agent
