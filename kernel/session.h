// Session: a live interpreter (a "kernel") in its own sandbox, whose state
// persists across cells - like a Jupyter kernel, but isolated.
//
// A Session starts the language's kernel program (kernel/<language>/) in a
// fresh sandbox with a private channel at fd 3, speaks the kernel protocol
// (docs/kernel-protocol.md) with it, and runs cells with per-cell limits:
// output streams to a callback as it is produced; a cell past its wall or
// CPU deadline is interrupted, and if it does not stop within a grace
// period the kernel is killed and the session is lost. A lost session is
// never silently replaced: every later cell reports SESSION_LOST until
// Restart(). Workspace files can be written, read (never through a symlink)
// and listed while the session lives.
//
// Execute() runs one cell at a time; Interrupt() may be called from any
// thread while it runs.
#pragma once

#include <cstdint>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kernel/kernel_channel.h"
#include "kernel/language.h"
#include "kernel/sandbox_template.h"
#include "kernel/snapshot_archive.h"
#include "sandbox/limits.h"
#include "sandbox/machine.h"
#include "sandbox/result.h"
#include "sandbox/sandbox.h"

namespace warden {

struct SessionOptions {
  Language language = Language::kPython;
  // Session-wide limits: memory and pids apply to the whole session, tmpfs
  // sizes to its /tmp and workspace; cpu_ms is the session's total CPU
  // budget and wall_ms is ignored (cells have their own limits).
  Limits limits = DefaultSessionLimits();
  // Python modules imported before the first cell (e.g. numpy, pandas).
  std::vector<std::string> warm;
  // Host directory holding the kernel programs (kernel/python, ...).
  std::string kernels_dir = DefaultKernelsDir();
  // How long the kernel may take to start (warm imports included).
  int64_t start_timeout_ms = 30'000;
  // After a deadline's interrupt, how long a cell may take to stop.
  int64_t interrupt_grace_ms = 2'000;
  // Cap on a single file moved in or out of the workspace.
  int64_t max_file_bytes = 64LL << 20;
  std::vector<BindMount> binds;  // extra binds, as for one-shot runs
  // Host directory of wheels that `pip install` in the sandbox installs
  // from (bound read-only at kWheelhouseMountPoint); empty: none.
  std::string wheelhouse;
  // Python only: clone the kernel's sandbox from this fork server (not
  // owned; warden-python-zygote), whose interpreter already holds the
  // kernel and its warm modules, instead of starting the interpreter anew.
  ForkServer* fork_server = nullptr;
  // A process of this machine (sandbox/machine.h) instead of a sandbox of
  // its own: the kernel is spawned in the running machine, with its files,
  // processes and cgroup (`limits`, `binds` and `wheelhouse` are then the
  // machine's, fixed when it started). Null: a sandbox of its own.
  std::shared_ptr<Machine> machine;
  // Where the workspace is inside the sandbox (a machine's is its user's
  // home, e.g. /home/user), and the kernel's working directory (empty: the
  // workspace).
  std::string workspace = "/workspace";
  std::string cwd;
  // More environment for the kernel ("KEY=value"), over its own: E2B's
  // sandbox-wide envs.
  std::vector<std::string> env;
  // The sandbox's way out: each Session gets a gate of its own from this
  // (sandbox/egress_gate.h), which serves every sandbox it runs in turn.
  // Unset: no egress listener.
  std::function<std::shared_ptr<EgressGate>()> egress;
  // A host file bound as the sandbox's CA bundle (FilesystemSpec::ca_bundle_source).
  std::string ca_bundle;
  // The template the sandbox runs in (its root filesystem, the image's
  // interpreter for the kernel); null: the host's runtime. With a machine,
  // the machine's (it started in it).
  std::shared_ptr<const SandboxTemplate> sandbox_template;

