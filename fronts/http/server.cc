// HttpServer: an acceptor and a few I/O threads over one io_context; each
// connection runs on a strand of its own (connection.h), handlers on the
// shared WorkPool.
#include "fronts/http/server.h"

#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "boost/asio/dispatch.hpp"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/strand.hpp"
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

// Connections the descriptor limit leaves room for: each is one descriptor,
// and the rest of the process (sessions, gRPC, logs) keeps a quarter of
// the limit, at least 256.
int FitToDescriptors(int wanted) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return wanted;
  const rlim_t spare = std::max<rlim_t>(256, limit.rlim_cur / 4);
  if (limit.rlim_cur <= spare) return 1;
  return static_cast<int>(std::min<rlim_t>(static_cast<rlim_t>(wanted), limit.rlim_cur - spare));
}

int IoThreads(int asked) {
  if (asked > 0) return asked;
  const unsigned cores = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp<unsigned>(cores, 1, 16));
}

}  // namespace

ServerShared::ServerShared(HttpServerOptions options_in, std::shared_ptr<const Router> router_in,
                           Authenticate authenticate_in, int io_threads)
    : options(std::move(options_in)),
      router(std::move(router_in)),
      access(options.access),
      authenticate(std::move(authenticate_in)),
      io(io_threads),
      // One tenant's blocking handlers take at most half of the threads.
      pool(io_threads, options.handler_threads, absl::Seconds(30), std::max(1, options.handler_threads / 2)),
      streams(std::make_shared<TenantStreams>(options.max_streams_per_tenant,
                                              absl::StrCat(options.settings_prefix, "max_streams_per_tenant"),
                                              options.handler_threads,
                                              absl::StrCat(options.settings_prefix, "handler_threads"))) {}

std::shared_ptr<void> ServerShared::ReserveBody(size_t n) {
  size_t used = body_bytes.load();
  do {
    if (used + n > options.max_body_bytes_in_flight) return nullptr;
  } while (!body_bytes.compare_exchange_weak(used, used + n));
  // Not null (a null shared_ptr reads as false: "not reserved"); owns
  // nothing, its deleter gives the bytes back.
  return std::shared_ptr<void>(static_cast<void*>(this), [this, n](void*) { body_bytes -= n; });
}

class HttpServer::Core {
 public:
  explicit Core(std::shared_ptr<ServerShared> shared)
      : shared_(std::move(shared)),
        acceptor_(net::make_strand(shared_->io)),
        retry_(acceptor_.get_executor()),
        work_(net::make_work_guard(shared_->io)) {}

