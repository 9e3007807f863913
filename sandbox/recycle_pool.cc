#include "sandbox/recycle_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "sandbox/sandbox_child.h"

namespace warden {
namespace {

// What of a network namespace a program in it can observe and leave
// behind, as /proc/net shows it to the reading thread: its sockets
// (sockstat's per-namespace counts of every socket: TCP's in use, orphans
// among them, and in TIME_WAIT, UDP, UDP-Lite, raw and fragments; the unix table with abstract
// names and sockets held only by fds in flight), and the counters every
// packet moves (the interface's, IP, ICMP, TCP and UDP's in snmp, snmp6 and
// netstat). Not the tcp and udp tables: reading them walks the host-wide
// hash tables, milliseconds, and sockstat counts what they would list. Nothing else in it is the sandbox's to change: its init holds no
// capability in a namespace of the host's user namespace (no interfaces,
// routes, rules or sysctls), and multicast memberships die with sockets.
constexpr const char* kNetFiles[] = {"dev",      "snmp",      "snmp6", "netstat",
                                     "sockstat", "sockstat6", "unix"};

// sockstat's "orphan", "alloc" and "mem" figures are host-wide (all
// namespaces' orphaned TCP sockets - closed, still sending their FIN -,
// sockets and buffer pages): each becomes one "#", or they would differ
// with the host's traffic. Clean namespaces were once dropped as "net
// dirty" because other programs' connections were closing (an unmasked
// orphan count) or their buffers had grown from 3 to 4 digits of pages (a
// mask kept each digit). An orphan of the sandbox's own still shows in its
// namespace's "inuse".
void MaskHostWide(std::string& text) {
  for (const char* key : {" orphan ", " alloc ", " mem "}) {
    for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + 1)) {
      const size_t start = at + strlen(key);
      size_t end = start;
      while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
      text.replace(start, end - start, "#");
    }
  }
}

// The calling thread's view of its network namespace (see kNetFiles).
std::string NetFingerprint() {
  std::string out;
  char buf[16384];
  for (const char* name : kNetFiles) {
    const int fd = open(absl::StrCat("/proc/thread-self/net/", name).c_str(), O_RDONLY | O_CLOEXEC);
    absl::StrAppend(&out, "== ", name, "\n");
    if (fd < 0) continue;
    std::string text;
    for (;;) {
      const ssize_t n = read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      text.append(buf, static_cast<size_t>(n));
    }
    close(fd);
    if (absl::StartsWith(name, "sockstat")) MaskHostWide(text);
    out += text;
  }
  return out;
}

UniqueFd OpenOwnNamespace(const char* type) {
  return UniqueFd(open(absl::StrCat("/proc/thread-self/ns/", type).c_str(), O_RDONLY | O_CLOEXEC));
}

// One SysV object of each kind, made and removed at once, in the calling
// thread's IPC namespace. True when each got `expected` as its id: the id
// a fresh namespace gives its n-th object (index n, sequence 0; ipc/util.c
// ipc_idr_alloc allocates indices cyclically and bumps the sequence on each
// wrap), so any object the sandbox created - removed since or not - shows.
bool ProbeSysvIds(int expected) {
  const int shm = shmget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
  if (shm >= 0) shmctl(shm, IPC_RMID, nullptr);
  const int sem = semget(IPC_PRIVATE, 1, IPC_CREAT | 0600);
  if (sem >= 0) semctl(sem, 0, IPC_RMID);
  const int msg = msgget(IPC_PRIVATE, IPC_CREAT | 0600);
  if (msg >= 0) msgctl(msg, IPC_RMID, nullptr);
  return shm == expected && sem == expected && msg == expected;
}

}  // namespace

