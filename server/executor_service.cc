#include "server/executor_service.h"

#include "server/path_watch.h"

#include <signal.h>

#include <algorithm>
#include <deque>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/call_metadata.h"
#include "server/convert.h"
#include "server/port_relay.h"

namespace warden {
namespace {

constexpr size_t kChunkBytes = 64 << 10;

// A unary call whose cancellation interrupts the work behind it.
class CancellableUnary : public grpc::ServerUnaryReactor {
 public:
  explicit CancellableUnary(std::shared_ptr<Cancellation> cancellation)
      : cancellation_(std::move(cancellation)) {}
  void OnCancel() override { cancellation_->Cancel(); }
  void OnDone() override { delete this; }

 private:
  std::shared_ptr<Cancellation> cancellation_;
};

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* ctx, const absl::Status& status) {
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpc(status));
  return reactor;
}

// Writes a queue of messages one at a time (gRPC allows one outstanding
// write), then finishes. Push and Close may be called from any thread;
// Close must be the producer's last call. The client's cancellation
// reaches the producer through the Cancellation.
template <typename Message>
class QueuedWriter : public grpc::ServerWriteReactor<Message> {
 public:
  explicit QueuedWriter(std::shared_ptr<Cancellation> cancellation)
      : cancellation_(std::move(cancellation)) {}

  void Push(Message message) {
    {
      absl::MutexLock lock(&mu_);
      if (failed_ || closing_) return;
      queue_.push_back(std::move(message));
    }
    Pump();
  }
  void Close(grpc::Status status) {
    {
      absl::MutexLock lock(&mu_);
      final_ = std::move(status);
      closing_ = true;
      ++closing_pumps_;
    }
    Pump();
    // A write in flight may finish the call and reach OnDone while this Pump
    // still runs (ASan saw the reactor freed under it): whichever of the two
    // ends last frees it.
    bool free;
    {
      absl::MutexLock lock(&mu_);
      free = --closing_pumps_ == 0 && done_;
    }
    if (free) delete this;
  }
  // Sends the response's initial metadata now, with `key: value` added,
  // ahead of any message: a client learns that its request was accepted
  // before the first event (docs/api.md, ExecuteStream). Before the first
  // Push; `ctx` is the call's.
  void SendHeaders(grpc::CallbackServerContext* ctx, std::string key, std::string value) {
    {
      absl::MutexLock lock(&mu_);
      if (failed_ || closing_ || headers_ctx_ != nullptr) return;
      headers_ctx_ = ctx;
      headers_ = {std::move(key), std::move(value)};
    }
    Pump();
  }
  void OnSendInitialMetadataDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) {
        failed_ = true;
        queue_.clear();
      }
    }
    if (!ok) cancellation_->Cancel();
    Pump();
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      queue_.pop_front();
      if (!ok) {  // the client went away: stop the work, drop the rest
        failed_ = true;
        queue_.clear();
      }
    }
    if (!ok) cancellation_->Cancel();
    Pump();
  }
  void OnCancel() override { cancellation_->Cancel(); }
  // gRPC calls OnDone once every other reaction has returned, ordered by its
  // own hand-off inside libgrpc. Taking the lock once also orders this
  // thread after the last OnWriteDone by a lock: plain to a reader, and to
  // ThreadSanitizer, which cannot see inside libgrpc (docs/security.md).
  void OnDone() override {
    bool free;
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
      free = closing_pumps_ == 0;
    }
    if (free) delete this;
  }

 private:
  // Decides under the lock, acts outside it: gRPC may run reactions inline.
  void Pump() {
    const Message* next = nullptr;
    bool finish = false;
    grpc::CallbackServerContext* headers = nullptr;
    std::pair<std::string, std::string> header;
    grpc::Status status;
    {
      absl::MutexLock lock(&mu_);
      if (writing_ || finished_) return;
      if (headers_ctx_ != nullptr && !headers_sent_ && !failed_) {
        // One operation at a time: the metadata, then the messages.
        headers_sent_ = true;
        writing_ = true;
        headers = headers_ctx_;
        header = headers_;
      } else if (!queue_.empty()) {
        writing_ = true;
        next = &queue_.front();  // deque elements stay put while we push behind them
      } else if (closing_) {
        finished_ = true;
        finish = true;
        status = failed_ ? grpc::Status(grpc::StatusCode::CANCELLED, "the client went away") : final_;
      }
    }
    if (headers) {
      headers->AddInitialMetadata(header.first, header.second);
      this->StartSendInitialMetadata();
    }
    if (next) this->StartWrite(next);
    if (finish) this->Finish(status);
  }

  std::shared_ptr<Cancellation> cancellation_;
  absl::Mutex mu_;
  std::deque<Message> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_ ABSL_GUARDED_BY(mu_);
  grpc::CallbackServerContext* headers_ctx_ ABSL_GUARDED_BY(mu_) = nullptr;  // not owned
  std::pair<std::string, std::string> headers_ ABSL_GUARDED_BY(mu_);
  bool headers_sent_ ABSL_GUARDED_BY(mu_) = false;
  int closing_pumps_ ABSL_GUARDED_BY(mu_) = 0;  // Close calls still in their Pump
  bool done_ ABSL_GUARDED_BY(mu_) = false;       // OnDone came
};

