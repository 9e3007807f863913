#include "gateway/node_source.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace warden::gateway {
namespace {

class Static final : public NodeSource {
 public:
  explicit Static(std::vector<std::string> addresses) : addresses_(std::move(addresses)) {
    std::sort(addresses_.begin(), addresses_.end());
  }
  absl::StatusOr<std::vector<std::string>> Resolve() override { return addresses_; }
  std::string Describe() const override { return absl::StrCat("the list ", absl::StrJoin(addresses_, ", ")); }

 private:
  std::vector<std::string> addresses_;
};

class Dns final : public NodeSource {
 public:
  Dns(std::string name, int port) : name_(std::move(name)), port_(port) {}

  absl::StatusOr<std::vector<std::string>> Resolve() override {
    addrinfo hints = {};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    // getaddrinfo reads /etc/resolv.conf afresh when it changes, and asks
    // the resolver each time: Swarm's and Kubernetes' DNS answer with the
    // records as they are now.
    if (int rc = getaddrinfo(name_.c_str(), nullptr, &hints, &found); rc != 0) {
      return absl::UnavailableError(absl::StrCat("resolving ", name_, ": ", gai_strerror(rc)));
    }
    std::set<std::string> addresses;
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      char text[INET6_ADDRSTRLEN] = {};
      if (a->ai_family == AF_INET) {
        inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, text, sizeof(text));
        addresses.insert(absl::StrCat(text, ":", port_));
      } else if (a->ai_family == AF_INET6) {
        inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, text, sizeof(text));
        addresses.insert(absl::StrCat("[", text, "]:", port_));
      }
    }
    freeaddrinfo(found);
    if (addresses.empty()) return absl::UnavailableError(absl::StrCat(name_, " has no address records"));
    return std::vector<std::string>(addresses.begin(), addresses.end());
  }
  std::string Describe() const override { return absl::StrCat("DNS name ", name_, " (port ", port_, ")"); }

 private:
  const std::string name_;
  const int port_;
};

}  // namespace

std::unique_ptr<NodeSource> StaticNodes(std::vector<std::string> addresses) {
  return std::make_unique<Static>(std::move(addresses));
}

std::unique_ptr<NodeSource> DnsNodes(std::string name, int port) { return std::make_unique<Dns>(std::move(name), port); }

}  // namespace warden::gateway
