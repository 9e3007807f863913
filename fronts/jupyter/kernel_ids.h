// Kernel ids <-> Warden session ids. A kernel is a Warden session; its id
// is the session's id laid out as a UUID, because Jupyter Server routes
// kernels by the pattern \w+-\w+-\w+-\w+-\w+ (so `jupyter server
// --gateway-url` would 404 on "s-..."): the session "s-" + 24 hex digits
// is the kernel "xxxxxxxx-xxxx-xxxx-xxxx-xxxx00000000". A fleet's session
// "s-<24 hex>-<node>" (docs/fleet.md) is that UUID + "_" + the node id with
// '_' for '-', still five \w+ groups. Any other session id is used as it
// is, and a URL may also name a session directly by its "s-..." id.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace warden::jupyter {

std::string KernelIdFromSessionId(absl::string_view session_id);
std::string SessionIdFromKernelId(absl::string_view kernel_id);

}  // namespace warden::jupyter