v1::ExecuteEvent ToEvent(const CellEvent& event) {
  v1::ExecuteEvent out;
  switch (event.kind) {
    case CellEvent::Kind::kStdout: out.set_stdout(event.text); break;
    case CellEvent::Kind::kStderr: out.set_stderr(event.text); break;
    case CellEvent::Kind::kDisplayData: *out.mutable_display() = ToProto(event.data); break;
    case CellEvent::Kind::kExecuteResult:
      *out.mutable_result() = ToProto(event.data);
      out.mutable_result()->set_is_result(true);
      break;
    case CellEvent::Kind::kError: *out.mutable_error() = ToProto(event.error); break;
  }
  return out;
}

// UploadFile: a header, then chunks, each written to the file as it comes
// (Engine::Upload): one chunk in memory at a time, whatever the file's size
// and however many uploads run at once. The next chunk is read once the
// last is written, so a client faster than the disk waits (flow control).
class UploadReactor : public grpc::ServerReadReactor<v1::UploadFileRequest> {
 public:
  UploadReactor(grpc::CallbackServerContext* ctx, Engine& engine, Tasks& tasks, std::string tenant,
                v1::FileInfo* response)
      : ctx_(ctx), engine_(engine), tasks_(tasks), tenant_(std::move(tenant)), response_(response) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      if (!have_header_) {
        Finish(ToGrpc(absl::InvalidArgumentError("UploadFile needs a header message first")));
        return;
      }
      if (ctx_->IsCancelled()) {  // the client gave up: the file stays as far as it came
        Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the upload was cancelled"));
        return;
      }
      tasks_.Run([this] {  // the client finished sending
        auto written = upload_->Finish();
        if (written.ok()) FillFileInfo(*written, response_);
        Finish(ToGrpc(written.status()));
      });
      return;
    }
    const int64_t max = engine_.options().limits.max_file_bytes;
    if (request_.has_header()) {
      if (have_header_) {
        Finish(ToGrpc(absl::InvalidArgumentError("UploadFile got a second header")));
        return;
      }
      header_ = request_.header();
      have_header_ = true;
      if (header_.size() > max) {
        Finish(ToGrpc(absl::InvalidArgumentError(
            absl::StrCat("the file is ", header_.size(), " bytes; the server's maximum is ", max))));
        return;
      }
      tasks_.Run([this] {
        FileMetadata metadata(header_.metadata().begin(), header_.metadata().end());
        auto upload = engine_.StartUpload(tenant_, header_.session_id(), header_.path(), metadata);
        if (!upload.ok()) {
          Finish(ToGrpc(upload.status()));
          return;
        }
        upload_ = *std::move(upload);
        StartRead(&request_);
      });
      return;
    }
    if (request_.has_chunk()) {
      if (!have_header_) {
        Finish(ToGrpc(absl::InvalidArgumentError("UploadFile needs the header before any chunk")));
        return;
      }
      tasks_.Run([this] {
        if (absl::Status written = upload_->Write(request_.chunk()); !written.ok()) {
          Finish(ToGrpc(written));
          return;
        }
        StartRead(&request_);
      });
      return;
    }
    Finish(ToGrpc(absl::InvalidArgumentError("an UploadFile message must hold a header or a chunk")));
  }
  void OnDone() override { delete this; }

 private:
  grpc::CallbackServerContext* const ctx_;  // not owned
  Engine& engine_;
  Tasks& tasks_;
  const std::string tenant_;
  v1::FileInfo* response_;
  v1::UploadFileRequest request_;
  v1::UploadFileHeader header_;
  bool have_header_ = false;
  std::unique_ptr<Engine::Upload> upload_;
};

// Streams a command's events from the start until its end, each as soon as
// it comes. When the client goes away first (which wakes the wait), a
// command not in the background is killed.
void FollowCommand(const std::shared_ptr<ManagedCommand>& managed, bool kill_on_cancel,
                   QueuedWriter<v1::CommandEvent>* writer, Cancellation& cancellation) {
  cancellation.Attach(managed->command.get());
  size_t cursor = 0;
  for (;;) {
    auto events = managed->command->Next(&cursor, absl::InfiniteFuture(), cancellation.flag());
    bool ended = false;
    for (const CommandEvent& event : events) {
      ended = ended || event.kind == CommandEvent::Kind::kEnd;
      writer->Push(ToProto(event));
    }
    if (ended) break;
    if (cancellation.cancelled()) {
      if (kill_on_cancel) (void)managed->command->Signal(SIGKILL);
      break;
    }
  }
  cancellation.Detach();
  writer->Close(grpc::Status::OK);
}

}  // namespace

