// Engine: what wardend does, independent of gRPC. The service validates
// nothing itself; it converts requests to these calls and results back.
//
// One-shot executions take a warm session from the language's pool, run one
// cell and hand the session to the Disposer; session executions run in the
// caller's own session. Both stream events through a callback and can be
// cancelled from another thread (the RPC's cancellation).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "admission/tenant_queue.h"
#include "common/metrics.h"
#include "egress/policy.h"
#include "egress/proxy.h"
#include "kernel/session.h"
#include "kernel/workspace.h"
#include "server/network.h"
#include "server/options.h"
#include "server/session_ledger.h"
#include "server/session_manager.h"
#include "server/snapshot_store.h"
#include "server/template_catalog.h"
#include "server/volume_catalog.h"
#include "server/warm_pool.h"

namespace warden {

// Lets another thread interrupt whatever an execution is running.
class Cancellation {
 public:
  void Cancel();
  bool cancelled() const;
  // The engine attaches the session while a cell runs in it; a command's
  // follower attaches the command, whose waiting readers Cancel wakes.
  void Attach(Session* session);
  void Attach(Command* command);
  // Anything else that waits: `hook` is called (once) by Cancel.
  void Attach(std::function<void()> hook);
  void Detach();
  // For Session::Execute, which reads it after marking the cell busy.
  const std::atomic<bool>* flag() const { return &cancelled_; }

 private:
  mutable absl::Mutex mu_;
  Session* session_ ABSL_GUARDED_BY(mu_) = nullptr;
  Command* command_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::function<void()> hook_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> cancelled_{false};
};

struct ExecuteCall {
  std::string tenant;
  std::string code;
  std::optional<Language> language;  // one-shot; default python
  std::string session_id;            // empty: one-shot
  std::string context_id;            // a context of the session; empty: its own interpreter
  std::vector<std::string> env;      // "KEY=value" for this cell only (a machine's sessions)
  CellLimitsOptions limits;          // 0: the default (the session's, or the server's)
  std::vector<std::pair<std::string, std::string>> files;  // one-shot: path, content
  std::string template_name;  // one-shot: run in this template (empty: the host's runtime)
  // The client's: waiting for a turn or a worker ends here at the latest.
  absl::Time deadline = absl::InfiniteFuture();
  // Called once, before any event, when the cell is accepted: its session
  // and context exist and it will run (or wait for the session's running
  // cell). A refused request returns its error without calling it.
  std::function<void()> on_accepted;
};

struct ExecutionResult {
  CellResult cell;
  std::string session_id;
};

struct CreateSessionCall {
  std::string tenant;
  std::optional<Language> language;
  CellLimitsOptions limits;  // memory_mb for the session; the rest: cell defaults
  int64_t ttl_seconds = 0;
  int64_t idle_timeout_seconds = 0;
  std::map<std::string, std::string> labels;
  // Contexts and commands: the session is one machine (sandbox/machine.h)
  // whose workspace is at `workspace_path` (empty: /workspace), its user's
  // home, with symlinks to it at each of `workspace_aliases`; `env`
  // ("KEY=value") is every process's and cell's.
  bool shared_workspace = false;
  // What the TTL's end does to a session with a shared workspace.
  enum class OnExpiry { kClose, kPause, kPauseFilesystem } on_expiry = OnExpiry::kClose;
  std::vector<std::string> workspace_aliases;
  std::string workspace_path;
  std::vector<std::string> env;
  // The client's: waiting for a sandbox ends here at the latest (none set:
  // queue.max_wait_ms from now).
  absl::Time deadline = absl::InfiniteFuture();
  // True once the client has gone (may be empty): a sandbox that comes for
  // it goes to the next request in line instead.
  std::function<bool()> abandoned;
  // Where its connections may go (server/network.h); unset: its pool's.
  std::optional<egress::PolicySpec> network;
  // Its exposed ports: reached without a token (needs http.allow_public_ports),
  // the Host header its servers see ("${PORT}" replaced), and whether a
  // request to one resumes the session when it is paused with its memory.
  bool public_ports = false;
  std::string port_host_header;
  // The template the session runs in (its own or a public one); empty: the
  // host's runtime.
  std::string template_name;
  std::vector<VolumeMountRecord> volumes;  // mounted into its sandbox
  bool resume_on_port_request = false;
};

// Puts work that may block on a thread of the caller's (the service's
// Tasks): the engine's asynchronous calls carry on there once their turn
// has come, so that no thread waits for a turn.
using Runner = std::function<void(std::function<void()>)>;

struct RunCommandCall {
  std::string tenant;
  std::string session_id;
  std::vector<std::string> argv;  // e.g. {"/bin/bash", "-l", "-c", "ls"}
  std::vector<std::string> env;   // "KEY=value"
  std::string cwd;                // empty: the workspace
  bool stdin_open = false;
  int64_t wall_ms = 0;            // 0: until it ends or is killed
  std::string tag;
  std::optional<std::pair<uint16_t, uint16_t>> terminal;  // columns, rows
};

// Counters the metrics endpoint and tests read.
struct EngineStats {
  int sessions = 0;
  int live_sessions = 0;  // holding a sandbox (not hibernated)
  int64_t memory_committed_bytes = 0;  // the sessions' memory limits, hibernated ones included
  int executing = 0;
  TenantQueueStats admission;
  // Starts of sandboxes no warm pool holds (a session with a shared
  // workspace: its own machine), a few at once (one per core), the rest in
  // line.
  TenantQueueStats starts;
  // By pool: "python" for a language's default profile, "python:1024mb"
  // for another memory limit.
  std::map<std::string, WarmPoolStats> pools;
};

// The modules a language's sandboxes import ahead of time: the last
// non-empty `warm` list among its pools (the zygote imports Python's).
std::vector<std::string> WarmModules(const DaemonOptions& options, Language language);
// The wheelhouse of a language's sandboxes whose pool names none, the same
// way: the last non-empty `wheelhouse` among its pools.
std::string Wheelhouse(const DaemonOptions& options, Language language);

class Engine {
 public:
  // `executor`, `metrics` and `python_zygote` (may be null) are not owned
  // and must outlive the engine. With a zygote, Python sessions and pool
  // workers are cloned from it.
  Engine(const DaemonOptions& options, Executor& executor, Metrics* metrics = nullptr,
         ForkServer* python_zygote = nullptr, Network* network = nullptr, TemplateCatalog* templates = nullptr,
         VolumeCatalog* volumes = nullptr);
  ~Engine();

