#include "server/tenancy.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/security/auth_context.h"

namespace warden {
namespace {

std::string Header(const grpc::ServerContextBase& ctx, const char* name) {
  const auto& metadata = ctx.client_metadata();
  auto it = metadata.find(name);
  return it == metadata.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

bool IsTenantName(const std::string& tenant) {
  return !tenant.empty() && tenant.size() <= 64 && std::all_of(tenant.begin(), tenant.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

}  // namespace

bool Tenancy::FromGateway(const grpc::ServerContextBase& ctx) const {
  if (gateway_name_.empty()) return false;
  std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  // Authenticated: gRPC verified the client's certificate chain, against
  // the gateway's CA, the only client CA a node of a fleet trusts.
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return false;
  for (const char* property : {"x509_subject_alternative_name", "x509_common_name"}) {
    for (const grpc::string_ref& value : auth->FindPropertyValues(property)) {
      if (std::string(value.data(), value.size()) == gateway_name_) return true;
    }
  }
  return false;
}

absl::StatusOr<std::string> Tenancy::TenantOf(const grpc::ServerContextBase& ctx) const {
  const std::string forwarded = Header(ctx, kForwardedTenantHeader);
  if (!forwarded.empty()) {
    if (!FromGateway(ctx)) {
      return absl::UnauthenticatedError(absl::StrCat(
          kForwardedTenantHeader, " is accepted only from warden-gateway's client certificate; "
          "authenticate with a bearer token (authorization: Bearer ...)"));
    }
    if (!IsTenantName(forwarded)) {
      return absl::InvalidArgumentError(absl::StrCat(kForwardedTenantHeader, " is not a tenant name"));
    }
    return forwarded;
  }
  return authenticate_(Header(ctx, "authorization"));
}

absl::Status Tenancy::CheckGateway(const grpc::ServerContextBase& ctx) const {
  if (FromGateway(ctx)) return absl::OkStatus();
  return absl::PermissionDeniedError(
      gateway_name_.empty()
          ? "this wardend trusts no gateway: set fleet.gateway_ca_file and fleet.gateway_name"
          : absl::StrCat("only warden-gateway (a client certificate naming ", gateway_name_, ") may call this"));
}

}  // namespace warden
