#include "server/startup_probe.h"

#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace warden {

std::vector<WorkerProbe> ProbeWorkers(Executor& executor,
                                      const std::vector<SessionOptions>& profiles) {
  std::vector<WorkerProbe> probes(profiles.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < profiles.size(); ++i) {
    threads.emplace_back([&executor, &profile = profiles[i], &probe = probes[i]] {
      probe.language = profile.language;
      const absl::Time start = absl::Now();
      auto session = Session::Start(executor, profile);
      probe.took = absl::Now() - start;
      probe.status = session.status();
      if (!session.ok()) probe.fix = HowToFix(profile, session.status());
    });
  }
  for (std::thread& thread : threads) thread.join();
  return probes;
}

std::string HowToFix(const SessionOptions& profile, const absl::Status& failure) {
  const std::string why(failure.message());
  const std::string interpreter = KernelArgv(profile.language).front();
  const std::string kernels = absl::StrCat(profile.kernels_dir, "/", KernelSubdirectory(profile.language));
  const bool about_kernels = absl::StrContains(why, kernels) || absl::StrContains(why, kKernelMountPoint);
  if (about_kernels && (absl::StrContains(why, "ermission denied") || absl::StrContains(why, "EACCES"))) {
    return absl::StrCat("the sandbox's unprivileged ids must be able to read ", kernels,
                        ": make it readable by all (the checkout's kernel/ directory as git "
                        "creates it under umask 022), or `make install` the kernels and set "
                        "kernels_dir to them");
  }
  if (about_kernels) {
    return absl::StrCat("set kernels_dir in the configuration to a directory holding python/, "
                        "node/ and bash/, readable by all: the kernel/ directory of the checkout "
                        "wardend was built from, or where `make install` put them "
                        "(<prefix>/lib/warden/kernels); it is now ", profile.kernels_dir);
  }
  if (absl::StrContains(why, "execve") && absl::StrContains(why, "No such file")) {
    return absl::StrCat(interpreter, " is missing: install it (on a host `make deps` installs "
                        "python3, nodejs and bash from Debian; in a container image, add the "
                        "interpreter's package to the image), or remove the ",
                        LanguageName(profile.language), " pool from the configuration's pools");
  }
  if (absl::StrContains(why, "clone3") || absl::StrContains(why, "namespace")) {
    return "this host cannot build sandboxes: run `wardend --check` and see docs/operations.md, "
           "\"Troubleshooting\"";
  }
  if (absl::StrContains(why, "cgroup")) {
    return "wardend cannot manage its cgroups: run `wardend --check` and see "
           "docs/operations.md, \"cgroups\"";
  }
  if (absl::StrContains(why, "was not ready within")) {
    return "the kernel did not get ready in time: check the host's load, and that the modules "
           "in pools[].warm import quickly";
  }
  if (absl::StrContains(why, "it said:")) {
    return absl::StrCat("the kernel itself failed, in the words above: check that ", kernels,
                        " holds the kernel of this build and that the modules in pools[].warm "
                        "are installed");
  }
  return "see docs/operations.md, \"Troubleshooting\"; `wardend --check` repeats this probe";
}

bool AllStarted(const std::vector<WorkerProbe>& probes) {
  for (const WorkerProbe& probe : probes) {
    if (!probe.status.ok()) return false;
  }
  return true;
}

std::string FormatWorkerProbes(const std::vector<WorkerProbe>& probes) {
  std::string out;
  for (const WorkerProbe& probe : probes) {
    const std::string name = LanguageName(probe.language);
    if (probe.status.ok()) {
      absl::StrAppend(&out, "  ", name, ": ok, started in ", absl::ToInt64Milliseconds(probe.took),
                      " ms\n");
    } else {
      absl::StrAppend(&out, "  ", name, ": FAILED: ", probe.status.message(), "\n", "    fix: ",
                      probe.fix, "\n");
    }
  }
  return out;
}

}  // namespace warden
