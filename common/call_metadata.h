// gRPC metadata keys of warden.v1 that its server and its clients (the
// protocol fronts) share: names only, no gRPC here.
#pragma once

namespace warden {

// In the initial metadata of ExecuteStream, sent as soon as the cell is
// accepted (its session and context exist; it runs or waits for its turn)
// and before its first event. A refused request ends with its status and
// never carries it (docs/api.md, "ExecuteStream").
inline constexpr char kCellAcceptedMetadataKey[] = "warden-cell-accepted";

}  // namespace warden
