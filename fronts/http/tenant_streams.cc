#include "fronts/http/tenant_streams.h"

#include "absl/strings/str_cat.h"

namespace warden::http {

TenantStreams::Lease::~Lease() { owner_->Close(tenant_, holds_thread_); }

absl::StatusOr<std::unique_ptr<TenantStreams::Lease>> TenantStreams::Open(const std::string& tenant,
                                                                          bool holds_thread) {
  {
    absl::MutexLock lock(&mu_);
    int& n = open_[tenant];
    if (n >= cap_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "this caller already holds ", n, " open streams (event streams and WebSockets), the most ", setting_,
          " allows one tenant: close one first, or raise ", setting_));
    }
    if (holds_thread) {
      const int free = thread_cap_ - holding_threads_;
      auto mine_it = threads_of_.find(tenant);
      const int mine = mine_it == threads_of_.end() ? 0 : mine_it->second;
      if (free <= 0) {
        if (n == 0) open_.erase(tenant);
        return absl::UnavailableError(absl::StrCat(
            "the server streams ", holding_threads_, " responses already, each on a handler thread, half of its ",
            handler_threads_, " (", threads_setting_, "); try again shortly, or raise ", threads_setting_));
      }
      // Its first always, then no more than the others keep free after it.
      if (mine > 0 && mine + 1 > free - 1) {
        if (n == 0) open_.erase(tenant);
        return absl::ResourceExhaustedError(absl::StrCat(
            "this caller streams ", mine, " responses, each on a handler thread, and ", free,
            " such threads are free: one tenant takes at most half of those free, so that other tenants find "
            "room; close a stream first, or raise ", threads_setting_));
      }
      ++threads_of_[tenant];
      ++holding_threads_;
    }
    ++n;
  }
  return std::unique_ptr<Lease>(new Lease(shared_from_this(), tenant, holds_thread));
}

int TenantStreams::holding_threads() const {
  absl::MutexLock lock(&mu_);
  return holding_threads_;
}

int TenantStreams::holding_threads(const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  auto it = threads_of_.find(tenant);
  return it == threads_of_.end() ? 0 : it->second;
}

void TenantStreams::Close(const std::string& tenant, bool holds_thread) {
  absl::MutexLock lock(&mu_);
  if (holds_thread) {
    --holding_threads_;
    auto mine = threads_of_.find(tenant);
    if (mine != threads_of_.end() && --mine->second <= 0) threads_of_.erase(mine);
  }
  auto it = open_.find(tenant);
  if (it == open_.end()) return;
  if (--it->second <= 0) open_.erase(it);
}

int TenantStreams::open(const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  auto it = open_.find(tenant);
  return it == open_.end() ? 0 : it->second;
}

}  // namespace warden::http
