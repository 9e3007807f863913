#include "fronts/jupyter/kernel_channel.h"

#include <optional>
#include <utility>

#include "fronts/jupyter/messages.h"
#include "grpcpp/support/client_callback.h"

namespace warden::jupyter {

void Caller::Apply(grpc::ClientContext& context) const {
  if (!authorization.empty()) context.AddMetadata("authorization", authorization);
}

// --- Lane ---

void KernelChannel::Lane::Push(std::shared_ptr<KernelChannel> owner, Message m) {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    queue_.push_back(std::move(m));
    if (running_) return;
    running_ = true;
  }
  Schedule(std::move(owner));
}

void KernelChannel::Lane::Resume(std::shared_ptr<KernelChannel> owner) { Schedule(std::move(owner)); }

void KernelChannel::Lane::Schedule(std::shared_ptr<KernelChannel> owner) {
  if (!pool_->Submit([this, owner = std::move(owner)] { Drain(); })) {
    absl::MutexLock lock(&mu_);  // the pool stops: nothing more will run
    running_ = false;
  }
}

void KernelChannel::Lane::Drain() {
  for (;;) {
    Message next;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_ || queue_.empty()) {
        running_ = false;
        return;
      }
      next = std::move(queue_.front());
      queue_.pop_front();
    }
    if (!handle_(std::move(next))) return;  // goes on asynchronously; Resume() follows
  }
}

std::deque<Message> KernelChannel::Lane::TakeIf(const std::function<bool(const Message&)>& match) {
  absl::MutexLock lock(&mu_);
  std::deque<Message> taken, kept;
  for (Message& m : queue_) (match(m) ? taken : kept).push_back(std::move(m));
  queue_ = std::move(kept);
  return taken;
}

void KernelChannel::Lane::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  queue_.clear();
}

// --- ExecuteCall: one cell as a gRPC callback call ---

class KernelChannel::ExecuteCall : public grpc::ClientReadReactor<v1::ExecuteEvent> {
 public:
  ExecuteCall(std::shared_ptr<KernelChannel> channel, Message request, int predicted_count)
      : channel_(std::move(channel)), request_(std::move(request)), predicted_count_(predicted_count) {
    silent_ = request_.content.value("silent", false);
    stop_on_error_ = request_.content.value("stop_on_error", true);
    call_.set_code(request_.content["code"].get<std::string>());
    call_.set_session_id(channel_->session_id_);
    channel_->caller_.Apply(context_);
  }

  // False when the channel closed first (nothing started).
  bool Begin() {
    {
      absl::MutexLock lock(&channel_->call_mu_);
      if (channel_->closed_) return false;
      channel_->running_ = &context_;
    }
    channel_->stub_->async()->ExecuteStream(&context_, &call_, this);
    StartRead(&event_);
    StartCall();
    return true;
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows
    KernelChannel& c = *channel_;
    switch (event_.event_case()) {
      case v1::ExecuteEvent::kStdout:
        c.Publish("iopub", "stream", {{"name", "stdout"}, {"text", event_.stdout()}}, request_);
        break;
      case v1::ExecuteEvent::kStderr:
        c.Publish("iopub", "stream", {{"name", "stderr"}, {"text", event_.stderr()}}, request_);
        break;
      case v1::ExecuteEvent::kDisplay:
        c.Publish("iopub", "display_data",
                  {{"data", MimeBundle(event_.display())},
                   {"metadata", nlohmann::json::object()},
                   {"transient", nlohmann::json::object()}},
                  request_);
        break;
      case v1::ExecuteEvent::kResult:
        value_ = event_.result();  // sent once the real execution count is known
        break;
      case v1::ExecuteEvent::kError:
        error_ = ErrorContent(event_.error());
        c.Publish("iopub", "error", *error_, request_);
        break;
      case v1::ExecuteEvent::kSummary:
        summary_ = event_.summary();
        break;
      case v1::ExecuteEvent::EVENT_NOT_SET:
        break;
    }
    StartRead(&event_);
  }

  void OnDone(const grpc::Status& status) override {
    std::shared_ptr<KernelChannel> channel = std::move(channel_);
    {
      absl::MutexLock lock(&channel->call_mu_);
      channel->running_ = nullptr;
    }
    Finish(*channel, status);
    delete this;
    channel->ExecuteDone();
  }

