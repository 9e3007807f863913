// AdminHttpServer: one thread, one poll() loop, non-blocking sockets. Each
// connection reads one request head, gets one response, and is closed.
#include "server/admin_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "sandbox/status_macros.h"

namespace warden {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kListenBacklog = 128;
// When accept() runs out of descriptors or memory the listener stays
// readable; wait this long before trying again instead of spinning.
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);

struct ListenAddress {
  sockaddr_storage addr = {};
  socklen_t len = 0;
};

absl::Status BadListen(absl::string_view listen, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "admin listen address \"", listen, "\" ", why,
      ": use HOST:PORT with an IPv4 literal, [IPv6] or localhost, e.g. 127.0.0.1:9464"));
}

absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view listen) {
  const size_t colon = listen.rfind(':');
  if (colon == absl::string_view::npos) return BadListen(listen, "has no port");
  absl::string_view host = listen.substr(0, colon);
  const absl::string_view port_text = listen.substr(colon + 1);

  if (port_text.empty() || port_text.size() > 5 ||
      !std::all_of(port_text.begin(), port_text.end(),
                   [](char c) { return c >= '0' && c <= '9'; })) {
    return BadListen(listen, "has no valid port");
  }
  const int port = std::stoi(std::string(port_text));
  if (port > 65535) return BadListen(listen, "has a port above 65535");

  ListenAddress out;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    const std::string literal(host.substr(1, host.size() - 2));
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&out.addr);
    if (inet_pton(AF_INET6, literal.c_str(), &sin6->sin6_addr) != 1) {
      return BadListen(listen, "has an invalid IPv6 address");
    }
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(static_cast<uint16_t>(port));
    out.len = sizeof(sockaddr_in6);
    return out;
  }
  if (host == "localhost") host = "127.0.0.1";
  const std::string literal(host);
  auto* sin = reinterpret_cast<sockaddr_in*>(&out.addr);
  if (inet_pton(AF_INET, literal.c_str(), &sin->sin_addr) != 1) {
    return BadListen(listen, host.find(':') != absl::string_view::npos
                                 ? "has an IPv6 address without brackets"
                                 : "is not an IP address or localhost");
  }
  sin->sin_family = AF_INET;
  sin->sin_port = htons(static_cast<uint16_t>(port));
  out.len = sizeof(sockaddr_in);
  return out;
}

absl::StatusOr<int> BoundPort(int fd) {
  sockaddr_storage addr = {};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return absl::ErrnoToStatus(errno, "getsockname on the admin listener");
  }
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

// --- HTTP/1.x request heads (RFC 9112), as much as the admin port needs.

bool IsTokenChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         absl::string_view("!#$%&'*+-.^_`|~").find(c) != absl::string_view::npos;
}

bool IsToken(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsTokenChar);
}

struct RequestHead {
  absl::string_view method;
  absl::string_view path;  // without the query
};

// `head` is everything up to, not including, the blank line.
absl::StatusOr<RequestHead> ParseRequestHead(absl::string_view head) {
  std::vector<absl::string_view> lines = absl::StrSplit(head, '\n');
  for (auto& line : lines) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  }
  // A server SHOULD ignore empty lines before the request line.
  auto first = std::find_if(lines.begin(), lines.end(), [](auto l) { return !l.empty(); });
  if (first == lines.end()) return absl::InvalidArgumentError("empty request");

  std::vector<absl::string_view> parts = absl::StrSplit(*first, ' ');
  if (parts.size() != 3) return absl::InvalidArgumentError("malformed request line");
  const absl::string_view method = parts[0], target = parts[1], version = parts[2];
  if (!IsToken(method)) return absl::InvalidArgumentError("malformed method");
  if (target.empty() || target.front() != '/' ||
      std::any_of(target.begin(), target.end(),
                  [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; })) {
    return absl::InvalidArgumentError("request target must be an absolute path");
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    return absl::InvalidArgumentError("only HTTP/1.0 and HTTP/1.1 are served");
  }
  for (auto it = first + 1; it != lines.end(); ++it) {
    const absl::string_view line = *it;
    const size_t colon = line.find(':');
    // No obsolete line folding, no whitespace before the colon.
    if (colon == absl::string_view::npos || !IsToken(line.substr(0, colon))) {
      return absl::InvalidArgumentError("malformed header field");
    }
  }
  return RequestHead{method, target.substr(0, target.find('?'))};
}

