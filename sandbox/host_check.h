// HostCheck: what this host supports, for `warden-run --check` and
// `wardend --check`, in the spirit of isolate-check-environment.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sandbox/cgroup.h"

namespace warden {

struct HostCheckItem {
  std::string name;    // "user namespaces", "cgroups", ...
  bool ok = false;
  bool required = true;  // a missing required feature means no sandbox here
  std::string detail;  // what was found, or what to do
};

struct HostCheck {
  std::vector<HostCheckItem> items;
  bool ok() const;               // every required item is ok
  std::string Format() const;    // one line per item
};

// Probes the running kernel: user namespaces (by creating one), seccomp with
// user notification, pidfd, the fd-based mount API, and cgroups (version,
// controllers, cgroup.kill) through CgroupManager::Create with `options`.
// `allow_degraded` makes cgroups optional.
HostCheck CheckHost(const CgroupOptions& options, bool allow_degraded);

// AppArmor's restriction of unprivileged user namespaces
// (kernel.apparmor_restrict_unprivileged_userns, on by default from Ubuntu
// 23.10 and 24.04): `knob` is the sysctl's value, "" when the kernel has
// none; `privileged` whether this process has CAP_SYS_ADMIN (root), whose
// user namespaces it leaves alone; `userns_problem` what the namespace probe
// found ("" when it worked). Names the sysctl and says what to do.
HostCheckItem AppArmorUsernsItem(const std::string& knob, bool privileged,
                                 const std::string& userns_problem);

struct ExecutorOptions;

// What this host sustains: empty sandboxes (/bin/true, every namespace,
// mounts, cgroup, seccomp) built and torn down per second, one after the
// other on each core, for `duration`. Programs a sandbox runs add their own
// start-up; this is the ceiling the sandbox itself sets.
struct SandboxRate {
  double per_second = 0;
  int threads = 0;
  int failures = 0;
};
absl::StatusOr<SandboxRate> MeasureSandboxRate(const ExecutorOptions& options, absl::Duration duration);

}  // namespace warden
