// The Python zygote: starting warden-python-zygote (kernel/python_zygote.cc),
// the fork server Python sessions are cloned from (sandbox/fork_server.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sandbox/fork_server.h"

namespace warden {

// warden-python-zygote beside the running program (build/bin, or where
// `make install` put both), else the one this build made.
std::string DefaultPythonZygoteProgram();

// The environment every Python kernel starts with (before per-session
// additions such as WARDEN_WARM); the zygote gets it too, so that what its
// imports cache (matplotlib's config dir, ...) is right inside sandboxes.
// The other kernels get it too: it also makes `pip` install into the
// workspace from a wheelhouse, never from the network (docs/runtime.md).
std::vector<std::string> PythonKernelEnvironment();

// Starts the zygote with the kernel from `kernels_dir` and `warm` imported,
// and waits until it is ready (warm imports take a second or so).
absl::StatusOr<std::unique_ptr<ForkServer>> StartPythonZygote(const std::string& program,
                                                              const std::string& kernels_dir,
                                                              const std::vector<std::string>& warm);

}  // namespace warden
