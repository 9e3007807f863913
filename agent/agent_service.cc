#include "agent/agent_service.h"

#include <cstdlib>
#include <deque>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/engine_port.h"
#include "server/convert.h"
#include "spdlog/spdlog.h"

namespace warden::agent {
namespace {

// What the run and the reactor share: the run's cancellation, and the
// client's answers to function calls.
class RunState {
 public:
  RunControl control;

  void Deliver(v1::FunctionResult result) {
    absl::MutexLock lock(&mu_);
    answers_[result.call_id()] = std::move(result);
  }
  void CloseReads() {
    absl::MutexLock lock(&mu_);
    reads_closed_ = true;
  }
  void Wake() {
    absl::MutexLock lock(&mu_);
    woken_ = true;
  }
  absl::StatusOr<v1::FunctionResult> Await(const std::string& call_id, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return answers_.count(call_id) > 0 || reads_closed_ || woken_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    if (auto it = answers_.find(call_id); it != answers_.end()) {
      v1::FunctionResult result = std::move(it->second);
      answers_.erase(it);
      return result;
    }
    if (woken_) return absl::CancelledError("the run was cancelled");
    if (reads_closed_) {
      return absl::FailedPreconditionError("the client closed its side of the stream without answering");
    }
    return absl::DeadlineExceededError(absl::StrCat("no answer within ", absl::FormatDuration(timeout)));
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, v1::FunctionResult> answers_ ABSL_GUARDED_BY(mu_);
  bool reads_closed_ ABSL_GUARDED_BY(mu_) = false;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
};

class RunReactor : public grpc::ServerBidiReactor<v1::AgentRequest, v1::AgentEvent> {
 public:
  RunReactor(AgentService* service, absl::StatusOr<std::string> tenant, Engine& engine, Tasks& tasks,
             LlmClient* llm, const LoopOptions& loop)
      : engine_(engine), tasks_(tasks), llm_(llm), loop_(loop), state_(std::make_shared<RunState>()) {
    if (!tenant.ok()) {
      Close(ToGrpc(tenant.status()));
      return;
    }
    tenant_ = *tenant;
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client finished writing, or the call is over
      state_->CloseReads();
      if (!started_) Close(ToGrpc(absl::InvalidArgumentError("Run needs a first message with `start`")));
      return;
    }
    if (!started_) {
      if (!request_.has_start()) {
        Close(ToGrpc(absl::InvalidArgumentError("the first message of Run must carry `start`")));
        return;
      }
      started_ = true;
      Start(request_.start());
    } else if (request_.has_function_result()) {
      state_->Deliver(request_.function_result());
    }
    if (!closing()) StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    Step step;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      queue_.pop_front();
      if (!ok) {
        failed_ = true;
        queue_.clear();
      }
      step = NextStepLocked();
    }
    if (!ok) Cancel();
    Take(step);
  }
  void OnCancel() override { Cancel(); }
  // gRPC calls OnDone once every other reaction has returned, ordered by its
  // own hand-off inside libgrpc. Taking the lock once also orders this
  // thread after the last OnWriteDone by a lock: plain to a reader, and to
  // ThreadSanitizer, which cannot see inside libgrpc (docs/security.md).
  void OnDone() override {
    { absl::MutexLock lock(&mu_); }
    delete this;
  }

 private:
  bool closing() {
    absl::MutexLock lock(&mu_);
    return closing_;
  }
  void Cancel() {
    state_->control.Cancel();
    state_->Wake();
  }

  void Start(const v1::RunAgentRequest& start) {
    if (llm_ == nullptr) {
      Close(ToGrpc(absl::FailedPreconditionError(
          "the agent has no model server: set agent.llm.base_url and agent.llm.model in wardend's configuration, "
          "or start wardend with --llm-base-url URL --llm-model NAME (docs/agent.md)")));
      return;
    }
    if (absl::Status s = ValidateAgentRequest(start, loop_); !s.ok()) {
      Close(ToGrpc(s));
      return;
    }
    std::shared_ptr<RunState> state = state_;
    tasks_.Run([this, state, start] {
      spdlog::info("agent run for tenant {}: mode {}, model {}", tenant_, v1::AgentMode_Name(start.mode()),
                   start.model().empty() ? llm_->options().model : start.model());
      EnginePort port(engine_, tenant_);
      const int64_t function_timeout_ms = loop_.function_timeout_ms;
      AgentRun run(
          *llm_, port, loop_, start, [this](v1::AgentEvent event) { Push(std::move(event)); },
          [state, function_timeout_ms](const v1::FunctionCall& call) {
            return state->Await(call.call_id(), absl::Milliseconds(function_timeout_ms));
          },
          &state->control);
      absl::StatusOr<v1::FinalEvent> final = run.Run();
      if (final.ok()) {
        spdlog::info("agent run for tenant {} ended: {} after {} turns, {} tokens", tenant_,
                     v1::StopReason_Name(final->stop_reason()), final->iterations(), final->usage().total_tokens());
      } else {
        spdlog::warn("agent run for tenant {} failed: {}", tenant_, std::string(final.status().message()));
      }
      Close(final.ok() ? grpc::Status::OK : ToGrpc(final.status()));
    });
  }

