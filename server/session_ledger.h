// SessionLedger: who holds a fleet's session, in the shared snapshot storage
// every node mounts (docs/fleet.md). A session that never moved has no entry
// (the node in its id holds it, generation 0). Every change of holder is a
// new generation, written as <dir>/<session id>/<generation>.json with
// link(2), which fails if the file exists: of two nodes claiming the same
// generation exactly one wins, on a local filesystem and on NFS alike. A
// node that finds a generation newer than the one it knows was fenced: the
// session lives elsewhere now, and it must not serve (or wake) its copy.
//
// The states:
//   handed_over  its draining holder snapshotted it (snapshot_id); the next
//                node to claim it restores it under the same id
//   owned        `node` holds it (taken over, or woken from hibernation)
//   lost         its holder could not hand it over; `reason` says why
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/options.h"
#include "server/session_manager.h"

namespace warden {

struct LedgerRecord {
  enum class State { kHandedOver, kOwned, kLost };
  int64_t generation = 0;
  State state = State::kOwned;
  std::string node;   // the holder (kOwned), or the node that handed it over or lost it
  std::string epoch;  // that node's wardend process
  std::string tenant;
  std::string snapshot_id;  // kHandedOver: in the shared SnapshotStore
  std::string reason;       // kLost
  absl::Time at;
};

const char* LedgerStateName(LedgerRecord::State state);

class SessionLedger {
 public:
  // `dir` is <fleet.shared_dir>/sessions; made on first use.
  explicit SessionLedger(std::string dir) : dir_(std::move(dir)) {}

  // The newest generation of the session, nullopt if it never moved.
  absl::StatusOr<std::optional<LedgerRecord>> Current(const std::string& session_id) const;
  // Writes `record` as generation `after` + 1 (after: the generation the
  // writer knows, 0 for one that never moved). ABORTED if that generation
  // exists already: someone else moved the session first.
  absl::StatusOr<LedgerRecord> Append(const std::string& session_id, int64_t after, LedgerRecord record);
  // The session ended for good: its entry goes.
  void Forget(const std::string& session_id);
  // Entries whose newest record is older than `before` (ended sessions
  // whose holder died before forgetting them); returns how many went.
  int Sweep(absl::Time before);

 private:
  absl::StatusOr<std::string> DirOf(const std::string& session_id) const;

  const std::string dir_;
};

// What a session needs, besides its state, to live on under its id on
// another node: its tenant-visible settings, as JSON kept with its snapshot
// (SnapshotRecord::session_meta).
std::string EncodeSessionMeta(const ManagedSession& entry);
// What a session's metadata names that the engine resolves itself: the
// template it ran in and the volumes it had mounted.
struct SessionMetaRefs {
  std::string template_name, template_digest;
  std::vector<VolumeMountRecord> volumes;
};
// Fills `entry` (tenant, language and memory come from the snapshot record)
// from EncodeSessionMeta's text; missing fields keep `entry`'s defaults.
absl::Status DecodeSessionMeta(const std::string& text, ManagedSession* entry, SessionMetaRefs* refs = nullptr);

}  // namespace warden
