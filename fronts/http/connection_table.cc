#include "fronts/http/connection_table.h"

namespace warden::http {

void ConnectionTable::Add(const std::shared_ptr<Connection>& connection, Member* member) {
  absl::MutexLock lock(&mu_);
  member->table = this;
  member->all = all_.insert(all_.end(), Entry{connection, member});
  member->listed = true;
}

void ConnectionTable::Remove(Member* member) {
  absl::MutexLock lock(&mu_);
  if (member->is_waiting) waiting_.erase(member->waiting);
  member->is_waiting = false;
  if (member->listed) all_.erase(member->all);
  member->listed = false;
}

void ConnectionTable::SetWaiting(const std::shared_ptr<Connection>& connection, Member* member, bool waiting) {
  absl::MutexLock lock(&mu_);
  if (member->is_waiting) waiting_.erase(member->waiting);
  member->is_waiting = waiting && member->listed;
  if (member->is_waiting) member->waiting = waiting_.insert(waiting_.end(), Entry{connection, member});
}

std::shared_ptr<Connection> ConnectionTable::TakeOldestWaiting() {
  absl::MutexLock lock(&mu_);
  while (!waiting_.empty()) {
    Entry oldest = waiting_.front();
    waiting_.pop_front();
    oldest.member->is_waiting = false;
    // One being destroyed is leaving anyway; the next is the one to close.
    if (std::shared_ptr<Connection> connection = oldest.connection.lock()) return connection;
  }
  return nullptr;
}

int ConnectionTable::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(all_.size());
}

int ConnectionTable::waiting() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(waiting_.size());
}

bool ConnectionTable::WaitForAtMost(int n, absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  auto few = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return all_.size() <= static_cast<size_t>(n); };
  return mu_.AwaitWithDeadline(absl::Condition(&few), deadline);
}

std::vector<std::shared_ptr<Connection>> ConnectionTable::All() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<Connection>> out;
  for (const Entry& entry : all_) {
    if (auto c = entry.connection.lock()) out.push_back(std::move(c));
  }
  return out;
}

}  // namespace warden::http
