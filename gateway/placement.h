// Placement: which node gets a new session or a one-shot. The better of K
// nodes chosen at random (K = 2 by default: "the power of two choices"),
// by a load score from what each node last reported plus what the gateway
// sent it since. Random sampling keeps many gateways, each with a slightly
// stale view, from herding onto the one node that looked idlest.
#pragma once

#include <vector>

#include "absl/random/random.h"
#include "warden/v1/fleet.pb.h"

namespace warden::gateway {

// Lower is better. `in_flight`: calls the gateway has outstanding on the
// node (work it sent that the node may not have reported yet).
double LoadScore(const v1::NodeStatus& status, int in_flight);

// The index of the lowest score among `choices` distinct random indices of
// `scores` (all of them when there are fewer); -1 when `scores` is empty.
int PickBestOfK(const std::vector<double>& scores, int choices, absl::BitGen& rng);

}  // namespace warden::gateway
