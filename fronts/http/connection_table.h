// ConnectionTable: the connections one HttpServer has open, and which of
// them wait for a request head, in the order they began to wait: at the
// connection bound the server closes the one that has waited longest
// (a slowloris, or a client idling on a kept-alive connection) to make room
// for a new one. Thread-safe.
#pragma once

#include <list>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace warden::http {

class Connection;

class ConnectionTable {
 public:
  struct Entry;
  // A connection's place in the table, kept inside the connection and
  // guarded by the table's lock. Its destructor takes it off the table:
  // declared before the connection's other members, it goes after them,
  // so that a connection leaves the count only once its memory is freed.
  struct Member {
    Member() = default;
    Member(const Member&) = delete;
    Member& operator=(const Member&) = delete;
    ~Member() {
      if (table != nullptr) table->Remove(this);
    }
    ConnectionTable* table = nullptr;
    std::list<Entry>::iterator all;
    std::list<Entry>::iterator waiting;
    bool listed = false;
    bool is_waiting = false;
  };
  struct Entry {
    std::weak_ptr<Connection> connection;
    Member* member;
  };

  void Add(const std::shared_ptr<Connection>& connection, Member* member);
  // From Member's destructor.
  void Remove(Member* member);
  // Whether the connection now waits for a request head (the wait's start
  // orders it among the others).
  void SetWaiting(const std::shared_ptr<Connection>& connection, Member* member, bool waiting);
  // The connection that has waited longest for a head, off the waiting
  // list; null when none waits.
  std::shared_ptr<Connection> TakeOldestWaiting();

  int size() const;
  int waiting() const;
  bool WaitForAtMost(int n, absl::Time deadline) const;
  std::vector<std::shared_ptr<Connection>> All() const;

 private:
  mutable absl::Mutex mu_;
  std::list<Entry> all_ ABSL_GUARDED_BY(mu_);
  std::list<Entry> waiting_ ABSL_GUARDED_BY(mu_);
};

}  // namespace warden::http