  // Starts filling the pools and reaping expired sessions.
  void Start();
  // Closes every session and stops the pools; later calls fail UNAVAILABLE.
  void Stop();

  absl::StatusOr<ExecutionResult> Execute(const ExecuteCall& call,
                                          const Session::EventCallback& on_event,
                                          Cancellation* cancellation);

  absl::StatusOr<std::shared_ptr<ManagedSession>> CreateSession(const CreateSessionCall& call);

  // Execute and CreateSession with no thread waiting for a turn or a
  // sandbox: the request waits in line (admission/: the tenant's turn, a
  // warm worker, a turn to start a machine) as a callback, `run` carries on
  // with the blocking part once its turn has come, and `done` gets the
  // result: on a thread of `run`'s, or on this thread (refused at once), or
  // on a pool's or a queue's thread (refused while it waited). `done` must
  // not block; `cancellation` (may be null) must outlive it. The
  // synchronous calls above are these, carried on on the caller's thread.
  using ExecuteDone = std::function<void(absl::StatusOr<ExecutionResult>)>;
  using CreateDone = std::function<void(absl::StatusOr<std::shared_ptr<ManagedSession>>)>;
  void ExecuteAsync(ExecuteCall call, Session::EventCallback on_event, Cancellation* cancellation, Runner run,
                    ExecuteDone done);
  void CreateSessionAsync(CreateSessionCall call, Runner run, CreateDone done);
  // Refuses every request waiting for its turn (UNAVAILABLE: shutting
  // down) and every later one; what has its turn carries on (the pools
  // serve it until Stop). The first step of a shutdown: nothing then waits
  // on a turn that will not come.
  void StopAdmitting();
  absl::StatusOr<std::shared_ptr<ManagedSession>> GetSession(const std::string& tenant,
                                                             const std::string& id) const;
  std::vector<std::shared_ptr<ManagedSession>> ListSessions(
      const std::string& tenant, const std::map<std::string, std::string>& labels) const;
  absl::Status CloseSession(const std::string& tenant, const std::string& id);
  // Returns whether a cell was running.
  absl::StatusOr<bool> InterruptSession(const std::string& tenant, const std::string& id);
  absl::StatusOr<std::shared_ptr<ManagedSession>> RestartSession(const std::string& tenant,
                                                                 const std::string& id,
                                                                 bool clear_workspace);
  // Files of a session, as its sandbox's user: paths relative to the
  // workspace, or (a machine's) absolute anywhere in its sandbox; what
  // comes back names them the same way (kernel/workspace.h).
  absl::StatusOr<WorkspaceListing> WriteFile(const std::string& tenant, const std::string& id,
                                             const std::string& path, const std::string& data,
                                             const FileMetadata& metadata = {});
  // A file written as its pieces come (UploadFile): opened - created or
  // truncated, its metadata replaced - by StartUpload, each piece written
  // by Write at once, never the whole file in memory; at most
  // limits.max_file_bytes in all. What is written stays when an upload
  // fails half way, as with E2B's envd.
  class Upload {
   public:
    absl::Status Write(absl::string_view piece);
    // The file as WriteFile describes it.
    absl::StatusOr<WorkspaceListing> Finish();

