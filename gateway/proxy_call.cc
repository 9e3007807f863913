#include "gateway/proxy_call.h"

#include <spdlog/spdlog.h>

#include <deque>
#include <map>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gateway/gateway.h"
#include "grpcpp/alarm.h"
#include "grpcpp/support/byte_buffer.h"
#include "warden/v1/agent.pb.h"
#include "warden/v1/executor.pb.h"
#include "warden/v1/fleet.grpc.pb.h"

namespace warden::gateway {
namespace {

constexpr int kMaxHops = 4;                                  // MOVED redirects followed
constexpr absl::Duration kHandoverPoll = absl::Milliseconds(100);
constexpr absl::Duration kTakeOverTimeout = absl::Seconds(20);
constexpr char kTenantHeader[] = "x-warden-tenant";          // server/tenancy.h
constexpr char kFleetHintTypeUrl[] = "type.googleapis.com/warden.v1.FleetHint";

std::string ToBytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Dump(&slices).ok()) return out;
  for (const grpc::Slice& slice : slices) out.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  return out;
}

grpc::ByteBuffer FromBytes(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

// What a node said about a refusal (server/fleet_hint.h).
std::optional<v1::FleetHint> HintOf(const grpc::Status& status) {
  if (status.ok() || status.error_details().empty()) return std::nullopt;
  v1::RpcStatus details;
  if (!details.ParseFromString(status.error_details())) return std::nullopt;
  for (const google::protobuf::Any& any : details.details()) {
    v1::FleetHint hint;
    if (any.type_url() == kFleetHintTypeUrl && hint.ParseFromString(any.value())) return hint;
  }
  return std::nullopt;
}

// The node never saw the call: its connection could not be made.
bool NeverReached(const grpc::Status& status, Node& node) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE || HintOf(status)) return false;
  return !node.up() || node.channel().GetState(false) == GRPC_CHANNEL_TRANSIENT_FAILURE ||
         absl::StrContains(status.error_message(), "failed to connect");
}

// The node's own initial metadata (warden-*: common/call_metadata.h), once
// it has come.
std::multimap<std::string, std::string> WardenHeadersOf(const grpc::ClientContext& ctx) {
  std::multimap<std::string, std::string> out;
  for (const auto& [key, value] : ctx.GetServerInitialMetadata()) {
    if (absl::StartsWith(absl::string_view(key.data(), key.size()), "warden-")) {
      out.emplace(std::string(key.data(), key.size()), std::string(value.data(), value.size()));
    }
  }
  return out;
}

std::string Since(absl::Time when) {
  return absl::StrCat(absl::ToInt64Milliseconds(absl::Now() - when) / 1000.0, " s ago");
}

class ProxyCall;

