#include "keeper/client.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "sandbox/fd_passing.h"

namespace warden::keeper {

absl::StatusOr<std::unique_ptr<KeeperClient>> KeeperClient::Connect(const std::string& path) {
  struct sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("keeper socket path too long: ", path));
  }
  memcpy(addr.sun_path, path.c_str(), path.size());
  UniqueFd fd(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd) return absl::ErrnoToStatus(errno, "socket");
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot reach warden-keeper at ", path, ": ",
                                               strerror(errno),
                                               " (start wardend through warden-keeper, or unset "
                                               "WARDEN_KEEPER_SOCKET)"));
  }
  // A keeper that refuses us (another wardend is attached) closes at once;
  // that shows on the first read, in Adopt.
  struct timeval tv = {30, 0};
  setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return std::unique_ptr<KeeperClient>(new KeeperClient(std::move(fd)));
}

absl::Status KeeperClient::Send(const Header& header, const int* fds, int n_fds) {
  absl::MutexLock lock(&mu_);
  if (SendWithFds(fd_.get(), &header, sizeof(header), nullptr, 0, fds, n_fds) < 0) {
    return absl::ErrnoToStatus(errno, "sending to warden-keeper");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<HeldSandbox>> KeeperClient::Adopt() {
  if (absl::Status s = Send(Header{MessageType::kAdopt}, nullptr, 0); !s.ok()) return s;
  std::vector<HeldSandbox> held;
  absl::MutexLock lock(&mu_);
  std::string buffer(sizeof(Header) + kMaxPayload, '\0');
  for (;;) {
    int fds[kMaxPassedFds];
    int n_fds = 0;
    const ssize_t n = ReceiveWithFds(fd_.get(), buffer.data(), buffer.size(), 0, fds, &n_fds);
    std::vector<UniqueFd> received;
    for (int i = 0; i < n_fds; ++i) received.emplace_back(fds[i]);
    if (n < 0) return absl::ErrnoToStatus(errno, "reading from warden-keeper");
    if (n < static_cast<ssize_t>(sizeof(Header))) {
      return absl::UnavailableError(
          "warden-keeper closed the connection: another wardend is attached to it");
    }
    Header header;
    memcpy(&header, buffer.data(), sizeof(header));
    switch (header.type) {
      case MessageType::kHeld: {
        HeldSandbox sandbox;
        sandbox.id = header.id_string();
        sandbox.ended = header.a != 0;
        sandbox.wait_status = static_cast<int>(header.b);
        size_t next = 0;
        for (int h = 0; h < kHandleCount; ++h) {
          if ((header.mask & (1u << h)) && next < received.size()) {
            sandbox.handles[h] = std::move(received[next++]);
          }
        }
        held.push_back(std::move(sandbox));
        break;
      }
      case MessageType::kOutput: {
        if (held.empty() || held.back().id != header.id_string() || header.a < 0 || header.a > 2) {
          return absl::InternalError("warden-keeper sent output out of order");
        }
        held.back().buffered[header.a].append(buffer.data() + sizeof(Header),
                                              static_cast<size_t>(n) - sizeof(Header));
        held.back().dropped[header.a] += header.b;
        break;
      }
      case MessageType::kAdoptEnd:
        return held;
      default:
        return absl::InternalError("warden-keeper sent an unknown message");
    }
  }
}

absl::Status KeeperClient::Hold(const std::string& id, const Handles& handles) {
  Header header{MessageType::kHold};
  header.set_id(id);
  int fds[kHandleCount];
  int n = 0;
  for (int h = 0; h < kHandleCount; ++h) {
    if (!handles[h]) continue;
    header.mask |= 1u << h;
    fds[n++] = handles[h].get();  // SCM_RIGHTS sends a copy
  }
  return Send(header, fds, n);
}

absl::Status KeeperClient::Drop(const std::string& id) {
  Header header{MessageType::kDrop};
  header.set_id(id);
  return Send(header, nullptr, 0);
}

absl::Status KeeperClient::Stop() { return Send(Header{MessageType::kStop}, nullptr, 0); }

absl::Status KeeperClient::Serving() { return Send(Header{MessageType::kServing}, nullptr, 0); }

}  // namespace warden::keeper
