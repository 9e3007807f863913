// SessionKeeper: wardend's half of keeping sessions across its restarts
// and crashes (docs/keeper-design.md).
//
// Under warden-keeper (which sets WARDEN_KEEPER_SOCKET), every session's
// sandbox is handed to the keeper (a copy of its handles, over SCM_RIGHTS)
// as the session is registered, and its metadata - id, tenant, language,
// limits, deadlines as absolute times, execution count, cgroup - is written
// to <state_dir>/sessions/<id> (0600, atomically). A starting wardend takes
// back what the keeper holds (Receive), pairs each sandbox with its
// metadata, lets the crash reclaim spare exactly those cgroups (KeptGroups),
// and rebuilds the sessions in the engine (AdoptInto). Whatever it cannot
// pair - a sandbox without metadata, metadata without a sandbox, a sandbox
// whose init died - is dropped and reported.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "keeper/client.h"
#include "server/engine.h"
#include "server/session_manager.h"

namespace warden {

// One session's metadata file. A line-based text form ("key value").
struct SessionRecord {
  std::string id;
  std::string tenant;
  Language language = Language::kPython;
  int64_t memory_mb = 0;
  std::map<std::string, std::string> labels;
  absl::Time created, expires, last_used;
  absl::Duration idle_timeout;
  CellLimitsOptions cell_defaults;
  Session::Handover snapshot;
  std::string cgroup_subtree, cgroup_group;  // empty without cgroups
  bool busy = false;  // a cell was running when this was written
  // Its own network policy (server/network.h's JSON, secrets included; the
  // file is 0600), its exposed ports' access and traffic token.
  std::string network;
  bool public_ports = false;
  std::string port_host_header;
  std::string traffic_token;
  std::string template_name, template_digest;  // empty: the host's runtime
  std::vector<VolumeMountRecord> volumes;

  std::string Encode() const;
  static absl::StatusOr<SessionRecord> Decode(const std::string& text);
};

// What AdoptInto did, for the log.
struct AdoptReport {
  std::vector<std::string> adopted;   // session ids
  std::vector<std::string> dropped;   // "id: why"
  int64_t buffered_bytes = 0;         // output kept by the keeper while detached
  int64_t truncated_bytes = 0;        // lost beyond its buffer
  std::string Summary() const;
};

class SessionKeeper : public SessionObserver {
 public:
  // The keeper's socket, from WARDEN_KEEPER_SOCKET; empty: no keeper.
  static std::string SocketFromEnvironment();
  static absl::StatusOr<std::unique_ptr<SessionKeeper>> Connect(const std::string& socket,
                                                                const std::string& state_dir);

  // Takes every sandbox the keeper holds and reads the metadata beside them.
  // With `drop_all` (wardend --drop-sessions) none is to be adopted.
  absl::Status Receive(bool drop_all);
  // Cgroup subtree -> the groups of sandboxes about to be adopted: what the
  // reclaim of a predecessor's subtree must leave alone.
  std::map<std::string, std::set<std::string>> KeptGroups() const;
  // Rebuilds the received sessions in `engine` (before it starts) and ends
  // those it cannot. The keeper forgets what is dropped; its metadata files
  // are removed.
  AdoptReport AdoptInto(Engine& engine, Executor& executor);

  void OnRegistered(const ManagedSession& entry) override;
  void OnRemoved(const ManagedSession& entry) override;
  // Rewrites every session's metadata (before detaching).
  void PersistAll(const std::vector<std::shared_ptr<ManagedSession>>& sessions);
  // Stop for real: the keeper ends whatever it still holds and quits after
  // this wardend exits. The metadata directory goes.
  void Stop();
  // This wardend serves: the keeper tells systemd (READY=1).
  void Serving() { (void)client_->Serving(); }

 private:
  SessionKeeper(std::unique_ptr<keeper::KeeperClient> client, std::string dir)
      : client_(std::move(client)), dir_(std::move(dir)) {}
  absl::Status Persist(const ManagedSession& entry);
  std::string PathOf(const std::string& id) const { return dir_ + "/" + id; }

  std::unique_ptr<keeper::KeeperClient> client_;
  const std::string dir_;  // <state_dir>/sessions
  struct Received {
    keeper::HeldSandbox held;
    std::optional<SessionRecord> record;
    std::string problem;  // why it cannot be adopted, if it cannot
  };
  std::vector<Received> received_;
  std::vector<std::string> orphan_records_;  // metadata without a sandbox
};

}  // namespace warden
