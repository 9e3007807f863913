// Placement: which node gets new work. The better of K nodes chosen at
// random (K = 2 by default: "the power of two choices"), by a score from
// what each node last reported plus what the gateway sent it since. Random
// sampling keeps many gateways, each with a slightly stale view, from
// herding onto the one node that looked best.
//
// What the score weighs depends on what is placed. A session (and an agent
// run, a restored snapshot) holds memory for hours: it goes where the least
// is held against what the node can hold (HeldScore), and a node busy now
// gets fewer of them for as long as it stays busy - never so few that what
// the nodes hold drifts far apart. A one-shot lasts a moment: it goes where
// the least work runs and waits now (WorkScore), the sandboxes it holds and
// the memory in use on its machine counting beside it.
#pragma once

#include <vector>

#include "absl/random/bit_gen_ref.h"
#include "absl/random/random.h"
#include "warden/v1/fleet.pb.h"

namespace warden::gateway {

// What the gateway knows of one candidate node.
struct NodeView {
  v1::NodeStatus status;  // as it last reported
  int in_flight = 0;      // calls the gateway has outstanding on it now
  // Sessions placed there that its report does not count yet: created
  // since the ask it answers, and being created now.
  int placed = 0;
};

// What a node holds, against what it may hold: 0 empty, 1 full (more when
// memory is overcommitted). The largest of its sessions against
// sessions.max_total, its live sandboxes against sessions.max_live, and the
// memory limits of its sessions against its memory; `extra` sessions (placed
// since the report, or being created) count in each, their memory at the
// node's mean limit per session (`bytes_per_session` when it reports none).
double HeldScore(const v1::NodeStatus& status, int extra, double bytes_per_session = 0);
// How busy a node is now: executions running and waiting per CPU, the
// gateway's calls in flight on it per CPU, and its machine's CPU use (0-1).
double BusyScore(const v1::NodeStatus& status, int in_flight);
// What a one-shot meets there now: BusyScore's work per CPU, the live
// sandboxes against what the node may hold, and half each of its machine's
// CPU use and memory in use.
double WorkScore(const v1::NodeStatus& status, int in_flight);

enum class Placing {
  kSession,  // held for long: balance what nodes hold
  kWork,     // a one-shot: balance the work now
};
// The score of each candidate (lower is better), in their order.
std::vector<double> PlacementScores(const std::vector<NodeView>& nodes, Placing what);

// The index of the lowest score among `choices` distinct random indices of
// `scores` (all of them when there are fewer); -1 when `scores` is empty.
int PickBestOfK(const std::vector<double>& scores, int choices, absl::BitGenRef rng);

}  // namespace warden::gateway
