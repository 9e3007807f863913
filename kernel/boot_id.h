// BootId: a machine's own /proc/sys/kernel/random/boot_id. A host file,
// beneath a directory of wardend's own, bound read-only over that procfs
// entry in the machine (FilesystemSpec::boot_id_source), holding a random
// UUID that changes at each boot of the machine (E2B's filesystem-only
// resume is a reboot). The host's own boot id stays hidden, so two machines
// cannot tell from it that they share a host. Destroying it removes the
// file (a machine still binding it keeps reading what it held).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "sandbox/unique_fd.h"

namespace warden {

class BootId {
 public:
  // A new file beneath `dir` (an existing directory), with a fresh id.
  static absl::StatusOr<std::unique_ptr<BootId>> Create(const std::string& dir);
  ~BootId();
  BootId(const BootId&) = delete;
  BootId& operator=(const BootId&) = delete;

  const std::string& path() const { return path_; }
  // A new boot: a new id, seen at once wherever the file is bound.
  absl::Status Renew();

 private:
  BootId() = default;
  std::string path_;
  UniqueFd fd_;  // open for writing since before its mode became 0444
};

}  // namespace warden
