// VolumeService: warden.v1.Volumes (proto/warden/v1/images.proto) over the
// gRPC callback API: thin calls into the VolumeCatalog, the file calls on
// the service's own threads (a volume is mounted for them as for a
// session, and let go before the call finishes: a volume no call and no
// session holds may be deleted), uploads collected up to
// limits.max_file_bytes.
#pragma once

#include <memory>

#include "server/engine.h"
#include "server/executor_service.h"
#include "server/tenancy.h"
#include "server/volume_catalog.h"
#include "warden/v1/images.grpc.pb.h"

namespace warden {

class VolumeService final : public v1::Volumes::CallbackService {
 public:
  // None is owned; all outlive the service.
  VolumeService(VolumeCatalog& catalog, Engine& engine, std::shared_ptr<const Tenancy> tenancy)
      : catalog_(catalog), engine_(engine), tenancy_(std::move(tenancy)) {}

  grpc::ServerUnaryReactor* CreateVolume(grpc::CallbackServerContext* ctx, const v1::CreateVolumeRequest* request,
                                         v1::Volume* response) override;
  grpc::ServerUnaryReactor* ListVolumes(grpc::CallbackServerContext* ctx, const v1::ListVolumesRequest* request,
                                        v1::ListVolumesResponse* response) override;
  grpc::ServerUnaryReactor* GetVolume(grpc::CallbackServerContext* ctx, const v1::GetVolumeRequest* request,
                                      v1::Volume* response) override;
  grpc::ServerUnaryReactor* DeleteVolume(grpc::CallbackServerContext* ctx, const v1::DeleteVolumeRequest* request,
                                         v1::DeleteVolumeResponse* response) override;
  grpc::ServerReadReactor<v1::WriteVolumeFileRequest>* WriteVolumeFile(grpc::CallbackServerContext* ctx,
                                                                       v1::VolumeEntry* response) override;
  grpc::ServerWriteReactor<v1::FileChunk>* ReadVolumeFile(grpc::CallbackServerContext* ctx,
                                                          const v1::ReadVolumeFileRequest* request) override;
  grpc::ServerUnaryReactor* ListVolumeFiles(grpc::CallbackServerContext* ctx, const v1::ListVolumeFilesRequest* request,
                                            v1::ListVolumeFilesResponse* response) override;
  grpc::ServerUnaryReactor* StatVolumePath(grpc::CallbackServerContext* ctx, const v1::StatVolumePathRequest* request,
                                           v1::VolumeEntry* response) override;
  grpc::ServerUnaryReactor* MakeVolumeDirectory(grpc::CallbackServerContext* ctx,
                                                const v1::MakeVolumeDirectoryRequest* request,
                                                v1::VolumeEntry* response) override;
  grpc::ServerUnaryReactor* RemoveVolumePath(grpc::CallbackServerContext* ctx, const v1::RemoveVolumePathRequest* request,
                                             v1::RemoveVolumePathResponse* response) override;
  grpc::ServerUnaryReactor* SetVolumePathAttributes(grpc::CallbackServerContext* ctx,
                                                    const v1::SetVolumePathAttributesRequest* request,
                                                    v1::VolumeEntry* response) override;

 private:
  // Fills the proto, with its usage when the volume can be looked at.
  void Fill(const images::VolumeInfo& info, v1::Volume* out);
  // A unary call whose work (on a task thread) gets the caller's tenant.
  template <typename Work>
  grpc::ServerUnaryReactor* Run(grpc::CallbackServerContext* ctx, Work work);

  VolumeCatalog& catalog_;
  Engine& engine_;
  std::shared_ptr<const Tenancy> tenancy_;
  Tasks tasks_;
};

}  // namespace warden