 private:
  void Finish(KernelChannel& c, const grpc::Status& status) {
    const int count = summary_.execution_count() > 0 ? summary_.execution_count() : predicted_count_;
    if (!status.ok()) {
      error_ = ErrorForStatus(status.error_message());
      c.Publish("iopub", "error", *error_, request_);
    } else {
      if (value_ && !silent_) {
        c.Publish("iopub", "execute_result",
                  {{"execution_count", count}, {"data", MimeBundle(*value_)}, {"metadata", nlohmann::json::object()}},
                  request_);
      }
      if (!error_ && summary_.outcome() != v1::OUTCOME_OK) {
        error_ = ErrorForOutcome(summary_);
        c.Publish("iopub", "error", *error_, request_);
      }
    }
    nlohmann::json reply = {{"status", "ok"},
                            {"execution_count", count},
                            {"user_expressions", nlohmann::json::object()},
                            {"payload", nlohmann::json::array()}};
    if (error_) {
      reply.update(*error_);
      reply["status"] = "error";
      reply.erase("user_expressions");
      reply.erase("payload");
    }
    // The requests to abort are those queued before the reply goes out: a
    // client that sends its next cell on seeing the reply and idle must
    // not find it aborted (the callback thread publishing here races the
    // frames the I/O threads queue).
    std::deque<Message> aborted;
    if (error_ && stop_on_error_) aborted = c.TakeQueuedExecutes();
    c.Publish("shell", "execute_reply", std::move(reply), request_);
    c.Status("idle", request_);
    c.Abort(aborted);
  }

  std::shared_ptr<KernelChannel> channel_;
  const Message request_;
  const int predicted_count_;
  bool silent_ = false;
  bool stop_on_error_ = true;
  grpc::ClientContext context_;
  v1::ExecuteRequest call_;
  v1::ExecuteEvent event_;
  std::optional<v1::Result> value_;
  std::optional<nlohmann::json> error_;
  v1::ExecuteResponse summary_;
};

// --- KernelChannel ---

KernelChannel::KernelChannel(std::shared_ptr<v1::Executor::StubInterface> stub, Caller caller,
                             std::string session_id, const KernelSpec& spec, WireFormat format, ChannelSink sink,
                             std::shared_ptr<http::WorkPool> pool)
    : stub_(std::move(stub)),
      caller_(std::move(caller)),
      session_id_(std::move(session_id)),
      spec_(spec),
      format_(format),
      kernel_session_(NewUuid()),
      sink_(std::move(sink)),
      shell_(pool, [this](Message m) { return HandleShell(std::move(m)); }),
      control_(pool, [this](Message m) { return HandleControl(std::move(m)); }) {}

KernelChannel::~KernelChannel() { Close(); }

void KernelChannel::Close() {
  {
    absl::MutexLock lock(&call_mu_);
    closed_ = true;
    if (running_ != nullptr) running_->TryCancel();
  }
  control_.Stop();
  shell_.Stop();
  absl::MutexLock lock(&send_mu_);
  sink_ = ChannelSink{};
}

void KernelChannel::KernelGone() {
  Message none;
  Status("dead", none);
  std::function<void()> close;
  {
    absl::MutexLock lock(&send_mu_);
    close = sink_.close;
  }
  if (close) close();
}

int KernelChannel::dropped_frames() const {
  absl::MutexLock lock(&send_mu_);
  return dropped_frames_;
}

void KernelChannel::OnFrame(absl::string_view frame) {
  absl::StatusOr<Message> message = DecodeFrame(frame, format_);
  if (!message.ok()) {
    absl::MutexLock lock(&send_mu_);
    ++dropped_frames_;
    return;
  }
  if (message->channel == "control") {
    control_.Push(shared_from_this(), *std::move(message));
  } else if (message->channel == "shell") {
    shell_.Push(shared_from_this(), *std::move(message));
  }
  // stdin (input_reply) has nothing to answer: Warden's kernels never ask.
}

void KernelChannel::Publish(const std::string& channel, const std::string& msg_type, nlohmann::json content,
                            const Message& parent) {
  absl::MutexLock lock(&send_mu_);
  if (!sink_.send) return;
  Message m = MakeMessage(channel, msg_type, std::move(content), parent.header, kernel_session_);
  sink_.send(EncodeFrame(m, format_), format_ == WireFormat::kV1);
}

void KernelChannel::Status(const char* state, const Message& parent) {
  Publish("iopub", "status", {{"execution_state", state}}, parent);
}

bool KernelChannel::HandleShell(Message request) {
  const std::string type = request.msg_type();
  if (type == "execute_request") return Execute(request);
  Status("busy", request);
  if (type == "kernel_info_request") {
    Publish("shell", "kernel_info_reply", KernelInfoContent(spec_), request);
  } else if (type == "complete_request") {
    const int cursor = request.content.value("cursor_pos", 0);
    Publish("shell", "complete_reply",
            {{"status", "ok"}, {"matches", nlohmann::json::array()}, {"cursor_start", cursor},
             {"cursor_end", cursor}, {"metadata", nlohmann::json::object()}},
            request);
  } else if (type == "inspect_request") {
    Publish("shell", "inspect_reply",
            {{"status", "ok"}, {"found", false}, {"data", nlohmann::json::object()},
             {"metadata", nlohmann::json::object()}},
            request);
  } else if (type == "is_complete_request") {
    Publish("shell", "is_complete_reply", {{"status", "unknown"}}, request);
  } else if (type == "history_request") {
    Publish("shell", "history_reply", {{"status", "ok"}, {"history", nlohmann::json::array()}}, request);
  } else if (type == "comm_info_request") {
    Publish("shell", "comm_info_reply", {{"status", "ok"}, {"comms", nlohmann::json::object()}}, request);
  } else if (type.size() > 8 && type.compare(type.size() - 8, 8, "_request") == 0) {
    // Unknown requests get an error reply rather than silence, so that a
    // client waiting for the reply is not left hanging.
    nlohmann::json content = ErrorForStatus("Warden's kernels do not implement " + type);
    content["status"] = "error";
    Publish("shell", type.substr(0, type.size() - 8) + "_reply", std::move(content), request);
  }
  Status("idle", request);
  return true;
}