struct Response {
  int code = 200;
  absl::string_view reason = "OK";
  absl::string_view content_type = "text/plain; charset=utf-8";
  std::string body;
  bool allow_header = false;  // for 405
};

Response TextResponse(int code, absl::string_view reason, std::string body) {
  Response r;
  r.code = code;
  r.reason = reason;
  r.body = std::move(body);
  return r;
}

std::string Serialize(const Response& r, bool include_body) {
  std::string out =
      absl::StrCat("HTTP/1.1 ", r.code, " ", r.reason, "\r\nContent-Type: ", r.content_type,
                   "\r\nContent-Length: ", r.body.size(),
                   "\r\nCache-Control: no-store\r\nConnection: close\r\n");
  if (r.allow_header) out += "Allow: GET, HEAD\r\n";
  out += "\r\n";
  if (include_body) out += r.body;
  return out;
}

}  // namespace

class AdminHttpServer::Loop {
 public:
  Loop(AdminHttpOptions options, const Metrics* metrics, ReadinessCheck readiness,
       UniqueFd listener, int wake_fd)
      : options_(std::move(options)),
        timeout_(absl::ToChronoNanoseconds(options_.request_timeout)),
        metrics_(metrics),
        readiness_(std::move(readiness)),
        listener_(std::move(listener)),
        wake_fd_(wake_fd),
        overloaded_(Serialize(
            TextResponse(503, "Service Unavailable", "too many admin connections\n"), true)) {}

  // Serves until `wake_fd` becomes readable, then closes every connection.
  void Run();

 private:
  enum class State { kReading, kWriting, kDraining };
  struct Connection {
    UniqueFd fd;
    Clock::time_point deadline;
    State state = State::kReading;
    std::string in;
    std::string out;
    size_t written = 0;
  };

  void AcceptAll(Clock::time_point now);
  void Read(Connection& c);
  void Write(Connection& c);
  void Drain(Connection& c);
  void Respond(Connection& c, const Response& response, bool include_body);
  Response Route(const RequestHead& request) const;

  const AdminHttpOptions options_;
  const Clock::duration timeout_;
  const Metrics* const metrics_;  // not owned
  const ReadinessCheck readiness_;
  UniqueFd listener_;             // closed when Run() returns
  const int wake_fd_;             // not owned: the AdminHttpServer's eventfd
  const std::string overloaded_;  // sent, best effort, to a connection over the cap
  std::vector<Connection> connections_;
  Clock::time_point accept_paused_until_;
};

void AdminHttpServer::Loop::Run() {
  std::vector<pollfd> fds;
  while (true) {
    const Clock::time_point now = Clock::now();
    std::erase_if(connections_, [now](const Connection& c) { return !c.fd || c.deadline <= now; });

    // Slots 0 and 1 are the wake fd and the listener; connections follow.
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    const bool accepting = now >= accept_paused_until_;
    fds.push_back({accepting ? listener_.get() : -1, POLLIN, 0});
    Clock::time_point wake_at = accepting ? Clock::time_point::max() : accept_paused_until_;
    for (const Connection& c : connections_) {
      fds.push_back(
          {c.fd.get(), static_cast<short>(c.state == State::kWriting ? POLLOUT : POLLIN), 0});
      wake_at = std::min(wake_at, c.deadline);
    }
    int timeout_ms = -1;
    if (wake_at != Clock::time_point::max()) {
      // Round up, so the loop never wakes just before a deadline and spins.
      timeout_ms =
          static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(wake_at - now).count());
    }

    if (poll(fds.data(), fds.size(), timeout_ms) < 0) continue;  // EINTR; nothing else applies
    if (fds[0].revents != 0) break;                              // Stop()

    // Connections accepted below are not in `fds`; serve only the ones polled.
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Connection& c = connections_[i - 2];
      switch (c.state) {
        case State::kReading:
          Read(c);
          break;
        case State::kWriting:
          Write(c);
          break;
        case State::kDraining:
          Drain(c);
          break;
      }
    }
    if (fds[1].revents != 0) AcceptAll(Clock::now());
  }
  connections_.clear();
  listener_.Reset();  // refuse new connections rather than leave them queued
}

