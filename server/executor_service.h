// ExecutorService: warden.v1.Executor over the gRPC callback API. Methods
// stay thin: authenticate, convert the request, call the Engine, convert the
// result. Blocking work (running code, starting kernels, moving files) runs
// on threads of its own, never on gRPC's callback threads; each streaming
// RPC has a small reactor that owns the call's state and turns the client's
// cancellation into an interrupt of the running cell.
#pragma once

#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/engine.h"
#include "warden/v1/executor.grpc.pb.h"

namespace warden {

// Maps the "authorization" header (empty if absent) to a tenant, or fails
// with UNAUTHENTICATED.
using Authenticator = std::function<absl::StatusOr<std::string>(const std::string& authorization)>;

// Runs blocking work on its own threads and knows how many are still out.
class Tasks {
 public:
  void Run(std::function<void()> work);
  // Waits until none is running, or the deadline; returns whether idle.
  bool WaitIdle(absl::Time deadline);
  int running() const;

 private:
  mutable absl::Mutex mu_;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
};

class ExecutorService final : public v1::Executor::CallbackService {
 public:
  // Neither is owned; both outlive the service.
  ExecutorService(Engine& engine, Authenticator authenticate)
      : engine_(engine), authenticate_(std::move(authenticate)) {}

  Tasks& tasks() { return tasks_; }

  grpc::ServerUnaryReactor* Execute(grpc::CallbackServerContext* ctx, const v1::ExecuteRequest* request,
                                    v1::ExecuteResponse* response) override;
  grpc::ServerWriteReactor<v1::ExecuteEvent>* ExecuteStream(grpc::CallbackServerContext* ctx,
                                                            const v1::ExecuteRequest* request) override;
  grpc::ServerUnaryReactor* CreateSession(grpc::CallbackServerContext* ctx,
                                          const v1::CreateSessionRequest* request,
                                          v1::Session* response) override;
  grpc::ServerUnaryReactor* GetSession(grpc::CallbackServerContext* ctx,
                                       const v1::GetSessionRequest* request,
                                       v1::Session* response) override;
  grpc::ServerUnaryReactor* ListSessions(grpc::CallbackServerContext* ctx,
                                         const v1::ListSessionsRequest* request,
                                         v1::ListSessionsResponse* response) override;
  grpc::ServerUnaryReactor* CloseSession(grpc::CallbackServerContext* ctx,
                                         const v1::CloseSessionRequest* request,
                                         v1::CloseSessionResponse* response) override;
  grpc::ServerUnaryReactor* InterruptSession(grpc::CallbackServerContext* ctx,
                                             const v1::InterruptSessionRequest* request,
                                             v1::InterruptSessionResponse* response) override;
  grpc::ServerUnaryReactor* RestartSession(grpc::CallbackServerContext* ctx,
                                           const v1::RestartSessionRequest* request,
                                           v1::Session* response) override;
  grpc::ServerReadReactor<v1::UploadFileRequest>* UploadFile(grpc::CallbackServerContext* ctx,
                                                             v1::FileInfo* response) override;
  grpc::ServerWriteReactor<v1::FileChunk>* DownloadFile(grpc::CallbackServerContext* ctx,
                                                        const v1::DownloadFileRequest* request) override;
  grpc::ServerUnaryReactor* ListFiles(grpc::CallbackServerContext* ctx, const v1::ListFilesRequest* request,
                                      v1::ListFilesResponse* response) override;

 private:
  absl::StatusOr<std::string> Tenant(grpc::CallbackServerContext* ctx) const;
  absl::StatusOr<ExecuteCall> ToCall(grpc::CallbackServerContext* ctx, const v1::ExecuteRequest& request) const;

  Engine& engine_;
  Authenticator authenticate_;
  Tasks tasks_;
};

}  // namespace warden
