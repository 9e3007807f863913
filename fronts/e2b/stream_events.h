// StreamEvents: a warden.v1 server stream read on a thread of its own, so
// that the handler's thread can wait for the next event with a deadline and
// write keepalives to its client meanwhile (envd's streams, the code
// interpreter's /execute). Destroying it cancels the call and joins.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"

namespace warden::e2b {

template <typename Event>
class StreamEvents {
 public:
  using Reader = grpc::ClientReaderInterface<Event>;
  using Open = std::function<std::unique_ptr<Reader>(grpc::ClientContext*)>;

  StreamEvents(std::unique_ptr<grpc::ClientContext> context, const Open& open)
      : context_(std::move(context)), reader_(open(context_.get())), thread_([this] { Run(); }) {}
  // A stream the caller opened (and may have waited on for its initial
  // metadata) with `context`.
  StreamEvents(std::unique_ptr<grpc::ClientContext> context, std::unique_ptr<Reader> reader)
      : context_(std::move(context)), reader_(std::move(reader)), thread_([this] { Run(); }) {}
  ~StreamEvents() {
    context_->TryCancel();
    thread_.join();
  }
  StreamEvents(const StreamEvents&) = delete;
  StreamEvents& operator=(const StreamEvents&) = delete;

  enum class Next { kEvent, kEnd, kQuiet };
  // The next event into *event; kEnd once the stream ended (see status());
  // kQuiet when `deadline` passed first.
  Next Wait(absl::Time deadline, Event* event) {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithDeadline(absl::Condition(
                              +[](StreamEvents* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
                                return !self->queue_.empty() || self->ended_;
                              },
                              this),
                          deadline);
    if (!queue_.empty()) {
      *event = std::move(queue_.front());
      queue_.pop_front();
      return Next::kEvent;
    }
    return ended_ ? Next::kEnd : Next::kQuiet;
  }
  grpc::Status status() {
    absl::MutexLock lock(&mu_);
    return status_;
  }
  // Cancels the call (the server stops the work behind it); Wait then ends.
  void Cancel() { context_->TryCancel(); }

 private:
  void Run() {
    Event event;
    while (reader_->Read(&event)) {
      absl::MutexLock lock(&mu_);
      queue_.push_back(std::move(event));
    }
    grpc::Status status = reader_->Finish();
    absl::MutexLock lock(&mu_);
    status_ = std::move(status);
    ended_ = true;
  }

  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<Reader> reader_;
  absl::Mutex mu_;
  std::deque<Event> queue_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace warden::e2b
