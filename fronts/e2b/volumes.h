// E2B's volumes on the HTTP front, as a translation to warden.v1.Volumes
// (e2b.Volume in the E2B SDKs; docs/integrations.md):
//
// Control plane (X-API-KEY, the caller's Warden token):
//   POST /volumes {name}           201 {volumeID, name, token}
//   GET  /volumes                  [{volumeID, name}]
//   GET  /volumes/{id}             {volumeID, name, token}
//   DELETE /volumes/{id}           204 (404 for none)
// Content (E2B_VOLUME_API_URL; Authorization: Bearer <the volume's token>):
//   GET|POST /volumecontent/{id}/dir?path=&depth=   list / make a directory
//   GET|PUT  /volumecontent/{id}/file?path=         read / write a file
//   GET|PATCH|DELETE /volumecontent/{id}/path?path= stat / chown, chmod / remove
//
// A volume's id is its name (names are unique per tenant). Its token seals
// {the volume, the API key} as sandboxes' access tokens do (access_token.h):
// the front keeps nothing, and a revoked key revokes the tokens made for it.
// Sandboxes mount volumes by name at create (volumeMounts, e2b_front.cc).
#pragma once

#include "fronts/e2b/e2b_front.h"
#include "fronts/http/router.h"
#include "warden/v1/images.grpc.pb.h"

namespace warden::e2b {

// `volumes` is not owned and outlives the router's use.
void AddE2bVolumeRoutes(http::Router& router, v1::Volumes::StubInterface* volumes, E2bOptions options);

}  // namespace warden::e2b