Runner ExecutorService::Run() {
  return [this](std::function<void()> work) { tasks_.Run(std::move(work)); };
}

absl::StatusOr<std::string> ExecutorService::Tenant(grpc::CallbackServerContext* ctx) const {
  return tenancy_->TenantOf(*ctx);
}

absl::StatusOr<ExecuteCall> ExecutorService::ToCall(grpc::CallbackServerContext* ctx,
                                                    const v1::ExecuteRequest& request) const {
  ExecuteCall call;
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return tenant.status();
  call.tenant = *tenant;
  call.code = request.code();
  auto language = FromProto(request.language());
  if (!language.ok()) return language.status();
  call.language = *language;
  call.session_id = request.session_id();
  call.context_id = request.context_id();
  for (const auto& [k, v] : request.env()) call.env.push_back(k + "=" + v);
  std::sort(call.env.begin(), call.env.end());
  call.limits.wall_ms = request.limits().wall_ms();
  call.limits.cpu_ms = request.limits().cpu_ms();
  call.limits.memory_mb = request.limits().memory_mb();
  call.limits.output_bytes = request.limits().output_bytes();
  for (const v1::File& file : request.files()) call.files.emplace_back(file.path(), file.content());
  call.template_name = request.template_();
  if (ctx->deadline() != std::chrono::system_clock::time_point::max()) {
    call.deadline = absl::FromChrono(ctx->deadline());
  }
  return call;
}

grpc::ServerUnaryReactor* ExecutorService::Execute(grpc::CallbackServerContext* ctx,
                                                   const v1::ExecuteRequest* request,
                                                   v1::ExecuteResponse* response) {
  auto call = ToCall(ctx, *request);
  if (!call.ok()) return FinishNow(ctx, call.status());
  auto cancellation = std::make_shared<Cancellation>();
  auto* reactor = new CancellableUnary(cancellation);
  engine_.ExecuteAsync(std::move(*call), nullptr, cancellation.get(), Run(),
                       [reactor, response, cancellation](absl::StatusOr<ExecutionResult> result) {
                         if (result.ok()) FillResponse(result->cell, result->session_id, response);
                         reactor->Finish(ToGrpc(result.status()));
                       });
  return reactor;
}

grpc::ServerWriteReactor<v1::ExecuteEvent>* ExecutorService::ExecuteStream(
    grpc::CallbackServerContext* ctx, const v1::ExecuteRequest* request) {
  auto cancellation = std::make_shared<Cancellation>();
  auto* writer = new QueuedWriter<v1::ExecuteEvent>(cancellation);
  auto call = ToCall(ctx, *request);
  if (!call.ok()) {
    writer->Close(ToGrpc(call.status()));
    return writer;
  }
  // Says the cell was accepted before its first event comes: an HTTP front
  // can answer its own client at once, however long the cell stays silent.
  call->on_accepted = [writer, ctx] { writer->SendHeaders(ctx, kCellAcceptedMetadataKey, "1"); };
  engine_.ExecuteAsync(
      std::move(*call), [writer](const CellEvent& event) { writer->Push(ToEvent(event)); }, cancellation.get(),
      Run(), [writer, cancellation](absl::StatusOr<ExecutionResult> result) {
        if (result.ok()) {
          v1::ExecuteEvent summary;
          FillResponse(result->cell, result->session_id, summary.mutable_summary());
          writer->Push(std::move(summary));
        }
        writer->Close(ToGrpc(result.status()));
      });
  return writer;
}