void AdminHttpServer::Loop::AcceptAll(Clock::time_point now) {
  while (true) {
    UniqueFd fd(accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        accept_paused_until_ = now + kAcceptBackoff;
      }
      return;  // EAGAIN: accepted everything that was waiting
    }
    if (connections_.size() >= static_cast<size_t>(options_.max_connections)) {
      // The response fits in any socket buffer; if it does not go out whole,
      // the client sees the connection closed, which is also an answer.
      (void)send(fd.get(), overloaded_.data(), overloaded_.size(), MSG_NOSIGNAL);
      continue;
    }
    connections_.push_back(Connection{std::move(fd), now + timeout_});
  }
}

void AdminHttpServer::Loop::Read(Connection& c) {
  char buf[4096];
  while (true) {
    const ssize_t n = recv(c.fd.get(), buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // wait for more
    if (n <= 0) {  // the client went away (or reset) before finishing a request
      c.fd.Reset();
      return;
    }
    // Look for the blank line only in what is new (and 3 bytes before it).
    const size_t search_from = c.in.size() < 3 ? 0 : c.in.size() - 3;
    const size_t room = options_.max_request_bytes - c.in.size();
    c.in.append(buf, std::min(static_cast<size_t>(n), room));

    // The head ends at the first blank line; tolerate bare LF line endings.
    const size_t end = std::min(c.in.find("\r\n\r\n", search_from), c.in.find("\n\n", search_from));
    if (end != std::string::npos) {
      absl::StatusOr<RequestHead> request =
          ParseRequestHead(absl::string_view(c.in).substr(0, end));
      if (!request.ok()) {
        Respond(c,
                TextResponse(400, "Bad Request",
                             absl::StrCat("bad request: ", request.status().message(), "\n")),
                true);
      } else {
        Respond(c, Route(*request), request->method != "HEAD");
      }
      return;
    }
    if (c.in.size() >= options_.max_request_bytes) {
      Respond(c,
              TextResponse(
                  431, "Request Header Fields Too Large",
                  absl::StrCat("request head exceeds ", options_.max_request_bytes, " bytes\n")),
              true);
      return;
    }
  }
}

void AdminHttpServer::Loop::Respond(Connection& c, const Response& response, bool include_body) {
  c.out = Serialize(response, include_body);
  c.written = 0;
  c.state = State::kWriting;
  Write(c);  // usually the whole response fits in the socket buffer right away
}

void AdminHttpServer::Loop::Write(Connection& c) {
  while (c.written < c.out.size()) {
    const ssize_t n =
        send(c.fd.get(), c.out.data() + c.written, c.out.size() - c.written, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // wait for POLLOUT
    if (n < 0) {
      c.fd.Reset();
      return;
    }
    c.written += static_cast<size_t>(n);
  }
  // Done. Closing now, with request bytes still unread (a body, a second
  // request), would make the kernel send RST, and the client could lose the
  // response it has not read yet. Half-close instead and wait for the
  // client's FIN, discarding what it sends, until the deadline.
  c.out.clear();
  c.out.shrink_to_fit();
  c.in.clear();
  c.in.shrink_to_fit();
  shutdown(c.fd.get(), SHUT_WR);
  c.state = State::kDraining;
  Drain(c);
}

void AdminHttpServer::Loop::Drain(Connection& c) {
  char buf[4096];
  while (true) {
    const ssize_t n = recv(c.fd.get(), buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {  // FIN or error: finished
      c.fd.Reset();
      return;
    }
  }
}

Response AdminHttpServer::Loop::Route(const RequestHead& request) const {
  Response r;
  if (request.path == "/metrics") {
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    if (metrics_ != nullptr) r.body = metrics_->Render();
  } else if (request.path == "/healthz") {
    r.body = "ok\n";
  } else if (request.path == "/readyz") {
    const absl::Status ready = readiness_ ? readiness_() : absl::OkStatus();
    r = ready.ok() ? TextResponse(200, "OK", "ready\n")
                   : TextResponse(503, "Service Unavailable",
                                  absl::StrCat("not ready: ", ready.message(), "\n"));
  } else {
    return TextResponse(404, "Not Found", "not found; try /metrics, /healthz or /readyz\n");
  }
  if (request.method != "GET" && request.method != "HEAD") {
    r = TextResponse(405, "Method Not Allowed", "method not allowed; use GET\n");
    r.allow_header = true;
  }
  return r;
}

absl::StatusOr<std::unique_ptr<AdminHttpServer>> AdminHttpServer::Start(AdminHttpOptions options,
                                                                        const Metrics* metrics,
                                                                        ReadinessCheck readiness) {
  if (options.max_request_bytes < 64 || options.max_connections < 1 ||
      options.max_connections > 1024 || options.request_timeout <= absl::ZeroDuration() ||
      options.request_timeout > absl::Hours(1)) {
    return absl::InvalidArgumentError(
        "admin server options: max_request_bytes must be at least 64, max_connections "
        "between 1 and 1024, and request_timeout between 0 and 1 hour");
  }
  ASSIGN_OR_RETURN(const ListenAddress address, ParseListenAddress(options.listen));
  const std::string what = absl::StrCat("cannot listen on ", options.listen);

  UniqueFd listener(socket(address.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!listener) return absl::ErrnoToStatus(errno, what);
  // A restarted wardend must not fail to bind while old connections linger
  // in TIME_WAIT; SO_REUSEADDR still refuses a port another socket listens on.
  const int one = 1;
  if (setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
    return absl::ErrnoToStatus(errno, what);
  }
  if (bind(listener.get(), reinterpret_cast<const sockaddr*>(&address.addr), address.len) != 0 ||
      listen(listener.get(), kListenBacklog) != 0) {
    return absl::ErrnoToStatus(errno, what);
  }
  ASSIGN_OR_RETURN(const int port, BoundPort(listener.get()));

  UniqueFd wake(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake) return absl::ErrnoToStatus(errno, "eventfd for the admin server");
  const int wake_fd = wake.get();
  auto loop = std::make_unique<Loop>(std::move(options), metrics, std::move(readiness),
                                     std::move(listener), wake_fd);
  std::unique_ptr<AdminHttpServer> server(
      new AdminHttpServer(port, std::move(wake), std::move(loop)));
  {
    absl::MutexLock lock(&server->stop_mu_);
    server->thread_ = std::thread([loop = server->loop_.get()] { loop->Run(); });
  }
  return server;
}

AdminHttpServer::AdminHttpServer(int port, UniqueFd wake, std::unique_ptr<Loop> loop)
    : port_(port), wake_(std::move(wake)), loop_(std::move(loop)) {}

AdminHttpServer::~AdminHttpServer() { Stop(); }

void AdminHttpServer::Stop() {
  absl::MutexLock lock(&stop_mu_);
  if (!thread_.joinable()) return;
  const uint64_t one = 1;
  // Cannot fail short of EBADF: the counter is far from overflowing.
  (void)!write(wake_.get(), &one, sizeof(one));
  thread_.join();
}

}  // namespace warden