  static Limits DefaultSessionLimits();
  static std::string DefaultKernelsDir();
};

struct CellLimits {
  int64_t wall_ms = 30'000;
  int64_t cpu_ms = 30'000;
  int64_t output_bytes = 1LL << 20;  // each of stdout and stderr, per cell
};

struct CellError {
  std::string ename;
  std::string evalue;
  std::vector<std::string> traceback;
};

// Something a cell produced, streamed while it runs.
struct CellEvent {
  enum class Kind { kStdout, kStderr, kDisplayData, kExecuteResult, kError };
  Kind kind;
  std::string text;     // kStdout / kStderr: raw bytes
  MimeBundle data;      // kDisplayData / kExecuteResult
  CellError error;      // kError
};

struct CellResult {
  Outcome outcome = Outcome::kInternal;
  int execution_count = 0;
  std::string stdout_data, stderr_data;
  bool stdout_truncated = false, stderr_truncated = false;
  std::optional<MimeBundle> result;      // the trailing expression's value
  std::vector<MimeBundle> displays;      // rich output (plots), in order
  std::optional<CellError> error;
  std::optional<int> exit_code;          // bash: the cell's exit status; or the dead kernel's
  int signal = 0;                        // the signal that killed the kernel, if one did
  // The limit that stopped the cell (WALL_TIMEOUT, CPU_TIMEOUT or
  // OUTPUT_LIMIT), also when the kernel then had to be killed (SESSION_LOST).
  std::optional<Outcome> limit;
  int64_t wall_ms = 0;
  int64_t cpu_ms = 0;                    // CPU used during this cell (cgroup delta)
  int64_t peak_memory_bytes = 0;         // the session's peak so far
  std::optional<std::string> violation;  // the syscall, for VIOLATION
  std::string message;                   // why, for SESSION_LOST / INTERNAL / timeouts
};

// A session's state as its kernel packed it (docs/kernel-protocol.md),
// inside its own sandbox: only a kernel of the same language reads it back.
struct SessionSnapshot {
  SnapshotArchive archive;
  int execution_count = 0;
  // What the kernel could not capture, by name (a variable, or a workspace
  // path), with the reason; empty when the snapshot is complete.
  std::map<std::string, std::string> left_out;
};

struct WorkspaceEntry {
  std::string path;  // relative to the workspace
  enum class Type { kFile, kDirectory, kSymlink, kOther } type;
  int64_t size = 0;
  uint32_t mode = 0;  // permission bits
  int64_t modified_unix_ms = 0;
};

class Session {
 public:
  using EventCallback = std::function<void(const CellEvent&)>;

  // Starts the kernel and waits for it to be ready. `executor` is not owned
  // and must outlive the session.
  static absl::StatusOr<std::unique_ptr<Session>> Start(Executor& executor,
                                                        const SessionOptions& options);
  ~Session();

  // Keeping sessions across wardend's restarts (docs/keeper-design.md).
  // What a successor needs besides the sandbox's handles.
  struct Handover {
    int execution_count = 0;
    int next_cell_id = 1;
    std::vector<std::string> cgroup_paths;  // the sandbox's group
    uid_t program_host_uid = 0;
    gid_t program_host_gid = 0;
    std::string version;  // the kernel's language version
    bool busy = false;    // a cell (the one before next_cell_id) was running
    // What the sandbox wrote while no wardend was attached (the keeper's
    // buffer), to be read before anything more from the sandbox.
    std::string pending_stdout, pending_stderr, pending_channel;
  };
  absl::StatusOr<WorkerHandles> DuplicateHandles() const;
  // The kernel's pid in its sandbox (0 until it started, and for a kernel
  // that is its sandbox's own program).
  pid_t kernel_pid() const;
  // A connection to `port` on the sandbox's loopback (an exposed port,
  // sandbox/port_dial.h); a machine's process reaches its machine's.
  absl::StatusOr<UniqueFd> ConnectToPort(uint16_t port, absl::Time deadline) const;
  // The gate of this session's way out (SessionOptions::egress); null
  // without one.
  const std::shared_ptr<EgressGate>& egress_gate() const { return egress_gate_; }
  Handover Describe() const;
  // A session around a sandbox a predecessor started (Worker::Adopt), as
  // Describe() saw it. Its kernel may still be running a cell the
  // predecessor started; words about it are told apart by the cell id.
  static absl::StatusOr<std::unique_ptr<Session>> Adopt(Executor& executor,
                                                        const SessionOptions& options,
                                                        std::unique_ptr<Worker> worker,
                                                        const Handover& snapshot);

  // `cancelled` (may be null) closes the gap before the cell counts as
  // running, when Interrupt() would still be a no-op: a caller that sets it
  // and then calls Interrupt() stops the cell whenever it does so.
  // `env` ("KEY=value") holds for this cell only, over the kernel's own.
  CellResult Execute(const std::string& code, const CellLimits& limits,
                     const EventCallback& on_event = nullptr,
                     const std::atomic<bool>* cancelled = nullptr,
                     const std::vector<std::string>& env = {});
  // After Adopt of a session whose cell was running: waits for that cell
  // to end (within `limits`, counted from now) and returns what it
  // produced since the predecessor stopped reading, buffered output first.
  // nullopt when no cell was running.
  std::optional<CellResult> ResumeCell(const CellLimits& limits);
  // Interrupts the running cell (SIGINT); no-op when idle.
  absl::Status Interrupt();
  // Names the session's sandbox for `ps` ("warden-sandbox NAME": its id,
  // once it has one), now and whenever it starts a new one (Restart). Until
  // then a sandbox is named by its language. The sandbox of a machine's
  // process is its machine's, named by its owner.
  void SetName(const std::string& name);
  // A fresh interpreter. With `clear_workspace` the whole sandbox is new;
  // otherwise the kernel restarts in place and the workspace and /tmp stay.
  absl::Status Restart(bool clear_workspace);