grpc::ServerUnaryReactor* ExecutorService::CreateSession(grpc::CallbackServerContext* ctx,
                                                         const v1::CreateSessionRequest* request,
                                                         v1::Session* response) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  auto language = FromProto(request->language());
  if (!language.ok()) return FinishNow(ctx, language.status());
  CreateSessionCall call;
  call.tenant = *tenant;
  call.language = *language;
  call.limits.wall_ms = request->limits().wall_ms();
  call.limits.cpu_ms = request->limits().cpu_ms();
  call.limits.memory_mb = request->limits().memory_mb();
  call.limits.output_bytes = request->limits().output_bytes();
  call.ttl_seconds = request->ttl_seconds();
  call.idle_timeout_seconds = request->idle_timeout_seconds();
  call.labels.insert(request->labels().begin(), request->labels().end());
  call.shared_workspace = request->shared_workspace();
  call.workspace_aliases.assign(request->workspace_aliases().begin(), request->workspace_aliases().end());
  switch (request->on_expiry()) {
    case v1::ON_EXPIRY_PAUSE: call.on_expiry = CreateSessionCall::OnExpiry::kPause; break;
    case v1::ON_EXPIRY_PAUSE_FILESYSTEM: call.on_expiry = CreateSessionCall::OnExpiry::kPauseFilesystem; break;
    default: break;
  }
  call.workspace_path = request->workspace_path();
  for (const auto& [k, v] : request->env()) call.env.push_back(k + "=" + v);
  std::sort(call.env.begin(), call.env.end());
  if (ctx->deadline() != std::chrono::system_clock::time_point::max()) {
    call.deadline = absl::FromChrono(ctx->deadline());
  }
  // The context lives until the reactor finishes, after the engine's last
  // use of this.
  call.abandoned = [ctx] { return ctx->IsCancelled(); };
  if (request->has_network()) call.network = FromProto(request->network());
  call.public_ports = request->ports().public_();
  call.port_host_header = request->ports().host_header();
  call.template_name = request->template_();
  for (const v1::VolumeMount& mount : request->volumes()) {
    call.volumes.push_back({mount.volume(), mount.path(), mount.read_only()});
  }
  call.resume_on_port_request = request->ports().resume_on_request();
  auto* reactor = ctx->DefaultReactor();
  engine_.CreateSessionAsync(std::move(call), Run(),
                             [reactor, response](absl::StatusOr<std::shared_ptr<ManagedSession>> entry) {
                               if (entry.ok()) FillSession(**entry, response);
                               reactor->Finish(ToGrpc(entry.status()));
                             });
  return reactor;
}

grpc::ServerUnaryReactor* ExecutorService::GetSession(grpc::CallbackServerContext* ctx,
                                                      const v1::GetSessionRequest* request,
                                                      v1::Session* response) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  auto entry = engine_.GetSession(*tenant, request->session_id());
  if (entry.ok()) FillSession(**entry, response);
  return FinishNow(ctx, entry.status());
}

grpc::ServerUnaryReactor* ExecutorService::ListSessions(grpc::CallbackServerContext* ctx,
                                                        const v1::ListSessionsRequest* request,
                                                        v1::ListSessionsResponse* response) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  std::map<std::string, std::string> labels(request->labels().begin(), request->labels().end());
  for (const auto& entry : engine_.ListSessions(*tenant, labels)) FillSession(*entry, response->add_sessions());
  return FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* ExecutorService::CloseSession(grpc::CallbackServerContext* ctx,
                                                        const v1::CloseSessionRequest* request,
                                                        v1::CloseSessionResponse*) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  // Closing may tear the sandbox down (milliseconds): not on gRPC's thread.
  auto* reactor = ctx->DefaultReactor();
  tasks_.Run([this, reactor, tenant = *tenant, id = request->session_id()] {
    reactor->Finish(ToGrpc(engine_.CloseSession(tenant, id)));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ExecutorService::InterruptSession(grpc::CallbackServerContext* ctx,
                                                            const v1::InterruptSessionRequest* request,
                                                            v1::InterruptSessionResponse* response) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  auto was_busy = engine_.InterruptSession(*tenant, request->session_id());
  if (was_busy.ok()) response->set_was_busy(*was_busy);
  return FinishNow(ctx, was_busy.status());
}

grpc::ServerUnaryReactor* ExecutorService::RestartSession(grpc::CallbackServerContext* ctx,
                                                          const v1::RestartSessionRequest* request,
                                                          v1::Session* response) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  auto* reactor = ctx->DefaultReactor();
  tasks_.Run([this, reactor, response, tenant = *tenant, id = request->session_id(),
              clear = request->clear_workspace()] {
    auto entry = engine_.RestartSession(tenant, id, clear);
    if (entry.ok()) FillSession(**entry, response);
    reactor->Finish(ToGrpc(entry.status()));
  });
  return reactor;
}

grpc::ServerReadReactor<v1::UploadFileRequest>* ExecutorService::UploadFile(grpc::CallbackServerContext* ctx,
                                                                            v1::FileInfo* response) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) {
    // A reactor that refuses at once.
    class Refuse : public grpc::ServerReadReactor<v1::UploadFileRequest> {
     public:
      explicit Refuse(const absl::Status& s) { Finish(ToGrpc(s)); }
      void OnDone() override { delete this; }
    };
    return new Refuse(tenant.status());
  }
  return new UploadReactor(ctx, engine_, tasks_, *tenant, response);
}