  absl::Status Listen(const net::ip::tcp::endpoint& endpoint) {
    beast::error_code ec;
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return absl::UnavailableError(absl::StrCat("cannot listen on ", shared_->options.listen, " for the ",
                                                 shared_->options.name, " front: ", ec.message()));
    }
    port_ = acceptor_.local_endpoint().port();
    max_connections_ = FitToDescriptors(shared_->options.max_connections);
    return absl::OkStatus();
  }

  void Run(int io_threads) {
    Accept();
    absl::MutexLock lock(&mu_);
    for (int i = 0; i < io_threads; ++i) threads_.emplace_back([this] { shared_->io.run(); });
  }

  // Stops accepting and closes every connection; idempotent.
  void CloseAll() {
    bool first = false;
    {
      absl::MutexLock lock(&mu_);
      first = !closing_;
      closing_ = true;
    }
    if (first) {
      absl::Notification closed;
      net::dispatch(acceptor_.get_executor(), [this, &closed] {
        beast::error_code ignored;
        acceptor_.close(ignored);
        retry_.cancel();
        closed.Notify();
      });
      closed.WaitForNotification();
    }
    for (const std::shared_ptr<Connection>& c : shared_->table.All()) c->Close();
  }

  bool Drain(absl::Time deadline) {
    CloseAll();
    return shared_->pool.WaitIdle(deadline);
  }

  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      if (stopped_) return;
      stopped_ = true;
    }
    CloseAll();
    // Handlers see their writes fail and return; their last completions
    // still need the I/O threads, which run until every connection is gone.
    shared_->pool.Stop();
    // Late closes (a handler that started a WebSocket as Stop began).
    while (!shared_->table.WaitForAtMost(0, absl::Now() + absl::Seconds(1))) {
      for (const std::shared_ptr<Connection>& c : shared_->table.All()) c->Close();
    }
    work_.reset();
    shared_->io.stop();  // timers (WebSocket pings) of sockets already closed
    std::vector<std::thread> threads;
    {
      absl::MutexLock lock(&mu_);
      threads = std::move(threads_);
    }
    for (std::thread& t : threads) t.join();
  }

  int port() const { return port_; }
  int max_connections() const { return max_connections_; }
  ServerShared& shared() { return *shared_; }

 private:
  void Accept() {
    acceptor_.async_accept(net::make_strand(shared_->io),
                           [this](beast::error_code ec, net::ip::tcp::socket socket) { OnAccept(ec, std::move(socket)); });
  }

  void OnAccept(beast::error_code ec, net::ip::tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;  // stopping
    if (ec) {
      // Out of descriptors or memory: close the connection waiting longest
      // for a head, and try again shortly.
      if (std::shared_ptr<Connection> oldest = shared_->table.TakeOldestWaiting()) oldest->Close();
      retry_.expires_after(std::chrono::milliseconds(20));
      retry_.async_wait([this](beast::error_code wait) {
        if (!wait) Accept();
      });
      return;
    }
    if (shared_->table.size() >= max_connections_) {
      if (std::shared_ptr<Connection> oldest = shared_->table.TakeOldestWaiting()) {
        oldest->Close();  // a slowloris, or the longest idle keep-alive client
      } else {
        // Every connection is busy: an answer that fits any socket buffer;
        // a client that misses it sees the close, also an answer.
        static const std::string busy = [] {
          static constexpr absl::string_view kBody = "too many connections; try again in a moment\n";
          return absl::StrCat("HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: ",
                              kBody.size(), "\r\nConnection: close\r\n\r\n", kBody);
        }();
        (void)::send(socket.native_handle(), busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        Accept();
        return;
      }
    }
    // Streamed answers are many small writes: without TCP_NODELAY each
    // waits for the client's delayed ACK of the last (40 ms).
    socket.set_option(net::ip::tcp::no_delay(true), ec);
    auto connection = std::make_shared<Connection>(shared_, std::move(socket));
    connection->Start();
    Accept();
  }

  const std::shared_ptr<ServerShared> shared_;
  net::ip::tcp::acceptor acceptor_;  // on its own strand
  net::steady_timer retry_;
  net::executor_work_guard<net::io_context::executor_type> work_;
  int port_ = 0;
  int max_connections_ = 0;
  absl::Mutex mu_;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options,
                                                             std::shared_ptr<const Router> router,
                                                             Authenticate authenticate) {
  if (options.max_header_bytes < 256 || options.max_connections < 1 || options.max_connections > 1'000'000 ||
      options.head_timeout <= absl::ZeroDuration() || options.idle_timeout <= absl::ZeroDuration() ||
      options.io_timeout <= absl::ZeroDuration() || options.max_streams_per_tenant < 1 ||
      options.io_threads < 0 || options.handler_threads < 1) {
    return absl::InvalidArgumentError(
        "HTTP server options out of range: max_header_bytes >= 256, 1 <= max_connections <= 1000000, "
        "positive timeouts, max_streams_per_tenant >= 1, io_threads >= 0, handler_threads >= 1");
  }
  if (router == nullptr) return absl::InvalidArgumentError("the HTTP server needs a router");
  auto endpoint = ParseListen(options.listen);
  if (!endpoint.ok()) return endpoint.status();
  const int io_threads = IoThreads(options.io_threads);
  auto shared = std::make_shared<ServerShared>(std::move(options), std::move(router), std::move(authenticate),
                                               io_threads);
  auto core = std::make_shared<Core>(std::move(shared));
  if (absl::Status listening = core->Listen(*endpoint); !listening.ok()) return listening;
  core->Run(io_threads);
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(core)));
}

HttpServer::~HttpServer() { Stop(); }

int HttpServer::port() const { return core_->port(); }
int HttpServer::max_connections() const { return core_->max_connections(); }
int HttpServer::connections() const { return core_->shared().table.size(); }

bool HttpServer::WaitForConnectionsAtMost(int n, absl::Time deadline) const {
  return core_->shared().table.WaitForAtMost(n, deadline);
}

bool HttpServer::Drain(absl::Time deadline) { return core_->Drain(deadline); }

void HttpServer::Stop() { core_->Stop(); }

}  // namespace warden::http