  // Snapshots (Python only; UNIMPLEMENTED for the other kernels). Both need
  // the session idle and alive, and wait at most until `deadline`.
  absl::StatusOr<SessionSnapshot> Snapshot(absl::Time deadline);
  // Loads a snapshot into this session, meant to be fresh: its variables
  // join the namespace, its files the workspace, and the execution count
  // continues from the snapshot's. Returns what could not be restored.
  absl::StatusOr<std::map<std::string, std::string>> Restore(const SnapshotArchive& archive,
                                                             absl::Time deadline);
  // Hibernation: Release ends the sandbox (the kernel, its memory and its
  // workspace go; the caller keeps a snapshot), Reopen starts a fresh one
  // for Restore. A released session is not lost, just not running.
  void Release();
  absl::Status Reopen();
  // Reopen with the sandbox of `fresh`, a ready session started with the
  // same options (a warm pool's): no sandbox is started on the caller's
  // time. `fresh` is left empty.
  absl::Status Reopen(std::unique_ptr<Session> fresh);
  bool released() const;

  // False once the session is lost or its kernel has died, even while idle
  // (a kernel killed from outside is noticed here, not only by the next cell).
  bool Alive();
  bool lost() const;
  std::string lost_reason() const;
  int execution_count() const;
  Language language() const { return options_.language; }
  const KernelInfo& info() const { return info_; }
  // When the last start of this session's sandbox passed each stage, and
  // when its kernel said it was ready (the bench's per-stage breakdown).
  struct StartTimes {
    Program::StageTimes sandbox;
    absl::Time kernel_ready;
  };
  StartTimes start_times() const;
  std::optional<CgroupUsage> Usage() const;

  // Workspace files. Paths are relative to the workspace, without "..";
  // nothing is ever resolved through a symlink.
  absl::Status WriteFile(const std::string& path, const std::string& data);
  absl::StatusOr<std::string> ReadFile(const std::string& path);
  absl::StatusOr<std::vector<WorkspaceEntry>> ListFiles(const std::string& dir = "", int max_depth = 0);
  // Runs `op` on the workspace's directory (an fd it does not own) as the
  // sandbox's user, for the path operations of kernel/workspace.h.
  absl::Status InWorkspace(const std::function<absl::Status(int root_fd)>& op);

 private:
  Session(Executor& executor, const SessionOptions& options);
  absl::Status StartWorker(bool fresh_sandbox);
  // A new wake-up eventfd for a session Release() left without one.
  absl::Status RenewWake();
  // Execute, or with `resume` the wait for a cell already sent (ResumeCell).
  CellResult RunCell(const std::string& code, const CellLimits& limits, const EventCallback& on_event,
                     const std::atomic<bool>* cancelled, std::optional<int> resume,
                     const std::vector<std::string>& env = {});
  absl::Status AwaitReady();
  void MarkLost(const std::string& reason);
  struct OpenedWorkspace {
    UniqueFd root;
    uid_t uid;  // the program's host ids
    gid_t gid;
  };
  // `dir` is the workspace (empty) or "/tmp", as the sandbox sees it.
  absl::StatusOr<OpenedWorkspace> OpenWorkspace(const std::string& dir = "") const;
  // Sends one snapshot/restore frame and waits for the kernel's answer,
  // discarding what it prints meanwhile.
  absl::StatusOr<KernelMessage> Request(const std::string& frame, int id, absl::Time deadline);

  Executor& executor_;
  const SessionOptions options_;
  const std::shared_ptr<EgressGate> egress_gate_;
  // Owned by the thread running Execute/Restart; guarded for Interrupt().
  mutable absl::Mutex mu_;
  std::unique_ptr<Program> worker_ ABSL_GUARDED_BY(mu_);
  std::string name_ ABSL_GUARDED_BY(mu_);  // SetName's
  StartTimes start_times_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool interrupt_requested_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<std::string> lost_ ABSL_GUARDED_BY(mu_);
  int execution_count_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int> next_cell_id_{1};
  std::optional<int> resume_cell_;  // set by Adopt; taken by ResumeCell
  std::string pending_stdout_, pending_stderr_;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  UniqueFd wake_;  // eventfd: Interrupt() wakes a waiting Execute()
  KernelChannel channel_;
  KernelInfo info_;
};

}  // namespace warden