ScopedNamespaces::ScopedNamespaces(const PooledNamespaces& host, int net, int ipc, int uts)
    : host_(host) {
  auto enter = [this](int fd, int type, bool* moved) {
    if (fd < 0 || error_ != 0) return;
    if (setns(fd, type) != 0) {
      error_ = errno;
      return;
    }
    *moved = true;
  };
  enter(net, CLONE_NEWNET, &moved_net_);
  enter(ipc, CLONE_NEWIPC, &moved_ipc_);
  enter(uts, CLONE_NEWUTS, &moved_uts_);
}

ScopedNamespaces::~ScopedNamespaces() {
  auto leave = [](bool moved, const UniqueFd& fd, int type, const char* what) {
    if (!moved || setns(fd.get(), type) == 0) return;
    std::fprintf(stderr, "warden: cannot return a thread to the host's %s namespace: %s\n", what,
                 strerror(errno));
    std::abort();
  };
  leave(moved_net_, host_.net, CLONE_NEWNET, "network");
  leave(moved_ipc_, host_.ipc, CLONE_NEWIPC, "IPC");
  leave(moved_uts_, host_.uts, CLONE_NEWUTS, "UTS");
}

absl::StatusOr<std::unique_ptr<RecyclePool>> RecyclePool::Create(int max_idle) {
  if (geteuid() != 0) {
    return absl::FailedPreconditionError(
        "recycled namespaces need real root: they must belong to the host's user namespace");
  }
  auto pool = std::unique_ptr<RecyclePool>(new RecyclePool());
  pool->max_idle_ = max_idle;
  pool->host_.net = OpenOwnNamespace("net");
  pool->host_.ipc = OpenOwnNamespace("ipc");
  pool->host_.uts = OpenOwnNamespace("uts");
  if (!pool->host_.valid()) return absl::ErrnoToStatus(errno, "open /proc/thread-self/ns");
  // One made now, so a host that refuses (a seccomp profile without
  // unshare, say) is found here rather than on a request.
  ASSIGN_OR_RETURN(PooledNamespaces first, pool->Make());
  absl::MutexLock lock(&pool->mu_);
  pool->idle_.push_back(std::move(first));
  pool->stats_ = RecyclePoolStats{};
  return pool;
}

absl::StatusOr<PooledNamespaces> RecyclePool::Make() {
  PooledNamespaces ns;
  // unshare moves only this thread (all three or none).
  if (unshare(CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) != 0) {
    return absl::ErrnoToStatus(errno, "unshare(CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)");
  }
  // From here the thread is in the new namespaces until it is moved back.
  auto restore = [this] {
    if (setns(host_.net.get(), CLONE_NEWNET) != 0 || setns(host_.ipc.get(), CLONE_NEWIPC) != 0 ||
        setns(host_.uts.get(), CLONE_NEWUTS) != 0) {
      std::fprintf(stderr, "warden: cannot return a thread to the host's namespaces: %s\n",
                   strerror(errno));
      std::abort();
    }
  };
  ns.net = OpenOwnNamespace("net");
  ns.ipc = OpenOwnNamespace("ipc");
  ns.uts = OpenOwnNamespace("uts");
  if (!ns.valid()) {
    const int e = errno;
    restore();
    return absl::ErrnoToStatus(e, "open /proc/thread-self/ns");
  }
  if (int err = BringUpLoopback(); err != 0) {
    restore();
    return absl::ErrnoToStatus(err, "bringing up loopback in a new network namespace");
  }
  ns.net_fingerprint = NetFingerprint();
  restore();
  absl::MutexLock lock(&mu_);
  ++stats_.namespaces_made;
  return ns;
}

