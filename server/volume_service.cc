#include "server/volume_service.h"

#include <deque>

#include "absl/strings/str_cat.h"
#include "server/convert.h"
#include "spdlog/spdlog.h"

namespace warden {
namespace {

void FillEntry(const images::VolumeEntry& e, v1::VolumeEntry* out) {
  out->set_path(e.path);
  out->set_name(e.name);
  out->set_type(e.type == 'f' ? "file" : e.type == 'd' ? "directory" : e.type == 'l' ? "symlink" : "other");
  out->set_size(e.size);
  out->set_mode(e.mode);
  out->set_uid(e.uid);
  out->set_gid(e.gid);
  out->set_modified_unix_ms(e.modified_unix_ms);
  out->set_accessed_unix_ms(e.accessed_unix_ms);
  out->set_changed_unix_ms(e.changed_unix_ms);
  out->set_symlink_target(e.symlink_target);
}

template <typename Message>
images::EntryAttributes AttributesOf(const Message& m) {
  images::EntryAttributes a;
  if (m.has_uid()) a.uid = m.uid();
  if (m.has_gid()) a.gid = m.gid();
  if (m.has_mode()) a.mode = m.mode();
  return a;
}

absl::Status CheckIds(const images::EntryAttributes& a) {
  // What a sandbox's idmapped mount shows as its own ids; others as nobody.
  for (const std::optional<uint32_t>& id : {a.uid, a.gid}) {
    if (id && *id > 65535) return absl::InvalidArgumentError("uid and gid are 0 to 65535");
  }
  if (a.mode && *a.mode > 07777) return absl::InvalidArgumentError("mode is permission bits: 0 to 07777");
  return absl::OkStatus();
}

// WriteVolumeFile: a header, then chunks, collected up to the server's cap.
class WriteReactor : public grpc::ServerReadReactor<v1::WriteVolumeFileRequest> {
 public:
  WriteReactor(VolumeCatalog& catalog, Tasks& tasks, std::string tenant, int64_t max, v1::VolumeEntry* response)
      : catalog_(catalog), tasks_(tasks), tenant_(std::move(tenant)), max_(max), response_(response) {
    StartRead(&request_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      if (!have_header_) {
        Finish(ToGrpc(absl::InvalidArgumentError("WriteVolumeFile needs a header message first")));
        return;
      }
      tasks_.Run([this] {
        absl::StatusOr<images::VolumeEntry> written = WriteFile();
        if (written.ok()) FillEntry(*written, response_);
        Finish(ToGrpc(written.status()));
      });
      return;
    }
    if (request_.has_header()) {
      if (have_header_) {
        Finish(ToGrpc(absl::InvalidArgumentError("WriteVolumeFile got a second header")));
        return;
      }
      header_ = request_.header();
      have_header_ = true;
      if (header_.size() > max_) {
        Finish(ToGrpc(absl::InvalidArgumentError(
            absl::StrCat("the file is ", header_.size(), " bytes; the server's maximum is ", max_))));
        return;
      }
    } else if (request_.has_chunk()) {
      if (!have_header_ || static_cast<int64_t>(data_.size() + request_.chunk().size()) > max_) {
        Finish(ToGrpc(absl::InvalidArgumentError(
            have_header_ ? absl::StrCat("the file passed the server's maximum of ", max_, " bytes")
                         : std::string("WriteVolumeFile needs the header before any chunk"))));
        return;
      }
      data_ += request_.chunk();
    }
    StartRead(&request_);
  }
  void OnDone() override { delete this; }

 private:
  // On a task thread. The volume stays mounted for the write alone: its hold
  // is let go before Finish, so a client that saw the write end may delete
  // the volume at once (DeleteVolume refuses a volume mounted here).
  absl::StatusOr<images::VolumeEntry> WriteFile() {
    images::EntryAttributes attrs = AttributesOf(header_);
    if (absl::Status s = CheckIds(attrs); !s.ok()) return s;
    absl::StatusOr<std::shared_ptr<images::VolumeStore::Mounted>> volume = catalog_.Mount(tenant_, header_.volume());
    if (!volume.ok()) return volume.status();
    auto data = std::make_shared<std::string>(std::move(data_));
    return (*volume)->Write(header_.path(), [data]() -> absl::StatusOr<std::string> {
      return std::exchange(*data, std::string());
    }, header_.make_parents(), attrs);
  }

