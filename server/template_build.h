// Template builds (warden.v1 BuildTemplate, `warden template build`): a
// Dockerfile run by Debian's buildah, offline, in namespaces of its own
// (docs/templates.md, "Building a template"; docs/security.md).
//
// CheckDockerfile reads the Dockerfile before anything runs: every FROM
// names a template the caller may use, an earlier stage or `scratch` (no
// registry), RUN takes no flags (--mount, --network, --security), and the
// FROM lines are rewritten to name Warden's copies of the templates in the
// build's own buildah storage.
//
// RunBuild runs buildah in a user namespace whose root is an unprivileged
// host id range (no host capability), with a network namespace of its own
// (no interface but a down loopback), a pid namespace, a mount namespace
// whose root holds the host's system directories read-only and the build's
// directory, and a cgroup with the operator's memory and pids limits. RUN
// steps run in buildah's chroot isolation inside all of that.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "images/template_store.h"

namespace warden {

class CgroupManager;

struct CheckedDockerfile {
  // What buildah reads: FROM lines naming localhost/warden-base-N.
  std::string text;
  // The templates the FROM lines name, N-th first (duplicates once).
  std::vector<std::string> bases;
  int instructions = 0;
};

absl::StatusOr<CheckedDockerfile> CheckDockerfile(const std::string& dockerfile);

struct BuildJob {
  // A fresh directory (the store's tmp/, 0700, root's): the build's work
  // lives in dir/build, owned by the build's ids.
  std::string dir;
  // The build context as a tar, or empty: none.
  std::string context_tar;
  CheckedDockerfile dockerfile;
  std::vector<images::TemplateInfo> bases;  // as dockerfile.bases
  std::map<std::string, std::string> build_args;
  absl::Duration timeout = absl::Minutes(30);
  int64_t memory_bytes = 0;
  // The build's files (buildah's storage, the context, the image made),
  // measured every 2 s; 0: no bound.
  int64_t max_bytes = 0;
  int64_t pids = 0;
  // The build's host ids: [host_id_base, host_id_base + 65536).
  uid_t host_id_base = 1'000'000;
  // Where the limits' cgroup is made (not owned; may be null: no cgroup).
  CgroupManager* cgroups = nullptr;
  // A line of buildah's output, as it comes.
  std::function<void(const std::string&)> line;
  // Polled: stop the build (the caller went away).
  std::function<bool()> cancelled;
};

// Runs the build; returns the path of the image it made, an OCI archive
// (in job.dir). A failing step is FAILED_PRECONDITION naming the step and
// what it said.
absl::StatusOr<std::string> RunBuild(const BuildJob& job);

}  // namespace warden
