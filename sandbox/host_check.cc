#include "sandbox/host_check.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <thread>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "sandbox/sandbox.h"
#include "sandbox/unique_fd.h"

namespace warden {
namespace {

std::string ReadSmallFile(const char* path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(ss.str()));
}

// Forks a child that tries every namespace Warden uses; returns "" or why not.
std::string ProbeNamespaces() {
  pid_t pid = fork();
  if (pid < 0) return absl::StrCat("fork: ", strerror(errno));
  if (pid == 0) {
    int flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
                CLONE_NEWPID | CLONE_NEWCGROUP;
    if (unshare(flags) != 0) _exit(errno);
    // The creator has every capability in its new user namespace, unless a
    // security module took them (AppArmor's unprivileged_userns profile):
    // naming its own UTS namespace needs CAP_SYS_ADMIN there.
    const char name[] = "warden-check";
    _exit(sethostname(name, sizeof(name) - 1) == 0 ? 0 : 100 + errno);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : EINVAL;
  if (code > 100) {
    return absl::StrCat("user namespaces are created but give no capabilities inside (sethostname: ",
                        strerror(code - 100), ")");
  }
  return absl::StrCat("unshare(user, mount, net, ipc, uts, pid, cgroup) failed: ", strerror(code));
}

constexpr char kAppArmorUsernsKnob[] = "/proc/sys/kernel/apparmor_restrict_unprivileged_userns";

}  // namespace

bool HostCheck::ok() const {
  for (const auto& item : items) {
    if (item.required && !item.ok) return false;
  }
  return true;
}

std::string HostCheck::Format() const {
  std::string out;
  for (const auto& item : items) {
    absl::StrAppend(&out, item.ok ? "[ok]      " : (item.required ? "[MISSING] " : "[warn]    "),
                    item.name, ": ", item.detail, "\n");
  }
  absl::StrAppend(&out, ok() ? "sandbox: can be built on this host\n"
                             : "sandbox: CANNOT be built on this host (see MISSING above)\n");
  return out;
}

HostCheckItem AppArmorUsernsItem(const std::string& knob, bool privileged,
                                 const std::string& userns_problem) {
  const std::string name = "apparmor";
  if (knob.empty()) {
    return {name, true, false,
            "kernel.apparmor_restrict_unprivileged_userns is not on this kernel: AppArmor does not "
            "restrict user namespaces here"};
  }
  if (knob == "0") {
    return {name, true, false, "kernel.apparmor_restrict_unprivileged_userns=0: user namespaces are not restricted"};
  }
  const std::string remedy =
      "allow them for Warden's programs with an AppArmor profile, /etc/apparmor.d/warden: "
      "'abi <abi/4.0>, include <tunables/global> profile warden /usr/bin/{wardend,warden-run} "
      "flags=(unconfined) { userns, }', loaded with 'apparmor_parser -r /etc/apparmor.d/warden'; or "
      "lift the restriction for the whole host: 'sysctl -w kernel.apparmor_restrict_unprivileged_userns=0' "
      "(persist it in /etc/sysctl.d/)";
  if (privileged) {
    return {name, true, false,
            absl::StrCat("kernel.apparmor_restrict_unprivileged_userns=", knob,
                         ": unprivileged user namespaces get no capabilities; this process has "
                         "CAP_SYS_ADMIN (root, as the packaged unit runs wardend), which the "
                         "restriction leaves alone. A rootless wardend or warden-run needs: ",
                         remedy)};
  }
  if (userns_problem.empty()) {
    return {name, true, false,
            absl::StrCat("kernel.apparmor_restrict_unprivileged_userns=", knob,
                         ", but this process's user namespaces work (an AppArmor profile allows them)")};
  }
  return {name, false, true,
          absl::StrCat("kernel.apparmor_restrict_unprivileged_userns=", knob,
                       " keeps this process's user namespaces from getting capabilities, so no "
                       "sandbox can be built (Ubuntu 23.10 and later). Run wardend as root (the "
                       "packaged unit does), or ", remedy)};
}

HostCheck CheckHost(const CgroupOptions& options, bool allow_degraded) {
  HostCheck check;
  struct utsname uts;
  uname(&uts);
  check.items.push_back({"kernel", true, false, absl::StrCat(uts.release, " ", uts.machine)});

  {
    std::string why = ProbeNamespaces();
    std::string max_ns = ReadSmallFile("/proc/sys/user/max_user_namespaces");
    const std::string knob = ReadSmallFile(kAppArmorUsernsKnob);
    const bool restricted = !knob.empty() && knob != "0";
    check.items.push_back(
        {"user namespaces", why.empty(), true,
         why.empty() ? absl::StrCat("available (max_user_namespaces=", max_ns, ")")
         : restricted
             ? absl::StrCat(why, "; kernel.apparmor_restrict_unprivileged_userns=", knob, ": see apparmor below")
             : absl::StrCat(why, "; enable with sysctl user.max_user_namespaces=10000")});
    check.items.push_back(AppArmorUsernsItem(knob, geteuid() == 0, why));
  }
  {
    std::string actions = ReadSmallFile("/proc/sys/kernel/seccomp/actions_avail");
    bool ok = actions.find("user_notif") != std::string::npos &&
              actions.find("kill_process") != std::string::npos;
    check.items.push_back({"seccomp", ok, true,
                           ok ? absl::StrCat("filter actions: ", actions)
                              : absl::StrCat("need kill_process and user_notif, have: '", actions,
                                             "' (Linux 5.0+ with CONFIG_SECCOMP_FILTER)")});
  }
  {
    UniqueFd fd(static_cast<int>(syscall(SYS_pidfd_open, getpid(), 0)));
    check.items.push_back({"pidfd", fd.valid(), true,
                           fd.valid() ? "pidfd_open works" : "pidfd_open failed (Linux 5.3+ needed)"});
  }
  {
    UniqueFd fs(fsopen("tmpfs", FSOPEN_CLOEXEC));
    bool ok = fs.valid() || errno == EPERM;  // EPERM: exists, but we lack CAP_SYS_ADMIN here
    check.items.push_back({"mount API", ok, true,
                           ok ? "fsopen/open_tree/move_mount/mount_setattr present"
                              : "the fd-based mount API is missing (Linux 5.12+ needed)"});
  }
  {
    CgroupOptions probe = options;
    if (probe.subtree_name.empty()) probe.subtree_name = absl::StrCat("warden-check-", getpid());
    auto manager = CgroupManager::Create(probe);
    if (manager.ok()) {
      check.items.push_back({"cgroups", true, !allow_degraded, (*manager)->Describe()});
    } else {
      check.items.push_back({"cgroups", false, !allow_degraded,
                             absl::StrCat(manager.status().message(),
                                          allow_degraded ? " (degraded mode: rlimits only)" : "")});
    }
  }
  return check;
}

absl::StatusOr<SandboxRate> MeasureSandboxRate(const ExecutorOptions& options, absl::Duration duration) {
  auto executor = Executor::Create(options);
  if (!executor.ok()) return executor.status();
  SandboxSpec spec;
  spec.argv = {"/bin/true"};
  SandboxRate rate;
  rate.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  absl::Mutex mu;
  int done = 0;
  const absl::Time start = absl::Now();
  const absl::Time end = start + duration;
  std::vector<std::thread> threads;
  for (int i = 0; i < rate.threads; ++i) {
    threads.emplace_back([&] {
      while (absl::Now() < end) {
        const bool ok = (*executor)->Run(spec).outcome == Outcome::kOk;
        absl::MutexLock lock(&mu);
        ++done;
        if (!ok) ++rate.failures;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  rate.per_second = done / absl::ToDoubleSeconds(absl::Now() - start);
  return rate;
}

}  // namespace warden
