// KernelChannel: one client's WebSocket on /api/kernels/{id}/channels,
// speaking Jupyter's messaging protocol for one Warden session through the
// warden.v1 stub. Shell requests run one at a time, in order, on a thread of
// their own (an execute_request is an ExecuteStream call whose events
// become iopub messages: status busy, execute_input, stream, display_data,
// execute_result or error, then execute_reply on shell and status idle);
// control requests (interrupt, shutdown) have their own thread so they
// overtake a running cell. Closing the channel cancels its running cell
// (which interrupts it) and drops the requests still queued.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
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

// How a channel reaches its WebSocket. Called from the channel's threads,
// never two at once, and never after Close() returned.
struct ChannelSink {
  std::function<void(std::string frame, bool binary)> send;
  std::function<void()> close;  // close the WebSocket: the kernel is gone
};

class KernelChannel {
 public:
  KernelChannel(std::shared_ptr<v1::Executor::StubInterface> stub, Caller caller, std::string session_id,
                const KernelSpec& spec, WireFormat format, ChannelSink sink);
  ~KernelChannel();  // Close()
  KernelChannel(const KernelChannel&) = delete;
  KernelChannel& operator=(const KernelChannel&) = delete;

  // One frame from the client. Frames that are not Jupyter messages are
  // dropped (Jupyter has no reply for them) and counted.
  void OnFrame(absl::string_view frame);
  // The transport's socket is gone: cancel the running cell, drop the queue,
  // join the threads. Idempotent.
  void Close();
  // The kernel was shut down over REST: say so (status dead) and close the
  // WebSocket.
  void KernelGone();

  const std::string& session_id() const { return session_id_; }
  int dropped_frames() const;

 private:
  // One thread running handlers for queued messages, in order.
  class Lane {
   public:
    explicit Lane(std::function<void(Message)> handle);
    ~Lane();  // Stop()
    void Push(Message m);
    // Removes and returns the queued messages `match` accepts.
    std::deque<Message> TakeIf(const std::function<bool(const Message&)>& match);
    void Stop();

   private:
    void Loop();
    std::function<void(Message)> handle_;
    absl::Mutex mu_;
    std::deque<Message> queue_ ABSL_GUARDED_BY(mu_);
    bool stopping_ ABSL_GUARDED_BY(mu_) = false;
    std::thread thread_;
  };

  void HandleShell(Message request);
  void HandleControl(Message request);
  void Execute(const Message& request);
  void AbortQueuedExecutes();
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
  grpc::ClientContext* running_ ABSL_GUARDED_BY(call_mu_) = nullptr;  // not owned
  bool closed_ ABSL_GUARDED_BY(call_mu_) = false;

  std::unique_ptr<Lane> shell_;
  std::unique_ptr<Lane> control_;
};

}  // namespace warden::jupyter
