// HttpServer: one accepting thread, one thread per connection (at most
// max_connections), each connection with its own io_context.
#include "fronts/http/server.h"

#include <sys/socket.h>

#include <list>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/write.hpp"
#include "fronts/http/connection.h"

namespace warden::http {
namespace {

absl::Status BadListen(absl::string_view listen, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "listen address \"", listen, "\" ", why,
      ": use HOST:PORT with an IPv4 literal, [IPv6] or localhost, e.g. 127.0.0.1:8080"));
}

absl::StatusOr<net::ip::tcp::endpoint> ParseListen(absl::string_view listen) {
  const size_t colon = listen.rfind(':');
  if (colon == absl::string_view::npos) return BadListen(listen, "has no port");
  absl::string_view host = listen.substr(0, colon);
  const absl::string_view port_text = listen.substr(colon + 1);
  int port = 0;
  if (port_text.empty() || port_text.size() > 5 || !absl::SimpleAtoi(port_text, &port) || port < 0 ||
      port_text.find_first_not_of("0123456789") != absl::string_view::npos) {
    return BadListen(listen, "has no valid port");
  }
  if (port > 65535) return BadListen(listen, "has a port above 65535");
  const bool bracketed = host.size() >= 2 && host.front() == '[' && host.back() == ']';
  if (bracketed) host = host.substr(1, host.size() - 2);
  if (host == "localhost") host = "127.0.0.1";
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(std::string(host), ec);
  if (ec) return BadListen(listen, "is not an IP address or localhost");
  if (address.is_v6() && !bracketed) return BadListen(listen, "has an IPv6 address without brackets");
  return net::ip::tcp::endpoint(address, static_cast<unsigned short>(port));
}

}  // namespace

struct HttpServer::Shared {
  HttpServerOptions options;
  std::shared_ptr<const Router> router;
  Authenticate authenticate;
  AccessPolicy access;
  net::io_context accept_io;
  net::ip::tcp::acceptor acceptor{accept_io};

  struct Live {
    int fd = -1;  // for shutdown() from Stop; the connection closes it
    std::thread thread;
    bool done = false;
  };
  absl::Mutex mu;
  std::list<Live> live ABSL_GUARDED_BY(mu);
  bool stopping ABSL_GUARDED_BY(mu) = false;
};

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options,
                                                             std::shared_ptr<const Router> router,
                                                             Authenticate authenticate) {
  if (options.max_header_bytes < 256 || options.max_connections < 1 || options.max_connections > 65536 ||
      options.head_timeout <= absl::ZeroDuration() || options.io_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "HTTP server options out of range: max_header_bytes >= 256, 1 <= max_connections <= 65536, "
        "positive timeouts");
  }
  if (router == nullptr) return absl::InvalidArgumentError("the HTTP server needs a router");
  auto endpoint = ParseListen(options.listen);
  if (!endpoint.ok()) return endpoint.status();

  auto shared = std::make_shared<Shared>();
  shared->options = std::move(options);
  shared->router = std::move(router);
  shared->authenticate = std::move(authenticate);
  shared->access = AccessPolicy(shared->options.access);
  beast::error_code ec;
  auto& acceptor = shared->acceptor;
  acceptor.open(endpoint->protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(*endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", shared->options.listen, " for the ",
                                               shared->options.name, " front: ", ec.message()));
  }
  const int port = acceptor.local_endpoint().port();
  auto server = std::unique_ptr<HttpServer>(new HttpServer(port, std::move(shared)));
  absl::MutexLock lock(&server->stop_mu_);
  server->acceptor_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

HttpServer::~HttpServer() { Stop(); }

int HttpServer::connections() const {
  absl::MutexLock lock(&shared_->mu);
  int n = 0;
  for (const Shared::Live& c : shared_->live) n += c.done ? 0 : 1;
  return n;
}

