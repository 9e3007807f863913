#include "server/template_service.h"

#include <fcntl.h>
#include <unistd.h>

#include <deque>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "images/archive_input.h"
#include "images/fs_util.h"
#include "nlohmann/json.hpp"
#include "server/convert.h"
#include "server/template_build.h"
#include "spdlog/spdlog.h"

namespace warden {
namespace {

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* ctx, const absl::Status& status) {
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpc(status));
  return reactor;
}

// An upload, then a report: reads a header and chunks (spooled to a file)
// until the client is done sending, then runs `Work` on a task thread,
// which Pushes progress and Closes. Whichever of the work's Close and
// gRPC's OnDone ends last frees the reactor (as QueuedWriter does).
template <typename Request, typename Header>
class UploadThenReport : public grpc::ServerBidiReactor<Request, v1::TemplateProgress> {
 public:
  UploadThenReport(Tasks& tasks, int64_t max_bytes) : tasks_(tasks), max_bytes_(max_bytes) {}
  void Begin() { this->StartRead(&request_); }

  void Push(v1::TemplateProgress message) {
    {
      absl::MutexLock lock(&mu_);
      if (failed_ || closing_) return;
      queue_.push_back(std::move(message));
    }
    Pump();
  }
  void Close(const absl::Status& status, bool from_work = false) {
    {
      absl::MutexLock lock(&mu_);
      final_ = ToGrpc(status);
      closing_ = true;
      ++closing_pumps_;
      if (from_work) pending_work_ = false;
    }
    Pump();
    bool free;
    {
      absl::MutexLock lock(&mu_);
      free = --closing_pumps_ == 0 && done_ && !pending_work_;
    }
    if (free) delete this;
  }
  bool cancelled() {
    absl::MutexLock lock(&mu_);
    return failed_;
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client is done sending
      if (!have_header_) {
        Close(absl::InvalidArgumentError("the call needs a header message first"));
        return;
      }
      spool_.Reset();
      {
        absl::MutexLock lock(&mu_);
        pending_work_ = true;
      }
      tasks_.Run([this] { Close(Run(), /*from_work=*/true); });
      return;
    }
    absl::Status status;
    if (request_.has_header()) {
      if (have_header_) {
        status = absl::InvalidArgumentError("the call got a second header");
      } else {
        header_ = request_.header();
        have_header_ = true;
        status = Accept(header_);
        if (status.ok()) status = OpenSpool();
      }
    } else if (request_.has_chunk()) {
      if (!have_header_) {
        status = absl::InvalidArgumentError("the header comes before any chunk");
      } else if (received_ + static_cast<int64_t>(request_.chunk().size()) > max_bytes_) {
        status = absl::ResourceExhaustedError(absl::StrCat(
            "the upload passed the server's maximum of ", max_bytes_ >> 20, " MiB (templates.max_archive_bytes)"));
      } else {
        const std::string& chunk = request_.chunk();
        received_ += static_cast<int64_t>(chunk.size());
        size_t done = 0;
        while (done < chunk.size() && status.ok()) {
          ssize_t n = write(spool_.get(), chunk.data() + done, chunk.size() - done);
          if (n < 0 && errno == EINTR) continue;
          if (n < 0) status = absl::ErrnoToStatus(errno, "spooling the upload");
          else done += static_cast<size_t>(n);
        }
      }
    } else {
      status = absl::InvalidArgumentError("a message must hold a header or a chunk");
    }
    if (!status.ok()) {
      Close(status);
      return;
    }
    this->StartRead(&request_);
  }
  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      queue_.pop_front();
      if (!ok) {
        failed_ = true;
        queue_.clear();
      }
    }
    Pump();
  }
  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    failed_ = true;
  }
  void OnDone() override {
    bool free;
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
      failed_ = failed_ || !finished_;
      free = closing_pumps_ == 0 && !pending_work_;
    }
    if (free) delete this;
  }

 protected:
  virtual ~UploadThenReport() {
    spool_.Reset();
    if (!staging_.empty()) images::RemoveTree(staging_).IgnoreError();
  }
  // Checks the header (name, permission) before anything is uploaded.
  virtual absl::Status Accept(const Header& header) = 0;
  // Makes the staging directory (the spool is staging/upload).
  virtual absl::StatusOr<std::string> Staging() = 0;
  // The work, on a task thread: Push as it goes; returns the final status.
  virtual absl::Status Run() = 0;

  void Message(const std::string& text, int64_t done = 0, int64_t total = 0) {
    v1::TemplateProgress p;
    p.set_message(text);
    p.set_bytes_done(done);
    p.set_bytes_total(total);
    Push(std::move(p));
  }

  const Header& header() const { return header_; }
  const std::string& staging() const { return staging_; }
  std::string spool_path() const { return staging_ + "/upload"; }
  int64_t received() const { return received_; }

 private:
  absl::Status OpenSpool() {
    absl::StatusOr<std::string> staging = Staging();
    if (!staging.ok()) return staging.status();
    staging_ = *std::move(staging);
    spool_.Reset(open(spool_path().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!spool_) return absl::ErrnoToStatus(errno, "creating the upload's spool file");
    return absl::OkStatus();
  }
  void Pump() {
    const v1::TemplateProgress* next = nullptr;
    bool finish = false;
    grpc::Status status;
    {
      absl::MutexLock lock(&mu_);
      if (writing_ || finished_) return;
      if (!queue_.empty()) {
        writing_ = true;
        next = &queue_.front();
      } else if (closing_) {
        finished_ = true;
        finish = true;
        status = failed_ ? grpc::Status(grpc::StatusCode::CANCELLED, "the client went away") : final_;
      }
    }
    if (next) this->StartWrite(next);
    if (finish) this->Finish(status);
  }

  Tasks& tasks_;
  const int64_t max_bytes_;
  Request request_;
  Header header_;
  bool have_header_ = false;
  int64_t received_ = 0;
  UniqueFd spool_;
  std::string staging_;
  absl::Mutex mu_;
  std::deque<v1::TemplateProgress> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  bool pending_work_ ABSL_GUARDED_BY(mu_) = false;  // Run is scheduled or running
  grpc::Status final_ ABSL_GUARDED_BY(mu_);
  int closing_pumps_ ABSL_GUARDED_BY(mu_) = 0;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

class ImportReactor final : public UploadThenReport<v1::ImportTemplateRequest, v1::ImportTemplateHeader> {
 public:
  ImportReactor(TemplateCatalog& catalog, Tasks& tasks, std::string tenant)
      : UploadThenReport(tasks, catalog.options().max_archive_bytes), catalog_(catalog), tasks_(tasks),
        tenant_(std::move(tenant)) {}

 private:
  absl::Status Accept(const v1::ImportTemplateHeader& h) override {
    if (absl::Status s = images::TemplateStore::CheckName(h.name()); !s.ok()) return s;
    if (auto owner = catalog_.OwnerFor(tenant_, h.private_()); !owner.ok()) return owner.status();
    if (h.size() > catalog_.options().max_archive_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat("the image is ", h.size() >> 20,
                                                       " MiB; the server takes at most ",
                                                       catalog_.options().max_archive_bytes >> 20,
                                                       " MiB (templates.max_archive_bytes)"));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> Staging() override { return catalog_.NewStagingDir(); }
  absl::Status Run() override {
    Message(absl::StrCat("received ", received() >> 20, " MiB; unpacking the archive"), received(), received());
    const std::string layout = staging() + "/image";
    if (mkdir(layout.c_str(), 0700) != 0) return absl::ErrnoToStatus(errno, "mkdir " + layout);
    {
      UniqueFd archive(open(spool_path().c_str(), O_RDONLY | O_CLOEXEC));
      if (!archive) return absl::ErrnoToStatus(errno, "open the upload");
      absl::Status extracted =
          images::ExtractImageArchive(archive.get(), layout, catalog_.options().max_archive_bytes * 4);
      if (!extracted.ok()) return extracted;
    }
    unlink(spool_path().c_str());  // its room, before the layers take theirs
    TemplateCatalog::ImportCall call;
    call.tenant = tenant_;
    call.name = header().name();
    call.ref = header().ref();
    call.private_template = header().private_();
    call.progress = [this](const images::ImportProgress& p) { Message(p.message, p.bytes_done, p.bytes_total); };
    absl::StatusOr<images::TemplateInfo> info = catalog_.Import(call, layout);
    if (!info.ok()) return info.status();
    v1::TemplateProgress done;
    FillTemplate(*info, done.mutable_template_());
    Push(std::move(done));
    // What an image it replaced no longer shares goes, off this call.
    tasks_.Run([&catalog = catalog_] { catalog.store().PurgeGarbage(); });
    return absl::OkStatus();
  }

  TemplateCatalog& catalog_;
  Tasks& tasks_;
  const std::string tenant_;
};

// BuildTemplate: the header's Dockerfile is checked and its FROM templates
// resolved before the context is taken; then buildah runs it
// (server/template_build.h) and what it made is imported as ImportTemplate
// imports an image.
class BuildReactor final : public UploadThenReport<v1::BuildTemplateRequest, v1::BuildTemplateHeader> {
 public:
  BuildReactor(TemplateCatalog& catalog, Tasks& tasks, std::string tenant)
      : UploadThenReport(tasks, catalog.options().max_archive_bytes), catalog_(catalog), tasks_(tasks),
        tenant_(std::move(tenant)) {}

 private:
  absl::Status Accept(const v1::BuildTemplateHeader& h) override {
    if (!catalog_.options().build) {
      return absl::FailedPreconditionError(
          "this server builds no templates (templates.build is off): build the image elsewhere and import it");
    }
    if (access("/usr/bin/buildah", X_OK) != 0) {
      return absl::FailedPreconditionError(
          "this server has no buildah, which builds templates: install Debian's buildah package on it");
    }
    if (absl::Status s = images::TemplateStore::CheckName(h.name()); !s.ok()) return s;
    absl::StatusOr<std::string> owner = catalog_.OwnerFor(tenant_, h.private_());
    if (!owner.ok()) return owner.status();
    if (!owner->empty() && !catalog_.store().Get(*owner, h.name()).ok()) {
      const images::TemplateUsage usage = catalog_.UsageOf(*owner);
      if (usage.count >= catalog_.options().max_per_tenant) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "tenant '", *owner, "' has ", usage.count, " templates, its most (templates.max_per_tenant): remove one "
            "first (warden template rm)"));
      }
    }
    if (h.dockerfile().empty()) return absl::InvalidArgumentError("the build needs a Dockerfile");
    absl::StatusOr<CheckedDockerfile> checked = CheckDockerfile(h.dockerfile());
    if (!checked.ok()) return checked.status();
    for (const std::string& name : checked->bases) {
      absl::StatusOr<images::TemplateInfo> base = catalog_.Get(tenant_, name);
      if (!base.ok()) {
        std::vector<std::string> names;
        for (const images::TemplateInfo& t : catalog_.List(tenant_)) names.push_back(t.name);
        return absl::NotFoundError(absl::StrCat(
            "FROM ", name, ": there is no template '", name, "'",
            names.empty() ? " (there are none yet: warden template import)"
                          : absl::StrCat("; there are: ", absl::StrJoin(names, ", "))));
      }
      bases_.push_back(*std::move(base));
    }
    dockerfile_ = *std::move(checked);
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> Staging() override { return catalog_.NewStagingDir(); }
  absl::Status Run() override {
    const TemplatesOptions& options = catalog_.options();
    BuildJob job;
    job.dir = staging();
    if (received() > 0) job.context_tar = spool_path();
    job.dockerfile = dockerfile_;
    job.bases = bases_;
    job.build_args.insert(header().build_args().begin(), header().build_args().end());
    job.timeout = absl::Milliseconds(options.build_timeout_ms);
    job.memory_bytes = options.build_memory_mb << 20;
    job.pids = options.build_pids;
    job.max_bytes = 2 * options.max_image_bytes;
    job.host_id_base = static_cast<uid_t>(options.build_host_id_base);
    job.cgroups = catalog_.executor().mutable_cgroups();
    job.line = [this](const std::string& line) { Message(line); };
    job.cancelled = [this] { return cancelled(); };
    const absl::Time started = absl::Now();
    absl::StatusOr<std::string> archive = RunBuild(job);
    if (!archive.ok()) {
      spdlog::info("template build {} for tenant {} failed: {}", header().name(), tenant_,
                   archive.status().ToString());
      return archive.status();
    }
    Message(absl::StrCat("built in ", absl::FormatDuration(absl::Trunc(absl::Now() - started, absl::Milliseconds(100))),
                         "; importing the image"));
    const std::string layout = staging() + "/image";
    if (mkdir(layout.c_str(), 0700) != 0) return absl::ErrnoToStatus(errno, "mkdir " + layout);
    {
      UniqueFd file(open(archive->c_str(), O_RDONLY | O_CLOEXEC));
      if (!file) return absl::ErrnoToStatus(errno, "open the built image");
      absl::Status extracted = images::ExtractImageArchive(file.get(), layout, options.max_image_bytes);
      if (!extracted.ok()) return extracted;
    }
    // The build's storage, before the import takes its room.
    images::RemoveTree(staging() + "/build").IgnoreError();
    TemplateCatalog::ImportCall call;
    call.tenant = tenant_;
    call.name = header().name();
    call.private_template = header().private_();
    call.progress = [this](const images::ImportProgress& p) { Message(p.message, p.bytes_done, p.bytes_total); };
    absl::StatusOr<images::TemplateInfo> info = catalog_.Import(call, layout);
    if (!info.ok()) return info.status();
    v1::TemplateProgress done;
    FillTemplate(*info, done.mutable_template_());
    Push(std::move(done));
    tasks_.Run([&catalog = catalog_] { catalog.store().PurgeGarbage(); });
    return absl::OkStatus();
  }

  TemplateCatalog& catalog_;
  Tasks& tasks_;
  const std::string tenant_;
  CheckedDockerfile dockerfile_;
  std::vector<images::TemplateInfo> bases_;
};

}  // namespace

