#include "gateway/node_directory.h"

#include <spdlog/spdlog.h>

#include <arpa/inet.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gateway/placement.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace warden::gateway {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// A connection that cannot be made: the node is down now, not after
// `down_after` polls.
bool Unreachable(const grpc::Status& status, grpc::Channel& channel) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return false;
  return channel.GetState(false) == GRPC_CHANNEL_TRANSIENT_FAILURE;
}

}  // namespace

Node::Node(std::string address, std::shared_ptr<grpc::Channel> channel, const NodesOptions& options)
    : address_(std::move(address)),
      channel_(channel),
      generic_(channel),
      stub_(v1::Node::NewStub(channel)),
      down_after_(options.down_after),
      poll_timeout_ms_(options.poll_timeout_ms),
      liveness_(options.down_after) {}

std::string Node::node_id() const {
  absl::MutexLock lock(&mu_);
  return status_.node_id();
}

bool Node::up() const {
  absl::MutexLock lock(&mu_);
  return liveness_.up();
}

bool Node::draining() const {
  absl::MutexLock lock(&mu_);
  return liveness_.up() && status_.draining();
}

v1::NodeStatus Node::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

std::optional<std::pair<absl::Time, std::string>> Node::down() const {
  absl::MutexLock lock(&mu_);
  if (liveness_.up()) return std::nullopt;
  return std::make_pair(liveness_.down_since(), liveness_.down_reason());
}

absl::Time Node::last_heard() const {
  absl::MutexLock lock(&mu_);
  return liveness_.last_heard();
}

void Node::Heard() {
  absl::MutexLock lock(&mu_);
  liveness_.Heard(absl::Now());
}

void Node::PlacingStarted() { ++creating_; }

void Node::PlacingEnded(bool created) {
  --creating_;
  if (!created) return;
  absl::MutexLock lock(&mu_);
  placed_.push_back(absl::Now());
}

int Node::placed_since_report() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(placed_.size());
}

void Node::Enter(const std::shared_ptr<grpc::ClientContext>& call) {
  ++in_flight_;
  absl::MutexLock lock(&mu_);
  calls_.insert(call);
}

void Node::Leave(const std::shared_ptr<grpc::ClientContext>& call) {
  --in_flight_;
  absl::MutexLock lock(&mu_);
  calls_.erase(call);
}

void Node::CancelCalls(const std::string& why) {
  std::vector<std::shared_ptr<grpc::ClientContext>> calls;
  {
    absl::MutexLock lock(&mu_);
    calls.assign(calls_.begin(), calls_.end());
  }
  if (!calls.empty()) spdlog::warn("node {} ({}): cancelling {} calls: {}", node_id(), address_, calls.size(), why);
  for (const auto& call : calls) call->TryCancel();
}

bool Node::Record(const grpc::Status& status, const v1::NodeStatus* reported, absl::Time sent) {
  bool went_down = false;
  std::string reason;
  {
    absl::MutexLock lock(&mu_);
    --asks_out_;
    if (status.ok()) {
      if (!liveness_.up()) {
        spdlog::info("node {} at {} is up (epoch {}{})", reported->node_id(), address_, reported->epoch(),
                     reported->draining() ? ", draining" : "");
      }
      // Asks overlap: an older answer arriving late must not undo a newer one.
      if (sent >= status_asked_) {
        status_ = *reported;
        status_asked_ = sent;
        // The node answered after `sent`: the sessions it had made by then
        // are in its count.
        while (!placed_.empty() && placed_.front() <= sent) placed_.pop_front();
      }
      liveness_.Answered(absl::Now());
      return false;
    }
    const bool unreachable = Unreachable(status, *channel_);
    const std::string why =
        status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED
            ? absl::StrCat("it answered none of ", down_after_, " status asks in a row within ", poll_timeout_ms_,
                           " ms each, nor any call meanwhile (stopped, or cut off)")
            : status.error_message();
    went_down = liveness_.Failed(sent, absl::Now(), unreachable, why);
    reason = liveness_.down_reason();
  }
  if (went_down) {
    spdlog::warn("node {} at {} is down: {}", node_id(), address_, reason);
    CancelCalls(absl::StrCat("the node is down: ", reason));
  }
  return went_down;
}

NodeDirectory::NodeDirectory(const GatewayOptions& options, std::unique_ptr<NodeSource> source)
    : options_(options), source_(std::move(source)) {
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ReadFile(options_.nodes.ca_file);
  ssl.pem_private_key = ReadFile(options_.nodes.key_file);
  ssl.pem_cert_chain = ReadFile(options_.nodes.cert_file);
  credentials_ = grpc::SslCredentials(ssl);
}

NodeDirectory::~NodeDirectory() { Stop(); }

std::shared_ptr<grpc::Channel> NodeDirectory::ChannelTo(const std::string& address) const {
  grpc::ChannelArguments args;
  if (!options_.nodes.server_name.empty()) args.SetSslTargetNameOverride(options_.nodes.server_name);
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // Reconnect quickly once a node is back (gRPC's default backoff grows to
  // two minutes); the polls decide whether it is up.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // The gateway retries itself, knowing what a node may not have started
  // (proxy_call.h); gRPC's own retries would keep a copy of every call's
  // headers and messages for a replay that never comes.
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  // One channel per node: never let gRPC share a subchannel between them.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // IP literals as they are; a host name (a static list may hold them)
  // through gRPC's resolver.
  std::string target = absl::StrCat("dns:///", address);
  if (!address.empty() && address.front() == '[') {
    target = absl::StrCat("ipv6:", address);
  } else if (in_addr v4; inet_pton(AF_INET, address.substr(0, address.rfind(':')).c_str(), &v4) == 1) {
    target = absl::StrCat("ipv4:", address);
  }
  return grpc::CreateCustomChannel(target, credentials_, args);
}

