#include "server/node_service.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "server/convert.h"

namespace warden {
namespace {

// MemTotal and MemAvailable from /proc/meminfo, in bytes.
std::pair<int64_t, int64_t> Memory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t value = 0;
  std::string unit;
  int64_t total = 0, available = 0;
  while (in >> key >> value) {
    std::getline(in, unit);
    if (key == "MemTotal:") total = value * 1024;
    if (key == "MemAvailable:") available = value * 1024;
  }
  return {total, available};
}

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* ctx, const absl::Status& status) {
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpc(status));
  return reactor;
}

}  // namespace

NodeService::NodeService(Engine& engine, std::shared_ptr<const Tenancy> tenancy, Tasks& tasks,
                         std::string node_name)
    : engine_(engine), tenancy_(std::move(tenancy)), tasks_(tasks), node_name_(std::move(node_name)),
      started_(absl::Now()) {
  CpuIdle();
}

double NodeService::CpuIdle() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  uint64_t total = 0, idle = 0, value = 0;
  in >> cpu;
  for (int field = 0; field < 10 && in >> value; ++field) {
    total += value;
    if (field == 3 || field == 4) idle += value;  // idle, iowait
  }
  absl::MutexLock lock(&mu_);
  if (total > last_total_ && last_total_ != 0) {
    cpu_idle_ = static_cast<double>(idle - last_idle_) / static_cast<double>(total - last_total_);
  }
  last_idle_ = idle;
  last_total_ = total;
  return cpu_idle_;
}

v1::NodeStatus NodeService::Status() {
  const DaemonOptions& options = engine_.options();
  const EngineStats stats = engine_.Stats();
  v1::NodeStatus out;
  out.set_node_id(engine_.node_id());
  out.set_node_name(node_name_);
  out.set_epoch(engine_.epoch());
  out.set_draining(engine_.draining());
  out.set_started_unix_ms(absl::ToUnixMillis(started_));
  out.set_version(WARDEN_VERSION);
  const auto [total, available] = Memory();
  v1::NodeCapacity* capacity = out.mutable_capacity();
  capacity->set_max_sessions(options.sessions.max_total);
  capacity->set_max_live(options.sessions.max_live);
  capacity->set_max_running(options.queue.max_running);
  capacity->set_max_running_per_tenant(options.max_concurrent_per_tenant);
  capacity->set_cpus(static_cast<int>(std::thread::hardware_concurrency()));
  capacity->set_memory_bytes(total);
  v1::NodeLoad* load = out.mutable_load();
  load->set_sessions(stats.sessions);
  load->set_live_sandboxes(stats.live_sessions);
  load->set_executing(stats.executing);
  load->set_memory_committed_bytes(stats.memory_committed_bytes);
  int queued = stats.admission.waiting + stats.starts.waiting;
  int warm = 0;
  for (const auto& [name, pool] : stats.pools) {
    queued += pool.waiting;
    warm += pool.ready;
  }
  load->set_queued(queued);
  load->set_warm_workers(warm);
  load->set_cpu_idle(CpuIdle());
  load->set_memory_available_bytes(available);
  return out;
}

grpc::ServerUnaryReactor* NodeService::GetNodeStatus(grpc::CallbackServerContext* ctx,
                                                     const v1::GetNodeStatusRequest*, v1::NodeStatus* response) {
  // Without a trusted gateway (a single wardend), any authenticated caller may ask.
  absl::Status allowed =
      tenancy_->forwarding() ? tenancy_->CheckGateway(*ctx) : tenancy_->TenantOf(*ctx).status();
  if (!allowed.ok()) return FinishNow(ctx, allowed);
  *response = Status();
  return FinishNow(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* NodeService::TakeOverSession(grpc::CallbackServerContext* ctx,
                                                       const v1::TakeOverSessionRequest* request,
                                                       v1::TakeOverSessionResponse* response) {
  if (absl::Status gateway = tenancy_->CheckGateway(*ctx); !gateway.ok()) return FinishNow(ctx, gateway);
  absl::StatusOr<std::string> tenant = tenancy_->TenantOf(*ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  auto* reactor = ctx->DefaultReactor();
  tasks_.Run([this, reactor, response, tenant = *tenant, id = request->session_id(),
              owner_lost = request->owner_lost()] {
    absl::StatusOr<Engine::TakenOver> taken = engine_.TakeOverSession(tenant, id, owner_lost);
    if (taken.ok()) {
      response->set_node_id(taken->node_id);
      if (taken->session) FillSession(*taken->session, response->mutable_session());
    }
    reactor->Finish(ToGrpc(taken.status()));
  });
  return reactor;
}

}  // namespace warden