absl::StatusOr<PooledNamespaces> RecyclePool::TakeNamespaces(const std::string& hostname) {
  PooledNamespaces ns;
  {
    absl::MutexLock lock(&mu_);
    if (!idle_.empty()) {
      ns = std::move(idle_.front());
      idle_.pop_front();
      ++stats_.namespaces_reused;
    }
  }
  if (!ns.valid()) {
    ASSIGN_OR_RETURN(ns, Make());
  }
  // The names are the run's own; the sandbox cannot change them (the
  // namespace is not its user namespace's), but its predecessor's run may
  // have asked for another hostname.
  ScopedNamespaces in(host_, -1, -1, ns.uts.get());
  if (in.error() != 0) return absl::ErrnoToStatus(in.error(), "setns into a pooled UTS namespace");
  struct utsname names;
  if (uname(&names) != 0) return absl::ErrnoToStatus(errno, "uname");
  if (hostname != names.nodename && sethostname(hostname.data(), hostname.size()) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("sethostname ", hostname));
  }
  ++ns.uses;
  return ns;
}

bool RecyclePool::Clean(PooledNamespaces& ns, const char** which) {
  ScopedNamespaces in(host_, ns.net.get(), ns.ipc.get(), -1);
  if (in.error() != 0) {
    *which = "net";
    return false;
  }
  if (NetFingerprint() != ns.net_fingerprint) {
    *which = "net";
    return false;
  }
  const bool ipc_clean = ProbeSysvIds(ns.ipc_probes);
  ++ns.ipc_probes;
  if (!ipc_clean) {
    *which = "ipc";
    return false;
  }
  return true;
}

void RecyclePool::ReturnNamespaces(PooledNamespaces ns, bool cgroup_empty) {
  if (!ns.valid()) return;
  const char* dirty = nullptr;
  const bool retired = ns.uses >= kMaxUses;
  const bool keep = cgroup_empty && !retired && Clean(ns, &dirty);
  absl::MutexLock lock(&mu_);
  if (retired) ++stats_.namespaces_retired;
  if (!cgroup_empty) ++stats_.namespaces_not_empty;
  if (dirty != nullptr) ++(dirty[0] == 'n' ? stats_.net_dirty : stats_.ipc_dirty);
  if (keep && static_cast<int>(idle_.size()) < max_idle_) idle_.push_back(std::move(ns));
  // Otherwise ns's fds close here and the kernel frees the namespaces.
}

std::unique_ptr<Cgroup> RecyclePool::TakeCgroup(const CgroupLimits& limits) {
  std::unique_ptr<Cgroup> group;
  {
    absl::MutexLock lock(&mu_);
    if (idle_cgroups_.empty()) return nullptr;
    group = std::move(idle_cgroups_.front());
    idle_cgroups_.pop_front();
  }
  if (absl::Status s = group->Reuse(limits); !s.ok()) {
    absl::MutexLock lock(&mu_);
    ++stats_.cgroups_dropped;
    return nullptr;  // the group kills what is left and removes itself
  }
  absl::MutexLock lock(&mu_);
  ++stats_.cgroups_reused;
  return group;
}

void RecyclePool::ReturnCgroup(std::unique_ptr<Cgroup> group) {
  if (group == nullptr) return;
  absl::StatusOr<bool> empty = group->Empty();
  {
    absl::MutexLock lock(&mu_);
    if (empty.ok() && *empty && group->Reusable() &&
        static_cast<int>(idle_cgroups_.size()) < max_idle_) {
      idle_cgroups_.push_back(std::move(group));
      return;
    }
    ++stats_.cgroups_dropped;
  }
  // Killing what is left and removing the directories take milliseconds:
  // outside the lock.
  group.reset();
}

std::vector<std::string> RecyclePool::IdleCgroupPaths() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> paths;
  for (const std::unique_ptr<Cgroup>& group : idle_cgroups_) {
    for (std::string& path : group->Paths()) paths.push_back(std::move(path));
  }
  return paths;
}

RecyclePoolStats RecyclePool::Stats() const {
  absl::MutexLock lock(&mu_);
  RecyclePoolStats stats = stats_;
  stats.idle_namespaces = static_cast<int>(idle_.size());
  stats.idle_cgroups = static_cast<int>(idle_cgroups_.size());
  return stats;
}

}  // namespace warden
