#include "agent/engine_port.h"

#include "server/convert.h"

namespace warden::agent {
namespace {

CellLimitsOptions FromProto(const v1::Limits& limits) {
  CellLimitsOptions out;
  out.wall_ms = limits.wall_ms();
  out.cpu_ms = limits.cpu_ms();
  out.memory_mb = limits.memory_mb();
  out.output_bytes = limits.output_bytes();
  return out;
}

}  // namespace

absl::StatusOr<std::string> EnginePort::CreateSession(v1::Language language, const v1::Limits& limits) {
  auto parsed = warden::FromProto(language);
  if (!parsed.ok()) return parsed.status();
  CreateSessionCall call;
  call.tenant = tenant_;
  call.language = *parsed;
  call.limits = FromProto(limits);
  call.labels = {{"warden.agent", "run"}};
  auto entry = engine_.CreateSession(call);
  if (!entry.ok()) return entry.status();
  return (*entry)->id;
}

absl::StatusOr<v1::ExecuteResponse> EnginePort::Execute(const std::string& session_id, const std::string& code,
                                                        const v1::Limits& limits, RunControl* control) {
  ExecuteCall call;
  call.tenant = tenant_;
  call.code = code;
  call.session_id = session_id;
  call.limits = FromProto(limits);
  Cancellation cancellation;
  ScopedCancelHook hook(control, [&cancellation] { cancellation.Cancel(); });
  if (control && control->cancelled()) return absl::CancelledError("the run was cancelled");
  auto result = engine_.Execute(call, nullptr, &cancellation);
  if (control && control->cancelled()) return absl::CancelledError("the run was cancelled");
  if (!result.ok()) return result.status();
  v1::ExecuteResponse response;
  FillResponse(result->cell, result->session_id, &response);
  return response;
}

absl::Status EnginePort::WriteFile(const std::string& session_id, const std::string& path, const std::string& data) {
  return engine_.WriteFile(tenant_, session_id, path, data).status();
}

absl::StatusOr<std::string> EnginePort::ReadFile(const std::string& session_id, const std::string& path) {
  return engine_.ReadFile(tenant_, session_id, path);
}

absl::StatusOr<std::vector<std::string>> EnginePort::ListFiles(const std::string& session_id) {
  auto entries = engine_.ListFiles(tenant_, session_id, "");
  if (!entries.ok()) return entries.status();
  std::vector<std::string> files;
  for (const WorkspaceListing& e : *entries) {
    if (e.type == 'f' && e.path.find("__pycache__") == std::string::npos) {
      files.push_back(e.path);
    }
  }
  return files;
}

absl::Status EnginePort::CloseSession(const std::string& session_id) {
  return engine_.CloseSession(tenant_, session_id);
}

absl::StatusOr<ExecutorPort::Fork> EnginePort::ForkSession(const std::string& session_id) {
  auto fork = engine_.ForkSession(tenant_, session_id, /*labels=*/{});  // the source's: warden.agent=run
  if (!fork.ok()) return fork.status();
  return Fork{fork->session->id, fork->left_out};
}

}  // namespace warden::agent