   private:
    friend class Engine;
    Upload(Engine& engine, std::shared_ptr<ManagedSession> entry, std::string path, UniqueFd fd)
        : engine_(engine), entry_(std::move(entry)), path_(std::move(path)), fd_(std::move(fd)) {}
    Engine& engine_;
    const std::shared_ptr<ManagedSession> entry_;
    const std::string path_;
    UniqueFd fd_;
    int64_t written_ = 0;
  };
  absl::StatusOr<std::unique_ptr<Upload>> StartUpload(const std::string& tenant, const std::string& id,
                                                      const std::string& path, const FileMetadata& metadata = {});
  absl::StatusOr<std::string> ReadFile(const std::string& tenant, const std::string& id,
                                       const std::string& path);
  absl::StatusOr<std::vector<WorkspaceListing>> ListFiles(const std::string& tenant,
                                                          const std::string& id,
                                                          const std::string& path, int max_depth = 0);
  absl::StatusOr<WorkspaceListing> StatPath(const std::string& tenant, const std::string& id,
                                            const std::string& path);
  absl::StatusOr<WorkspaceListing> MakeDirectory(const std::string& tenant, const std::string& id,
                                                 const std::string& path);
  absl::StatusOr<WorkspaceListing> MovePath(const std::string& tenant, const std::string& id,
                                            const std::string& from, const std::string& to);
  absl::Status RemovePath(const std::string& tenant, const std::string& id, const std::string& path);

  // Contexts: further interpreters in a session created with a shared
  // workspace. The session's own interpreter is the context whose id is the
  // session's; it is listed first and cannot be removed.
  absl::StatusOr<std::shared_ptr<ManagedSession>> CreateContext(const std::string& tenant,
                                                                const std::string& session_id,
                                                                std::optional<Language> language,
                                                                const std::string& cwd = "");
  absl::StatusOr<std::vector<std::shared_ptr<ManagedSession>>> ListContexts(
      const std::string& tenant, const std::string& session_id) const;
  absl::StatusOr<std::shared_ptr<ManagedSession>> RestartContext(const std::string& tenant,
                                                                 const std::string& session_id,
                                                                 const std::string& context_id);
  absl::Status RemoveContext(const std::string& tenant, const std::string& session_id,
                             const std::string& context_id);

  // Commands beside a session's interpreters, in its shared workspace.
  absl::StatusOr<std::shared_ptr<ManagedCommand>> StartCommand(const RunCommandCall& call);
  absl::StatusOr<std::shared_ptr<ManagedCommand>> GetCommand(const std::string& tenant,
                                                             const std::string& session_id, int id) const;
  absl::StatusOr<std::vector<std::shared_ptr<ManagedCommand>>> ListCommands(
      const std::string& tenant, const std::string& session_id) const;
  // The session's sandbox, for a watch on its files (server/path_watch.h),
  // and the directory named as the path calls name it.
  struct WatchTarget {
    std::shared_ptr<Machine> machine;
    std::string dir;  // absolute, inside the sandbox
  };
  absl::StatusOr<WatchTarget> WatchTargetOf(const std::string& tenant, const std::string& session_id,
                                            const std::string& path);

