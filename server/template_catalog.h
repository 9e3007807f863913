// TemplateCatalog: the image store (images/template_store.h) as wardend
// uses it - which template a tenant's name means and what its sandboxes
// need (kernel/sandbox_template.h), imports under the operator's rules
// (who may, quotas), and each new template's interpreters found and probed
// in a sandbox of it, so that a session in it says at once what it cannot
// run. Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "images/template_store.h"
#include "kernel/sandbox_template.h"
#include "sandbox/sandbox.h"
#include "server/options.h"

namespace warden {

// Where Warden mounts things in a template's sandbox: made in every root
// the store builds, so that no directory of the image needs splitting for
// them (sandbox/mount_plan.h).
std::vector<std::string> TemplateMountPointDirs();
std::vector<std::string> TemplateMountPointFiles();

class TemplateCatalog {
 public:
  // Opens the store (templates.dir); `executor` (not owned) runs the probes.
  static absl::StatusOr<std::unique_ptr<TemplateCatalog>> Create(const DaemonOptions& options, Executor& executor);

  // templates.operators / templates.tenants ("*": everyone).
  bool IsOperator(const std::string& tenant) const;
  bool MayOwn(const std::string& tenant) const;

  // The template `name` is for `tenant`: its own, else the public one.
  // NOT_FOUND names what there is.
  absl::StatusOr<std::shared_ptr<const SandboxTemplate>> Resolve(const std::string& tenant, const std::string& name);
  // A template with exactly `digest` (a snapshot's, a kept session's): the
  // one named `name` if it still has it, else any the tenant may use.
  absl::StatusOr<std::shared_ptr<const SandboxTemplate>> ResolveDigest(const std::string& tenant,
                                                                      const std::string& name,
                                                                      const std::string& digest);

  struct ImportCall {
    std::string tenant;
    std::string name;
    std::string ref;
    bool private_template = false;
    std::function<void(const images::ImportProgress&)> progress;
  };
  // Who owns what `call` makes: "" (public) for an operator's unless
  // private, the tenant for a tenant allowed its own; PERMISSION_DENIED
  // otherwise, saying how the operator allows it.
  absl::StatusOr<std::string> OwnerFor(const std::string& tenant, bool private_template) const;
  // Imports the image in `layout_dir` (an OCI layout or docker-save
  // directory), then probes its interpreters.
  absl::StatusOr<images::TemplateInfo> Import(const ImportCall& call, const std::string& layout_dir);
  // A fresh directory in the store's tmp/ (the same file system) for an
  // upload to be unpacked into; removed by the caller.
  absl::StatusOr<std::string> NewStagingDir();

  // The tenant's own templates, then the public ones.
  std::vector<images::TemplateInfo> List(const std::string& tenant) const;
  absl::StatusOr<images::TemplateInfo> Get(const std::string& tenant, const std::string& name) const;
  absl::Status Delete(const std::string& tenant, const std::string& name, bool public_template);
  images::TemplateUsage UsageOf(const std::string& tenant) const { return store_->UsageOf(tenant); }

  // The interpreters a template's record says it has (what List shows).
  static std::shared_ptr<SandboxTemplate> FromInfo(const images::TemplateInfo& info);

  images::TemplateStore& store() { return *store_; }
  Executor& executor() { return executor_; }
  const TemplatesOptions& options() const { return options_.templates; }
  const DaemonOptions& daemon_options() const { return options_; }

 private:
  TemplateCatalog(const DaemonOptions& options, Executor& executor, std::unique_ptr<images::TemplateStore> store)
      : options_(options), executor_(executor), store_(std::move(store)) {}
  // Finds python3, node and bash on the image's PATH and asks each its
  // version in a sandbox of the template: the record's `runtime`.
  std::string Probe(const images::TemplateInfo& info);
  absl::StatusOr<std::shared_ptr<const SandboxTemplate>> Live(const images::TemplateInfo& info);

  const DaemonOptions options_;
  Executor& executor_;
  std::unique_ptr<images::TemplateStore> store_;
  mutable absl::Mutex mu_;
  // Templates sessions use now, by root digest: one pin each, shared.
  std::map<std::string, std::weak_ptr<const SandboxTemplate>> live_ ABSL_GUARDED_BY(mu_);
};

}  // namespace warden
