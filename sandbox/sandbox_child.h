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
};
const char* ChildStageName(ChildStage stage);

// Messages on the control socket (SOCK_SEQPACKET), child -> supervisor.
struct ControlMessage {
  enum Type : int32_t {
    kSetupFailed = 1,  // stage, error (errno), op_index (mount op or -1)
    kPayloadReady,     // carries the seccomp listener and the program's pidfd (SCM_RIGHTS)
    kMainExited,       // value = wait status of the main process
  };
  int32_t type = 0;
  int32_t stage = 0;
  int32_t error = 0;
  int32_t op_index = -1;
  int32_t value = 0;
};

// Commands on the control socket, supervisor -> init, one byte each.
constexpr char kGo = 'g';           // maps written, cgroup joined: build and start
constexpr char kKillProgram = 'k';  // kill every process but the init
constexpr char kRespawn = 'r';      // kill them, then start the program afresh

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
};

// clone3 of the sandbox's init into new user, pid, mount, net, ipc and uts
// namespaces (the init enters its cgroup namespace itself, from inside its
// cgroup) with a pidfd in *pidfd. `as_sibling` makes the init a child of the
// caller's parent (CLONE_PARENT: a fork server cloning for its supervisor).
// `fresh_net_ipc_uts` false keeps the calling thread's network, IPC and UTS
// namespaces (prepared ones it has entered: ScopedNamespaces).
// Returns as clone3 does: 0 in the child, its pid, or -1 with errno.
long CloneSandboxInit(bool as_sibling, int* pidfd, bool fresh_net_ipc_uts = true);

// Sets the loopback interface of the caller's network namespace up; 0 or
// an errno. Async-signal-safe.
int BringUpLoopback();

// The sandbox's init (PID 1 of its pid namespace). Never returns.
[[noreturn]] void SandboxInitMain(const ChildPlan& plan);

}  // namespace warden
