// Who is calling, for every gRPC service wardend serves: the tenant of the
// caller's bearer token, or, on a node of a fleet, the tenant warden-gateway
// forwards (x-warden-tenant), accepted only over a connection whose client
// certificate was verified against fleet.gateway_ca_file and names
// fleet.gateway_name (docs/security.md, "A fleet").
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/server_context.h"

namespace warden {

// Maps the "authorization" header (empty if absent) to a tenant, or fails
// with UNAUTHENTICATED.
using Authenticator = std::function<absl::StatusOr<std::string>(const std::string& authorization)>;

inline constexpr char kForwardedTenantHeader[] = "x-warden-tenant";

class Tenancy {
 public:
  // `gateway_name` empty: nothing may forward a tenant.
  Tenancy(Authenticator authenticate, std::string gateway_name)
      : authenticate_(std::move(authenticate)), gateway_name_(std::move(gateway_name)) {}

  absl::StatusOr<std::string> TenantOf(const grpc::ServerContextBase& ctx) const;
  // OK only for the gateway's certificate (PERMISSION_DENIED otherwise).
  absl::Status CheckGateway(const grpc::ServerContextBase& ctx) const;
  bool forwarding() const { return !gateway_name_.empty(); }
  const Authenticator& authenticator() const { return authenticate_; }

 private:
  bool FromGateway(const grpc::ServerContextBase& ctx) const;

  Authenticator authenticate_;
  std::string gateway_name_;
};

}  // namespace warden
