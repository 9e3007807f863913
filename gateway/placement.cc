#include "gateway/placement.h"

#include <algorithm>
#include <numeric>

namespace warden::gateway {

double LoadScore(const v1::NodeStatus& status, int in_flight) {
  const v1::NodeCapacity& capacity = status.capacity();
  const v1::NodeLoad& load = status.load();
  const double cpus = std::max(1, capacity.cpus());
  // Work running or waiting, per CPU: what a new execution queues behind.
  double score = (load.executing() + load.queued() + in_flight) / cpus;
  // Sandboxes held, against what the node may hold: memory and descriptors.
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

int PickBestOfK(const std::vector<double>& scores, int choices, absl::BitGen& rng) {
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