  VolumeCatalog& catalog_;
  Tasks& tasks_;
  const std::string tenant_;
  const int64_t max_;
  v1::VolumeEntry* response_;
  v1::WriteVolumeFileRequest request_;
  v1::WriteVolumeFileHeader header_;
  bool have_header_ = false;
  std::string data_;
};

// ReadVolumeFile: the file's chunks, read on a task thread.
class ReadReactor : public grpc::ServerWriteReactor<v1::FileChunk> {
 public:
  explicit ReadReactor(std::string tenant) : tenant_(std::move(tenant)) {}
  void Start(VolumeCatalog& catalog, Tasks& tasks, const v1::ReadVolumeFileRequest& request, int64_t max) {
    tasks.Run([this, &catalog, request, max] { Close(ToGrpc(SendFile(catalog, request, max))); });
  }
  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) failed_ = true;
  }
  void OnDone() override {
    bool free;
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
      free = closed_;
    }
    if (free) delete this;
  }

 private:
  // On a task thread. The volume stays mounted while the stream is live and
  // no longer: its hold is let go before Close finishes the call, so a
  // client that saw the read end may delete the volume at once, while one
  // still reading keeps DeleteVolume refused.
  absl::Status SendFile(VolumeCatalog& catalog, const v1::ReadVolumeFileRequest& request, int64_t max) {
    absl::StatusOr<std::shared_ptr<images::VolumeStore::Mounted>> volume = catalog.Mount(tenant_, request.volume());
    if (!volume.ok()) return volume.status();
    bool first = true;
    return (*volume)->Read(request.path(), max, [&](const std::string& chunk, int64_t total) {
      v1::FileChunk c;
      c.set_data(chunk);
      if (first) c.set_total_size(total);
      first = false;
      return Push(std::move(c));
    });
  }

  // One write at a time: waits for the previous one (the file is read as
  // fast as the client takes it).
  bool Push(v1::FileChunk chunk) {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](ReadReactor* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(r->mu_) { return !r->writing_ || r->failed_; }, this));
    if (failed_) return false;
    current_ = std::move(chunk);
    writing_ = true;
    mu_.Unlock();
    StartWrite(&current_);
    mu_.Lock();
    return true;
  }
  void Close(grpc::Status status) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ReadReactor* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(r->mu_) { return !r->writing_ || r->failed_; }, this));
    }
    Finish(status);
    bool free;
    {
      absl::MutexLock lock(&mu_);
      closed_ = true;
      free = done_;
    }
    if (free) delete this;
  }

  const std::string tenant_;
  absl::Mutex mu_;
  v1::FileChunk current_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

template <typename Work>
grpc::ServerUnaryReactor* VolumeService::Run(grpc::CallbackServerContext* ctx, Work work) {
  auto* reactor = ctx->DefaultReactor();
  absl::StatusOr<std::string> tenant = tenancy_->TenantOf(*ctx);
  if (!tenant.ok()) {
    reactor->Finish(ToGrpc(tenant.status()));
    return reactor;
  }
  tasks_.Run([reactor, tenant = *tenant, work = std::move(work)] { reactor->Finish(ToGrpc(work(tenant))); });
  return reactor;
}

void VolumeService::Fill(const images::VolumeInfo& info, v1::Volume* out) {
  out->set_name(info.name);
  out->set_max_bytes(info.max_bytes);
  out->set_max_files(info.max_files);
  out->set_created_unix_ms(info.created_unix_ms);
  int mounts = 0;
  for (const auto& session : engine_.AllSessions()) {
    if (session->tenant != info.tenant) continue;
    for (const VolumeMountRecord& v : session->volumes) mounts += v.volume == info.name;
  }
  out->set_mounts(mounts);
  if (auto mounted = catalog_.Mount(info.tenant, info.name); mounted.ok()) {
    if (auto usage = (*mounted)->Usage(); usage.ok()) {
      out->set_used_bytes(usage->used_bytes);
      out->set_used_files(usage->used_files);
    }
  }
}