// The call's leg to one node. Shared: the ProxyCall holds it while it may
// still send or read, gRPC (through self_) until OnDone. Two holds keep the
// stream alive for what starts outside its reactions (the client's next
// message, the next read once the client took the last answer): one for
// the read flow, released when a read fails; one for the write flow,
// released after WritesDone or once the call is over.
class Upstream final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  Upstream(ProxyCall* call, std::shared_ptr<Node> node, std::vector<grpc::ByteBuffer> pending, bool close)
      : call_(call), node_(std::move(node)), out_(pending.begin(), pending.end()), close_(close) {}

  void Start(std::shared_ptr<Upstream> self, const std::string& method,
             std::chrono::system_clock::time_point deadline, const std::string& tenant) {
    self_ = std::move(self);
    ctx_ = std::make_shared<grpc::ClientContext>();
    if (deadline != std::chrono::system_clock::time_point::max()) ctx_->set_deadline(deadline);
    if (!tenant.empty()) ctx_->AddMetadata(kTenantHeader, tenant);
    // The headers go with the first message, and with a request that is
    // all there is, the half-close too (StartWriteLast): one write to the
    // node instead of three (docs/fleet.md, "Figures").
    ctx_->set_initial_metadata_corked(true);
    node_->Enter(ctx_);
    node_->generic().PrepareBidiStreamingCall(ctx_.get(), method, grpc::StubOptions(), this);
    AddMultipleHolds(2);
    {
      absl::MutexLock lock(&mu_);
      started_ = true;
      read_pending_ = true;
    }
    StartRead(&in_);
    Pump();
    StartCall();
  }
  void Send(grpc::ByteBuffer message) {
    {
      absl::MutexLock lock(&mu_);
      if (write_stopped_) return;
      out_.push_back(std::move(message));
    }
    Pump();
  }
  void CloseSend() {
    {
      absl::MutexLock lock(&mu_);
      close_ = true;
    }
    Pump();
  }
  // The client took the last answer: the next one.
  void ReadNext() {
    {
      absl::MutexLock lock(&mu_);
      if (read_pending_ || read_ended_) return;
      read_pending_ = true;
    }
    StartRead(&in_);
  }
  void Cancel() {
    ctx_->TryCancel();
    ReadNext();  // a read must be out for the read flow to end
  }
  const std::shared_ptr<Node>& node() const { return node_; }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      out_.pop_front();
      if (!ok) write_stopped_ = true;  // the call is ending; OnDone says how
    }
    Pump();
  }
  void OnReadInitialMetadataDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;
  // The node's own initial metadata (warden-*), once it has come.
  std::multimap<std::string, std::string> WardenHeaders() const;

 private:
  // Decides under the lock, acts outside it: gRPC may run reactions inline.
  void Pump() {
    const grpc::ByteBuffer* next = nullptr;
    bool last = false;
    bool close = false;
    bool release = false;
    {
      absl::MutexLock lock(&mu_);
      if (!started_ || writing_ || !write_hold_) return;
      if (write_stopped_ || closed_) {
        out_.clear();
        write_hold_ = false;
        release = true;
      } else if (!out_.empty()) {
        writing_ = true;
        next = &out_.front();
        // The client has sent all it will: this message closes the stream.
        last = close_ && out_.size() == 1;
        closed_ = last;
      } else if (close_) {
        write_hold_ = false;
        close = true;
      }
    }
    if (next && last) StartWriteLast(next, grpc::WriteOptions());
    if (next && !last) StartWrite(next);
    if (close) StartWritesDone();
    if (close || release) RemoveHold();
  }

  ProxyCall* const call_;  // outlives this leg's OnDone
  const std::shared_ptr<Node> node_;
  std::shared_ptr<Upstream> self_;
  std::shared_ptr<grpc::ClientContext> ctx_;
  grpc::ByteBuffer in_;
  absl::Mutex mu_;
  std::deque<grpc::ByteBuffer> out_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool close_ ABSL_GUARDED_BY(mu_) = false;
  bool write_stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;  // the last message went with the half-close
  bool write_hold_ ABSL_GUARDED_BY(mu_) = true;
  bool read_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool read_ended_ ABSL_GUARDED_BY(mu_) = false;
};