void NodeDirectory::Start() {
  ResolveNow();
  loop_ = std::thread([this] { Loop(); });
}

void NodeDirectory::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (loop_.joinable()) loop_.join();
}

void NodeDirectory::ResolveNow() {
  absl::StatusOr<std::vector<std::string>> addresses = source_->Resolve();
  if (!addresses.ok()) {
    spdlog::warn("nodes: {} (keeping the {} known)", std::string(addresses.status().message()), All().size());
    return;
  }
  absl::MutexLock lock(&mu_);
  std::set<std::string> now(addresses->begin(), addresses->end());
  for (const std::string& address : now) {
    if (!by_address_.count(address)) {
      by_address_[address] = std::make_shared<Node>(address, ChannelTo(address), options_.nodes);
    }
  }
  // An address gone from the records stays while it answers (a draining
  // node leaves DNS before it has handed its sessions over), and until
  // then its calls route on; once down and gone, it goes.
  for (auto it = by_address_.begin(); it != by_address_.end();) {
    if (!now.count(it->first) && !it->second->up()) {
      it = by_address_.erase(it);
    } else {
      ++it;
    }
  }
}

void NodeDirectory::PollAll() {
  // Asks overlap: a new one goes every interval while earlier ones wait
  // for their deadline, so that `down_after` failures take one timeout and
  // down_after - 1 intervals, not down_after of each (liveness.h).
  const int max_out = static_cast<int>(options_.nodes.poll_timeout_ms / options_.nodes.poll_interval_ms) + 2;
  for (const std::shared_ptr<Node>& node : All()) {
    {
      absl::MutexLock lock(&node->mu_);
      if (node->asks_out_ >= max_out) continue;
      ++node->asks_out_;
    }
    struct Poll {
      grpc::ClientContext ctx;
      v1::GetNodeStatusRequest request;
      v1::NodeStatus response;
      absl::Time sent = absl::Now();
    };
    auto poll = std::make_shared<Poll>();
    poll->ctx.set_deadline(absl::ToChronoTime(poll->sent + absl::Milliseconds(options_.nodes.poll_timeout_ms)));
    node->stub().async()->GetNodeStatus(
        &poll->ctx, &poll->request, &poll->response, [this, node, poll](grpc::Status status) {
          node->Record(status, &poll->response, poll->sent);
          if (!status.ok()) return;
          absl::MutexLock lock(&mu_);
          std::string& epoch = epochs_[poll->response.node_id()];
          if (!epoch.empty() && epoch != poll->response.epoch()) {
            spdlog::warn("node {} restarted (epoch {} -> {}): the sessions it held then are gone unless handed over",
                         poll->response.node_id(), epoch, poll->response.epoch());
            restarted_[poll->response.node_id()] = absl::Now();
          }
          epoch = poll->response.epoch();
        });
  }
}

void NodeDirectory::Loop() {
  absl::Time next_resolve = absl::Now() + absl::Milliseconds(options_.nodes.resolve_interval_ms);
  do {
    if (absl::Now() >= next_resolve) {
      ResolveNow();
      next_resolve = absl::Now() + absl::Milliseconds(options_.nodes.resolve_interval_ms);
    }
    PollAll();
  } while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(options_.nodes.poll_interval_ms)));
}

std::vector<std::shared_ptr<Node>> NodeDirectory::All() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<Node>> out;
  for (const auto& [address, node] : by_address_) out.push_back(node);
  return out;
}

std::shared_ptr<Node> NodeDirectory::ById(const std::string& node_id) const {
  std::shared_ptr<Node> found;
  for (const std::shared_ptr<Node>& node : All()) {
    if (node->node_id() != node_id) continue;
    if (node->up()) return node;
    found = node;
  }
  return found;
}

std::shared_ptr<Node> NodeDirectory::Place(const std::set<std::string>& exclude, Placing what) {
  std::vector<std::shared_ptr<Node>> candidates;
  std::vector<NodeView> views;
  for (const std::shared_ptr<Node>& node : All()) {
    if (!node->up() || node->draining()) continue;
    NodeView view{node->status(), node->in_flight(), node->placed_since_report() + node->creating()};
    if (exclude.count(view.status.node_id())) continue;
    candidates.push_back(node);
    views.push_back(std::move(view));
  }
  const std::vector<double> scores = PlacementScores(views, what);
  absl::MutexLock lock(&mu_);
  const int best = PickBestOfK(scores, options_.placement.choices, rng_);
  return best < 0 ? nullptr : candidates[best];
}

bool NodeDirectory::WaitForNodes(int count, absl::Time deadline) const {
  while (absl::Now() < deadline) {
    int up = 0;
    for (const auto& node : All()) up += node->up() ? 1 : 0;
    if (up >= count) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return false;
}

std::optional<absl::Time> NodeDirectory::RestartedAt(const std::string& node_id) const {
  absl::MutexLock lock(&mu_);
  auto it = restarted_.find(node_id);
  if (it == restarted_.end()) return std::nullopt;
  return it->second;
}

}  // namespace warden::gateway
