// Turns Ctrl-C (SIGINT) and SIGTERM into ClientContext::TryCancel() on the
// call in flight, so the daemon stops the execution instead of letting it
// run to its limit. While one is alive it owns the process's SIGINT and
// SIGTERM handlers (so at most one at a time); before and after, the
// signals do what they did before (by default: end the process).
#pragma once

#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/client_context.h"

namespace warden::cli {

class CancelOnSignal {
 public:
  // `context` is not owned and must outlive this object.
  explicit CancelOnSignal(grpc::ClientContext* context);
  ~CancelOnSignal();  // restores the previous handlers; the call is left alone
  CancelOnSignal(const CancelOnSignal&) = delete;
  CancelOnSignal& operator=(const CancelOnSignal&) = delete;

  // The signal that cancelled the call, or 0.
  int received_signal() const;

 private:
  void Watch();

  mutable absl::Mutex mu_;
  grpc::ClientContext* const context_;
  int received_signal_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread watcher_;
};

}  // namespace warden::cli
