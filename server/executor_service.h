// ExecutorService: warden.v1.Executor over the gRPC callback API. Methods
// stay thin: authenticate, convert the request, call the Engine, convert the
// result. Blocking work (running code, starting kernels, moving files) runs
// on threads of its own, never on gRPC's callback threads; each streaming
// RPC has a small reactor that owns the call's state and turns the client's
// cancellation into an interrupt of the running cell.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/engine.h"
#include "server/path_watchers.h"
#include "server/tasks.h"
#include "server/tenancy.h"
#include "warden/v1/executor.grpc.pb.h"

namespace warden {

class ExecutorService final : public v1::Executor::CallbackService {
 public:
  // Neither is owned; both outlive the service.
  ExecutorService(Engine& engine, std::shared_ptr<const Tenancy> tenancy)
      : engine_(engine),
        tenancy_(std::move(tenancy)),
        watchers_(engine, [this](std::function<void()> work) { tasks_.Run(std::move(work)); }) {}

  Tasks& tasks() { return tasks_; }
  // Ends the polled directory watchers: at shutdown, before the engine stops.
  void StopWatchers() { watchers_.Stop(); }

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
  grpc::ServerUnaryReactor* StatPath(grpc::CallbackServerContext* ctx, const v1::StatPathRequest* request,
                                     v1::FileInfo* response) override;
  grpc::ServerUnaryReactor* MakeDirectory(grpc::CallbackServerContext* ctx,
                                          const v1::MakeDirectoryRequest* request,
                                          v1::FileInfo* response) override;
  grpc::ServerUnaryReactor* MovePath(grpc::CallbackServerContext* ctx, const v1::MovePathRequest* request,
                                     v1::FileInfo* response) override;
  grpc::ServerUnaryReactor* RemovePath(grpc::CallbackServerContext* ctx, const v1::RemovePathRequest* request,
                                       v1::RemovePathResponse* response) override;

  grpc::ServerUnaryReactor* PauseSession(grpc::CallbackServerContext* ctx, const v1::PauseSessionRequest* request,
                                         v1::Session* response) override;
  grpc::ServerUnaryReactor* ResumeSession(grpc::CallbackServerContext* ctx, const v1::ResumeSessionRequest* request,
                                          v1::Session* response) override;
  grpc::ServerUnaryReactor* UpdateNetwork(grpc::CallbackServerContext* ctx, const v1::UpdateNetworkRequest* request,
                                          v1::Session* response) override;
  grpc::ServerBidiReactor<v1::PortStreamRequest, v1::PortStreamResponse>* ConnectPort(
      grpc::CallbackServerContext* ctx) override;
  grpc::ServerUnaryReactor* SetSessionTtl(grpc::CallbackServerContext* ctx,
                                          const v1::SetSessionTtlRequest* request,
                                          v1::Session* response) override;
  grpc::ServerUnaryReactor* CreateContext(grpc::CallbackServerContext* ctx,
                                          const v1::CreateContextRequest* request,
                                          v1::Context* response) override;
  grpc::ServerUnaryReactor* ListContexts(grpc::CallbackServerContext* ctx,
                                         const v1::ListContextsRequest* request,
                                         v1::ListContextsResponse* response) override;
  grpc::ServerUnaryReactor* RestartContext(grpc::CallbackServerContext* ctx,
                                           const v1::RestartContextRequest* request,
                                           v1::Context* response) override;
  grpc::ServerUnaryReactor* RemoveContext(grpc::CallbackServerContext* ctx,
                                          const v1::RemoveContextRequest* request,
                                          v1::RemoveContextResponse* response) override;
  grpc::ServerWriteReactor<v1::CommandEvent>* RunCommand(grpc::CallbackServerContext* ctx,
                                                         const v1::RunCommandRequest* request) override;
  grpc::ServerWriteReactor<v1::CommandEvent>* ConnectCommand(
      grpc::CallbackServerContext* ctx, const v1::ConnectCommandRequest* request) override;
  grpc::ServerUnaryReactor* SendCommandInput(grpc::CallbackServerContext* ctx,
                                             const v1::SendCommandInputRequest* request,
                                             v1::SendCommandInputResponse* response) override;
  grpc::ServerUnaryReactor* SignalCommand(grpc::CallbackServerContext* ctx,
                                          const v1::SignalCommandRequest* request,
                                          v1::SignalCommandResponse* response) override;
  grpc::ServerUnaryReactor* ListCommands(grpc::CallbackServerContext* ctx,
                                         const v1::ListCommandsRequest* request,
                                         v1::ListCommandsResponse* response) override;
  grpc::ServerUnaryReactor* ResizeTerminal(grpc::CallbackServerContext* ctx,
                                           const v1::ResizeTerminalRequest* request,
                                           v1::ResizeTerminalResponse* response) override;
  grpc::ServerWriteReactor<v1::WatchEvent>* WatchPath(grpc::CallbackServerContext* ctx,
                                                      const v1::WatchPathRequest* request) override;
  grpc::ServerUnaryReactor* CreateWatcher(grpc::CallbackServerContext* ctx, const v1::CreateWatcherRequest* request,
                                          v1::Watcher* response) override;
  grpc::ServerUnaryReactor* GetWatcherEvents(grpc::CallbackServerContext* ctx,
                                             const v1::GetWatcherEventsRequest* request,
                                             v1::GetWatcherEventsResponse* response) override;
  grpc::ServerUnaryReactor* RemoveWatcher(grpc::CallbackServerContext* ctx, const v1::RemoveWatcherRequest* request,
                                          v1::RemoveWatcherResponse* response) override;
  grpc::ServerUnaryReactor* SnapshotSession(grpc::CallbackServerContext* ctx,
                                            const v1::SnapshotSessionRequest* request,
                                            v1::Snapshot* response) override;
  grpc::ServerUnaryReactor* RestoreSnapshot(grpc::CallbackServerContext* ctx,
                                            const v1::RestoreSnapshotRequest* request,
                                            v1::Session* response) override;
  grpc::ServerUnaryReactor* ListSnapshots(grpc::CallbackServerContext* ctx,
                                          const v1::ListSnapshotsRequest* request,
                                          v1::ListSnapshotsResponse* response) override;
  grpc::ServerUnaryReactor* DeleteSnapshot(grpc::CallbackServerContext* ctx,
                                           const v1::DeleteSnapshotRequest* request,
                                           v1::DeleteSnapshotResponse* response) override;
  grpc::ServerUnaryReactor* ForkSession(grpc::CallbackServerContext* ctx,
                                        const v1::ForkSessionRequest* request,
                                        v1::ForkSessionResponse* response) override;

 private:
  absl::StatusOr<std::string> Tenant(grpc::CallbackServerContext* ctx) const;
  // The engine's asynchronous calls carry on on the service's threads.
  Runner Run();
  absl::StatusOr<ExecuteCall> ToCall(grpc::CallbackServerContext* ctx, const v1::ExecuteRequest& request) const;

  Engine& engine_;
  std::shared_ptr<const Tenancy> tenancy_;
  Tasks tasks_;
  PathWatchers watchers_;  // after tasks_: stopped (its threads ended) before it goes
};

}  // namespace warden
