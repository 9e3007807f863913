// NodeDirectory: the nodes a gateway routes to, as it sees them now. It
// resolves the NodeSource every resolve_interval_ms, asks each node for its
// status (warden.v1.Node/GetNodeStatus) every poll_interval_ms, and marks a
// node down by the rule in liveness.h (`down_after` failed asks in a row
// with nothing heard from it meanwhile, or at once when its connection
// cannot be made): calls to it then fail fast, or go elsewhere, and the
// calls it had in flight are cancelled. Nothing here survives a restart,
// and nothing needs to: the next polls rebuild it.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gateway/gateway_options.h"
#include "gateway/liveness.h"
#include "gateway/node_source.h"
#include "gateway/placement.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "warden/v1/fleet.grpc.pb.h"

namespace warden::gateway {

// One node, at one address. Shared by the directory and the calls using it.
class Node {
 public:
  Node(std::string address, std::shared_ptr<grpc::Channel> channel, const NodesOptions& options);

  const std::string& address() const { return address_; }
  grpc::GenericStub& generic() { return generic_; }
  v1::Node::Stub& stub() { return *stub_; }
  grpc::Channel& channel() { return *channel_; }

  std::string node_id() const;
  bool up() const;        // answering its status
  bool draining() const;  // up, but taking no new work
  // The last status it reported (empty before the first).
  v1::NodeStatus status() const;
  // Why and since when it is down (unset while up).
  std::optional<std::pair<absl::Time, std::string>> down() const;
  // When it last answered an ask or said something on a call.
  absl::Time last_heard() const;
  int in_flight() const { return in_flight_.load(); }
  // The node said something on a proxied call: it is alive (liveness.h).
  void Heard();
  // A call placed here that makes a session (CreateSession, RestoreSnapshot)
  // starts, and ends (`created`: it answered with the session). Until the
  // node's next report counts it, placement counts it itself: a burst
  // between two reports must not all go to the node that looked emptiest.
  void PlacingStarted();
  void PlacingEnded(bool created);
  // Sessions being created here now, and created since the report the
  // status is.
  int creating() const { return creating_.load(); }
  int placed_since_report() const;

  // Calls on this node register their context, so that they are cancelled
  // when it goes down (a call to a lost node must never hang).
  // (Shared: the canceller holds it while it cancels, with no lock held,
  // since gRPC may run the call's last reaction inside TryCancel.)
  void Enter(const std::shared_ptr<grpc::ClientContext>& call);
  void Leave(const std::shared_ptr<grpc::ClientContext>& call);

 private:
  friend class NodeDirectory;
  // The directory's poller: the answer to an ask sent at `sent`, or why it
  // failed. Returns true when the node went from up to down.
  bool Record(const grpc::Status& status, const v1::NodeStatus* reported, absl::Time sent);
  void CancelCalls(const std::string& why);

  const std::string address_;
  const std::shared_ptr<grpc::Channel> channel_;
  grpc::GenericStub generic_;
  std::unique_ptr<v1::Node::Stub> stub_;
  std::atomic<int> in_flight_{0};
  std::atomic<int> creating_{0};
  const int down_after_;
  const int64_t poll_timeout_ms_;
  mutable absl::Mutex mu_;
  v1::NodeStatus status_ ABSL_GUARDED_BY(mu_);
  absl::Time status_asked_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();  // when the ask status_ answers went
  std::deque<absl::Time> placed_ ABSL_GUARDED_BY(mu_);  // sessions answered since then, oldest first
  Liveness liveness_ ABSL_GUARDED_BY(mu_);
  int asks_out_ ABSL_GUARDED_BY(mu_) = 0;  // asks sent, not answered or failed yet
  std::set<std::shared_ptr<grpc::ClientContext>> calls_ ABSL_GUARDED_BY(mu_);
};

class NodeDirectory {
 public:
  NodeDirectory(const GatewayOptions& options, std::unique_ptr<NodeSource> source);
  ~NodeDirectory();  // Stop()

  void Start();
  void Stop();

  // The node whose id is `node_id`: the one up if several addresses
  // claimed it (a restarted task moves), else the last seen; null if the
  // gateway has never heard of it.
  std::shared_ptr<Node> ById(const std::string& node_id) const;
  // Every node known now.
  std::vector<std::shared_ptr<Node>> All() const;
  // A node for new work: up, not draining, not in `exclude` (node ids),
  // the better of placement.choices by what `what` weighs (placement.h).
  // Null if there is none.
  std::shared_ptr<Node> Place(const std::set<std::string>& exclude, Placing what);
  // Waits until at least `count` nodes are up, or the deadline.
  bool WaitForNodes(int count, absl::Time deadline) const;
  // A node id's restarts this gateway saw: the time of the last one.
  std::optional<absl::Time> RestartedAt(const std::string& node_id) const;

 private:
  void Loop();
  void ResolveNow();
  void PollAll();
  std::shared_ptr<grpc::Channel> ChannelTo(const std::string& address) const;

  const GatewayOptions options_;
  const std::unique_ptr<NodeSource> source_;
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Node>> by_address_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> epochs_ ABSL_GUARDED_BY(mu_);  // node id -> epoch last seen
  std::map<std::string, absl::Time> restarted_ ABSL_GUARDED_BY(mu_);
  absl::BitGen rng_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread loop_;
};

}  // namespace warden::gateway
