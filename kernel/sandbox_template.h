// SandboxTemplate: what a session's sandboxes need of a template (an image's
// root filesystem from the image store, images/template_store.h) to run its
// kernels with the image's own interpreters. Made by the server from the
// store's record; immutable and shared by every session of the template.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernel/language.h"

namespace warden {

struct SandboxTemplate {
  std::string name;    // as the tenant named it
  std::string owner;   // its tenant; empty for a public template
  std::string digest;  // "sha256:...": the image's config digest
  std::string root;    // host path of its root filesystem (never written)
  // The image's /etc/passwd and /etc/group: kept in the sandbox's.
  std::string passwd, group;
  std::vector<std::string> env;  // the image's ENV ("KEY=value")
  std::string working_dir;       // the image's WORKDIR
  // Each language the image can run a kernel of: its interpreter, as found
  // on the image's PATH (a path inside the template), and version. A
  // language missing here says why in `unavailable`.
  std::map<Language, std::string> interpreters;
  std::map<Language, std::string> versions;
  std::map<Language, std::string> unavailable;
  // Keeps the root filesystem in the store while sessions use it (the
  // store's pin, images::TemplateStore::PinRoot).
  std::shared_ptr<void> pin;

  // The image's PATH, or Docker's default when it sets none.
  std::string Path() const;
  // UNIMPLEMENTED-style reason when `language` cannot run here; empty when
  // it can.
  std::string Unavailable(Language language) const;
};

// The environment a kernel of `language` starts with in a template's
// sandbox: the image's ENV over Warden's defaults, Warden's kernel settings
// over that, and PATH the image's with Warden's tools first.
std::vector<std::string> TemplateKernelEnvironment(const SandboxTemplate& t, const std::vector<std::string>& kernel_env);

}  // namespace warden
