// The Kernel Gateway API's routes on the HTTP front: /api, /api/kernelspecs,
// /api/kernels[/{kernel_id}[/interrupt|/restart|/channels]] (what each does:
// kernel_gateway.h). The credential is Jupyter's, "Authorization: token
// TOKEN" or "?token=TOKEN", the daemon's token for a tenant; every error,
// the front's own (401, 404, 405, 413) included, has Kernel Gateway's shape.
#pragma once

#include <memory>

#include "fronts/http/router.h"
#include "fronts/jupyter/kernel_gateway.h"

namespace warden::jupyter {

// Adds the routes and claims /api for Kernel Gateway errors. The router's
// handlers share `gateway`.
void AddKernelGatewayRoutes(http::Router& router, std::shared_ptr<KernelGateway> gateway);

}  // namespace warden::jupyter
