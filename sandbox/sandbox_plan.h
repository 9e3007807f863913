// SandboxPlan: everything the containment sequence needs (a ChildPlan minus
// its file descriptors), owning its data, with a wire form so that a fork
// server can run the sequence on the supervisor's behalf.
//
// The supervisor builds one per sandbox; a local clone uses View() directly,
// a fork server receives Encode()'s bytes and Decode()s them before it
// clones. The wire form is private to one wardend and the fork servers it
// started from its own binaries, so it carries no version.
#pragma once

#include <linux/filter.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sandbox/mount_plan.h"
#include "sandbox/sandbox_child.h"

namespace warden {

struct SandboxPlan {
  MountPlan mounts;
  std::vector<sock_filter> seccomp;
  std::string path;
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::string cwd;
  std::string hostname;
  uid_t uid = 0;
  gid_t gid = 0;
  uid_t init_uid = 0;
  gid_t init_gid = 0;
  uid_t owner_uid = 0;  // ChildPlan::owner_uid
  bool clear_groups = true;
  std::vector<ChildRlimit> rlimits;
  bool machine = false;  // ChildPlan::machine
  std::string label;     // ChildPlan::label (the layout is the cloner's own)
  uint16_t egress_port = 0;  // ChildPlan::egress_port

  // A ChildPlan pointing into this plan; valid while the plan lives and is
  // not changed. File descriptors are left at -1 for the caller to fill in.
  ChildPlan View();

  std::string Encode() const;
  static absl::StatusOr<SandboxPlan> Decode(absl::string_view data);

 private:
  std::vector<char*> argv_pointers_;
  std::vector<char*> env_pointers_;
};

}  // namespace warden
