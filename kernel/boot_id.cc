#include "kernel/boot_id.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace warden {

absl::StatusOr<std::unique_ptr<BootId>> BootId::Create(const std::string& dir) {
  std::string name = dir + "/boot-id-XXXXXX";
  UniqueFd fd(mkostemp(name.data(), O_CLOEXEC));
  if (!fd) return absl::ErrnoToStatus(errno, "creating a boot id file in " + dir);
  auto out = std::unique_ptr<BootId>(new BootId());
  out->path_ = name;
  out->fd_ = std::move(fd);
  // Read by the machine's user through the bind; written through fd_ only.
  if (fchmod(out->fd_.get(), 0444) != 0) return absl::ErrnoToStatus(errno, "chmod " + name);
  RETURN_IF_ERROR(out->Renew());
  return out;
}

BootId::~BootId() { unlink(path_.c_str()); }

absl::Status BootId::Renew() {
  uint8_t b[16];
  if (getrandom(b, sizeof(b), 0) != sizeof(b)) return absl::ErrnoToStatus(errno, "getrandom");
  b[6] = (b[6] & 0x0f) | 0x40;  // version 4, variant 1, as the kernel's own
  b[8] = (b[8] & 0x3f) | 0x80;
  const std::string text = absl::StrFormat(
      "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x\n", b[0], b[1], b[2], b[3], b[4],
      b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  // The same length every time: rewritten in place, never truncated, so a
  // reader sees the old id or the new one.
  if (pwrite(fd_.get(), text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    return absl::ErrnoToStatus(errno, "write " + path_);
  }
  return absl::OkStatus();
}

}  // namespace warden