  // The session's network policy from now on (nullopt: none of its own,
  // so its pool's); connections open keep theirs.
  absl::StatusOr<std::shared_ptr<ManagedSession>> UpdateNetwork(const std::string& tenant, const std::string& id,
                                                                std::optional<egress::PolicySpec> network);
  // A connection to `port` on session `id`'s loopback (an exposed port):
  // for its tenant's call (`tenant` set), or else for whoever holds its
  // traffic token, or anyone when its ports are public. A hibernated
  // session wakes first; a paused one resumes first when it asked for that
  // (resume_on_port_request) and was paused with its memory, else it is
  // FAILED_PRECONDITION.
  struct PortConnection {
    UniqueFd fd;
    std::string host_header;  // the Host its server should see ("" as sent)
  };
  absl::StatusOr<PortConnection> ConnectPort(const std::optional<std::string>& tenant, const std::string& id,
                                             int port, const std::string& traffic_token, absl::Time deadline);
  // What the session's sandboxes moved through the egress proxy.
  egress::Usage NetworkUsage(const ManagedSession& entry) const;
  Network* network() const { return network_; }

  // The session now ends `ttl_seconds` from now (at most the server's maximum).
  absl::StatusOr<std::shared_ptr<ManagedSession>> SetSessionTtl(const std::string& tenant,
                                                                const std::string& id,
                                                                int64_t ttl_seconds);

  // Keeping sessions across restarts (server/session_keeper.h). Set the
  // observer before Start(); it is told of every session registered,
  // restarted (a new sandbox) or removed.
  void SetSessionObserver(SessionObserver* observer) {
    observer_ = observer;
    sessions_.SetObserver(observer);
  }
  // Rebuilds a session a predecessor started around its adopted sandbox;
  // `entry` has everything but `session`. Before Start().
  absl::StatusOr<std::shared_ptr<ManagedSession>> AdoptSession(std::unique_ptr<ManagedSession> entry,
                                                               std::unique_ptr<Worker> worker,
                                                               const Session::Handover& snapshot,
                                                               absl::Time last_used);
  std::vector<std::shared_ptr<ManagedSession>> AllSessions() const { return sessions_.All(); }
  // A template of exactly `digest` for `tenant` (a kept session's, a
  // snapshot's): FAILED_PRECONDITION when there is none any more.
  absl::StatusOr<std::shared_ptr<const SandboxTemplate>> TemplateWithDigest(const std::string& tenant,
                                                                            const std::string& name,
                                                                            const std::string& digest);

  // Snapshots of Python sessions (server/engine_snapshots.cc): stored on
  // disk, private to the tenant; restored and forked into fresh sandboxes.
  absl::StatusOr<SnapshotRecord> SnapshotSession(const std::string& tenant, const std::string& id,
                                                 const std::string& name = "");
  // PauseSession / ResumeSession (docs/api.md): a session with a shared
  // workspace stops, its processes frozen (keep_memory) or ended with its
  // files kept, and does not expire while paused (up to the maximum TTL);
  // resumed, it has the time left that it had.
  absl::StatusOr<std::shared_ptr<ManagedSession>> PauseSession(const std::string& tenant, const std::string& id,
                                                               bool keep_memory);
  absl::StatusOr<std::shared_ptr<ManagedSession>> ResumeSession(const std::string& tenant, const std::string& id);
  absl::StatusOr<std::shared_ptr<ManagedSession>> RestoreSnapshot(
      const std::string& tenant, const std::string& snapshot_id, int64_t ttl_seconds,
      const std::map<std::string, std::string>& labels);
  std::vector<SnapshotRecord> ListSnapshots(const std::string& tenant) const;
  absl::Status DeleteSnapshot(const std::string& tenant, const std::string& snapshot_id);
  struct Fork {
    std::shared_ptr<ManagedSession> session;
    std::map<std::string, std::string> left_out;  // what the fork could not get
  };
  // A new session with the source's limits and a copy of its state; the
  // source is not changed. Labels empty: the source's.
  absl::StatusOr<Fork> ForkSession(const std::string& tenant, const std::string& id,
                                   const std::map<std::string, std::string>& labels);
  const SnapshotStore& snapshots() const { return snapshots_; }