void FillTemplate(const images::TemplateInfo& info, v1::Template* out) {
  out->set_name(info.name);
  out->set_public_(info.owner.empty());
  out->set_digest(info.digest.str());
  out->set_size_bytes(info.size_bytes);
  out->set_created_unix_ms(info.created_unix_ms);
  out->set_source_ref(info.source_ref);
  for (const std::string& e : info.config.env) out->add_env(e);
  out->set_working_dir(info.config.working_dir);
  out->set_user(info.config.user);
  out->mutable_left_out()->insert(info.left_out.begin(), info.left_out.end());
  for (const images::TemplateLayer& layer : info.layers) out->add_layers(layer.diff_id.str());
  std::shared_ptr<SandboxTemplate> t = TemplateCatalog::FromInfo(info);
  for (Language language : {Language::kPython, Language::kJavaScript, Language::kBash}) {
    v1::TemplateLanguage* l = out->add_languages();
    l->set_language(ToProto(language));
    if (auto it = t->interpreters.find(language); it != t->interpreters.end()) {
      l->set_available(true);
      l->set_interpreter(it->second);
      l->set_version(t->versions[language]);
    } else {
      l->set_note(t->Unavailable(language));
    }
  }
}

grpc::ServerBidiReactor<v1::ImportTemplateRequest, v1::TemplateProgress>* TemplateService::ImportTemplate(
    grpc::CallbackServerContext* ctx) {
  absl::StatusOr<std::string> tenant = tenancy_->TenantOf(*ctx);
  auto* reactor = new ImportReactor(catalog_, tasks_, tenant.ok() ? *tenant : "");
  if (!tenant.ok()) {
    reactor->Close(tenant.status());
  } else {
    reactor->Begin();
  }
  return reactor;
}

