#include "server/fleet_hint.h"

namespace warden {

absl::Status WithFleetHint(absl::Status status, v1::FleetHint::Kind kind, const std::string& node_id,
                           const std::string& reason) {
  v1::FleetHint hint;
  hint.set_kind(kind);
  hint.set_node_id(node_id);
  hint.set_reason(reason);
  status.SetPayload(kFleetHintTypeUrl, absl::Cord(hint.SerializeAsString()));
  return status;
}

std::optional<v1::FleetHint> FleetHintOf(const absl::Status& status) {
  auto payload = status.GetPayload(kFleetHintTypeUrl);
  if (!payload) return std::nullopt;
  v1::FleetHint hint;
  if (!hint.ParseFromString(std::string(*payload))) return std::nullopt;
  return hint;
}

std::string ErrorDetailsOf(const absl::Status& status) {
  auto payload = status.GetPayload(kFleetHintTypeUrl);
  if (!payload) return "";
  v1::RpcStatus rpc;
  rpc.set_code(static_cast<int>(status.code()));
  rpc.set_message(std::string(status.message()));
  google::protobuf::Any* any = rpc.add_details();
  any->set_type_url(kFleetHintTypeUrl);
  any->set_value(std::string(*payload));
  return rpc.SerializeAsString();
}

}  // namespace warden