grpc::ServerWriteReactor<v1::FileChunk>* ExecutorService::DownloadFile(grpc::CallbackServerContext* ctx,
                                                                       const v1::DownloadFileRequest* request) {
  auto writer = new QueuedWriter<v1::FileChunk>(std::make_shared<Cancellation>());
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) {
    writer->Close(ToGrpc(tenant.status()));
    return writer;
  }
  tasks_.Run([this, writer, tenant = *tenant, id = request->session_id(), path = request->path()] {
    auto data = engine_.ReadFile(tenant, id, path);
    if (data.ok()) {
      size_t offset = 0;
      do {
        v1::FileChunk chunk;
        if (offset == 0) chunk.set_total_size(static_cast<int64_t>(data->size()));
        chunk.set_data(data->substr(offset, kChunkBytes));
        writer->Push(std::move(chunk));
        offset += kChunkBytes;
      } while (offset < data->size());
    }
    writer->Close(ToGrpc(data.status()));
  });
  return writer;
}

grpc::ServerUnaryReactor* ExecutorService::ListFiles(grpc::CallbackServerContext* ctx,
                                                     const v1::ListFilesRequest* request,
                                                     v1::ListFilesResponse* response) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  if (request->depth() < 0) {
    return FinishNow(ctx, absl::InvalidArgumentError("depth must be 0 (all levels) or more"));
  }
  auto entries = engine_.ListFiles(*tenant, request->session_id(), request->path(), request->depth());
  if (entries.ok()) {
    for (const WorkspaceListing& e : *entries) FillFileInfo(e, response->add_files());
  }
  return FinishNow(ctx, entries.status());
}


grpc::ServerUnaryReactor* ExecutorService::StatPath(grpc::CallbackServerContext* ctx,
                                                    const v1::StatPathRequest* request, v1::FileInfo* response) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  auto entry = engine_.StatPath(*tenant, request->session_id(), request->path());
  if (entry.ok()) FillFileInfo(*entry, response);
  return FinishNow(ctx, entry.status());
}

grpc::ServerUnaryReactor* ExecutorService::MakeDirectory(grpc::CallbackServerContext* ctx,
                                                         const v1::MakeDirectoryRequest* request,
                                                         v1::FileInfo* response) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  auto entry = engine_.MakeDirectory(*tenant, request->session_id(), request->path());
  if (entry.ok()) FillFileInfo(*entry, response);
  return FinishNow(ctx, entry.status());
}

grpc::ServerUnaryReactor* ExecutorService::MovePath(grpc::CallbackServerContext* ctx,
                                                    const v1::MovePathRequest* request, v1::FileInfo* response) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  auto entry = engine_.MovePath(*tenant, request->session_id(), request->from(), request->to());
  if (entry.ok()) FillFileInfo(*entry, response);
  return FinishNow(ctx, entry.status());
}

grpc::ServerUnaryReactor* ExecutorService::RemovePath(grpc::CallbackServerContext* ctx,
                                                      const v1::RemovePathRequest* request,
                                                      v1::RemovePathResponse* response) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  return FinishNow(ctx, engine_.RemovePath(*tenant, request->session_id(), request->path()));
}

}  // namespace warden

