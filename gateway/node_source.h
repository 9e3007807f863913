// NodeSource: where the nodes are, behind one small interface, so that the
// engine running them (Kubernetes, Docker Swarm, a fixed list) stays out of
// the gateway. Discovery is by DNS, which every engine serves: one name
// with a record per node (a Kubernetes headless Service, Swarm's
// tasks.<service> with endpoint mode dnsrr), or a static list.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace warden::gateway {

class NodeSource {
 public:
  virtual ~NodeSource() = default;
  // Every node's gRPC address, "HOST:PORT" ("[v6]:PORT"), sorted; an
  // error when none can be found (the previous answer then stands).
  virtual absl::StatusOr<std::vector<std::string>> Resolve() = 0;
  // What it resolves, for logs and errors.
  virtual std::string Describe() const = 0;
};

// A fixed list.
std::unique_ptr<NodeSource> StaticNodes(std::vector<std::string> addresses);
// Every A and AAAA record of `name`, each with `port`.
std::unique_ptr<NodeSource> DnsNodes(std::string name, int port);

}  // namespace warden::gateway
