// SessionManager: the daemon's sessions, by id, each owned by one tenant.
//
// A tenant sees and touches only its own sessions: anyone else's id is
// NOT_FOUND, exactly like an id that never existed. Sessions expire at
// their time-to-live or after an idle timeout (Reap, called periodically);
// the number of sessions is capped in total and per tenant. Entries are
// shared: a closed session lives on until the last call using it returns.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kernel/boot_id.h"
#include "kernel/command.h"
#include "kernel/session.h"
#include "kernel/shared_workspace.h"
#include "sandbox/machine.h"
#include "egress/policy.h"
#include "server/options.h"
#include "server/snapshot_store.h"

namespace warden {

struct ManagedCommand;

struct ManagedSession {
  // A session with a shared workspace is one machine (sandbox/machine.h):
  // its interpreter, contexts, commands and terminals are processes in it,
  // sharing its files, process table and cgroup (the session's limits for
  // all of them together). Null otherwise. Declared first, so they go last:
  // the workspace (a directory of the host's, the machine's workspace), the
  // session's cgroup (its limits; the machine's nests in it; null in
  // degraded mode) and the machine.
  std::unique_ptr<SharedWorkspace> workspace;
  std::unique_ptr<BootId> boot_id;  // the machine's own (kernel/boot_id.h)
  std::vector<std::string> workspace_aliases;  // symlinks to it in the machine
  std::shared_ptr<Cgroup> cgroup;
  std::shared_ptr<Machine> machine;
  std::string workspace_path;    // with a machine: its workspace, its user's home
  std::vector<std::string> env;  // with a machine: what its processes start with
  std::string cwd;               // a context's working directory (empty: the workspace)

  // The network (server/network.h): the session's own policy (null: its
  // pool's, `pool_network`, which may be null too), the placeholders of its
  // secrets ("NAME=warden-secret-NAME", each cell's environment when it is
  // no machine), who may reach its exposed ports without the tenant's
  // token, and the Host its servers see. Set before the entry is shared;
  // `network` is replaced under network_mu (UpdateNetwork).
  mutable absl::Mutex network_mu;
  std::shared_ptr<const egress::Policy> network ABSL_GUARDED_BY(network_mu);
  std::shared_ptr<const egress::Policy> pool_network;
  std::vector<std::string> secret_env ABSL_GUARDED_BY(network_mu);
  bool public_ports = false;
  std::string port_host_header;
  bool resume_on_port_request = false;  // PortAccess.resume_on_request
  std::string traffic_token;
  // The gate of the session's way out: its machine's, or its interpreter's.
  std::shared_ptr<EgressGate> egress_gate;

  std::string id;
  std::string tenant;
  Language language = Language::kPython;
  // The template it runs in (pinned in the store while the session lives);
  // null: the host's runtime.
  std::shared_ptr<const SandboxTemplate> sandbox_template;
  // The volumes mounted into its sandbox, as asked for (the mounts
  // themselves are the sandbox's; a machine's for a shared workspace).
  std::vector<VolumeMountRecord> volumes;
  // Their binds (the mounts' fds stay valid while `volume_holds` keep the
  // volumes mounted: server/volume_catalog.h).
  std::vector<BindMount> volume_binds;
  std::vector<std::shared_ptr<void>> volume_holds;
  std::map<std::string, std::string> labels;
  absl::Time created;
  absl::Duration idle_timeout;
  CellLimitsOptions cell_defaults;  // for cells that leave a limit at 0
  int64_t memory_mb = 0;
  std::unique_ptr<Session> session;  // set once, before the entry is shared

  // A machine: its further interpreters ("contexts", each an entry of its
  // own with a session and a cell queue, never registered with the
  // SessionManager) and the commands run beside them, by process id.
  // The context whose id is this session's own is `session` itself.
  mutable absl::Mutex parts_mu;
  std::map<std::string, std::shared_ptr<ManagedSession>> contexts ABSL_GUARDED_BY(parts_mu);
  std::map<int, std::shared_ptr<ManagedCommand>> commands ABSL_GUARDED_BY(parts_mu);

