#include "kernel/zygote.h"

#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "kernel/language.h"
#include "sandbox/sandbox.h"

namespace warden {

std::string DefaultPythonZygoteProgram() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir.resize(dir.rfind('/'));
    std::string beside = dir + "/warden-python-zygote";
    if (access(beside.c_str(), X_OK) == 0) return beside;
  }
  return WARDEN_PYTHON_ZYGOTE;
}

std::vector<std::string> PythonKernelEnvironment() {
  std::vector<std::string> env;
  for (const std::string& entry : SandboxSpec::DefaultEnvironment()) {
    if (!absl::StartsWith(entry, "PATH=")) env.push_back(entry);
  }
  // Warden's pip first; console scripts of what it installed last.
  env.push_back(absl::StrCat("PATH=", kToolsMountPoint,
                             ":/usr/local/bin:/usr/bin:/bin:/workspace/.local/bin"));
  env.push_back("WARDEN_CHANNEL_FD=3");
  // pip installs into a user site in the workspace (the kernel keeps it on
  // sys.path), from the pool's wheelhouse if it has one ($PIP_FIND_LINKS,
  // added per session), never from an index: with no network, pip would
  // otherwise retry for a minute before failing. The system's packages are
  // read-only, so PEP 668's guard has nothing to protect.
  for (const char* setting :
       {"PYTHONUSERBASE=/workspace/.local", "PIP_USER=1", "PIP_NO_INDEX=1",
        "PIP_BREAK_SYSTEM_PACKAGES=1", "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1"}) {
    env.push_back(setting);
  }
  // Caches (matplotlib's font list, fontconfig) go to /tmp, not into the
  // user's workspace where they would show up as files.
  env.push_back("MPLCONFIGDIR=/tmp/.config/matplotlib");
  env.push_back("XDG_CACHE_HOME=/tmp/.cache");
  env.push_back("XDG_CONFIG_HOME=/tmp/.config");
  return env;
}

absl::StatusOr<std::unique_ptr<ForkServer>> StartPythonZygote(const std::string& program,
                                                              const std::string& kernels_dir,
                                                              const std::vector<std::string>& warm) {
  std::vector<std::string> env = PythonKernelEnvironment();
  // A fork server must stay single-threaded: no BLAS or OpenMP thread pools.
  env.push_back("OPENBLAS_NUM_THREADS=1");
  env.push_back("OMP_NUM_THREADS=1");
  env.push_back("MKL_NUM_THREADS=1");
  // Resolve every symbol of libpython and its libraries once, in the zygote:
  // lazily bound, each clone would look up the same symbols again and write
  // them into GOT pages it shares with the zygote, a copy-on-write fault each
  // (do_lookup_x and _dl_fixup in a profile of clones).
  env.push_back("LD_BIND_NOW=1");
  ForkServer::Program zygote;
  zygote.path = program;
  zygote.argv = KernelArgv(Language::kPython);
  zygote.env = std::move(env);
  zygote.setup = absl::StrCat(kernels_dir, "/python/warden_kernel.py\n", absl::StrJoin(warm, ","));
  return ForkServer::Start(zygote, absl::Seconds(60));
}

}  // namespace warden