grpc::ServerBidiReactor<v1::BuildTemplateRequest, v1::TemplateProgress>* TemplateService::BuildTemplate(
    grpc::CallbackServerContext* ctx) {
  absl::StatusOr<std::string> tenant = tenancy_->TenantOf(*ctx);
  auto* reactor = new BuildReactor(catalog_, tasks_, tenant.ok() ? *tenant : "");
  if (!tenant.ok()) {
    reactor->Close(tenant.status());
  } else {
    reactor->Begin();
  }
  return reactor;
}

grpc::ServerUnaryReactor* TemplateService::ListTemplates(grpc::CallbackServerContext* ctx,
                                                         const v1::ListTemplatesRequest*,
                                                         v1::ListTemplatesResponse* response) {
  absl::StatusOr<std::string> tenant = tenancy_->TenantOf(*ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  auto* reactor = ctx->DefaultReactor();
  tasks_.Run([this, reactor, response, tenant = *tenant] {
    for (const images::TemplateInfo& info : catalog_.List(tenant)) FillTemplate(info, response->add_templates());
    const images::TemplateUsage usage = catalog_.UsageOf(tenant);
    response->set_used_bytes(usage.bytes);
    if (catalog_.MayOwn(tenant)) {
      response->set_quota_bytes(catalog_.options().max_bytes_per_tenant);
      response->set_quota_count(catalog_.options().max_per_tenant);
    }
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* TemplateService::GetTemplate(grpc::CallbackServerContext* ctx,
                                                       const v1::GetTemplateRequest* request, v1::Template* response) {
  absl::StatusOr<std::string> tenant = tenancy_->TenantOf(*ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  absl::StatusOr<images::TemplateInfo> info = catalog_.Get(*tenant, request->name());
  if (info.ok()) FillTemplate(*info, response);
  return FinishNow(ctx, info.status());
}

grpc::ServerUnaryReactor* TemplateService::DeleteTemplate(grpc::CallbackServerContext* ctx,
                                                          const v1::DeleteTemplateRequest* request,
                                                          v1::DeleteTemplateResponse*) {
  absl::StatusOr<std::string> tenant = tenancy_->TenantOf(*ctx);
  if (!tenant.ok()) return FinishNow(ctx, tenant.status());
  auto* reactor = ctx->DefaultReactor();
  tasks_.Run([this, reactor, tenant = *tenant, name = request->name(), shared = request->public_()] {
    absl::Status deleted = catalog_.Delete(tenant, name, shared);
    if (deleted.ok()) spdlog::info("template {} deleted by tenant {}", name, tenant);
    reactor->Finish(ToGrpc(deleted));
    // Its files go after the answer: deleting an image takes a while.
    catalog_.store().PurgeGarbage();
  });
  return reactor;
}

}  // namespace warden
