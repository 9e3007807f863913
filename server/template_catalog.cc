#include "server/template_catalog.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "images/fs_util.h"
#include "kernel/language.h"
#include "server/path_watch.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace warden {
namespace {

using Json = nlohmann::json;

bool Listed(const std::vector<std::string>& list, const std::string& tenant) {
  return std::find(list.begin(), list.end(), "*") != list.end() ||
         std::find(list.begin(), list.end(), tenant) != list.end();
}

// What each language needs of an image, and how its version is asked.
struct LanguageProbe {
  Language language;
  std::vector<std::string> names;  // looked up on the image's PATH, in order
  std::vector<std::string> args;   // after the interpreter: prints its version
  int min_major, min_minor;
  const char* need;  // for messages: "python3 (3.8 or newer)"
};

const LanguageProbe kProbes[] = {
    {Language::kPython, {"python3", "python"}, {"-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"}, 3, 8,
     "python3 (3.8 or newer)"},
    {Language::kJavaScript, {"node", "nodejs"}, {"--version"}, 18, 0, "node (18 or newer)"},
    {Language::kBash, {"bash"}, {"-c", "echo $BASH_VERSION"}, 4, 0, "bash (4 or newer)"},
};

// "v18.19.0", "3.11.2", "5.2.15(1)-release" -> major, minor.
bool ParseVersion(absl::string_view text, int* major, int* minor) {
  text = absl::StripAsciiWhitespace(text);
  absl::ConsumePrefix(&text, "v");
  std::vector<absl::string_view> parts = absl::StrSplit(text, absl::MaxSplits('.', 2));
  if (parts.size() < 2) return false;
  std::string minor_digits;
  for (char c : parts[1]) {
    if (!isdigit(static_cast<unsigned char>(c))) break;
    minor_digits += c;
  }
  return absl::SimpleAtoi(parts[0], major) && absl::SimpleAtoi(minor_digits, minor);
}

// An executable regular file at `path` inside the root, resolved as the
// sandbox would (symlinks within the root).
bool IsExecutableIn(int root, const std::string& path) {
  struct open_how how = {};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  UniqueFd fd(static_cast<int>(syscall(SYS_openat2, root, path.c_str(), &how, sizeof(how))));
  struct stat st;
  return fd && fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) != 0;
}

}  // namespace

std::vector<std::string> TemplateMountPointDirs() {
  return {"proc", "dev", "tmp", "root", "workspace", "home/user", "opt/warden/kernel", "opt/warden/bin",
          "opt/warden/wheelhouse", "opt/warden/kernels/python", "opt/warden/kernels/node",
          "opt/warden/kernels/bash", "opt/warden/kernels/java", "opt/warden/libexec"};
}

std::vector<std::string> TemplateMountPointFiles() {
  return {"etc/passwd", "etc/group", "etc/hosts", "etc/hostname", "etc/resolv.conf",
          std::string(kWatchProgramInSandbox).substr(1)};
}

absl::StatusOr<std::unique_ptr<TemplateCatalog>> TemplateCatalog::Create(const DaemonOptions& options,
                                                                          Executor& executor) {
  images::TemplateStore::Options store;
  store.dir = options.TemplateDirectory();
  store.set_owners = geteuid() == 0;
  store.mount_point_dirs = TemplateMountPointDirs();
  store.mount_point_files = TemplateMountPointFiles();
  store.max_image_bytes = options.templates.max_image_bytes;
  auto opened = images::TemplateStore::Open(store);
  if (!opened.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("the template store ", store.dir, " cannot be opened: ",
                                                      opened.status().message(),
                                                      " (set templates.dir to a directory wardend may use)"));
  }
  return std::unique_ptr<TemplateCatalog>(new TemplateCatalog(options, executor, *std::move(opened)));
}

bool TemplateCatalog::IsOperator(const std::string& tenant) const { return Listed(options_.templates.operators, tenant); }
bool TemplateCatalog::MayOwn(const std::string& tenant) const { return Listed(options_.templates.tenants, tenant); }

absl::StatusOr<std::string> TemplateCatalog::OwnerFor(const std::string& tenant, bool private_template) const {
  if (IsOperator(tenant) && !private_template) return std::string();
  if (MayOwn(tenant)) return tenant;
  if (IsOperator(tenant)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "tenant '", tenant, "' manages the public templates but may not have private ones: the operator "
        "lists the tenants that may in templates.tenants"));
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "tenant '", tenant, "' may not import or build templates: the operator allows tenants their own with "
      "templates.tenants (and the public ones with templates.operators) in wardend's configuration"));
}