bool KernelChannel::HandleControl(Message request) {
  const std::string type = request.msg_type();
  if (type == "interrupt_request") {
    v1::InterruptSessionRequest req;
    req.set_session_id(session_id_);
    v1::InterruptSessionResponse resp;
    grpc::ClientContext ctx;
    caller_.Apply(ctx);
    const grpc::Status s = stub_->InterruptSession(&ctx, req, &resp);
    nlohmann::json content = {{"status", "ok"}};
    if (!s.ok()) {
      content = ErrorForStatus(s.error_message());
      content["status"] = "error";
    }
    Publish("control", "interrupt_reply", std::move(content), request);
  } else if (type == "shutdown_request") {
    const bool restart = request.content.value("restart", false);
    grpc::ClientContext ctx;
    caller_.Apply(ctx);
    grpc::Status s;
    if (restart) {
      v1::RestartSessionRequest req;
      req.set_session_id(session_id_);
      v1::Session session;
      s = stub_->RestartSession(&ctx, req, &session);
    } else {
      v1::CloseSessionRequest req;
      req.set_session_id(session_id_);
      v1::CloseSessionResponse resp;
      s = stub_->CloseSession(&ctx, req, &resp);
    }
    nlohmann::json content = {{"status", "ok"}, {"restart", restart}};
    if (!s.ok()) {
      content = ErrorForStatus(s.error_message());
      content["status"] = "error";
      content["restart"] = restart;
    }
    Publish("control", "shutdown_reply", content, request);
    Publish("iopub", "shutdown_reply", content, request);
    if (s.ok() && !restart) Status("dead", request);
    if (s.ok() && restart) {
      {
        absl::MutexLock lock(&send_mu_);
        kernel_session_ = NewUuid();
      }
      Status("starting", request);
      Status("idle", request);
    }
  } else if (type == "kernel_info_request") {
    Publish("control", "kernel_info_reply", KernelInfoContent(spec_), request);
  }
  return true;
}

bool KernelChannel::Execute(const Message& request) {
  Status("busy", request);
  const auto code_it = request.content.find("code");
  if (code_it == request.content.end() || !code_it->is_string()) {
    nlohmann::json error = ErrorForStatus("execute_request needs content.code, a string");
    Publish("iopub", "error", error, request);
    error["status"] = "error";
    error["execution_count"] = 0;
    Publish("shell", "execute_reply", std::move(error), request);
    Status("idle", request);
    return true;
  }

  // execute_input comes before the cell runs, so its count is predicted
  // from the session's; execute_result and execute_reply use the real one.
  int predicted_count = 0;
  {
    v1::GetSessionRequest req;
    req.set_session_id(session_id_);
    v1::Session session;
    grpc::ClientContext ctx;
    caller_.Apply(ctx);
    if (stub_->GetSession(&ctx, req, &session).ok()) predicted_count = session.execution_count() + 1;
  }
  if (!request.content.value("silent", false)) {
    Publish("iopub", "execute_input", {{"code", code_it->get<std::string>()}, {"execution_count", predicted_count}},
            request);
  }
  auto* call = new ExecuteCall(shared_from_this(), request, predicted_count);
  if (!call->Begin()) {
    delete call;  // closed: the lane is stopped too
    return true;
  }
  return false;  // ExecuteDone() resumes the lane
}

void KernelChannel::ExecuteDone() { shell_.Resume(shared_from_this()); }

// After an error with stop_on_error, the execute requests already queued
// are not run, as in ipykernel: each gets execute_reply status "aborted".
std::deque<Message> KernelChannel::TakeQueuedExecutes() {
  return shell_.TakeIf([](const Message& m) { return m.msg_type() == "execute_request"; });
}

void KernelChannel::Abort(const std::deque<Message>& aborted) {
  for (const Message& m : aborted) {
    Status("busy", m);
    Publish("shell", "execute_reply", {{"status", "aborted"}, {"execution_count", 0}}, m);
    Status("idle", m);
  }
}

}  // namespace warden::jupyter
