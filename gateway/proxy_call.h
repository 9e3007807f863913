// ProxyCall: one client call through the gateway, whatever its method:
// read the client's first message, decide the node (routes.h), stream the
// call to it and its answers back, byte for byte. Before the node has
// answered anything the call may still move: a one-shot or new session a
// node refused goes to another node; a session that moved is followed; a
// session whose node drains waits for the handover and is taken over on
// another node; a session whose node is lost fails fast, naming the node.
// After the first answer the call is the node's (after its headers too,
// unless it then refuses the call with a fleet hint).
#pragma once

#include <memory>

#include "grpcpp/generic/async_generic_service.h"

namespace warden::gateway {

class Gateway;

// The reactor for a new call; it deletes itself when the call is done.
grpc::ServerGenericBidiReactor* NewProxyCall(Gateway& gateway, grpc::GenericCallbackServerContext* ctx);

}  // namespace warden::gateway
