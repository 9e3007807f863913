// FleetHint on absl::Status: why a node of a fleet refused or redirected a
// call (proto/warden/v1/fleet.proto), carried as a payload of the status
// and, on the wire, in the error's details (google.rpc.Status shape) where
// warden-gateway reads it. Clients that do not look never see it.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "warden/v1/fleet.pb.h"

namespace warden {

inline constexpr char kFleetHintTypeUrl[] = "type.googleapis.com/warden.v1.FleetHint";

absl::Status WithFleetHint(absl::Status status, v1::FleetHint::Kind kind, const std::string& node_id = "",
                           const std::string& reason = "");
std::optional<v1::FleetHint> FleetHintOf(const absl::Status& status);
// The google.rpc.Status bytes of grpc-status-details-bin for `status`, ""
// when it carries no hint.
std::string ErrorDetailsOf(const absl::Status& status);

}  // namespace warden