std::shared_ptr<SandboxTemplate> TemplateCatalog::FromInfo(const images::TemplateInfo& info) {
  auto t = std::make_shared<SandboxTemplate>();
  t->name = info.name;
  t->owner = info.owner;
  t->digest = info.digest.str();
  t->root = info.root_path;
  t->passwd = info.passwd;
  t->group = info.group;
  t->env = info.config.env;
  t->working_dir = info.config.working_dir;
  Json runtime = Json::parse(info.runtime.empty() ? "{}" : info.runtime, nullptr, false);
  for (const LanguageProbe& probe : kProbes) {
    const char* key = LanguageName(probe.language);
    if (!runtime.is_object() || !runtime.contains(key) || !runtime[key].is_object()) {
      t->unavailable[probe.language] =
          absl::StrCat("the template '", info.name, "' was not probed for ", key, ": import it again");
      continue;
    }
    const Json& entry = runtime[key];
    if (entry.contains("interpreter") && entry["interpreter"].is_string()) {
      t->interpreters[probe.language] = entry["interpreter"].get<std::string>();
      if (entry.contains("version") && entry["version"].is_string()) {
        t->versions[probe.language] = entry["version"].get<std::string>();
      }
    } else {
      t->unavailable[probe.language] = entry.value("unavailable", std::string("not available"));
    }
  }
  return t;
}

absl::StatusOr<std::shared_ptr<const SandboxTemplate>> TemplateCatalog::Live(const images::TemplateInfo& info) {
  absl::MutexLock lock(&mu_);
  const std::string key = absl::StrCat(info.owner, "/", info.name, "@", info.digest.str());
  if (auto it = live_.find(key); it != live_.end()) {
    if (auto alive = it->second.lock()) return alive;
  }
  std::shared_ptr<SandboxTemplate> t = FromInfo(info);
  ASSIGN_OR_RETURN(std::shared_ptr<images::TemplateStore::Pin> pin, store_->PinRoot(info.root));
  t->pin = std::move(pin);
  live_[key] = t;
  for (auto it = live_.begin(); it != live_.end();) it = it->second.expired() ? live_.erase(it) : std::next(it);
  return std::shared_ptr<const SandboxTemplate>(std::move(t));
}

absl::StatusOr<std::shared_ptr<const SandboxTemplate>> TemplateCatalog::Resolve(const std::string& tenant,
                                                                                const std::string& name) {
  RETURN_IF_ERROR(images::TemplateStore::CheckName(name));
  auto own = store_->Get(tenant, name);
  if (own.ok()) return Live(*own);
  auto shared = store_->Get("", name);
  if (shared.ok()) return Live(*shared);
  std::vector<std::string> names;
  for (const images::TemplateInfo& t : List(tenant)) names.push_back(t.name);
  return absl::NotFoundError(absl::StrCat("there is no template '", name, "'",
                                          names.empty() ? " (there are none yet: warden template import)"
                                                        : absl::StrCat("; there are: ", absl::StrJoin(names, ", "))));
}

absl::StatusOr<std::shared_ptr<const SandboxTemplate>> TemplateCatalog::ResolveDigest(const std::string& tenant,
                                                                                      const std::string& name,
                                                                                      const std::string& digest) {
  for (const std::string& owner : {tenant, std::string()}) {
    auto named = store_->Get(owner, name);
    if (named.ok() && named->digest.str() == digest) return Live(*named);
  }
  for (const images::TemplateInfo& t : List(tenant)) {
    if (t.digest.str() == digest) return Live(t);
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "this ran in the template '", name, "' (", digest.substr(0, 19),
      "), which is no longer here: a session restores only onto the image it ran in; import that image again"));
}

absl::StatusOr<std::string> TemplateCatalog::NewStagingDir() {
  const std::string dir = absl::StrCat(store_->TmpDir(), "/", images::RandomName("upload-"));
  if (mkdir(dir.c_str(), 0700) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("mkdir ", dir));
  return dir;
}

absl::StatusOr<images::TemplateInfo> TemplateCatalog::Import(const ImportCall& call, const std::string& layout_dir) {
  ASSIGN_OR_RETURN(std::string owner, OwnerFor(call.tenant, call.private_template));
  images::ImportRequest request;
  request.layout_dir = layout_dir;
  request.ref = call.ref;
  request.name = call.name;
  request.owner = owner;
  if (!owner.empty()) {
    request.max_bytes = options_.templates.max_bytes_per_tenant;
    request.max_count = options_.templates.max_per_tenant;
  }
  request.progress = call.progress;
  ASSIGN_OR_RETURN(images::TemplateInfo info, store_->Import(request));
  if (call.progress) {
    images::ImportProgress p;
    p.stage = images::ImportProgress::Stage::kMerging;
    p.message = "finding the image's interpreters";
    call.progress(p);
  }
  info.runtime = Probe(info);
  RETURN_IF_ERROR(store_->SetRuntime(owner, call.name, info.runtime));
  spdlog::info("template {} imported for {} ({}, {} MiB, {} layers)", call.name,
               owner.empty() ? "every tenant" : "tenant " + owner, info.digest.str(), info.size_bytes >> 20,
               info.layers.size());
  return info;
}

