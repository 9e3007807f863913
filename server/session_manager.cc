#include "server/session_manager.h"

#include <sys/random.h>

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace warden {

std::string SessionManager::RandomHex() {
  unsigned char bytes[12];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(bytes), sizeof(bytes)));
}

std::string SessionManager::NewId() const {
  return node_id_.empty() ? absl::StrCat("s-", RandomHex()) : absl::StrCat("s-", RandomHex(), "-", node_id_);
}

std::string SessionManager::NodeOf(const std::string& session_id) {
  // "s-" + 24 hex digits + "-" + node
  constexpr size_t kPrefix = 2 + 24 + 1;
  if (session_id.size() <= kPrefix || session_id.compare(0, 2, "s-") != 0 || session_id[kPrefix - 1] != '-') {
    return "";
  }
  return session_id.substr(kPrefix);
}

absl::Status SessionManager::Reserve(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  if (total_ >= options_.max_total) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the server holds its maximum of ", options_.max_total, " sessions; close some first"));
  }
  int& mine = per_tenant_[tenant];
  if (mine >= options_.max_per_tenant) {
    return absl::ResourceExhaustedError(absl::StrCat("you hold your maximum of ",
                                                     options_.max_per_tenant,
                                                     " sessions; close some first"));
  }
  ++mine;
  ++total_;
  return absl::OkStatus();
}

void SessionManager::Unreserve(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  if (--per_tenant_[tenant] <= 0) per_tenant_.erase(tenant);
  --total_;
}

std::shared_ptr<ManagedSession> SessionManager::Register(std::unique_ptr<ManagedSession> entry) {
  if (entry->id.empty()) entry->id = NewId();
  entry->Touch();
  std::shared_ptr<ManagedSession> shared(std::move(entry));
  {
    absl::MutexLock lock(&mu_);
    sessions_[shared->id] = shared;
  }
  if (observer_ != nullptr) observer_->OnRegistered(*shared);
  return shared;
}

std::shared_ptr<ManagedSession> SessionManager::Adopt(std::unique_ptr<ManagedSession> entry,
                                                      absl::Time last_used) {
  entry->Touch(last_used);
  std::shared_ptr<ManagedSession> shared(std::move(entry));
  absl::MutexLock lock(&mu_);
  sessions_[shared->id] = shared;
  ++per_tenant_[shared->tenant];
  ++total_;
  return shared;
}

std::vector<std::shared_ptr<ManagedSession>> SessionManager::All() const {
  std::vector<std::shared_ptr<ManagedSession>> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, s] : sessions_) out.push_back(s);
  return out;
}

absl::StatusOr<std::shared_ptr<ManagedSession>> SessionManager::Get(const std::string& tenant,
                                                                    const std::string& id) const {
  absl::MutexLock lock(&mu_);
  return FindLocked(tenant, id);
}

std::shared_ptr<ManagedSession> SessionManager::GetOfAnyTenant(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : it->second;
}

absl::StatusOr<std::shared_ptr<ManagedSession>> SessionManager::FindLocked(const std::string& tenant,
                                                                           const std::string& id) const {
  auto it = sessions_.find(id);
  // Another tenant's session is indistinguishable from none at all.
  if (it == sessions_.end() || it->second->tenant != tenant) {
    return absl::NotFoundError(absl::StrCat("no session '", id, "'; it may have expired or been closed"));
  }
  return it->second;
}

std::vector<std::shared_ptr<ManagedSession>> SessionManager::List(
    const std::string& tenant, const std::map<std::string, std::string>& labels) const {
  std::vector<std::shared_ptr<ManagedSession>> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, s] : sessions_) {
    if (s->tenant != tenant) continue;
    bool match = true;
    for (const auto& [k, v] : labels) {
      auto it = s->labels.find(k);
      match = match && it != s->labels.end() && it->second == v;
    }
    if (match) out.push_back(s);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a->created < b->created; });
  return out;
}

absl::Status SessionManager::SetExpires(const std::string& tenant, const std::string& id,
                                        absl::Time expires) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto entry, FindLocked(tenant, id));
  entry->set_expires(expires);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<ManagedSession>> SessionManager::Remove(const std::string& tenant,
                                                                       const std::string& id) {
  std::shared_ptr<ManagedSession> entry;
  {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(entry, FindLocked(tenant, id));
    sessions_.erase(id);
    if (--per_tenant_[tenant] <= 0) per_tenant_.erase(tenant);
    --total_;
    entry->MarkClosed();
  }
  NotifyRemoved({entry});
  return entry;
}

std::vector<std::shared_ptr<ManagedSession>> SessionManager::TakeExpired(absl::Time now) {
  std::vector<std::shared_ptr<ManagedSession>> out;
  absl::ReleasableMutexLock lock(&mu_);
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    const auto& s = it->second;
    // A busy session is idle only once its cell returns; its TTL still holds.
    // A paused session is not idle: it is stopped, until its expiry.
    const bool idle_expired = !s->busy() && !s->paused() && !s->pause_on_expiry_keeping_memory &&
                              now - s->last_used() >= s->idle_timeout;
    if (now >= s->expires() || idle_expired) {
      if (--per_tenant_[s->tenant] <= 0) per_tenant_.erase(s->tenant);
      --total_;
      s->MarkClosed();
      out.push_back(s);
      it = sessions_.erase(it);
    } else {
      ++it;
    }
  }
  lock.Release();
  NotifyRemoved(out);
  return out;
}

std::vector<std::shared_ptr<ManagedSession>> SessionManager::ToPause(absl::Time now) const {
  std::vector<std::shared_ptr<ManagedSession>> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, s] : sessions_) {
    if (s->pause_on_expiry_keeping_memory && !s->paused() && now >= s->expires()) out.push_back(s);
  }
  return out;
}

std::vector<std::shared_ptr<ManagedSession>> SessionManager::IdleSince(absl::Time before) const {
  std::vector<std::shared_ptr<ManagedSession>> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, s] : sessions_) {
    if (!s->busy() && s->last_used() < before) out.push_back(s);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a->last_used() < b->last_used(); });
  return out;
}

std::vector<std::shared_ptr<ManagedSession>> SessionManager::TakeAll() {
  std::vector<std::shared_ptr<ManagedSession>> out;
  absl::ReleasableMutexLock lock(&mu_);
  for (auto& [id, s] : sessions_) {
    s->MarkClosed();
    out.push_back(s);
  }
  sessions_.clear();
  per_tenant_.clear();
  total_ = 0;
  lock.Release();
  NotifyRemoved(out);
  return out;
}

int SessionManager::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(sessions_.size());
}

}  // namespace warden
