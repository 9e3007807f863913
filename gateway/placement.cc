#include "gateway/placement.h"

#include <algorithm>
#include <numeric>

namespace warden::gateway {
namespace {

// How much a busy node's sessions weigh more, per unit of busy: a node
// running a cell on every CPU (work 1 per CPU) is given new sessions as if
// it held a tenth of the fleet's mean more than it does, so it takes fewer
// of them while it stays busy. Its work per CPU counts up to kBusyCap and
// its machine's CPU use (0-1) beside it, capped apart: nodes sharing a
// machine share its CPU use, and their work still tells them apart. At
// most three tenths of the mean: hours of held sessions stay balanced
// whatever the moment's load.
constexpr double kBusyShare = 0.1;
constexpr double kBusyCap = 2;
// A tenth of one session's share of a node's sessions.max_total: on an
// empty fleet the idle node wins, and never over a session held.
constexpr double kBusyFloorSessions = 0.1;

}  // namespace

double HeldScore(const v1::NodeStatus& status, int extra, double bytes_per_session) {
  const v1::NodeCapacity& capacity = status.capacity();
  const v1::NodeLoad& load = status.load();
  const double sessions = load.sessions() + extra;
  double held = sessions / std::max(1, capacity.max_sessions());
  if (capacity.max_live() > 0) {
    held = std::max(held, (load.live_sandboxes() + extra) / static_cast<double>(capacity.max_live()));
  }
  // The sessions placed since the report hold what the node's hold on
  // average, or (none reported yet) what the caller says sessions hold.
  const double per_session = load.sessions() > 0 && load.memory_committed_bytes() > 0
                                 ? static_cast<double>(load.memory_committed_bytes()) / load.sessions()
                                 : bytes_per_session;
  const double committed = static_cast<double>(load.memory_committed_bytes()) + extra * per_session;
  if (capacity.memory_bytes() > 0 && committed > 0) {
    held = std::max(held, committed / static_cast<double>(capacity.memory_bytes()));
  }
  return held;
}

double BusyScore(const v1::NodeStatus& status, int in_flight) {
  const v1::NodeLoad& load = status.load();
  const double cpus = std::max(1, status.capacity().cpus());
  return (load.executing() + load.queued() + in_flight) / cpus + (1.0 - std::clamp(load.cpu_idle(), 0.0, 1.0));
}

double WorkScore(const v1::NodeStatus& status, int in_flight) {
  const v1::NodeCapacity& capacity = status.capacity();
  const v1::NodeLoad& load = status.load();
  const double cpus = std::max(1, capacity.cpus());
  // Work running or waiting, per CPU: what a new execution queues behind.
  double score = (load.executing() + load.queued() + in_flight) / cpus;
  // Sandboxes held, against what the node may hold.
  const double room = capacity.max_live() > 0 ? capacity.max_live() : std::max(1, capacity.max_sessions());
  score += load.live_sandboxes() / room;
  // The machine itself (nodes may share machines with other work).
  score += 0.5 * (1.0 - std::clamp(load.cpu_idle(), 0.0, 1.0));
  if (capacity.memory_bytes() > 0) {
    score += 0.5 * (1.0 - static_cast<double>(load.memory_available_bytes()) /
                              static_cast<double>(capacity.memory_bytes()));
  }
  return score;
}

std::vector<double> PlacementScores(const std::vector<NodeView>& nodes, Placing what) {
  // What a session holds across the fleet, for the sessions placed on a
  // node that has reported none yet.
  double committed = 0, sessions = 0;
  for (const NodeView& node : nodes) {
    committed += static_cast<double>(node.status.load().memory_committed_bytes());
    sessions += node.status.load().sessions();
  }
  const double bytes_per_session = sessions > 0 ? committed / sessions : 0;
  std::vector<double> held, scores;
  for (const NodeView& node : nodes) held.push_back(HeldScore(node.status, node.placed, bytes_per_session));
  // (A one-shot's score leaves held aside: it needs the memory free now,
  // not what sessions may use.)
  const double mean = nodes.empty() ? 0 : std::accumulate(held.begin(), held.end(), 0.0) / nodes.size();
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (what == Placing::kSession) {
      const double cpu_use = 1.0 - std::clamp(nodes[i].status.load().cpu_idle(), 0.0, 1.0);
      const double work = BusyScore(nodes[i].status, nodes[i].in_flight) - cpu_use;
      const double busy = std::min(work, kBusyCap) + cpu_use;
      const double floor = kBusyFloorSessions / std::max(1, nodes[i].status.capacity().max_sessions());
      scores.push_back(held[i] + (kBusyShare * mean + floor) * busy);
    } else {
      scores.push_back(WorkScore(nodes[i].status, nodes[i].in_flight));
    }
  }
  return scores;
}

int PickBestOfK(const std::vector<double>& scores, int choices, absl::BitGenRef rng) {
  const int n = static_cast<int>(scores.size());
  if (n == 0) return -1;
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  const int k = std::min(std::max(choices, 1), n);
  // A partial Fisher-Yates shuffle: the first k are a uniform sample.
  for (int i = 0; i < k; ++i) std::swap(order[i], order[absl::Uniform(rng, i, n)]);
  int best = order[0];
  for (int i = 1; i < k; ++i) {
    if (scores[order[i]] < scores[best]) best = order[i];
  }
  return best;
}

}  // namespace warden::gateway