  // Hibernation (Engine): while `session` is released, the snapshot that
  // holds its state. Read and written only by whoever holds the session's
  // turn (Begin/End).
  std::string hibernation_snapshot;
  // Set when waking it failed for good (its snapshot damaged, or refused by
  // its kernel): every later call gets this at once, never "try again".
  absl::Status wake_failure;
  // When hibernation last found the state not completely capturable; it is
  // not tried again until the session is used.
  absl::Time hibernation_refused = absl::InfinitePast();
  // In a fleet: the generation of the session's entry in the shared ledger
  // this node knows (server/session_ledger.h); 0 until it first moves.
  // Read and written only by whoever holds the session's turn.
  int64_t ledger_generation = 0;

  // PauseSession (Engine): running, paused with its processes frozen, or
  // paused with its processes ended (its files kept).
  enum class Pause { kRunning, kFrozen, kFilesystemOnly };
  std::atomic<Pause> pause{Pause::kRunning};
  bool paused() const { return pause.load() != Pause::kRunning; }
  absl::Duration paused_remaining;  // its TTL left when paused; Pause/Resume only
  // At its TTL's end it pauses (E2B's auto-pause) instead of closing.
  std::optional<bool> pause_on_expiry_keeping_memory;
  absl::Mutex pause_mu;             // one Pause or Resume at a time
  // FAILED_PRECONDITION while paused: a paused session runs nothing.
  absl::Status CheckRunning() const {
    if (!paused()) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("session ", id, " is paused; resume it first (ResumeSession; E2B: connect)"));
  }

  absl::Time last_used() const {
    absl::MutexLock lock(&mu);
    return last_used_;
  }
  // Moved by SessionManager::SetExpires while others read it.
  absl::Time expires() const {
    absl::MutexLock lock(&mu);
    return expires_;
  }
  void set_expires(absl::Time expires) {
    absl::MutexLock lock(&mu);
    expires_ = expires;
  }
  void Touch(absl::Time when = absl::Now()) {
    absl::MutexLock lock(&mu);
    last_used_ = when;
  }
  // Marks the session busy for one call, waiting until `deadline` for the
  // call before it to end (one cell at a time, in order of arrival, like a
  // Jupyter kernel's queue). If it was closed meanwhile: why (SetEndedBy),
  // else NOT_FOUND; FAILED_PRECONDITION if it stayed busy.
  absl::Status Begin(absl::Time deadline) {
    absl::MutexLock lock(&mu);
    auto free = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return !busy_ || closed_; };
    mu.AwaitWithDeadline(absl::Condition(&free), deadline);
    if (closed_) return ClosedLocked();
    if (busy_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "session ", id, " is still running another cell; wait for it or interrupt it"));
    }
    busy_ = true;
    return absl::OkStatus();
  }
  // `used`: the call counts as use (resets the idle clock); hibernation's
  // own turn does not.
  void End(bool used = true) {
    absl::MutexLock lock(&mu);
    busy_ = false;
    if (used) last_used_ = absl::Now();
  }
  bool busy() const {
    absl::MutexLock lock(&mu);
    return busy_;
  }
  // OK while the session is open; what Begin would say once it closed.
  absl::Status CheckOpen() const {
    absl::MutexLock lock(&mu);
    return closed_ ? ClosedLocked() : absl::OkStatus();
  }
  void MarkClosed() {
    absl::MutexLock lock(&mu);
    closed_ = true;
  }
  // What a call that found the session before it closed hears, from Begin,
  // once it has: a session handed over to another node says MOVING
  // (server/fleet_hint.h), which a gateway follows, where NOT_FOUND would
  // end the call. Set before the session is closed.
  void SetEndedBy(absl::Status why) {
    absl::MutexLock lock(&mu);
    ended_by_ = std::move(why);
  }
  // The cell that was running when the previous wardend went (kept by
  // warden-keeper), once it has ended: GetSession reports it.
  void SetDetachedCell(CellResult cell) {
    absl::MutexLock lock(&mu);
    detached_cell_ = std::move(cell);
  }
  std::optional<CellResult> detached_cell() const {
    absl::MutexLock lock(&mu);
    return detached_cell_;
  }

 private:
  absl::Status ClosedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (!ended_by_.ok()) return ended_by_;
    return absl::NotFoundError(absl::StrCat("no session '", id, "'; it may have expired or been closed"));
  }

  mutable absl::Mutex mu;
  absl::Time last_used_ ABSL_GUARDED_BY(mu);
  absl::Time expires_ ABSL_GUARDED_BY(mu);
  bool busy_ ABSL_GUARDED_BY(mu) = false;
  bool closed_ ABSL_GUARDED_BY(mu) = false;
  absl::Status ended_by_ ABSL_GUARDED_BY(mu);
  std::optional<CellResult> detached_cell_ ABSL_GUARDED_BY(mu);
};

