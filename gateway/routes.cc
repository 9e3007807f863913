#include "gateway/routes.h"

#include "absl/strings/str_cat.h"
#include "warden/v1/agent.pb.h"
#include "warden/v1/executor.pb.h"
#include "warden/v1/fleet.pb.h"

namespace warden::gateway {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

// The methods that do not name a session, and what to do with them.
const std::map<std::string, Route::Kind>& Explicit() {
  static const auto* kinds = new std::map<std::string, Route::Kind>{
      {"warden.v1.Executor.Execute", Route::Kind::kExecute},
      {"warden.v1.Executor.ExecuteStream", Route::Kind::kExecute},
      {"warden.v1.Executor.CreateSession", Route::Kind::kPlace},
      {"warden.v1.Executor.RestoreSnapshot", Route::Kind::kPlace},
      {"warden.v1.Executor.ListSessions", Route::Kind::kFanOut},
      {"warden.v1.Executor.ListSnapshots", Route::Kind::kAnyNode},
      {"warden.v1.Executor.DeleteSnapshot", Route::Kind::kAnyNode},
      {"warden.v1.Agent.Run", Route::Kind::kPlace},
      {"warden.v1.Node.GetNodeStatus", Route::Kind::kGateway},
      {"warden.v1.Node.TakeOverSession", Route::Kind::kRefused},
  };
  return *kinds;
}

// session_id at the top, or one level down (UploadFile's header).
std::vector<const FieldDescriptor*> FindSessionField(const Descriptor* message) {
  if (const FieldDescriptor* f = message->FindFieldByName("session_id");
      f != nullptr && f->type() == FieldDescriptor::TYPE_STRING && !f->is_repeated()) {
    return {f};
  }
  for (int i = 0; i < message->field_count(); ++i) {
    const FieldDescriptor* f = message->field(i);
    if (f->type() != FieldDescriptor::TYPE_MESSAGE || f->is_repeated()) continue;
    if (const FieldDescriptor* g = f->message_type()->FindFieldByName("session_id");
        g != nullptr && g->type() == FieldDescriptor::TYPE_STRING && !g->is_repeated()) {
      return {f, g};
    }
  }
  return {};
}

}  // namespace

const char* RouteKindName(Route::Kind kind) {
  switch (kind) {
    case Route::Kind::kSession: return "session";
    case Route::Kind::kExecute: return "execute";
    case Route::Kind::kPlace: return "place";
    case Route::Kind::kAnyNode: return "any_node";
    case Route::Kind::kFanOut: return "fan_out";
    case Route::Kind::kGateway: return "gateway";
    case Route::Kind::kRefused: return "refused";
  }
  return "unknown";
}

std::string Route::SessionIdOf(const google::protobuf::Message& request) const {
  const google::protobuf::Message* message = &request;
  for (size_t i = 0; i + 1 < session_field.size(); ++i) {
    const auto* reflection = message->GetReflection();
    if (!reflection->HasField(*message, session_field[i])) return "";
    message = &reflection->GetMessage(*message, session_field[i]);
  }
  if (session_field.empty()) return "";
  return message->GetReflection()->GetString(*message, session_field.back());
}

absl::StatusOr<std::map<std::string, Route>> BuildRoutes() {
  std::map<std::string, Route> routes;
  for (const google::protobuf::ServiceDescriptor* service :
       {v1::ExecuteRequest::descriptor()->file()->FindServiceByName("Executor"),
        v1::AgentRequest::descriptor()->file()->FindServiceByName("Agent"),
        v1::NodeStatus::descriptor()->file()->FindServiceByName("Node")}) {
    for (int i = 0; i < service->method_count(); ++i) {
      const google::protobuf::MethodDescriptor* method = service->method(i);
      Route route;
      route.method = method;
      route.session_field = FindSessionField(method->input_type());
      if (auto it = Explicit().find(method->full_name()); it != Explicit().end()) {
        route.kind = it->second;
      } else if (!route.session_field.empty()) {
        route.kind = Route::Kind::kSession;
      } else {
        return absl::InternalError(absl::StrCat(
            "the gateway has no route for ", method->full_name(),
            ": its request names no session_id; give it one in gateway/routes.cc"));
      }
      if (route.kind == Route::Kind::kFanOut && method->server_streaming()) {
        return absl::InternalError(absl::StrCat(method->full_name(), " streams: it cannot be fanned out"));
      }
      routes[absl::StrCat("/", service->full_name(), "/", method->name())] = std::move(route);
    }
  }
  return routes;
}

}  // namespace warden::gateway
