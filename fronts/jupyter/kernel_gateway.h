// KernelGateway: the Jupyter Kernel Gateway API (jupyter-server/
// kernel_gateway's "jupyter-websocket" mode) as a translation to warden.v1.
// A kernel is a Warden session (ids: kernel_ids.h); every call goes through
// the stub with the caller's authorization, so tenants, quotas and limits
// are the daemon's. Transport-free: the HTTP front routes requests here
// and hands each WebSocket to Connect().
//
//   GET    /api                            {"version": ...}
//   GET    /api/kernelspecs                python3, javascript, bash
//   GET    /api/kernels                    the caller's kernels
//   POST   /api/kernels {name?}            201 + the kernel model
//   GET    /api/kernels/{id}               the kernel model
//   DELETE /api/kernels/{id}               204
//   POST   /api/kernels/{id}/interrupt     204
//   POST   /api/kernels/{id}/restart       200 + the kernel model
//   GET    /api/kernels/{id}/channels      WebSocket (KernelChannel)
//
// Errors have Kernel Gateway's shape, {"reason": ..., "message": ...}, with
// the HTTP status its clients expect (404 for an unknown kernel, 400 for a
// bad body, 401 without a valid token, 413 for a body over the bound, and
// for the rest the mapping all fronts share, fronts/http/status.h).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "fronts/http/work_pool.h"
#include "fronts/jupyter/kernel_channel.h"
#include "grpcpp/support/status.h"
#include "nlohmann/json.hpp"
#include "warden/v1/executor.grpc.pb.h"

namespace warden::jupyter {

// A REST answer: status, JSON body (none for 204) and extra headers.
struct Reply {
  int status = 200;
  nlohmann::json body;  // null: no body
  std::vector<std::pair<std::string, std::string>> headers;
};

// Kernel Gateway's error shape, the one place it is made.
Reply ErrorReply(int status, std::string message);
// A warden.v1 error as a Kernel Gateway error, with the HTTP status every
// front gives that code (http::HttpStatusFor).
Reply ErrorReplyFor(const grpc::Status& status);

class KernelGateway {
 public:
  // Bodies of POST /api/kernels beyond this are refused (413); the front
  // bounds them before reading, this is the gateway's own limit.
  static constexpr size_t kMaxBodyBytes = 64 * 1024;

  explicit KernelGateway(std::shared_ptr<v1::Executor::StubInterface> stub);
  ~KernelGateway();  // stops the channels' lanes: nothing queued runs after

  // Threads the channels' lanes run their short blocking calls on
  // (interrupts, restarts, the count a cell predicts); cells themselves
  // hold none.
  static constexpr int kLaneThreads = 64;

  Reply ApiInfo() const;
  Reply ListKernelSpecs() const;
  Reply ListKernels(const Caller& caller);
  Reply StartKernel(const Caller& caller, absl::string_view body);
  Reply GetKernel(const Caller& caller, absl::string_view kernel_id);
  Reply ShutdownKernel(const Caller& caller, absl::string_view kernel_id);
  Reply InterruptKernel(const Caller& caller, absl::string_view kernel_id);
  Reply RestartKernel(const Caller& caller, absl::string_view kernel_id);

  // Opens the channels of a kernel the caller may use, or returns null
  // with *error set (404 for an unknown kernel) to answer the upgrade
  // request with. The channel counts in the kernel's `connections` until
  // it is destroyed.
  std::shared_ptr<KernelChannel> Connect(const Caller& caller, absl::string_view kernel_id, WireFormat format,
                                         ChannelSink sink, Reply* error);

 private:
  nlohmann::json KernelModel(const v1::Session& session);
  int Connections(const std::string& session_id);
  std::vector<std::shared_ptr<KernelChannel>> ChannelsOf(const std::string& session_id);

  const std::shared_ptr<v1::Executor::StubInterface> stub_;
  const std::shared_ptr<http::WorkPool> lanes_;
  absl::Mutex mu_;
  // session id -> its open channels (pruned as they expire).
  std::map<std::string, std::vector<std::weak_ptr<KernelChannel>>> channels_ ABSL_GUARDED_BY(mu_);
};

}  // namespace warden::jupyter
