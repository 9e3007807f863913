// KeeperClient: wardend's side of the keeper protocol (keeper/protocol.h).
// Thread-safe; every call is one message, except Adopt, which is called
// once, before the daemon serves.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "keeper/protocol.h"
#include "sandbox/unique_fd.h"

namespace warden::keeper {

// One sandbox's handles, by keeper::Handle; absent ones are empty.
using Handles = std::array<UniqueFd, kHandleCount>;

// A sandbox the keeper held, as ADOPT hands it back.
struct HeldSandbox {
  std::string id;
  Handles handles;
  bool ended = false;  // its init had exited
  int wait_status = 0;
  std::string buffered[3];    // by keeper::Stream, written while detached
  int64_t dropped[3] = {0, 0, 0};  // bytes lost beyond the keeper's buffer
};

class KeeperClient {
 public:
  // Connects to the keeper's socket. UNAVAILABLE if no keeper listens.
  static absl::StatusOr<std::unique_ptr<KeeperClient>> Connect(const std::string& path);

  // Every sandbox the keeper holds, with what they wrote while detached.
  absl::StatusOr<std::vector<HeldSandbox>> Adopt();
  // Gives the keeper a copy of `handles` (SCM_RIGHTS duplicates them) under `id`,
  // replacing what it held under that id.
  absl::Status Hold(const std::string& id, const Handles& handles);
  absl::Status Drop(const std::string& id);
  // Stop for real: the keeper ends what it holds and quits after wardend.
  absl::Status Stop();
  // wardend serves (its listeners are bound): the keeper reports the unit
  // ready to systemd, and counts this start as a success.
  absl::Status Serving();

 private:
  explicit KeeperClient(UniqueFd fd) : fd_(std::move(fd)) {}
  absl::Status Send(const Header& header, const int* fds, int n_fds);

  absl::Mutex mu_;
  UniqueFd fd_ ABSL_GUARDED_BY(mu_);
};

}  // namespace warden::keeper
