// Routes: how the gateway sends each warden.v1 method, decided once from
// the services' descriptors, so that a method added to the proto is routed
// (by the session it names) or makes the gateway refuse to start, never
// silently unserved. routes_test walks the table.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace warden::gateway {

struct Route {
  enum class Kind {
    kSession,   // to the node holding the session the request names
    kExecute,   // kSession with a session id, else a one-shot: placed, retried elsewhere if refused
    kPlace,     // new work (a session, an agent run): placed, retried elsewhere if refused
    kAnyNode,   // the shared snapshot storage: any node answers for all
    kFanOut,    // every node, the answers merged (ListSessions)
    kGateway,   // answered by the gateway itself (GetNodeStatus)
    kRefused,   // never from a client (TakeOverSession: the gateway's own)
  };
  Kind kind = Kind::kSession;
  const google::protobuf::MethodDescriptor* method = nullptr;
  // Where the session id is in the (first) request: field path from the root.
  std::vector<const google::protobuf::FieldDescriptor*> session_field;

  bool client_streaming() const { return method->client_streaming(); }
  bool server_streaming() const { return method->server_streaming(); }
  // The session id the request names ("" if none).
  std::string SessionIdOf(const google::protobuf::Message& request) const;
};

const char* RouteKindName(Route::Kind kind);

// "/warden.v1.Executor/Execute" -> its route, for every method of
// warden.v1.Executor, Agent and Node. An error names any method it cannot
// route.
absl::StatusOr<std::map<std::string, Route>> BuildRoutes();

}  // namespace warden::gateway