namespace warden {

grpc::ServerUnaryReactor* ExecutorService::PauseSession(grpc::CallbackServerContext* ctx,
                                                        const v1::PauseSessionRequest* request,
                                                        v1::Session* response) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  // Freezing waits for the kernel, restarting starts interpreters: not on gRPC's thread.
  auto* reactor = ctx->DefaultReactor();
  tasks_.Run([this, reactor, response, tenant = *tenant, id = request->session_id(),
              keep = request->keep_memory()] {
    auto entry = engine_.PauseSession(tenant, id, keep);
    if (entry.ok()) FillSession(**entry, response);
    reactor->Finish(ToGrpc(entry.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ExecutorService::ResumeSession(grpc::CallbackServerContext* ctx,
                                                         const v1::ResumeSessionRequest* request,
                                                         v1::Session* response) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  auto* reactor = ctx->DefaultReactor();
  tasks_.Run([this, reactor, response, tenant = *tenant, id = request->session_id()] {
    auto entry = engine_.ResumeSession(tenant, id);
    if (entry.ok()) FillSession(**entry, response);
    reactor->Finish(ToGrpc(entry.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ExecutorService::UpdateNetwork(grpc::CallbackServerContext* ctx,
                                                         const v1::UpdateNetworkRequest* request,
                                                         v1::Session* response) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  std::optional<egress::PolicySpec> network;
  if (request->has_network()) network = FromProto(request->network());
  auto entry = engine_.UpdateNetwork(*tenant, request->session_id(), std::move(network));
  if (entry.ok()) FillSession(**entry, response);
  return FinishNow(ctx, entry.status());
}

grpc::ServerBidiReactor<v1::PortStreamRequest, v1::PortStreamResponse>* ExecutorService::ConnectPort(
    grpc::CallbackServerContext* ctx) {
  // A caller without any token may still reach a session's ports with its
  // traffic token (in the first message) or when they are public; a token
  // that is wrong is refused as on every call.
  std::optional<std::string> tenant;
  const auto& metadata = ctx->client_metadata();
  const bool has_credential =
      metadata.find("authorization") != metadata.end() || metadata.find(kForwardedTenantHeader) != metadata.end();
  absl::StatusOr<std::string> who = Tenant(ctx);
  if (who.ok()) {
    tenant = *who;
  } else if (has_credential) {
    class Refuse : public grpc::ServerBidiReactor<v1::PortStreamRequest, v1::PortStreamResponse> {
     public:
      explicit Refuse(const absl::Status& status) { Finish(ToGrpc(status)); }
      void OnDone() override { delete this; }
    };
    return new Refuse(who.status());
  }
  if (engine_.network() == nullptr) {
    class Refuse : public grpc::ServerBidiReactor<v1::PortStreamRequest, v1::PortStreamResponse> {
     public:
      Refuse() { Finish(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "this wardend has no network layer")); }
      void OnDone() override { delete this; }
    };
    return new Refuse();
  }
  return NewPortRelay(ctx, engine_, tasks_, engine_.network()->proxy().io(), std::move(tenant));
}

grpc::ServerUnaryReactor* ExecutorService::SetSessionTtl(grpc::CallbackServerContext* ctx,
                                                         const v1::SetSessionTtlRequest* request,
                                                         v1::Session* response) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  auto entry = engine_.SetSessionTtl(*tenant, request->session_id(), request->ttl_seconds());
  if (entry.ok()) FillSession(**entry, response);
  return FinishNow(ctx, entry.status());
}

grpc::ServerUnaryReactor* ExecutorService::CreateContext(grpc::CallbackServerContext* ctx,
                                                         const v1::CreateContextRequest* request,
                                                         v1::Context* response) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  auto language = FromProto(request->language());
  if (!language.ok()) return FinishNow(ctx, language.status());
  auto* reactor = ctx->DefaultReactor();
  tasks_.Run([this, reactor, response, tenant = *tenant, id = request->session_id(), language = *language,
              cwd = request->cwd()] {
    auto context = engine_.CreateContext(tenant, id, language, cwd);
    if (context.ok()) FillContext(**context, response);
    reactor->Finish(ToGrpc(context.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ExecutorService::ListContexts(grpc::CallbackServerContext* ctx,
                                                        const v1::ListContextsRequest* request,
                                                        v1::ListContextsResponse* response) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  auto contexts = engine_.ListContexts(*tenant, request->session_id());
  if (contexts.ok()) {
    for (const auto& context : *contexts) FillContext(*context, response->add_contexts());
    response->set_session_memory_bytes(PeakMemoryBytes(*contexts->front()));
  }
  return FinishNow(ctx, contexts.status());
}

grpc::ServerUnaryReactor* ExecutorService::RestartContext(grpc::CallbackServerContext* ctx,
                                                          const v1::RestartContextRequest* request,
                                                          v1::Context* response) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  auto* reactor = ctx->DefaultReactor();
  tasks_.Run([this, reactor, response, tenant = *tenant, id = request->session_id(),
              context_id = request->context_id()] {
    auto context = engine_.RestartContext(tenant, id, context_id);
    if (context.ok()) FillContext(**context, response);
    reactor->Finish(ToGrpc(context.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ExecutorService::RemoveContext(grpc::CallbackServerContext* ctx,
                                                         const v1::RemoveContextRequest* request,
                                                         v1::RemoveContextResponse*) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  // The context's sandbox is torn down here (milliseconds): not on gRPC's thread.
  auto* reactor = ctx->DefaultReactor();
  tasks_.Run([this, reactor, tenant = *tenant, id = request->session_id(), context_id = request->context_id()] {
    reactor->Finish(ToGrpc(engine_.RemoveContext(tenant, id, context_id)));
  });
  return reactor;
}

grpc::ServerWriteReactor<v1::CommandEvent>* ExecutorService::RunCommand(grpc::CallbackServerContext* ctx,
                                                                       const v1::RunCommandRequest* request) {
  auto cancellation = std::make_shared<Cancellation>();
  auto* writer = new QueuedWriter<v1::CommandEvent>(cancellation);
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) {
    writer->Close(ToGrpc(tenant.status()));
    return writer;
  }
  RunCommandCall call;
  call.tenant = *tenant;
  call.session_id = request->session_id();
  call.argv.assign(request->argv().begin(), request->argv().end());
  for (const auto& [k, v] : request->env()) call.env.push_back(k + "=" + v);
  call.cwd = request->cwd();
  call.stdin_open = request->stdin();
  call.wall_ms = request->timeout_ms();
  call.tag = request->tag();
  if (request->has_terminal()) {
    const auto clamp = [](uint32_t v, uint16_t fallback) {
      return v == 0 ? fallback : static_cast<uint16_t>(std::min<uint32_t>(v, 4096));
    };
    call.terminal = {{clamp(request->terminal().cols(), 80), clamp(request->terminal().rows(), 24)}};
  }
  tasks_.Run([this, writer, cancellation, call = std::move(call), background = request->background()] {
    auto managed = engine_.StartCommand(call);
    if (!managed.ok()) {
      writer->Close(ToGrpc(managed.status()));
      return;
    }
    v1::CommandEvent started;
    started.set_started((*managed)->id);
    writer->Push(std::move(started));
    FollowCommand(*managed, !background, writer, *cancellation);
  });
  return writer;
}

grpc::ServerWriteReactor<v1::CommandEvent>* ExecutorService::ConnectCommand(
    grpc::CallbackServerContext* ctx, const v1::ConnectCommandRequest* request) {
  auto cancellation = std::make_shared<Cancellation>();
  auto* writer = new QueuedWriter<v1::CommandEvent>(cancellation);
  auto tenant = Tenant(ctx);
  auto managed = tenant.ok() ? engine_.GetCommand(*tenant, request->session_id(), request->command_id())
                             : tenant.status();
  if (!managed.ok()) {
    writer->Close(ToGrpc(managed.status()));
    return writer;
  }
  tasks_.Run([writer, cancellation, managed = *managed] {
    v1::CommandEvent started;
    started.set_started(managed->id);
    writer->Push(std::move(started));
    FollowCommand(managed, /*kill_on_cancel=*/false, writer, *cancellation);
  });
  return writer;
}

grpc::ServerUnaryReactor* ExecutorService::SendCommandInput(grpc::CallbackServerContext* ctx,
                                                            const v1::SendCommandInputRequest* request,
                                                            v1::SendCommandInputResponse*) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  auto managed = engine_.GetCommand(*tenant, request->session_id(), request->command_id());
  if (!managed.ok()) return FinishNow(ctx, managed.status());
  absl::Status status = absl::OkStatus();
  if (!request->data().empty()) status = (*managed)->command->WriteStdin(request->data());
  if (status.ok() && request->close()) status = (*managed)->command->CloseStdin();
  return FinishNow(ctx, status);
}

grpc::ServerUnaryReactor* ExecutorService::SignalCommand(grpc::CallbackServerContext* ctx,
                                                         const v1::SignalCommandRequest* request,
                                                         v1::SignalCommandResponse*) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  const int sig = request->signal() == 0 ? SIGKILL : request->signal();
  if (sig < 1 || sig >= NSIG) {
    return FinishNow(ctx, absl::InvalidArgumentError(absl::StrCat("signal ", sig, " is not a signal number")));
  }
  auto managed = engine_.GetCommand(*tenant, request->session_id(), request->command_id());
  if (!managed.ok()) return FinishNow(ctx, managed.status());
  return FinishNow(ctx, (*managed)->command->Signal(sig));
}

grpc::ServerUnaryReactor* ExecutorService::ListCommands(grpc::CallbackServerContext* ctx,
                                                        const v1::ListCommandsRequest* request,
                                                        v1::ListCommandsResponse* response) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  auto commands = engine_.ListCommands(*tenant, request->session_id());
  if (commands.ok()) {
    for (const auto& command : *commands) FillCommand(*command, response->add_commands());
  }
  return FinishNow(ctx, commands.status());
}

grpc::ServerUnaryReactor* ExecutorService::ResizeTerminal(grpc::CallbackServerContext* ctx,
                                                          const v1::ResizeTerminalRequest* request,
                                                          v1::ResizeTerminalResponse*) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  const uint32_t cols = request->size().cols(), rows = request->size().rows();
  if (cols == 0 || rows == 0 || cols > 4096 || rows > 4096) {
    return FinishNow(ctx, absl::InvalidArgumentError("a terminal's size is 1-4096 columns and rows"));
  }
  auto managed = engine_.GetCommand(*tenant, request->session_id(), request->command_id());
  if (!managed.ok()) return FinishNow(ctx, managed.status());
  return FinishNow(ctx, (*managed)->command->Resize(static_cast<uint16_t>(cols), static_cast<uint16_t>(rows)));
}

grpc::ServerWriteReactor<v1::WatchEvent>* ExecutorService::WatchPath(grpc::CallbackServerContext* ctx,
                                                                    const v1::WatchPathRequest* request) {
  auto cancellation = std::make_shared<Cancellation>();
  auto* writer = new QueuedWriter<v1::WatchEvent>(cancellation);
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) {
    writer->Close(ToGrpc(tenant.status()));
    return writer;
  }
  tasks_.Run([this, writer, cancellation, tenant = *tenant, request = *request] {
    writer->Close(ToGrpc(WatchSessionPath(engine_, tenant, request, *cancellation,
                                          [writer](v1::WatchEvent event) { writer->Push(std::move(event)); })));
  });
  return writer;
}

grpc::ServerUnaryReactor* ExecutorService::CreateWatcher(grpc::CallbackServerContext* ctx,
                                                         const v1::CreateWatcherRequest* request,
                                                         v1::Watcher* response) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  // Waits for warden-watch to be in place (milliseconds; up to its start
  // timeout): not on gRPC's thread.
  auto* reactor = ctx->DefaultReactor();
  tasks_.Run([this, reactor, response, tenant = *tenant, request] {
    auto id = watchers_.Create(tenant, *request);
    if (id.ok()) response->set_watcher_id(*id);
    reactor->Finish(ToGrpc(id.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ExecutorService::GetWatcherEvents(grpc::CallbackServerContext* ctx,
                                                            const v1::GetWatcherEventsRequest* request,
                                                            v1::GetWatcherEventsResponse* response) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  return FinishNow(ctx, watchers_.TakeEvents(*tenant, *request, response));
}

grpc::ServerUnaryReactor* ExecutorService::RemoveWatcher(grpc::CallbackServerContext* ctx,
                                                         const v1::RemoveWatcherRequest* request,
                                                         v1::RemoveWatcherResponse*) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  return FinishNow(ctx, watchers_.Remove(*tenant, *request));
}

grpc::ServerUnaryReactor* ExecutorService::SnapshotSession(grpc::CallbackServerContext* ctx,
                                                           const v1::SnapshotSessionRequest* request,
                                                           v1::Snapshot* response) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  // The kernel packs the state (tens of milliseconds to seconds): not on gRPC's thread.
  auto* reactor = ctx->DefaultReactor();
  tasks_.Run([this, reactor, response, tenant = *tenant, id = request->session_id(), name = request->name()] {
    auto record = engine_.SnapshotSession(tenant, id, name);
    if (record.ok()) FillSnapshot(*record, response);
    reactor->Finish(ToGrpc(record.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ExecutorService::RestoreSnapshot(grpc::CallbackServerContext* ctx,
                                                           const v1::RestoreSnapshotRequest* request,
                                                           v1::Session* response) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  auto* reactor = ctx->DefaultReactor();
  tasks_.Run([this, reactor, response, tenant = *tenant, request] {
    std::map<std::string, std::string> labels(request->labels().begin(), request->labels().end());
    auto entry = engine_.RestoreSnapshot(tenant, request->snapshot_id(), request->ttl_seconds(), labels);
    if (entry.ok()) FillSession(**entry, response);
    reactor->Finish(ToGrpc(entry.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* ExecutorService::ListSnapshots(grpc::CallbackServerContext* ctx,
                                                         const v1::ListSnapshotsRequest*,
                                                         v1::ListSnapshotsResponse* response) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  for (const SnapshotRecord& record : engine_.ListSnapshots(*tenant)) {
    FillSnapshot(record, response->add_snapshots());
  }
  response->set_used_bytes(engine_.snapshots().UsedBytes(*tenant));
  response->set_quota_bytes(engine_.snapshots().max_bytes_per_tenant());
  return FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* ExecutorService::DeleteSnapshot(grpc::CallbackServerContext* ctx,
                                                          const v1::DeleteSnapshotRequest* request,
                                                          v1::DeleteSnapshotResponse*) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  return FinishNow(ctx, engine_.DeleteSnapshot(*tenant, request->snapshot_id()));
}

grpc::ServerUnaryReactor* ExecutorService::ForkSession(grpc::CallbackServerContext* ctx,
                                                       const v1::ForkSessionRequest* request,
                                                       v1::ForkSessionResponse* response) {
  auto tenant = Tenant(ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  auto* reactor = ctx->DefaultReactor();
  tasks_.Run([this, reactor, response, tenant = *tenant, request] {
    std::map<std::string, std::string> labels(request->labels().begin(), request->labels().end());
    auto fork = engine_.ForkSession(tenant, request->session_id(), labels);
    if (fork.ok()) {
      FillSession(*fork->session, response->mutable_session());
      response->mutable_left_out()->insert(fork->left_out.begin(), fork->left_out.end());
    }
    reactor->Finish(ToGrpc(fork.status()));
  });
  return reactor;
}

}  // namespace warden
