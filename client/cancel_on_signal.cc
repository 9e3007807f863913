// The handler only write()s the signal number to a pipe (async-signal-safe);
// a watcher thread reads it and cancels the call, which a handler may not.
#include "client/cancel_on_signal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <iterator>

namespace warden::cli {
namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM};
constexpr unsigned char kStop = 0;  // not a signal number: tells the watcher to return

// Process-wide, like the handlers themselves.
int g_pipe[2] = {-1, -1};
struct sigaction g_previous[std::size(kSignals)];

void OnSignal(int signal) {
  int saved_errno = errno;
  unsigned char byte = static_cast<unsigned char>(signal);
  (void)!write(g_pipe[1], &byte, 1);
  errno = saved_errno;
}

}  // namespace

CancelOnSignal::CancelOnSignal(grpc::ClientContext* context) : context_(context) {
  if (pipe2(g_pipe, O_CLOEXEC) != 0) return;  // no pipe: signals keep their default
  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &action, &g_previous[i]);
  watcher_ = std::thread([this] { Watch(); });
}

CancelOnSignal::~CancelOnSignal() {
  if (!watcher_.joinable()) return;
  for (size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &g_previous[i], nullptr);
  (void)!write(g_pipe[1], &kStop, 1);
  watcher_.join();
  close(g_pipe[0]);
  close(g_pipe[1]);
  g_pipe[0] = g_pipe[1] = -1;
}

int CancelOnSignal::received_signal() const {
  absl::MutexLock lock(&mu_);
  return received_signal_;
}

void CancelOnSignal::Watch() {
  while (true) {
    unsigned char byte;
    ssize_t n = read(g_pipe[0], &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n != 1 || byte == kStop) return;
    absl::MutexLock lock(&mu_);
    if (received_signal_ == 0) {  // a second Ctrl-C changes nothing
      received_signal_ = byte;
      context_->TryCancel();
    }
  }
}

}  // namespace warden::cli