bool HttpServer::WaitForConnectionsAtMost(int n, absl::Time deadline) const {
  Shared& shared = *shared_;
  absl::MutexLock lock(&shared.mu);
  auto few = [&shared, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(shared.mu) {
    int live = 0;
    for (const Shared::Live& c : shared.live) live += c.done ? 0 : 1;
    return live <= n;
  };
  return shared.mu.AwaitWithDeadline(absl::Condition(&few), deadline);
}

void HttpServer::AcceptLoop() {
  Shared& shared = *shared_;
  static constexpr absl::string_view kBusyBody = "too many connections; try again in a moment\n";
  const std::string busy = absl::StrCat(
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: ", kBusyBody.size(),
      "\r\nConnection: close\r\n\r\n", kBusyBody);
  while (true) {
    beast::error_code ec;
    net::ip::tcp::socket socket = shared.acceptor.accept(ec);
    {
      absl::MutexLock lock(&shared.mu);
      if (shared.stopping) return;
      // Join the connections that have finished.
      for (auto it = shared.live.begin(); it != shared.live.end();) {
        if (it->done) {
          it->thread.join();
          it = shared.live.erase(it);
        } else {
          ++it;
        }
      }
      if (ec) {
        // Out of descriptors or memory: the pending connection waits in the
        // queue; let a finishing connection free something first.
        if (ec == net::error::no_descriptors || ec == net::error::no_memory || ec == net::error::no_buffer_space) {
          shared.mu.AwaitWithTimeout(absl::Condition(+[](bool* s) { return *s; }, &shared.stopping),
                                     absl::Milliseconds(100));
        }
        continue;
      }
      if (shared.live.size() >= static_cast<size_t>(shared.options.max_connections)) {
        // The answer fits in any socket buffer; a client that misses it sees
        // the connection closed, which is also an answer.
        (void)::send(socket.native_handle(), busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        continue;
      }
      // Streamed answers are many small writes: without TCP_NODELAY each
      // waits for the client's delayed ACK of the last (40 ms).
      socket.set_option(net::ip::tcp::no_delay(true), ec);
      shared.live.emplace_back();
      Shared::Live& live = shared.live.back();
      live.fd = socket.native_handle();
      live.thread = std::thread([shared = shared_, &live, socket = std::move(socket)]() mutable {
        {
          net::io_context io;
          beast::error_code assign_ec;
          const auto protocol = socket.local_endpoint(assign_ec).protocol();
          net::ip::tcp::socket mine(io);
          if (!assign_ec) mine.assign(protocol, socket.release(), assign_ec);
          Connection connection(io, std::move(mine), shared->options, *shared->router, shared->access,
                                shared->authenticate);
          if (!assign_ec) connection.Serve();
          // Forget the fd before it closes (with `connection`), so that Stop
          // never shuts down a descriptor number reused by someone else.
          absl::MutexLock lock(&shared->mu);
          live.fd = -1;
        }
        // Done only once the connection and its io_context are destroyed: a
        // caller of WaitForConnectionsAtMost sees all of its memory returned.
        absl::MutexLock lock(&shared->mu);
        live.done = true;
      });
    }
  }
}

void HttpServer::Stop() {
  absl::MutexLock stop_lock(&stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  {
    absl::MutexLock lock(&shared_->mu);
    shared_->stopping = true;
    // Wakes the blocking accept (Linux answers it with EINVAL).
    ::shutdown(shared_->acceptor.native_handle(), SHUT_RDWR);
  }
  if (acceptor_.joinable()) acceptor_.join();
  beast::error_code ec;
  shared_->acceptor.close(ec);
  {
    absl::MutexLock lock(&shared_->mu);
    for (Shared::Live& c : shared_->live) {
      if (c.fd >= 0) ::shutdown(c.fd, SHUT_RDWR);  // its reads and writes fail at once
    }
  }
  // Join outside the lock (a finishing connection takes it); entries stay
  // until joined, since their threads write to them to the end.
  while (true) {
    std::thread* thread = nullptr;
    {
      absl::MutexLock lock(&shared_->mu);
      if (shared_->live.empty()) break;
      thread = &shared_->live.front().thread;
    }
    thread->join();
    absl::MutexLock lock(&shared_->mu);
    shared_->live.pop_front();
  }
}

}  // namespace warden::http
