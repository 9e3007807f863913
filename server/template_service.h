// TemplateService: warden.v1.Templates (proto/warden/v1/images.proto) over
// the gRPC callback API - imports (and builds) stream the image up and the
// progress down; the rest are thin calls into the TemplateCatalog. Uploads
// are spooled to a file in the store's tmp/ as they come (bounded by
// templates.max_archive_bytes), and the work runs on the service's own
// threads, never gRPC's.
#pragma once

#include <memory>
#include <string>

#include "server/executor_service.h"
#include "server/template_catalog.h"
#include "server/tenancy.h"
#include "warden/v1/images.grpc.pb.h"

namespace warden {

// The proto form of a template record (its languages from its probe).
void FillTemplate(const images::TemplateInfo& info, v1::Template* out);

class TemplateService final : public v1::Templates::CallbackService {
 public:
  // Neither is owned; both outlive the service.
  TemplateService(TemplateCatalog& catalog, std::shared_ptr<const Tenancy> tenancy)
      : catalog_(catalog), tenancy_(std::move(tenancy)) {}

  grpc::ServerBidiReactor<v1::ImportTemplateRequest, v1::TemplateProgress>* ImportTemplate(
      grpc::CallbackServerContext* ctx) override;
  grpc::ServerBidiReactor<v1::BuildTemplateRequest, v1::TemplateProgress>* BuildTemplate(
      grpc::CallbackServerContext* ctx) override;
  grpc::ServerUnaryReactor* ListTemplates(grpc::CallbackServerContext* ctx, const v1::ListTemplatesRequest* request,
                                          v1::ListTemplatesResponse* response) override;
  grpc::ServerUnaryReactor* GetTemplate(grpc::CallbackServerContext* ctx, const v1::GetTemplateRequest* request,
                                        v1::Template* response) override;
  grpc::ServerUnaryReactor* DeleteTemplate(grpc::CallbackServerContext* ctx, const v1::DeleteTemplateRequest* request,
                                           v1::DeleteTemplateResponse* response) override;

  Tasks& tasks() { return tasks_; }

 private:
  TemplateCatalog& catalog_;
  std::shared_ptr<const Tenancy> tenancy_;
  Tasks tasks_;
};

}  // namespace warden
