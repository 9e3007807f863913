#include "kernel/snapshot_archive.h"

#include <errno.h>
#include <sys/sendfile.h>

#include <deque>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace warden {

absl::Status CopyArchive(const SnapshotArchive& from, const UniqueFd& to) {
  off_t offset = 0;
  while (offset < from.bytes) {
    const ssize_t n =
        sendfile(to.get(), from.fd.get(), &offset, static_cast<size_t>(from.bytes - offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == ENOSPC || errno == EDQUOT)) {
      return absl::ResourceExhaustedError(
          absl::StrCat("no space left to copy the snapshot archive (", from.bytes, " bytes)"));
    }
    if (n < 0) return absl::ErrnoToStatus(errno, "copying the snapshot archive");
    if (n == 0) return absl::DataLossError("the snapshot archive is shorter than recorded");
  }
  return absl::OkStatus();
}

namespace {

// One thread for the life of the process: handing over an fd is cheap, and
// at exit the thread holds nothing but fds the process closes anyway.
class Closer {
 public:
  Closer() { std::thread([this] { Loop(); }).detach(); }

  void Add(UniqueFd fd) {
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(fd));
  }

 private:
  void Loop() {
    for (;;) {
      UniqueFd next;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty(); };
        mu_.Await(absl::Condition(&ready));
        next = std::move(queue_.front());
        queue_.pop_front();
      }
      // `next` closes here, outside the lock: the slow part.
    }
  }

  absl::Mutex mu_;
  std::deque<UniqueFd> queue_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

void CloseLater(UniqueFd fd) {
  if (!fd) return;
  static Closer* const closer = new Closer();  // never destroyed: its thread outlives main
  closer->Add(std::move(fd));
}

}  // namespace warden