// A command run in a session, by its id there: its pid in the machine
// (E2B's pid).
struct ManagedCommand {
  int id = 0;
  std::string tag;  // the caller's name for it (E2B's tag); may be empty
  std::unique_ptr<Command> command;
};

// Told of every session registered, adopted or removed (the keeper's
// bookkeeping, server/session_keeper.h). Called without the manager's lock.
class SessionObserver {
 public:
  virtual ~SessionObserver() = default;
  virtual void OnRegistered(const ManagedSession& entry) = 0;
  virtual void OnRemoved(const ManagedSession& entry) = 0;
};

class SessionManager {
 public:
  // `node_id` (a fleet's, FleetOptions) ends every session id this manager
  // makes, so that a gateway routes calls without a lookup table.
  explicit SessionManager(const SessionsOptions& options, std::string node_id = "")
      : options_(options), node_id_(std::move(node_id)) {}

  // Checks the caps for `tenant` and reserves a place; Register fills it.
  absl::Status Reserve(const std::string& tenant);
  void Unreserve(const std::string& tenant);
  // Adds a started session (its id is assigned here, unless it has one:
  // a session taken over from another node keeps its own) and returns it.
  std::shared_ptr<ManagedSession> Register(std::unique_ptr<ManagedSession> entry);
  // Adds a session a predecessor wardend started, under its own id, past
  // the caps (it already counted against them); the observer is not told.
  std::shared_ptr<ManagedSession> Adopt(std::unique_ptr<ManagedSession> entry, absl::Time last_used);
  // Set before any session exists; not owned.
  void SetObserver(SessionObserver* observer) { observer_ = observer; }
  // Every session, for the keeper's bookkeeping.
  std::vector<std::shared_ptr<ManagedSession>> All() const;

  absl::StatusOr<std::shared_ptr<ManagedSession>> Get(const std::string& tenant,
                                                      const std::string& id) const;
  // Whichever tenant's it is: for a credential that is the session's own
  // (its exposed ports' traffic token), never for a tenant's call.
  std::shared_ptr<ManagedSession> GetOfAnyTenant(const std::string& id) const;
  // The tenant's sessions carrying every label in `labels`, oldest first.
  std::vector<std::shared_ptr<ManagedSession>> List(const std::string& tenant,
                                                    const std::map<std::string, std::string>& labels) const;
  // Moves the session's expiry (E2B's set_timeout); NOT_FOUND as Get.
  absl::Status SetExpires(const std::string& tenant, const std::string& id, absl::Time expires);
  // Removes and returns the session (for the caller to dispose of).
  absl::StatusOr<std::shared_ptr<ManagedSession>> Remove(const std::string& tenant,
                                                         const std::string& id);
  // Removes sessions past their TTL or idle timeout; returns them.
  std::vector<std::shared_ptr<ManagedSession>> TakeExpired(absl::Time now);
  // Running sessions past their TTL that pause at its end instead.
  std::vector<std::shared_ptr<ManagedSession>> ToPause(absl::Time now) const;
  // Every session not used since `before` (hibernation's candidates),
  // the longest idle first.
  std::vector<std::shared_ptr<ManagedSession>> IdleSince(absl::Time before) const;
  // Removes everything (shutdown).
  std::vector<std::shared_ptr<ManagedSession>> TakeAll();
  int size() const;

  // "s-" + 24 random hex digits, then "-" + the node id in a fleet.
  std::string NewId() const;
  static std::string RandomHex();  // 24 random hex digits
  // The node id a session id ends with ("" for an id of no fleet's).
  static std::string NodeOf(const std::string& session_id);

 private:
  absl::StatusOr<std::shared_ptr<ManagedSession>> FindLocked(const std::string& tenant,
                                                             const std::string& id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void NotifyRemoved(const std::vector<std::shared_ptr<ManagedSession>>& removed) {
    if (observer_ == nullptr) return;
    for (const auto& entry : removed) observer_->OnRemoved(*entry);
  }

  const SessionsOptions options_;
  const std::string node_id_;
  SessionObserver* observer_ = nullptr;
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<ManagedSession>> sessions_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> per_tenant_ ABSL_GUARDED_BY(mu_);  // registered + reserved
  int total_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace warden