  // ---- a node of a fleet (server/engine_fleet.cc, docs/fleet.md)
  const std::string& node_id() const { return options_.fleet.node_id; }
  const std::string& epoch() const { return epoch_; }
  // Stops taking new work: new sessions and one-shots are refused (a
  // REFUSED hint: the gateway places them elsewhere) and calls to sessions
  // answered MOVING until they are handed over.
  void StartDraining();
  bool draining() const;
  struct HandoverReport {
    int handed_over = 0;
    int lost = 0;
  };
  // Hands every session over through the shared storage: its state as a
  // snapshot and a ledger record naming it, or, when its state cannot be
  // captured, a record saying it is lost and why. Each session then ends
  // here. `parallel` sessions at a time.
  HandoverReport HandOverAll(absl::Time deadline, int parallel);
  struct TakenOver {
    std::string node_id;                      // where the session lives now
    std::shared_ptr<ManagedSession> session;  // set when that is this node
  };
  // TakeOverSession (proto/warden/v1/fleet.proto): restores a session a
  // draining node handed over, or (owner_lost) one its lost node left
  // hibernated, under its own id; errors carry a FleetHint (LOST,
  // NOT_HANDED_OVER, REFUSED).
  absl::StatusOr<TakenOver> TakeOverSession(const std::string& tenant, const std::string& id,
                                            bool owner_lost);
  // Sessions warden-keeper handed back that another node took over
  // meanwhile are ended here, unwoken. After AdoptSession, before Start().
  void FenceAdopted();

  // Ready to serve: every configured pool has at least one warm worker.
  bool Ready() const;
  // OK, or UNAVAILABLE naming the first pool that cannot start any worker
  // ("python workers cannot start: <why>"; WarmPool::Health).
  absl::Status Health() const;
  // Called (on a pool's filler thread) whenever Health() may have changed.
  // Set it before Start().
  void SetHealthListener(std::function<void()> listener) { health_listener_ = std::move(listener); }
  // The session options of each configured language's default profile, as
  // its pool starts workers: what the start-up probe starts one of.
  std::vector<SessionOptions> ConfiguredProfiles() const;
  EngineStats Stats() const;
  const DaemonOptions& options() const { return options_; }