class ProxyCall final : public grpc::ServerGenericBidiReactor {
 public:
  ProxyCall(Gateway& gateway, grpc::GenericCallbackServerContext* ctx)
      : gateway_(gateway), ctx_(ctx), route_(gateway.RouteOf(ctx->method())) {
    if (route_ == nullptr) {
      Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, absl::StrCat("unknown method ", ctx->method())));
      return;
    }
    absl::StatusOr<std::string> tenant = gateway_.TenantOf(*ctx);
    // An exposed port may be reached without a token (the session's traffic
    // token, or public ports): the node decides, and no tenant is forwarded.
    const auto& metadata = ctx->client_metadata();
    const bool tokenless_port = ctx->method() == "/warden.v1.Executor/ConnectPort" &&
                                metadata.find("authorization") == metadata.end() &&
                                metadata.find(kTenantHeader) == metadata.end();
    if (!tenant.ok() && !tokenless_port) {
      Finish(grpc::Status(static_cast<grpc::StatusCode>(tenant.status().code()), std::string(tenant.status().message())));
      return;
    }
    if (tenant.ok()) tenant_ = *tenant;
    if (route_->kind == Route::Kind::kRefused) {
      Finish(grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          absl::StrCat(route_->method->full_name(), " is the gateway's own call to its nodes")));
      return;
    }
    handover_deadline_ = absl::Now() + absl::Milliseconds(gateway_.options().placement.handover_wait_ms);
    if (ctx->deadline() != std::chrono::system_clock::time_point::max()) {
      handover_deadline_ = std::min(handover_deadline_, absl::FromChrono(ctx->deadline()));
    }
    StartRead(&read_);
  }

  void OnReadDone(bool ok) override {
    std::shared_ptr<Upstream> up;
    bool first = false;
    bool empty = false;
    {
      absl::MutexLock lock(&mu_);
      if (!ok) {
        client_done_ = true;
        empty = requests_.empty();
      } else {
        request_bytes_ += read_.Length();
        requests_.push_back(read_);
        first = requests_.size() == 1;
        // One request message, unless the client streams them.
        if (!route_->client_streaming()) client_done_ = true;
      }
      up = upstream_;
    }
    if (!ok) {
      if (empty) FinishOnce(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the call carried no request message"));
      else if (up) up->CloseSend();
      return;
    }
    if (request_bytes_ > MaxRequestBytes()) {
      Abort(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "the request passed the gateway's bound"));
      return;
    }
    if (first) {
      Dispatch();
    } else if (up) {
      up->Send(read_);
    }
    if (route_->client_streaming()) StartRead(&read_);
  }

  void OnWriteDone(bool ok) override {
    std::shared_ptr<Upstream> up;
    {
      absl::MutexLock lock(&mu_);
      up = upstream_;
    }
    if (!up) return;
    if (ok) {
      up->ReadNext();
    } else {
      up->Cancel();  // the client went away
    }
  }

  void OnCancel() override {
    std::shared_ptr<Upstream> up;
    std::shared_ptr<grpc::ClientContext> side;
    bool idle = false;
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      up = upstream_;
      side = side_call_;
      idle = pending_ == 0;
    }
    if (up) up->Cancel();
    if (side) side->TryCancel();
    alarm_.Cancel();
    if (idle) FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled"));
  }

  void OnDone() override { delete this; }

  // From the upstream leg.
  void UpstreamAnswer(Upstream* leg, const grpc::ByteBuffer& answer) {
    // A method that answers once: the answer waits for the node's status
    // and goes to the client with it, in one write (StartWriteAndFinish).
    const bool hold = !route_->server_streaming();
    {
      absl::MutexLock lock(&mu_);
      responded_ = true;
      answered_ = true;
      answer_ = answer;
      held_answer_ = hold;
      // The node's headers go with the first answer if they have not gone.
      if (!headers_sent_) {
        headers_sent_ = true;
        for (const auto& [key, value] : leg->WardenHeaders()) ctx_->AddInitialMetadata(key, value);
      }
    }
    if (hold) return leg->ReadNext();  // ends the node's read flow: its status comes next
    StartWrite(&answer_);
  }

  // The node's initial metadata says something of its own (a cell was
  // accepted: common/call_metadata.h): the client hears it now, before any
  // answer, and the call is the node's from here on (no retry elsewhere:
  // the work may have begun there), unless the node then ends it with a
  // fleet hint before any answer: a cell accepted while queued behind
  // another, whose session the node's drain handed over before its turn
  // came, never began (UpstreamDone).
  void UpstreamHeaders(Upstream* leg) {
    std::multimap<std::string, std::string> headers = leg->WardenHeaders();
    if (headers.empty()) return;
    absl::MutexLock lock(&mu_);  // held so that no answer's write overtakes them
    if (headers_sent_ || cancelled_) return;
    headers_sent_ = true;
    responded_ = true;
    for (const auto& [key, value] : headers) ctx_->AddInitialMetadata(key, value);
    StartSendInitialMetadata();
  }

  void UpstreamDone(Upstream* leg, const grpc::Status& status) {
    bool responded;
    bool answered;
    bool cancelled;
    std::shared_ptr<Node> node = leg->node();
    {
      absl::MutexLock lock(&mu_);
      upstream_.reset();
      --pending_;
      responded = responded_;
      answered = answered_;
      cancelled = cancelled_;
    }
    if (cancelled) return FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled"));
    if (aborted_) return FinishOnce(*aborted_);
    // Headers alone, then a fleet hint: the node did not begin the work
    // (UpstreamHeaders); it may still go elsewhere.
    if (answered || (responded && !HintOf(status))) return FinishOnce(Annotate(status, *node));
    Decide(status, node);
  }

 private:
  int64_t MaxRequestBytes() const {
    const GatewayOptions& o = gateway_.options();
    return o.max_code_bytes + o.max_file_bytes * 2 + (4 << 20);
  }

  // ---- deciding where the call goes

  void Dispatch() {
    std::unique_ptr<google::protobuf::Message> request(
        google::protobuf::MessageFactory::generated_factory()->GetPrototype(route_->method->input_type())->New());
    if (!request->ParseFromString(ToBytes(requests_.front()))) {
      return FinishOnce(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the request message does not parse"));
    }
    session_id_ = route_->SessionIdOf(*request);
    switch (route_->kind) {
      case Route::Kind::kGateway: {
        return ReplyAndFinish(gateway_.FleetStatus().SerializeAsString());
      }
      case Route::Kind::kFanOut:
        return FanOut();
      case Route::Kind::kAnyNode:
      case Route::Kind::kPlace:
        return Place();
      case Route::Kind::kExecute:
        if (session_id_.empty()) return Place();
        return ToSession();
      case Route::Kind::kSession:
        if (session_id_.empty()) {
          return FinishOnce(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "session_id is empty: name a session"));
        }
        return ToSession();
      case Route::Kind::kRefused:
        break;
    }
    FinishOnce(grpc::Status(grpc::StatusCode::INTERNAL, "no route"));
  }

  // New work: the better of K nodes; another one if it refuses.
  void Place() {
    // What a session holds for hours is balanced; a one-shot's moment of
    // work goes where least runs now.
    std::shared_ptr<Node> node =
        gateway_.nodes().Place(tried_, route_->kind == Route::Kind::kPlace ? Placing::kSession : Placing::kWork);
    if (!node) {
      if (last_refusal_) return FinishOnce(*last_refusal_);
      return FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                     "no node of the fleet is up and taking work; try again shortly"));
    }
    ++attempts_;
    Attempt(node);
  }

  // The node the session id names, or where the session moved.
  void ToSession() {
    std::string node_id = gateway_.moved().Get(session_id_);
    if (node_id.empty()) node_id = OriginOf(session_id_);
    if (node_id.empty()) {
      return FinishOnce(grpc::Status(grpc::StatusCode::NOT_FOUND,
                                     absl::StrCat("no session '", session_id_, "'; it may have expired or been closed")));
    }
    std::shared_ptr<Node> node = gateway_.nodes().ById(node_id);
    if (node && node->up()) return Attempt(node);
    TakeOver(/*owner_lost=*/true);
  }

  static std::string OriginOf(const std::string& session_id) {
    constexpr size_t kPrefix = 2 + 24 + 1;  // "s-" + hex + "-"
    if (session_id.size() <= kPrefix || session_id.compare(0, 2, "s-") != 0 || session_id[kPrefix - 1] != '-') {
      return "";
    }
    return session_id.substr(kPrefix);
  }

  void Attempt(const std::shared_ptr<Node>& node) {
    if (!route_->client_streaming() && !route_->server_streaming()) return AttemptUnary(node);
    std::shared_ptr<Upstream> up;
    {
      absl::MutexLock lock(&mu_);
      if (!cancelled_) {
        up = std::make_shared<Upstream>(this, node, requests_, client_done_);
        upstream_ = up;
        ++pending_;
      }
    }
    if (!up) return FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled"));
    up->Start(up, ctx_->method(), ctx_->deadline(), tenant_);
  }

  // A method of one request and one answer goes to the node as one unary
  // call: one batch out (headers, message, half-close) and one completion
  // back (headers, answer, status), where a stream takes a reaction each.
  void AttemptUnary(const std::shared_ptr<Node>& node) {
    auto leg = std::make_shared<UnaryLeg>();
    if (ctx_->deadline() != std::chrono::system_clock::time_point::max()) leg->ctx->set_deadline(ctx_->deadline());
    if (!tenant_.empty()) leg->ctx->AddMetadata(kTenantHeader, tenant_);
    bool cancelled;
    {
      absl::MutexLock lock(&mu_);
      cancelled = cancelled_;
      if (!cancelled) {
        leg->request = requests_.front();
        side_call_ = leg->ctx;
        ++pending_;
      }
    }
    if (cancelled) return FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled"));
    node->Enter(leg->ctx);
    const bool placing = route_->kind == Route::Kind::kPlace;  // a new session, restored or made
    if (placing) node->PlacingStarted();
    node->generic().UnaryCall(leg->ctx.get(), ctx_->method(), grpc::StubOptions(), &leg->request, &leg->response,
                              [this, node, leg, placing](grpc::Status status) {
                                if (placing) node->PlacingEnded(status.ok());
                                node->Leave(leg->ctx);
                                UnaryDone(node, *leg, status);
                              });
  }

  struct UnaryLeg {
    std::shared_ptr<grpc::ClientContext> ctx = std::make_shared<grpc::ClientContext>();
    grpc::ByteBuffer request;
    grpc::ByteBuffer response;
  };

  void UnaryDone(const std::shared_ptr<Node>& node, UnaryLeg& leg, const grpc::Status& status) {
    bool cancelled;
    {
      absl::MutexLock lock(&mu_);
      side_call_.reset();
      --pending_;
      cancelled = cancelled_;
    }
    if (status.ok() || HintOf(status)) node->Heard();
    if (cancelled) return FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled"));
    if (aborted_) return FinishOnce(*aborted_);
    if (!status.ok()) return Decide(status, node);
    {
      absl::MutexLock lock(&mu_);
      responded_ = answered_ = held_answer_ = true;
      answer_ = leg.response;
      for (const auto& [key, value] : WardenHeadersOf(*leg.ctx)) ctx_->AddInitialMetadata(key, value);
    }
    FinishOnce(status);
  }

  // A node answered with an error before anything reached the client.
  void Decide(const grpc::Status& status, const std::shared_ptr<Node>& node) {
    const std::optional<v1::FleetHint> hint = HintOf(status);
    const bool new_work = route_->kind == Route::Kind::kPlace || route_->kind == Route::Kind::kAnyNode ||
                          (route_->kind == Route::Kind::kExecute && session_id_.empty());
    if (new_work) {
      const bool refused = (hint && hint->kind() == v1::FleetHint::REFUSED) || NeverReached(status, *node);
      if (refused && attempts_ < gateway_.options().placement.max_attempts) {
        tried_.insert(node->node_id());
        last_refusal_ = Annotate(status, *node);
        gateway_.CountRetry("refused");
        return Place();
      }
      return FinishOnce(Annotate(status, *node));
    }
    if (hint) {
      switch (hint->kind()) {
        case v1::FleetHint::MOVED:
          if (++hops_ <= kMaxHops) {
            gateway_.moved().Put(session_id_, hint->node_id());
            gateway_.CountRetry("moved");
            if (std::shared_ptr<Node> next = gateway_.nodes().ById(hint->node_id()); next && next->up()) {
              return Attempt(next);
            }
            return TakeOver(/*owner_lost=*/true);
          }
          break;
        case v1::FleetHint::MOVING:
          origin_moving_ = true;
          return TakeOver(/*owner_lost=*/false);
        case v1::FleetHint::LOST:
          return FinishLost(hint->reason());
        default:
          break;
      }
      return FinishOnce(Annotate(status, *node));
    }
    if (NeverReached(status, *node)) return TakeOver(/*owner_lost=*/!node->up());
    if (status.error_code() == grpc::StatusCode::NOT_FOUND && !gateway_.moved().Get(session_id_).empty()) {
      // The cache was stale: ask by the id afresh, once.
      gateway_.moved().Forget(session_id_);
      if (++hops_ <= kMaxHops) return ToSession();
    }
    FinishOnce(Annotate(status, *node));
  }

  // Asks another node to take the session over from the shared storage.
  void TakeOver(bool owner_lost) {
    const std::string origin = OriginOf(session_id_);
    std::set<std::string> exclude = tried_;
    exclude.insert(origin);
    std::shared_ptr<Node> taker = gateway_.nodes().Place(exclude, Placing::kSession);
    if (!taker) return FinishUnreachable("no other node is up to take it over");
    auto side = std::make_shared<grpc::ClientContext>();
    side->set_deadline(absl::ToChronoTime(std::min(absl::Now() + kTakeOverTimeout, handover_deadline_)));
    if (!tenant_.empty()) side->AddMetadata(kTenantHeader, tenant_);
    bool cancelled;
    {
      absl::MutexLock lock(&mu_);
      cancelled = cancelled_;
      if (!cancelled) {
        side_call_ = side;
        ++pending_;
      }
    }
    if (cancelled) return FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled"));
    takeover_request_.set_session_id(session_id_);
    takeover_request_.set_owner_lost(owner_lost);
    taker->Enter(side);
    gateway_.CountRetry("takeover");
    taker->stub().async()->TakeOverSession(side.get(), &takeover_request_, &takeover_response_,
                                           [this, taker, side, owner_lost](grpc::Status status) {
                                             taker->Leave(side);
                                             TakeOverDone(status, taker, owner_lost);
                                           });
  }

  void TakeOverDone(const grpc::Status& status, const std::shared_ptr<Node>& taker, bool owner_lost) {
    bool cancelled;
    {
      absl::MutexLock lock(&mu_);
      side_call_.reset();
      --pending_;
      cancelled = cancelled_;
    }
    if (cancelled) return FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled"));
    if (status.ok()) {
      const std::string holder = takeover_response_.node_id();
      gateway_.moved().Put(session_id_, holder);
      std::shared_ptr<Node> node = holder == taker->node_id() ? taker : gateway_.nodes().ById(holder);
      if (node && node->up() && ++hops_ <= kMaxHops) return Attempt(node);
      return FinishUnreachable(absl::StrCat("it lives on node ", holder, ", which is not up"));
    }
    const std::optional<v1::FleetHint> hint = HintOf(status);
    const std::string origin = OriginOf(session_id_);
    std::shared_ptr<Node> origin_node = gateway_.nodes().ById(origin);
    if (hint && hint->kind() == v1::FleetHint::LOST) return FinishLost(hint->reason());
    if (hint && hint->kind() == v1::FleetHint::REFUSED && attempts_++ < gateway_.options().placement.max_attempts) {
      tried_.insert(taker->node_id());
      return TakeOver(owner_lost);
    }
    // Handed over not yet: its node is still draining. Wait for it.
    const bool waiting = hint && (hint->kind() == v1::FleetHint::MOVING ||
                                  (hint->kind() == v1::FleetHint::NOT_HANDED_OVER && origin_node &&
                                   origin_node->up() && (origin_node->draining() || origin_moving_)));
    if (waiting && absl::Now() + kHandoverPoll < handover_deadline_) return Later(owner_lost);
    if (hint && hint->kind() == v1::FleetHint::NOT_HANDED_OVER) {
      if (origin_node && origin_node->up() && !origin_node->draining() && ++hops_ <= kMaxHops) {
        return Attempt(origin_node);  // back, or never gone: ask it again
      }
      return FinishUnreachable("the shared storage holds nothing of it to take over");
    }
    if (waiting) return FinishUnreachable("its node did not hand it over in time");
    FinishOnce(Annotate(status, *taker));
  }

  // Asks again in a moment (the session is being handed over).
  void Later(bool owner_lost) {
    bool cancelled;
    {
      absl::MutexLock lock(&mu_);
      cancelled = cancelled_;
      if (!cancelled) ++pending_;
    }
    if (cancelled) return FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled"));
    alarm_.Set(absl::ToChronoTime(absl::Now() + kHandoverPoll), [this, owner_lost](bool ok) {
      bool cancelled;
      {
        absl::MutexLock lock(&mu_);
        --pending_;
        cancelled = cancelled_ || !ok;
      }
      if (cancelled) return FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled"));
      // The origin may have finished draining and left meanwhile.
      std::shared_ptr<Node> origin = gateway_.nodes().ById(OriginOf(session_id_));
      TakeOver(owner_lost || !origin || !origin->up());
    });
  }

  // ListSessions: every node's answer, merged (oldest first, as one node lists).
  void FanOut() {
    std::vector<std::shared_ptr<Node>> nodes;
    for (const std::shared_ptr<Node>& node : gateway_.nodes().All()) {
      if (node->up()) nodes.push_back(node);
    }
    if (nodes.empty()) {
      return FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE, "no node of the fleet is up; try again shortly"));
    }
    struct Leg {
      std::shared_ptr<grpc::ClientContext> ctx = std::make_shared<grpc::ClientContext>();
      grpc::ByteBuffer response;
    };
    auto legs = std::make_shared<std::vector<Leg>>(nodes.size());
    auto answers = std::make_shared<std::vector<grpc::Status>>(nodes.size());
    {
      absl::MutexLock lock(&mu_);
      pending_ += static_cast<int>(nodes.size());
      fan_remaining_ = static_cast<int>(nodes.size());
    }
    for (size_t i = 0; i < nodes.size(); ++i) {
      Leg& leg = (*legs)[i];
      if (!tenant_.empty()) leg.ctx->AddMetadata(kTenantHeader, tenant_);
      if (ctx_->deadline() != std::chrono::system_clock::time_point::max()) leg.ctx->set_deadline(ctx_->deadline());
      nodes[i]->Enter(leg.ctx);
      nodes[i]->generic().UnaryCall(leg.ctx.get(), ctx_->method(), grpc::StubOptions(), &requests_.front(),
                                    &leg.response, [this, i, legs, answers, node = nodes[i]](grpc::Status status) {
                                      node->Leave((*legs)[i].ctx);
                                      (*answers)[i] = status;
                                      bool last;
                                      {
                                        absl::MutexLock lock(&mu_);
                                        --pending_;
                                        last = --fan_remaining_ == 0;
                                      }
                                      if (last) Merge(*legs, *answers);
                                    });
    }
  }

  template <typename Legs>
  void Merge(const Legs& legs, const std::vector<grpc::Status>& answers) {
    v1::ListSessionsResponse merged;
    int ok = 0;
    grpc::Status failure;
    for (size_t i = 0; i < answers.size(); ++i) {
      if (!answers[i].ok()) {
        failure = answers[i];
        continue;
      }
      v1::ListSessionsResponse part;
      if (part.ParseFromString(ToBytes(legs[i].response))) {
        ++ok;
        for (v1::Session& session : *part.mutable_sessions()) *merged.add_sessions() = std::move(session);
      }
    }
    if (ok == 0) return FinishOnce(failure);
    std::sort(merged.mutable_sessions()->begin(), merged.mutable_sessions()->end(),
              [](const v1::Session& a, const v1::Session& b) { return a.created_unix_ms() < b.created_unix_ms(); });
    ReplyAndFinish(merged.SerializeAsString());
  }

  // ---- answers

  grpc::Status Annotate(const grpc::Status& status, Node& node) {
    if (status.ok() || HintOf(status)) return grpc::Status(status.error_code(), status.error_message());
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE || status.error_code() == grpc::StatusCode::CANCELLED) {
      if (auto down = node.down()) {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            absl::StrCat("node ", NodeName(node), " was lost (", Since(down->first), ": ",
                                         down->second, "); the call did not complete: ", status.error_message()));
      }
    }
    if (status.error_code() == grpc::StatusCode::NOT_FOUND && !session_id_.empty()) {
      if (auto restarted = gateway_.nodes().RestartedAt(node.node_id())) {
        return grpc::Status(grpc::StatusCode::NOT_FOUND,
                            absl::StrCat(status.error_message(), " (node ", NodeName(node), " restarted ",
                                         Since(*restarted), "; the sessions it held then are lost)"));
      }
    }
    return grpc::Status(status.error_code(), status.error_message());
  }

  static std::string NodeName(Node& node) {
    const std::string id = node.node_id();
    return id.empty() ? node.address() : id;
  }

  void FinishUnreachable(const std::string& why) {
    const std::string origin = OriginOf(session_id_);
    std::shared_ptr<Node> node = gateway_.nodes().ById(origin);
    std::string state = "is not among the nodes this gateway reaches";
    if (node) {
      if (auto down = node->down()) {
        state = absl::StrCat("is unreachable (lost ", Since(down->first), ": ", down->second, ")");
      } else if (node->draining()) {
        state = "is draining";
      } else {
        state = "is up";
      }
    }
    gateway_.Count(*route_, "unreachable");
    FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            absl::StrCat("session ", session_id_, " is on node ", origin, ", which ", state, "; ",
                                         why, ": try again later, or start a new session")));
  }

  // The session is gone: said the way a node says it of a session whose
  // interpreter died (an outcome for executions, a state for GetSession).
  void FinishLost(const std::string& reason) {
    gateway_.Count(*route_, "session_lost");
    const std::string& name = route_->method->full_name();
    if (name == "warden.v1.Executor.Execute" || name == "warden.v1.Executor.ExecuteStream") {
      v1::ExecuteResponse response;
      response.set_outcome(v1::OUTCOME_SESSION_LOST);
      response.set_message(reason);
      response.set_session_id(session_id_);
      response.set_exit_code(-1);
      if (name == "warden.v1.Executor.Execute") return ReplyAndFinish(response.SerializeAsString());
      v1::ExecuteEvent event;
      *event.mutable_summary() = std::move(response);
      return ReplyAndFinish(event.SerializeAsString());
    }
    if (name == "warden.v1.Executor.GetSession") {
      v1::Session session;
      session.set_id(session_id_);
      session.set_state(v1::SESSION_STATE_LOST);
      session.set_lost_reason(reason);
      return ReplyAndFinish(session.SerializeAsString());
    }
    FinishOnce(grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("session ", session_id_, " is lost: ", reason)));
  }

  void ReplyAndFinish(const std::string& bytes) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
      answer_ = FromBytes(bytes);
    }
    gateway_.Count(*route_, "ok");
    StartWriteAndFinish(&answer_, grpc::WriteOptions(), grpc::Status::OK);
  }

  void FinishOnce(const grpc::Status& status) {
    bool with_answer;
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
      with_answer = held_answer_ && status.ok() && !cancelled_;
    }
    gateway_.Count(*route_, status.ok() ? "ok" : "error");
    if (with_answer) return StartWriteAndFinish(&answer_, grpc::WriteOptions(), status);
    Finish(status);
  }

  // Ends the call, cancelling what runs for it (which then finishes it).
  void Abort(const grpc::Status& status) {
    std::shared_ptr<Upstream> up;
    {
      absl::MutexLock lock(&mu_);
      aborted_ = status;
      up = upstream_;
    }
    if (up) return up->Cancel();
    FinishOnce(status);
  }

  Gateway& gateway_;
  grpc::GenericCallbackServerContext* const ctx_;
  const Route* const route_;
  std::string tenant_;
  std::string session_id_;
  absl::Time handover_deadline_;
  grpc::ByteBuffer read_;
  grpc::ByteBuffer answer_;
  grpc::Alarm alarm_;
  v1::TakeOverSessionRequest takeover_request_;
  v1::TakeOverSessionResponse takeover_response_;
  // Touched only by the call's own sequence of steps (one at a time).
  std::set<std::string> tried_;
  int attempts_ = 0;
  int hops_ = 0;
  bool origin_moving_ = false;  // the session's node said it is handing it over
  std::optional<grpc::Status> last_refusal_;
  int64_t request_bytes_ = 0;
  std::optional<grpc::Status> aborted_;

  absl::Mutex mu_;
  std::vector<grpc::ByteBuffer> requests_ ABSL_GUARDED_BY(mu_);  // all the client sent: a new leg replays them
  bool client_done_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<Upstream> upstream_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<grpc::ClientContext> side_call_ ABSL_GUARDED_BY(mu_);  // a unary leg or a takeover
  int pending_ ABSL_GUARDED_BY(mu_) = 0;  // legs, takeovers, alarms and fan-out calls outstanding
  int fan_remaining_ ABSL_GUARDED_BY(mu_) = 0;
  bool responded_ ABSL_GUARDED_BY(mu_) = false;
  bool headers_sent_ ABSL_GUARDED_BY(mu_) = false;  // the client has its initial metadata
  bool held_answer_ ABSL_GUARDED_BY(mu_) = false;   // answer_ goes with the status (unary answers)
  bool answered_ ABSL_GUARDED_BY(mu_) = false;      // a node's answer reached (or waits for) the client
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

void Upstream::OnReadDone(bool ok) {
  if (ok) node_->Heard();
  {
    absl::MutexLock lock(&mu_);
    read_pending_ = false;
    if (!ok) {
      read_ended_ = true;
      write_stopped_ = true;  // the node ended the call: nothing more to send
    }
  }
  if (ok) return call_->UpstreamAnswer(this, in_);
  Pump();
  RemoveHold();
}

void Upstream::OnReadInitialMetadataDone(bool ok) {
  if (!ok) return;
  node_->Heard();
  call_->UpstreamHeaders(this);
}

std::multimap<std::string, std::string> Upstream::WardenHeaders() const { return WardenHeadersOf(*ctx_); }

void Upstream::OnDone(const grpc::Status& status) {
  node_->Leave(ctx_);
  call_->UpstreamDone(this, status);
  self_.reset();  // may delete this
}

}  // namespace

grpc::ServerGenericBidiReactor* NewProxyCall(Gateway& gateway, grpc::GenericCallbackServerContext* ctx) {
  return new ProxyCall(gateway, ctx);
}

}  // namespace warden::gateway