  // One outstanding write at a time; Close must be the producer's last call.
  // Each caller decides its next step under the same lock that changed the
  // state, then takes it without touching the reactor again: once a step
  // finishes the call, gRPC may run OnDone on another thread and delete this
  // (a second lock for the decision let a producer's Close read freed memory
  // after a write's completion had finished the call).
  void Push(v1::AgentEvent event) {
    Step step;
    {
      absl::MutexLock lock(&mu_);
      if (failed_ || closing_) return;
      queue_.push_back(std::move(event));
      step = NextStepLocked();
    }
    Take(step);
  }
  void Close(grpc::Status status) {
    Step step;
    {
      absl::MutexLock lock(&mu_);
      if (closing_) return;
      final_status_ = std::move(status);
      closing_ = true;
      step = NextStepLocked();
    }
    Take(step);
  }

  struct Step {
    const v1::AgentEvent* write = nullptr;
    std::optional<grpc::Status> finish;
  };
  Step NextStepLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Step step;
    if (writing_ || finished_) return step;
    if (!queue_.empty()) {
      writing_ = true;
      step.write = &queue_.front();
    } else if (closing_) {
      finished_ = true;
      step.finish = failed_ ? grpc::Status(grpc::StatusCode::CANCELLED, "the client went away") : final_status_;
    }
    return step;
  }
  // The last thing a caller does with the reactor.
  void Take(const Step& step) {
    if (step.write != nullptr) {
      StartWrite(step.write);
    } else if (step.finish) {
      Finish(*step.finish);
    }
  }

  Engine& engine_;
  Tasks& tasks_;
  LlmClient* llm_;
  const LoopOptions loop_;
  std::string tenant_;
  std::shared_ptr<RunState> state_;
  v1::AgentRequest request_;
  bool started_ = false;  // only gRPC's read callbacks touch it

  absl::Mutex mu_;
  std::deque<v1::AgentEvent> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<LlmOptions> LlmOptionsFrom(const warden::LlmOptions& config) {
  LlmOptions o;
  o.base_url = config.base_url;
  o.model = config.model;
  o.request_timeout_ms = config.request_timeout_ms;
  o.max_tokens = config.max_tokens;
  o.temperature = config.temperature;
  o.stream = config.stream;
  o.max_retries = config.max_retries;
  o.tool_choice = config.tool_choice;
  if (!config.api_key_env.empty()) {
    const char* key = std::getenv(config.api_key_env.c_str());
    if (key == nullptr || *key == '\0') {
      return absl::FailedPreconditionError(absl::StrCat(
          "agent.llm.api_key_env names ", config.api_key_env,
          ", which is not set in wardend's environment: set it (systemd: Environment= or EnvironmentFile=)"));
    }
    o.api_key = key;
  }
  if (!config.api_key_file.empty()) {
    std::ifstream in(config.api_key_file);
    if (!in) {
      return absl::FailedPreconditionError(absl::StrCat("cannot read agent.llm.api_key_file ", config.api_key_file,
                                                        ": check the path and that wardend may read it"));
    }
    std::stringstream ss;
    ss << in.rdbuf();
    o.api_key = std::string(absl::StripAsciiWhitespace(ss.str()));
  }
  return o;
}

LoopOptions LoopOptionsFrom(const AgentOptions& config) {
  LoopOptions o;
  o.default_max_iterations = config.default_max_iterations;
  o.max_iterations = config.max_iterations;
  o.default_max_wall_ms = config.default_max_wall_ms;
  o.max_wall_ms = config.max_wall_ms;
  o.default_max_tokens = config.default_max_tokens;
  o.max_tokens = config.max_tokens;
  o.max_observation_bytes = static_cast<size_t>(config.max_observation_bytes);
  o.tools = config.llm.tools == "native" ? LoopOptions::Tools::kNative
            : config.llm.tools == "text" ? LoopOptions::Tools::kText
                                         : LoopOptions::Tools::kAuto;
  return o;
}

absl::StatusOr<std::unique_ptr<AgentService>> AgentService::Create(const AgentOptions& options, Engine& engine,
                                                                    std::shared_ptr<const Tenancy> tenancy,
                                                                    Tasks& tasks) {
  auto service = std::unique_ptr<AgentService>(new AgentService(engine, std::move(tenancy), tasks));
  service->loop_ = LoopOptionsFrom(options);
  if (!options.llm.base_url.empty()) {
    absl::StatusOr<LlmOptions> llm = LlmOptionsFrom(options.llm);
    if (!llm.ok()) return llm.status();
    service->llm_ = std::make_unique<LlmClient>(*llm);
    spdlog::info("agent: model {} at {}", llm->model, llm->base_url);
  }
  return service;
}

grpc::ServerBidiReactor<v1::AgentRequest, v1::AgentEvent>* AgentService::Run(grpc::CallbackServerContext* ctx) {
  return new RunReactor(this, tenancy_->TenantOf(*ctx), engine_, tasks_, llm_.get(), loop_);
}

}  // namespace warden::agent