std::string TemplateCatalog::Probe(const images::TemplateInfo& info) {
  Json runtime = Json::object();
  UniqueFd root(open(info.root_path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  const std::shared_ptr<SandboxTemplate> t = FromInfo(info);
  std::vector<std::string> path_dirs = absl::StrSplit(t->Path(), ':', absl::SkipEmpty());
  for (const LanguageProbe& probe : kProbes) {
    Json& entry = runtime[LanguageName(probe.language)];
    std::string interpreter;
    for (const std::string& name : probe.names) {
      for (const std::string& dir : path_dirs) {
        if (dir.empty() || dir[0] != '/') continue;
        const std::string candidate = absl::StrCat(dir, "/", name);
        if (root && IsExecutableIn(root.get(), candidate)) {
          interpreter = candidate;
          break;
        }
      }
      if (!interpreter.empty()) break;
    }
    if (interpreter.empty()) {
      entry["unavailable"] = absl::StrCat("the template '", info.name, "' has no ", probe.need, " on its PATH (",
                                          t->Path(), "), which Warden's ", LanguageName(probe.language),
                                          " kernel needs");
      continue;
    }
    SandboxSpec spec;
    spec.argv = {interpreter};
    spec.argv.insert(spec.argv.end(), probe.args.begin(), probe.args.end());
    spec.env = MergeEnvironment(SandboxSpec::DefaultEnvironment(), info.config.env);
    spec.filesystem.root = info.root_path;
    spec.filesystem.passwd_base = info.passwd;
    spec.filesystem.group_base = info.group;
    spec.limits.wall_ms = 20'000;
    spec.limits.cpu_ms = 10'000;
    spec.limits.memory_bytes = 512LL << 20;
    const Result r = executor_.Run(spec);
    int major = 0, minor = 0;
    const std::string out(absl::StripAsciiWhitespace(r.stdout_data.substr(0, 200)));
    if (r.outcome != Outcome::kOk || !ParseVersion(out, &major, &minor)) {
      entry["unavailable"] = absl::StrCat(
          "the template's ", interpreter, " did not say its version (", OutcomeName(r.outcome),
          r.message.empty() ? "" : ": " + r.message,
          r.stderr_data.empty() ? "" : absl::StrCat("; it said: ", r.stderr_data.substr(0, 300)), ")");
      continue;
    }
    if (major < probe.min_major || (major == probe.min_major && minor < probe.min_minor)) {
      entry["unavailable"] = absl::StrCat("the template's ", interpreter, " is ", out, "; Warden's ",
                                          LanguageName(probe.language), " kernel needs ", probe.need);
      continue;
    }
    entry["interpreter"] = interpreter;
    entry["version"] = absl::StrCat(absl::StripPrefix(out, "v"));
  }
  return runtime.dump();
}

std::vector<images::TemplateInfo> TemplateCatalog::List(const std::string& tenant) const {
  std::vector<images::TemplateInfo> out = tenant.empty() ? std::vector<images::TemplateInfo>() : store_->List(tenant);
  std::vector<images::TemplateInfo> shared = store_->List("");
  out.insert(out.end(), shared.begin(), shared.end());
  return out;
}

absl::StatusOr<images::TemplateInfo> TemplateCatalog::Get(const std::string& tenant, const std::string& name) const {
  auto own = store_->Get(tenant, name);
  if (own.ok() || !absl::IsNotFound(own.status())) return own;
  return store_->Get("", name);
}

absl::Status TemplateCatalog::Delete(const std::string& tenant, const std::string& name, bool public_template) {
  if (public_template) {
    if (!IsOperator(tenant)) {
      return absl::PermissionDeniedError(absl::StrCat(
          "tenant '", tenant, "' may not delete public templates: only templates.operators may"));
    }
    return store_->Remove("", name);
  }
  absl::Status own = store_->Remove(tenant, name);
  if (absl::IsNotFound(own) && store_->Get("", name).ok()) {
    return IsOperator(tenant) ? absl::NotFoundError(absl::StrCat(
                                    "you have no template '", name, "' of your own; delete the public one with public"))
                              : absl::PermissionDeniedError(
                                    absl::StrCat("'", name, "' is a public template: only the operator deletes it"));
  }
  return own;
}

}  // namespace warden
