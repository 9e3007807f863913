#include "sandbox/limits.h"

#include "absl/strings/str_cat.h"

namespace warden {
namespace {

absl::Status CheckRange(const char* name, int64_t value, int64_t min, int64_t max) {
  if (value < min || value > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " is ", value, "; it must be between ", min, " and ", max));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Limits::Validate() const {
  constexpr int64_t kMiB = 1 << 20;
  constexpr int64_t kTiB = 1LL << 40;
  // Below 8 MiB not even a shell starts; the caps are sanity bounds only,
  // the server applies its own configured maximums on top.
  if (auto s = CheckRange("memory_bytes", memory_bytes, 8 * kMiB, kTiB); !s.ok()) return s;
  if (auto s = CheckRange("pids", pids, 1, 1 << 20); !s.ok()) return s;
  if (auto s = CheckRange("cpu_ms", cpu_ms, 1, 86'400'000); !s.ok()) return s;
  if (auto s = CheckRange("wall_ms", wall_ms, 1, 86'400'000); !s.ok()) return s;
  if (auto s = CheckRange("output_bytes", output_bytes, 0, kTiB); !s.ok()) return s;
  if (auto s = CheckRange("tmpfs_bytes", tmpfs_bytes, kMiB, kTiB); !s.ok()) return s;
  if (auto s = CheckRange("file_size_bytes", file_size_bytes, 0, kTiB); !s.ok()) return s;
  if (auto s = CheckRange("open_files", open_files, 8, 1 << 20); !s.ok()) return s;
  return CheckRange("cpu_percent", cpu_percent, 1, 100 * 1024);
}

}  // namespace warden
