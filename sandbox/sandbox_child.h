// The child side of a sandbox: everything that runs between clone() and the
// program's execve(). Runs in a fresh child of a possibly multi-threaded
// process, so it makes system calls only: every string, array and number it
// needs is prepared by the supervisor in a ChildPlan beforehand, and failures
// are reported over the control socket before _exit.
#pragma once

#include <linux/filter.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>

#include "sandbox/mount_plan.h"
#include "sandbox/process_title.h"

namespace warden {

// Stages of the containment sequence, reported on failure.
enum class ChildStage : int32_t {
  kWaitForSupervisor = 1,
  kInitIdentity,
  kHostname,
  kLoopback,
  kGroups,
  kCgroupNamespace,
  kMounts,
  kForkPayload,
  kSession,
  kStdio,
  kRlimits,
  kCapabilities,
  kIdentity,
  kChdir,
  kNoNewPrivs,
  kSeccomp,
  kExec,
  kOomScore,  // after kExec only to keep the numbers of the others
  kSpawnRequest,  // a machine's init reading a spawn request (machine.h)
  kTerminal,      // a machine's init opening a terminal for a spawned process
  kEgress,        // the init opening the sandbox's egress listener (egress_gate.h)
};
const char* ChildStageName(ChildStage stage);

// Messages on the control socket (SOCK_SEQPACKET), child -> supervisor.
struct ControlMessage {
  enum Type : int32_t {
    kSetupFailed = 1,  // stage, error (errno), op_index (mount op or -1)
    kPayloadReady,     // carries the seccomp listener and the program's pidfd (SCM_RIGHTS)
    kMainExited,       // value = wait status of the main process
    kEgressListener,   // carries the egress listener (SCM_RIGHTS), before the program starts
  };
  int32_t type = 0;
  int32_t stage = 0;
  int32_t error = 0;
  int32_t op_index = -1;
  int32_t value = 0;
};

// Commands on the control socket, supervisor -> init, one byte each but
// kSpawn, which is a SpawnRequest.
constexpr char kGo = 'g';           // maps written, cgroup joined: build and start
constexpr char kKillProgram = 'k';  // kill every process but the init
constexpr char kRespawn = 'r';      // kill them, then start the program afresh
constexpr char kSpawn = 's';        // a machine's init: start one more process
constexpr char kRetitle = 't';      // a RetitleRequest

// The init's command line ("warden-sandbox LABEL", process_title.h) names
// `label` from now on: a sandbox from a warm pool given to a session.
struct RetitleRequest {
  char command = kRetitle;
  char label[ProcessTitle::kMaxLabel + 1] = {};  // NUL-terminated
};

// A machine's init (ChildPlan::machine) starts further processes on
// request: the spec (SpawnSpec's layout, in a memfd) and the process's
// stdin, stdout and stderr (and its channel socket) come with the request
// as SCM_RIGHTS, in that order. Each such process runs the whole
// containment sequence of the sandbox's own program (PayloadMain): its own
// session, rlimits, no capabilities, the sandbox user, no_new_privs, its own
// seccomp filter and listener.
struct SpawnRequest {
  enum Flags : uint32_t {
    kChannel = 1 << 0,   // a fifth fd: the channel socket, fd 3 in the process
    kTerminal = 1 << 1,  // no stdio fds: the init opens a terminal in the
                         // sandbox's devpts, the process's controlling one
    kInPlace = 1 << 2,   // run the fork server's program in place (a fork of
                         // the init, which holds it warm), not execve
  };
  char command = kSpawn;
  char reserved[3] = {};
  int32_t id = 0;           // the supervisor's name for it, > 0
  uint32_t flags = 0;
  int32_t cpu_seconds = 0;  // RLIMIT_CPU of the process; 0: the sandbox's
  uint16_t cols = 0, rows = 0;  // kTerminal: its size
};

// The spec of a spawned process, in a memfd the init maps privately: this
// header, then argc + 1 and envc + 1 slots of 8 bytes (offsets from the
// start, 0 for the terminating null; the init turns them into pointers in
// its private copy), then the NUL-terminated strings. argv[0] is the
// program: a path, or a name looked up in the PATH of the environment.
struct SpawnSpec {
  uint32_t magic = kMagic;
  uint32_t argc = 0;
  uint32_t envc = 0;
  uint32_t cwd = 0;   // offset of the working directory
  static constexpr uint32_t kMagic = 0x5761726e;  // "Warn"
};

// Reports about a spawned process, init -> supervisor (SOCK_SEQPACKET),
// told from a ControlMessage by their type.
struct SpawnReport {
  enum Type : int32_t {
    kReady = 10,   // running; carries its seccomp listener and pidfd (and a
                   // terminal's master) by SCM_RIGHTS
    kFailed = 11,  // stage, error: its containment sequence failed
    kExited = 12,  // status: its wait status; cpu_us: its CPU and its
                   // waited-for children's (wait4's rusage)
  };
  int32_t type = 0;
  int32_t id = 0;
  int32_t pid = 0;  // in the sandbox's pid namespace
  int32_t stage = 0;
  int32_t error = 0;
  int32_t status = 0;
  int64_t cpu_us = 0;
};

struct ChildRlimit {
  int resource;
  rlim_t soft;
  rlim_t hard;
};

struct ChildPlan {
  const MountPlan* mounts = nullptr;
  sock_fprog seccomp = {};
  const char* path = nullptr;  // resolved program path inside the sandbox
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* cwd = nullptr;
  const char* hostname = nullptr;
  uid_t uid = 0;  // the program's ids inside the user namespace
  gid_t gid = 0;
  // The init's ids inside the user namespace: it must run as a mapped id to
  // create files in its own tmpfs (unmapped owners fail with EOVERFLOW).
  uid_t init_uid = 0;
  gid_t init_gid = 0;
  // The host id that owns the sandbox's user namespace (CloneSandboxInit);
  // 0: the caller's (rootless, where no other can be).
  uid_t owner_uid = 0;
  bool clear_groups = true;  // false when setgroups is denied (rootless)
  const ChildRlimit* rlimits = nullptr;
  int n_rlimits = 0;
  int control_fd = -1;  // child's end of the control socket
  int stdin_fd = -1;    // become the payload's fds 0, 1, 2
  int stdout_fd = -1;
  int stderr_fd = -1;
  int channel_fd = -1;  // if >= 0, becomes the payload's fd 3
  // The supervisor's detached copies of the bind sources (OpenBindSources),
  // one per kBind operation of `mounts`; null when the init opens them
  // itself (rootless). Closed once the root filesystem is built.
  const int* bind_trees = nullptr;
  int n_bind_trees = 0;
  // Set by a fork server: instead of execve, the program runs this
  // function of the server's own (pre-initialised) code, after the whole
  // containment sequence, seccomp included. It must not return.
  void (*run_in_place)(const ChildPlan& plan) = nullptr;
  // The init was cloned into prepared network, IPC and UTS namespaces
  // (RecyclePool) instead of fresh ones: their hostname and loopback are
  // set already, and not the init's to change.
  bool namespaces_prepared = false;
  // A machine (sandbox/machine.h): the init starts no program of its own,
  // reports kPayloadReady (without fds) once the sandbox is built, and then
  // starts processes on request (SpawnRequest).
  bool machine = false;
  // What `ps` shows of the init (process_title.h): the memory layout of
  // the process it is cloned from (this one's, or the fork server's; null:
  // the name only), and what the sandbox is for ("warden-sandbox LABEL").
  const ProcessLayout* layout = nullptr;
  const char* label = nullptr;
  // Non-zero: the init listens on 127.0.0.1:egress_port in the sandbox's
  // network namespace before any program starts, and hands the socket to
  // the supervisor (kEgressListener): the sandbox's way out
  // (sandbox/egress_gate.h).
  uint16_t egress_port = 0;
  // Set by a machine's init on the plan of each process it spawns, never by
  // the supervisor: the process's id (0: the sandbox's own program), and
  // the terminal master to send with its report (or -1).
  int32_t spawn_id = 0;
  int terminal_master = -1;
};

// clone3 of the sandbox's init into new user, pid, mount, net, ipc and uts
// namespaces (the init enters its cgroup namespace itself, from inside its
// cgroup) with a pidfd in *pidfd. `as_sibling` makes the init a child of the
// caller's parent (CLONE_PARENT: a fork server cloning for its supervisor).
// `fresh_net_ipc_uts` false keeps the calling thread's network, IPC and UTS
// namespaces (prepared ones it has entered: ScopedNamespaces).
//
// `owner_uid` (not 0, and the caller real root) becomes the owner of the
// new user namespace: the calling thread takes it as its effective uid for
// the clone only. The kernel charges every per-user count made inside a
// user namespace (inotify instances and watches, pending signals, locked
// shared memory, processes, namespaces: kernel/ucount.c) to the user who
// made it in that namespace *and* to the namespace's owner in each
// namespace above, checked there against that namespace's limits. With
// root as the owner, every sandbox's inotify instances counted against
// root's fs.inotify.max_user_instances (128) on the host, so one sandbox
// could take them from root's own services and from every other sandbox.
// An owner of its own (the sandbox's unprivileged init id) makes each
// sandbox's counts its own, bounded by the host's per-user limits.
// Returns as clone3 does: 0 in the child, its pid, or -1 with errno.
long CloneSandboxInit(bool as_sibling, int* pidfd, bool fresh_net_ipc_uts = true, uid_t owner_uid = 0);

// Sets the loopback interface of the caller's network namespace up; 0 or
// an errno. Async-signal-safe.
int BringUpLoopback();

// The sandbox's init (PID 1 of its pid namespace). Never returns.
[[noreturn]] void SandboxInitMain(const ChildPlan& plan);

}  // namespace warden