grpc::ServerUnaryReactor* VolumeService::CreateVolume(grpc::CallbackServerContext* ctx,
                                                      const v1::CreateVolumeRequest* request, v1::Volume* response) {
  return Run(ctx, [this, request, response](const std::string& tenant) -> absl::Status {
    auto info = catalog_.CreateVolume(tenant, request->name(), request->max_bytes(), request->max_files());
    if (!info.ok()) return info.status();
    spdlog::info("volume {} created for tenant {} ({} MiB, {} files)", info->name, tenant, info->max_bytes >> 20,
                 info->max_files);
    Fill(*info, response);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* VolumeService::ListVolumes(grpc::CallbackServerContext* ctx, const v1::ListVolumesRequest*,
                                                     v1::ListVolumesResponse* response) {
  return Run(ctx, [this, response](const std::string& tenant) -> absl::Status {
    for (const images::VolumeInfo& info : catalog_.List(tenant)) Fill(info, response->add_volumes());
    response->set_quota_bytes(catalog_.options().max_bytes_per_tenant);
    response->set_quota_count(catalog_.options().max_per_tenant);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* VolumeService::GetVolume(grpc::CallbackServerContext* ctx, const v1::GetVolumeRequest* request,
                                                   v1::Volume* response) {
  return Run(ctx, [this, request, response](const std::string& tenant) -> absl::Status {
    auto info = catalog_.Get(tenant, request->name());
    if (!info.ok()) return info.status();
    Fill(*info, response);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* VolumeService::DeleteVolume(grpc::CallbackServerContext* ctx,
                                                      const v1::DeleteVolumeRequest* request, v1::DeleteVolumeResponse*) {
  return Run(ctx, [this, request](const std::string& tenant) -> absl::Status {
    absl::Status deleted = catalog_.Delete(tenant, request->name());
    if (deleted.ok()) spdlog::info("volume {} of tenant {} deleted", request->name(), tenant);
    return deleted;
  });
}

grpc::ServerReadReactor<v1::WriteVolumeFileRequest>* VolumeService::WriteVolumeFile(grpc::CallbackServerContext* ctx,
                                                                                    v1::VolumeEntry* response) {
  absl::StatusOr<std::string> tenant = tenancy_->TenantOf(*ctx);
  if (!tenant.ok()) {
    class Refuse : public grpc::ServerReadReactor<v1::WriteVolumeFileRequest> {
     public:
      explicit Refuse(const absl::Status& s) { Finish(ToGrpc(s)); }
      void OnDone() override { delete this; }
    };
    return new Refuse(tenant.status());
  }
  return new WriteReactor(catalog_, tasks_, *tenant, engine_.options().limits.max_file_bytes, response);
}

grpc::ServerWriteReactor<v1::FileChunk>* VolumeService::ReadVolumeFile(grpc::CallbackServerContext* ctx,
                                                                       const v1::ReadVolumeFileRequest* request) {
  absl::StatusOr<std::string> tenant = tenancy_->TenantOf(*ctx);
  auto* reactor = new ReadReactor(tenant.ok() ? *tenant : "");
  if (!tenant.ok()) {
    reactor->Finish(ToGrpc(tenant.status()));
    return reactor;
  }
  reactor->Start(catalog_, tasks_, *request, engine_.options().limits.max_file_bytes);
  return reactor;
}

grpc::ServerUnaryReactor* VolumeService::ListVolumeFiles(grpc::CallbackServerContext* ctx,
                                                         const v1::ListVolumeFilesRequest* request,
                                                         v1::ListVolumeFilesResponse* response) {
  return Run(ctx, [this, request, response](const std::string& tenant) -> absl::Status {
    auto volume = catalog_.Mount(tenant, request->volume());
    if (!volume.ok()) return volume.status();
    auto entries = (*volume)->List(request->path(), request->depth(), 10'000);
    if (!entries.ok()) return entries.status();
    for (const images::VolumeEntry& e : *entries) FillEntry(e, response->add_entries());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* VolumeService::StatVolumePath(grpc::CallbackServerContext* ctx,
                                                        const v1::StatVolumePathRequest* request,
                                                        v1::VolumeEntry* response) {
  return Run(ctx, [this, request, response](const std::string& tenant) -> absl::Status {
    auto volume = catalog_.Mount(tenant, request->volume());
    if (!volume.ok()) return volume.status();
    auto entry = (*volume)->Stat(request->path());
    if (entry.ok()) FillEntry(*entry, response);
    return entry.status();
  });
}

grpc::ServerUnaryReactor* VolumeService::MakeVolumeDirectory(grpc::CallbackServerContext* ctx,
                                                             const v1::MakeVolumeDirectoryRequest* request,
                                                             v1::VolumeEntry* response) {
  return Run(ctx, [this, request, response](const std::string& tenant) -> absl::Status {
    images::EntryAttributes attrs = AttributesOf(*request);
    if (absl::Status s = CheckIds(attrs); !s.ok()) return s;
    auto volume = catalog_.Mount(tenant, request->volume());
    if (!volume.ok()) return volume.status();
    auto entry = (*volume)->MakeDirectory(request->path(), request->make_parents(), attrs);
    if (entry.ok()) FillEntry(*entry, response);
    return entry.status();
  });
}

grpc::ServerUnaryReactor* VolumeService::RemoveVolumePath(grpc::CallbackServerContext* ctx,
                                                          const v1::RemoveVolumePathRequest* request,
                                                          v1::RemoveVolumePathResponse*) {
  return Run(ctx, [this, request](const std::string& tenant) -> absl::Status {
    auto volume = catalog_.Mount(tenant, request->volume());
    if (!volume.ok()) return volume.status();
    return (*volume)->Remove(request->path());
  });
}

grpc::ServerUnaryReactor* VolumeService::SetVolumePathAttributes(grpc::CallbackServerContext* ctx,
                                                                 const v1::SetVolumePathAttributesRequest* request,
                                                                 v1::VolumeEntry* response) {
  return Run(ctx, [this, request, response](const std::string& tenant) -> absl::Status {
    images::EntryAttributes attrs = AttributesOf(*request);
    if (absl::Status s = CheckIds(attrs); !s.ok()) return s;
    auto volume = catalog_.Mount(tenant, request->volume());
    if (!volume.ok()) return volume.status();
    auto entry = (*volume)->SetAttributes(request->path(), attrs);
    if (entry.ok()) FillEntry(*entry, response);
    return entry.status();
  });
}

}  // namespace warden
