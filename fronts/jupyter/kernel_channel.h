// KernelChannel: one client's WebSocket on /api/kernels/{id}/channels,
// speaking Jupyter's messaging protocol for one Warden session through the
// warden.v1 stub. Shell requests run one at a time, in order (an
// execute_request is an asynchronous ExecuteStream call whose events become
// iopub messages: status busy, execute_input, stream, display_data,
// execute_result or error, then execute_reply on shell and status idle);
// control requests (interrupt, shutdown) have a lane of their own so they
// overtake a running cell. Closing the channel cancels its running cell
// (which interrupts it) and drops the requests still queued.
//
// A channel holds no thread: its lanes run queued requests on a shared
// WorkPool, and a running cell is a gRPC callback call, so a thousand open
// channels cost their memory only.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "fronts/http/work_pool.h"
#include "fronts/jupyter/kernel_specs.h"
#include "fronts/jupyter/wire.h"
#include "grpcpp/client_context.h"
#include "warden/v1/executor.grpc.pb.h"

namespace warden::jupyter {

// Who is calling: the "authorization" metadata to send with every warden.v1
// call made on their behalf ("Bearer <token>"), empty when the daemon needs
// none.
struct Caller {
  std::string authorization;
  void Apply(grpc::ClientContext& context) const;
};

// How a channel reaches its WebSocket. Called from the channel's lanes and
// gRPC's callback threads, never two at once, and never after Close()
// returned. Must not block.
struct ChannelSink {
  std::function<void(std::string frame, bool binary)> send;
  std::function<void()> close;  // close the WebSocket: the kernel is gone
};

class KernelChannel : public std::enable_shared_from_this<KernelChannel> {
 public:
  // The lanes run on `pool`, shared with the gateway's other channels.
  KernelChannel(std::shared_ptr<v1::Executor::StubInterface> stub, Caller caller, std::string session_id,
                const KernelSpec& spec, WireFormat format, ChannelSink sink, std::shared_ptr<http::WorkPool> pool);
  ~KernelChannel();  // Close()
  KernelChannel(const KernelChannel&) = delete;
  KernelChannel& operator=(const KernelChannel&) = delete;

  // One frame from the client. Frames that are not Jupyter messages are
  // dropped (Jupyter has no reply for them) and counted. Never blocks.
  void OnFrame(absl::string_view frame);
  // The transport's socket is gone: cancel the running cell, drop the
  // queue, stop sending. Idempotent; never blocks.
  void Close();
  // The kernel was shut down over REST: say so (status dead) and close the
  // WebSocket.
  void KernelGone();

  const std::string& session_id() const { return session_id_; }
  int dropped_frames() const;

 private:
  class ExecuteCall;  // a running cell (gRPC callback reactor)

  // Queued messages run in order on the pool, one at a time, by `handle`,
  // which returns false when the message goes on asynchronously: the lane
  // then waits for Resume().
  class Lane {
   public:
    Lane(std::shared_ptr<http::WorkPool> pool, std::function<bool(Message)> handle)
        : pool_(std::move(pool)), handle_(std::move(handle)) {}
    // `owner` is kept alive while the lane works.
    void Push(std::shared_ptr<KernelChannel> owner, Message m);
    void Resume(std::shared_ptr<KernelChannel> owner);
    // Removes and returns the queued messages `match` accepts.
    std::deque<Message> TakeIf(const std::function<bool(const Message&)>& match);
    void Stop();  // drops the queue; nothing more runs

   private:
    void Schedule(std::shared_ptr<KernelChannel> owner);
    void Drain();
    const std::shared_ptr<http::WorkPool> pool_;
    const std::function<bool(Message)> handle_;
    absl::Mutex mu_;
    std::deque<Message> queue_ ABSL_GUARDED_BY(mu_);
    bool running_ ABSL_GUARDED_BY(mu_) = false;
    bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  };

  bool HandleShell(Message request);
  bool HandleControl(Message request);
  // Starts the cell; false when it runs on (ExecuteCall resumes the lane).
  bool Execute(const Message& request);
  void ExecuteDone();
  std::deque<Message> TakeQueuedExecutes();
  void Abort(const std::deque<Message>& aborted);
  void Publish(const std::string& channel, const std::string& msg_type, nlohmann::json content,
               const Message& parent);
  void Status(const char* state, const Message& parent);

  const std::shared_ptr<v1::Executor::StubInterface> stub_;
  const Caller caller_;
  const std::string session_id_;
  const KernelSpec& spec_;
  const WireFormat format_;
  // Jupyter clients drop messages whose header.session is not the kernel's
  // current one; one per channel, new after a restart.
  std::string kernel_session_ ABSL_GUARDED_BY(send_mu_);

  mutable absl::Mutex send_mu_;  // one frame at a time; sink_ cleared by Close
  ChannelSink sink_ ABSL_GUARDED_BY(send_mu_);
  int dropped_frames_ ABSL_GUARDED_BY(send_mu_) = 0;

  absl::Mutex call_mu_;
  grpc::ClientContext* running_ ABSL_GUARDED_BY(call_mu_) = nullptr;  // the running cell's; not owned
  bool closed_ ABSL_GUARDED_BY(call_mu_) = false;

  Lane shell_;
  Lane control_;
};

}  // namespace warden::jupyter
