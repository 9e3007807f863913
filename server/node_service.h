// NodeService: warden.v1.Node (proto/warden/v1/fleet.proto), what
// warden-gateway asks a node of a fleet: its id, capacity, load and whether
// it drains, and to take over sessions another node handed over. Only the
// gateway's certificate may call it (server/tenancy.h).
#pragma once

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/engine.h"
#include "server/tasks.h"
#include "server/tenancy.h"
#include "warden/v1/fleet.grpc.pb.h"

namespace warden {

class NodeService final : public v1::Node::CallbackService {
 public:
  // Not owned; all outlive the service. TakeOverSession runs on `tasks`.
  NodeService(Engine& engine, std::shared_ptr<const Tenancy> tenancy, Tasks& tasks, std::string node_name);

  grpc::ServerUnaryReactor* GetNodeStatus(grpc::CallbackServerContext* ctx, const v1::GetNodeStatusRequest* request,
                                          v1::NodeStatus* response) override;
  grpc::ServerUnaryReactor* TakeOverSession(grpc::CallbackServerContext* ctx,
                                            const v1::TakeOverSessionRequest* request,
                                            v1::TakeOverSessionResponse* response) override;

  // The status as GetNodeStatus answers it.
  v1::NodeStatus Status();

 private:
  // The machine's idle CPU since the last call (/proc/stat), 0..1.
  double CpuIdle();

  Engine& engine_;
  std::shared_ptr<const Tenancy> tenancy_;
  Tasks& tasks_;
  const std::string node_name_;
  const absl::Time started_;
  absl::Mutex mu_;
  uint64_t last_idle_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t last_total_ ABSL_GUARDED_BY(mu_) = 0;
  double cpu_idle_ ABSL_GUARDED_BY(mu_) = 1.0;
};

}  // namespace warden
