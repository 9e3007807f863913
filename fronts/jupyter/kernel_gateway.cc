#include "fronts/jupyter/kernel_gateway.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "fronts/http/status.h"
#include "fronts/jupyter/kernel_ids.h"
#include "fronts/jupyter/kernel_specs.h"

namespace warden::jupyter {
namespace {

// A restart waits this long for a running cell to stop after interrupting it.
constexpr absl::Duration kRestartInterruptWait = absl::Seconds(10);

const char* ReasonPhrase(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 412: return "Precondition Failed";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Error";
  }
}

std::string IsoTime(absl::Time t) { return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", t, absl::UTCTimeZone()); }

const char* ExecutionState(v1::SessionState state) {
  switch (state) {
    case v1::SESSION_STATE_BUSY: return "busy";
    case v1::SESSION_STATE_LOST: return "dead";
    default: return "idle";
  }
}

}  // namespace

Reply ErrorReply(int status, std::string message) {
  Reply r;
  r.status = status;
  r.body = {{"reason", ReasonPhrase(status)}, {"message", std::move(message)}};
  return r;
}

Reply ErrorReplyFor(const grpc::Status& status) {
  // gRPC's and absl's status codes have the same numbers; the HTTP status
  // is every front's (fronts/http/status.h).
  return ErrorReply(static_cast<int>(http::HttpStatusFor(static_cast<absl::StatusCode>(status.error_code()))),
                    status.error_message());
}

KernelGateway::KernelGateway(std::shared_ptr<v1::Executor::StubInterface> stub)
    : stub_(std::move(stub)), lanes_(std::make_shared<http::WorkPool>(1, kLaneThreads)) {}

// Channels may outlive the gateway (a WebSocket still closing); they share
// the pool, which refuses their work from now on.
KernelGateway::~KernelGateway() { lanes_->Stop(); }

Reply KernelGateway::ApiInfo() const {
  // The Jupyter Server API version this follows; clients only read it.
  return Reply{200, {{"version", "2.14.0"}, {"gateway", "warden"}}, {}};
}

Reply KernelGateway::ListKernelSpecs() const { return Reply{200, KernelSpecsJson(), {}}; }

nlohmann::json KernelGateway::KernelModel(const v1::Session& session) {
  return {
      {"id", KernelIdFromSessionId(session.id())},
      {"name", KernelSpecFor(session.language()).name},
      {"last_activity", IsoTime(absl::Now() - absl::Milliseconds(session.idle_ms()))},
      {"execution_state", ExecutionState(session.state())},
      {"connections", Connections(session.id())},
  };
}

Reply KernelGateway::ListKernels(const Caller& caller) {
  v1::ListSessionsRequest req;
  v1::ListSessionsResponse resp;
  grpc::ClientContext ctx;
  caller.Apply(ctx);
  if (grpc::Status s = stub_->ListSessions(&ctx, req, &resp); !s.ok()) return ErrorReplyFor(s);
  nlohmann::json kernels = nlohmann::json::array();
  for (const v1::Session& session : resp.sessions()) kernels.push_back(KernelModel(session));
  return Reply{200, kernels, {}};
}

Reply KernelGateway::StartKernel(const Caller& caller, absl::string_view body) {
  if (body.size() > kMaxBodyBytes) {
    return ErrorReply(413, absl::StrCat("the request body is ", body.size(), " bytes; a kernel start takes at most ",
                                        kMaxBodyBytes, " ({\"name\": \"python3\"})"));
  }
  std::string name(kDefaultKernelName);
  if (!body.empty()) {
    nlohmann::json model = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (model.is_discarded() || !(model.is_object() || model.is_null())) {
      return ErrorReply(400, "the request body must be a JSON object such as {\"name\": \"python3\"}");
    }
    if (model.is_object() && model.contains("name") && !model["name"].is_null()) {
      if (!model["name"].is_string()) return ErrorReply(400, "'name' must be a kernel spec name, a string");
      name = model["name"].get<std::string>();
    }
    if (model.is_object() && model.contains("env") && !model["env"].is_object()) {
      return ErrorReply(400, "'env' must be an object of strings");
    }
  }
  const KernelSpec* spec = FindKernelSpec(name);
  if (spec == nullptr) {
    return ErrorReply(404, absl::StrCat("No such kernel spec '", name, "'; this server offers ", KernelSpecNames()));
  }
  v1::CreateSessionRequest req;
  req.set_language(spec->language);
  (*req.mutable_labels())["jupyter.kernel_name"] = spec->name;
  v1::Session session;
  grpc::ClientContext ctx;
  caller.Apply(ctx);
  if (grpc::Status s = stub_->CreateSession(&ctx, req, &session); !s.ok()) return ErrorReplyFor(s);
  Reply r{201, KernelModel(session), {}};
  r.headers.emplace_back("Location", absl::StrCat("/api/kernels/", KernelIdFromSessionId(session.id())));
  return r;
}

Reply KernelGateway::GetKernel(const Caller& caller, absl::string_view kernel_id) {
  v1::GetSessionRequest req;
  req.set_session_id(SessionIdFromKernelId(kernel_id));
  v1::Session session;
  grpc::ClientContext ctx;
  caller.Apply(ctx);
  if (grpc::Status s = stub_->GetSession(&ctx, req, &session); !s.ok()) return ErrorReplyFor(s);
  return Reply{200, KernelModel(session), {}};
}

Reply KernelGateway::ShutdownKernel(const Caller& caller, absl::string_view kernel_id) {
  const std::string session_id = SessionIdFromKernelId(kernel_id);
  v1::CloseSessionRequest req;
  req.set_session_id(session_id);
  v1::CloseSessionResponse resp;
  grpc::ClientContext ctx;
  caller.Apply(ctx);
  if (grpc::Status s = stub_->CloseSession(&ctx, req, &resp); !s.ok()) return ErrorReplyFor(s);
  for (const std::shared_ptr<KernelChannel>& channel : ChannelsOf(session_id)) channel->KernelGone();
  return Reply{204, nullptr, {}};
}

Reply KernelGateway::InterruptKernel(const Caller& caller, absl::string_view kernel_id) {
  v1::InterruptSessionRequest req;
  req.set_session_id(SessionIdFromKernelId(kernel_id));
  v1::InterruptSessionResponse resp;
  grpc::ClientContext ctx;
  caller.Apply(ctx);
  if (grpc::Status s = stub_->InterruptSession(&ctx, req, &resp); !s.ok()) return ErrorReplyFor(s);
  return Reply{204, nullptr, {}};
}

Reply KernelGateway::RestartKernel(const Caller& caller, absl::string_view kernel_id) {
  v1::RestartSessionRequest req;
  req.set_session_id(SessionIdFromKernelId(kernel_id));
  v1::Session session;
  // Jupyter restarts a busy kernel; Warden restarts only an idle session,
  // so a running cell is interrupted first.
  const absl::Time deadline = absl::Now() + kRestartInterruptWait;
  bool interrupted = false;
  for (absl::Duration backoff = absl::Milliseconds(5);; backoff = std::min(backoff * 2, absl::Milliseconds(200))) {
    grpc::ClientContext ctx;
    caller.Apply(ctx);
    grpc::Status s = stub_->RestartSession(&ctx, req, &session);
    if (s.ok()) break;
    if (s.error_code() != grpc::StatusCode::FAILED_PRECONDITION || absl::Now() > deadline) return ErrorReplyFor(s);
    if (!interrupted) {
      v1::InterruptSessionRequest interrupt;
      interrupt.set_session_id(req.session_id());
      v1::InterruptSessionResponse ignored;
      grpc::ClientContext ictx;
      caller.Apply(ictx);
      (void)stub_->InterruptSession(&ictx, interrupt, &ignored);
      interrupted = true;
    }
    // The interrupted cell ends on its own schedule; there is nothing to
    // wait on through warden.v1 but the session's state.
    absl::SleepFor(backoff);
  }
  return Reply{200, KernelModel(session), {}};
}

std::shared_ptr<KernelChannel> KernelGateway::Connect(const Caller& caller, absl::string_view kernel_id,
                                                      WireFormat format, ChannelSink sink, Reply* error) {
  v1::GetSessionRequest req;
  req.set_session_id(SessionIdFromKernelId(kernel_id));
  v1::Session session;
  grpc::ClientContext ctx;
  caller.Apply(ctx);
  if (grpc::Status s = stub_->GetSession(&ctx, req, &session); !s.ok()) {
    *error = ErrorReplyFor(s);
    return nullptr;
  }
  auto channel = std::make_shared<KernelChannel>(stub_, caller, session.id(), KernelSpecFor(session.language()),
                                                 format, std::move(sink), lanes_);
  absl::MutexLock lock(&mu_);
  channels_[session.id()].push_back(channel);
  return channel;
}

std::vector<std::shared_ptr<KernelChannel>> KernelGateway::ChannelsOf(const std::string& session_id) {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<KernelChannel>> live;
  auto it = channels_.find(session_id);
  if (it == channels_.end()) return live;
  auto& weak = it->second;
  weak.erase(std::remove_if(weak.begin(), weak.end(),
                            [&live](const std::weak_ptr<KernelChannel>& w) {
                              std::shared_ptr<KernelChannel> c = w.lock();
                              if (!c) return true;
                              live.push_back(std::move(c));
                              return false;
                            }),
             weak.end());
  if (weak.empty()) channels_.erase(it);
  return live;
}

int KernelGateway::Connections(const std::string& session_id) {
  return static_cast<int>(ChannelsOf(session_id).size());
}

}  // namespace warden::jupyter