 private:
  // What Execute checks before its request joins the tenant's line.
  absl::Status CheckExecute(const ExecuteCall& call) const;
  // The rest of Execute, its turn (`slot`) come.
  absl::StatusOr<ExecutionResult> ExecuteAdmitted(const ExecuteCall& call, absl::Time deadline,
                                                  TenantQueue::Slot slot, const Session::EventCallback& on_event,
                                                  Cancellation* cancellation);
  // A new session, checked and counted against its tenant's quota, waiting
  // for its sandbox (engine.cc).
  struct Creation;
  absl::StatusOr<std::shared_ptr<Creation>> PrepareCreate(CreateSessionCall call);
  // Registers the session with the sandbox started for it, or undoes the
  // reservation (and the machine) if it has none.
  absl::StatusOr<std::shared_ptr<ManagedSession>> FinishCreate(Creation& creation,
                                                               absl::StatusOr<std::unique_ptr<Session>> started);
  // A wait's end: the client's deadline, or queue.max_wait_ms from now
  // when it set none.
  absl::Time WaitDeadline(absl::Time asked) const;
  absl::StatusOr<CellLimits> ResolveLimits(const CellLimitsOptions& asked,
                                           const CellLimitsOptions& defaults) const;
  SessionOptions SessionOptionsFor(Language language, int64_t memory_mb,
                                   std::shared_ptr<const SandboxTemplate> sandbox_template = nullptr) const;
  // The warm pool of a limits profile (in a template: the pool naming
  // it); null when none is configured for it, or when the sandbox mounts
  // volumes (`binds`: a sandbox of its own, never a pool's).
  WarmPool* PoolFor(Language language, int64_t memory_mb, const SandboxTemplate* sandbox_template = nullptr,
                    bool binds = false) const;
  // A sandbox for `tenant`'s new session, one-shot or waking session, from
  // the profile's warm pool (waiting in its line until `deadline`; `first`:
  // ahead of the tenant's other requests), or started here when the
  // profile has no pool.
  absl::StatusOr<std::unique_ptr<Session>> StartSession(
      const std::string& tenant, Language language, int64_t memory_mb, absl::Time deadline, bool first = false,
      const std::shared_ptr<const SandboxTemplate>& sandbox_template = nullptr,
      const std::vector<BindMount>& binds = {});
  absl::StatusOr<std::unique_ptr<Session>> StartOnDemand(
      Language language, int64_t memory_mb, const std::shared_ptr<const SandboxTemplate>& sandbox_template = nullptr,
      const std::vector<BindMount>& binds = {});
  // Mounts `entry`'s volumes (entry.volumes) for it: its volume_binds and
  // volume_holds.
  absl::Status AttachVolumes(ManagedSession& entry);
  // The template `name` means for `tenant`, able to run `language`;
  // null for no name.
  absl::StatusOr<std::shared_ptr<const SandboxTemplate>> TemplateFor(const std::string& tenant, const std::string& name,
                                                                     Language language) const;
  void ReapLoop();
  // Hibernation: idle, completely capturable sessions go to disk; a call
  // to one restores it first (Wake, with the session's turn held;
  // WakeForFiles takes the turn itself).
  void HibernateIdle();
  void Hibernate(ManagedSession& entry);
  // Hibernates `entry` if it is an idle, capturable Python session not
  // refused since its last use; true if its sandbox is released now.
  bool TryHibernate(ManagedSession& entry);
  // sessions.max_live: hibernates the least recently used idle Python
  // sessions (never `keep`) until one more may hold a sandbox.
  void MakeRoomForALiveSession(const ManagedSession* keep);
  absl::Status Wake(ManagedSession& entry);
  absl::Status WakeForFiles(ManagedSession& entry);
  // Resumes a paused session (ResumeSession's work, whoever asked).
  absl::Status Resume(const std::shared_ptr<ManagedSession>& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(entry->pause_mu);
  void DropHibernation(ManagedSession& entry);
  // The session's state, its turn held: from its kernel, or from disk if
  // it hibernates.
  absl::StatusOr<SessionSnapshot> Capture(ManagedSession& entry, absl::Time deadline);
  // Starts `entry` (filled in but for its session) from the warm pool with
  // `archive` restored into it, and registers it. With `shared_workspace`,
  // the session is a machine of its own (StartWithSharedWorkspace, from
  // `entry`'s workspace_path, aliases and env), into whose workspace the
  // archive's files are restored.
  absl::StatusOr<std::shared_ptr<ManagedSession>> StartFromArchive(
      std::unique_ptr<ManagedSession> entry, const SnapshotArchive& archive,
      std::map<std::string, std::string>* left_out, bool shared_workspace = false);
  // Starts the machine of `entry` (its workspace_path, aliases and env set),
  // with its workspace and the cgroup all its processes share, then its
  // interpreter in it.
  absl::StatusOr<std::unique_ptr<Session>> StartWithSharedWorkspace(ManagedSession& entry, Language language);
  // The session, which must have a shared workspace, and the context named.
  absl::StatusOr<std::shared_ptr<ManagedSession>> SharedSession(const std::string& tenant,
                                                                const std::string& id) const;
  // The tenant's session `id`, for a call to it. In a fleet: MOVING while
  // draining; for an id this node does not hold, what the ledger says
  // (MOVED, LOST) when the session moved.
  absl::StatusOr<std::shared_ptr<ManagedSession>> Find(const std::string& tenant, const std::string& id) const;
  // New work is refused while draining (REFUSED), and after Stop().
  absl::Status CheckTakingWork() const;
  // Fleet: claims the next ledger generation for `entry` (its turn held)
  // before it wakes; false (and the session ended here) when another node
  // holds it now, with MOVED in `status`.
  bool ClaimForWake(ManagedSession& entry, absl::Status* status);
  // Ends `entry` here without touching what it left in the shared storage
  // (it lives on elsewhere).
  void Release(const std::shared_ptr<ManagedSession>& entry);
  // Hands one session over (its turn is taken here); true if handed over.
  bool HandOver(const std::shared_ptr<ManagedSession>& entry, absl::Time deadline);
  // Restores the snapshot `record` names as `id`, claiming generation
  // `after` + 1 first.
  absl::StatusOr<TakenOver> Claim(const std::string& tenant, const std::string& id, int64_t after,
                                  const SnapshotRecord& snapshot);
  absl::StatusOr<std::shared_ptr<ManagedSession>> Context(const ManagedSession& session,
                                                          const std::string& context_id) const;
  absl::StatusOr<std::unique_ptr<Session>> StartSharedSession(const ManagedSession& owner,
                                                              Language language, const std::string& cwd);
  // Starts the machine of a session with a shared workspace.
  // (its workspace, cgroup and machine, set in `entry`).
  absl::StatusOr<std::shared_ptr<Machine>> StartMachine(ManagedSession& entry, Language language);
  // Names a session's sandbox (its machine's too) after the session, for
  // `ps`: "warden-sandbox <id>" (sandbox/process_title.h).
  static void NameSandboxes(const ManagedSession& entry);
  // Runs `op` on the session's files as its sandbox's user: `op` gets the
  // root fd, the path beneath it, and how to resolve it; `present` turns an
  // entry found beneath the root into the caller's terms (its path named
  // the way the caller names paths, its owner's names).
  using FileOp = std::function<absl::Status(int root, const std::string& rel, Resolve resolve,
                                            const std::function<void(WorkspaceListing&)>& present)>;
  absl::Status InFiles(ManagedSession& entry, const std::string& path, const FileOp& op);

  // The session's way out from now on: its gate's owner and rules.
  void BindNetwork(ManagedSession& entry);
  // The pool policy of (language, memory MiB); null without one.
  std::shared_ptr<const egress::Policy> PoolNetwork(Language language, int64_t memory_mb) const;

  const DaemonOptions options_;
  Executor& executor_;
  ForkServer* const python_zygote_;
  Network* const network_;  // null: no egress proxy (tests)
  std::map<std::pair<Language, int64_t>, std::shared_ptr<const egress::Policy>> pool_networks_;
  TemplateCatalog* const templates_;  // null: templates are off
  VolumeCatalog* const volumes_;      // null: volumes are off
  SessionObserver* observer_ = nullptr;
  // Adopted sessions finishing a cell their predecessor started; joined in Stop.
  std::vector<std::thread> resumers_;
  SessionManager sessions_;
  SnapshotStore snapshots_;
  // By language and memory limit (MiB): one per configured limits profile,
  // and always one for each language's default profile (size 0 when not
  // configured: sessions start on demand).
  std::map<std::pair<Language, int64_t>, std::unique_ptr<WarmPool>> pools_;
  // Pools that name a template (public, by name): by language, memory
  // limit and template; a configured one whose template is missing is an
  // error Health() reports.
  std::map<std::tuple<Language, int64_t, std::string>, std::unique_ptr<WarmPool>> template_pools_;
  std::vector<absl::Status> template_pool_errors_;
  Disposer disposer_;
  std::function<void()> health_listener_;
  CounterFamily* executions_ = nullptr;     // by language, mode, outcome
  HistogramFamily* latency_ = nullptr;      // seconds, by language and mode
  CounterFamily* rejections_ = nullptr;     // refused requests, by reason

  TenantQueue admission_;  // executions running and waiting, by tenant
  TenantQueue starts_;     // machines starting and waiting to (EngineStats::starts)
  std::string epoch_;                       // fleet: this process's (FleetOptions::epoch)
  std::unique_ptr<SessionLedger> ledger_;   // fleet: in shared_dir; null otherwise
  std::atomic<bool> draining_{false};
  mutable absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  absl::Notification stop_reaper_;
  std::thread reaper_;
};

}  // namespace warden
