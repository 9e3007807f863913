// HttpServer under the load issue 20 names, over real TCP on loopback:
// thousands of half-sent heads (slowloris) and idle keep-alive connections
// beside a real client that must be served, the connection bound and which
// connection makes room at it, deadlines on reads and writes, per-tenant
// caps on long-lived streams, blocking handlers that leave the I/O threads
// free, and WebSockets that hold no thread.
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "boost/beast/websocket.hpp"
#include "fronts/http/exchange.h"
#include "fronts/http/server.h"
#include "fronts/http/testing/raw_socket.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace warden::http {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace websocket = boost::beast::websocket;
using ::testing::HasSubstr;
using testing::RaiseDescriptorLimit;
using testing::RawSocket;

// Waits, with a deadline, for a condition that other threads make true.
template <class Condition>
bool Eventually(Condition condition, absl::Duration timeout = absl::Seconds(30)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

int ProcessThreads() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

class HttpServerLimitsTest : public ::testing::Test {
 protected:
  void Start(HttpServerOptions options) {
    auto protocol = std::make_shared<Protocol>();
    protocol->name = "test";
    protocol->find_token = [](const Request& r) { return r.Header("X-Tenant"); };
    protocol->render_error = [](unsigned status, const absl::Status& error, const Request&) {
      return Response::Json(status, {{"error", {{"code", status}, {"message", std::string(error.message())}}}});
    };
    router_ = std::make_shared<Router>();
    router_->Add(protocol, "GET", "/public", [](Request&, Exchange& e) { return e.Send(Response::Text(200, "hi")); });
    router_->Add(protocol, "GET", "/quick", [](Request&, Exchange& e) { return e.Send(Response::Text(200, "quick")); },
                 {.nonblocking = true});
    router_->Add(protocol, "GET", "/block", [this](Request&, Exchange& e) {
      ++blocked_;
      release_.WaitForNotification();
      return e.Send(Response::Text(200, "released"));
    });
    router_->Add(protocol, "GET", "/big", [](Request&, Exchange& e) {
      return e.Send(Response::Text(200, std::string(64 << 20, 'x')));
    });
    router_->Add(protocol, "GET", "/flood", [this](Request&, Exchange& e) {
      auto stream = e.StartStream(200, "application/octet-stream");
      absl::Status written = stream.status();
      const std::string chunk(1 << 20, 'x');
      for (int i = 0; written.ok() && i < 64; ++i) written = (*stream)->Write(chunk);
      absl::MutexLock lock(&mu_);
      big_status_ = written;
      big_done_ = true;
      return absl::OkStatus();
    });
    router_->Add(protocol, "POST", "/echo",
                 [](Request& r, Exchange& e) { return e.Send(Response::Text(200, r.body())); });
    router_->Add(protocol, "GET", "/lines", [](Request&, Exchange& e) {
      auto stream = e.StartStream(200, "application/x-ndjson");
      if (!stream.ok()) return stream.status();
      return (*stream)->Write("{}\n");
    });
    // A stream that lasts until the test releases it (a background
    // command's events, a long cell's output).
    router_->Add(protocol, "GET", "/long", [this](Request&, Exchange& e) {
      auto stream = e.StartStream(200, "application/x-ndjson");
      if (!stream.ok()) return stream.status();
      if (absl::Status s = (*stream)->Write("{}\n"); !s.ok()) return s;
      release_.WaitForNotification();
      return (*stream)->Finish();
    });
    // A stream whose handler waits on its upstream (here: the test's
    // release) and hears of its client's departure through the Hangup.
    router_->Add(protocol, "GET", "/wait", [this](Request&, Exchange& e) {
      auto stream = e.StartStream(200, "application/x-ndjson");
      if (!stream.ok()) return stream.status();
      if (absl::Status s = (*stream)->Write("{}\n"); !s.ok()) return s;
      absl::Notification gone;
      auto subscription = Hangup::Subscribe((*stream)->hangup(), [&gone] { gone.Notify(); });
      const bool heard = gone.WaitForNotificationWithTimeout(absl::Seconds(60));
      absl::MutexLock lock(&mu_);
      hangups_ += heard ? 1 : 0;
      return absl::OkStatus();
    });
    router_->Add(protocol, "GET", "/ws", [](Request&, Exchange& e) {
      auto ws = e.AcceptWebSocket({});
      if (!ws.ok()) return ws.status();
      std::weak_ptr<WebSocket> weak = *ws;
      (*ws)->Start([weak](WebSocket::Message m) {
        if (auto socket = weak.lock()) (void)socket->Send(std::move(m));
      });
      return absl::OkStatus();
    });
    options.listen = "127.0.0.1:0";
    auto server = HttpServer::Start(options, router_, [](absl::string_view token) { return std::string(token); });
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  void TearDown() override {
    if (!release_.HasBeenNotified()) release_.Notify();
    if (server_) server_->Stop();
  }

  int port() const { return server_->port(); }

  // A real client: Beast, a fresh connection, one request.
  unsigned RealClientGet(const std::string& target, std::string* body = nullptr) {
    net::io_context io;
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(30));
    beast::error_code ec;
    stream.connect(net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port())),
                   ec);
    if (ec) return 0;
    bhttp::request<bhttp::empty_body> req{bhttp::verb::get, target, 11};
    req.set(bhttp::field::host, "127.0.0.1");
    req.keep_alive(false);
    bhttp::write(stream, req, ec);
    beast::flat_buffer buffer;
    bhttp::response<bhttp::string_body> res;
    bhttp::read(stream, buffer, res, ec);
    if (ec) return 0;
    if (body != nullptr) *body = res.body();
    return res.result_int();
  }

  std::shared_ptr<Router> router_;
  std::unique_ptr<HttpServer> server_;
  absl::Notification release_;
  std::atomic<int> blocked_{0};
  absl::Mutex mu_;
  absl::Status big_status_ ABSL_GUARDED_BY(mu_);
  bool big_done_ ABSL_GUARDED_BY(mu_) = false;
  int hangups_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST_F(HttpServerLimitsTest, ASlowlorisOfThousandsOfHalfSentHeadsLeavesARealClientServed) {
  RaiseDescriptorLimit();
  HttpServerOptions options;
  options.max_connections = 500;
  options.head_timeout = absl::Minutes(5);  // the bound, not the deadline, must save the real client
  Start(options);
  std::vector<std::unique_ptr<RawSocket>> slow;
  int served = 0, refused = 0;
  for (int i = 0; i < 3000; ++i) {
    auto s = std::make_unique<RawSocket>(port());
    ASSERT_TRUE(s->ok()) << i;
    ASSERT_TRUE(s->Send("GET /public HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "));
    slow.push_back(std::move(s));
    if (i % 500 == 499) (RealClientGet("/public") == 200 ? served : refused)++;
  }
  // The real client beside them was served every time.
  EXPECT_EQ(served, 6);
  EXPECT_EQ(refused, 0);
  // The server held at most its bound, closing the heads that waited longest.
  EXPECT_LE(server_->connections(), 501);
  int closed = 0;
  EXPECT_TRUE(Eventually([&] {
    closed = 0;
    for (const auto& s : slow) closed += s->ClosedByServer() ? 1 : 0;
    return closed >= 2500;
  })) << closed << " of 3000 half-sent heads closed";
  // The oldest went first: the last ones sent are still open.
  EXPECT_FALSE(slow.back()->ClosedByServer());
  EXPECT_TRUE(slow.front()->ClosedByServer());
}

TEST_F(HttpServerLimitsTest, IdleConnectionsAreHeldUntilTheIdleTimeoutAndARealClientIsServedBeside) {
  RaiseDescriptorLimit();
  HttpServerOptions options;
  options.idle_timeout = absl::Seconds(2);
  options.head_timeout = absl::Seconds(1);
  Start(options);
  std::vector<std::unique_ptr<RawSocket>> idle;
  for (int i = 0; i < 2000; ++i) {
    auto s = std::make_unique<RawSocket>(port());
    ASSERT_TRUE(s->ok()) << i;
    ASSERT_TRUE(s->Send("GET /public HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    ASSERT_THAT(s->ReadResponse(), ::testing::StartsWith("HTTP/1.1 200 OK")) << i;
    idle.push_back(std::move(s));
  }
  const absl::Time answered = absl::Now();
  // Held: every one is still open, and a real client is served beside them.
  EXPECT_GE(server_->connections(), 2000);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(RealClientGet("/public"), 200u);
  int open = 0;
  for (const auto& s : idle) open += s->ClosedByServer() ? 0 : 1;
  if (absl::Now() - answered < absl::Seconds(1)) {
    EXPECT_EQ(open, 2000);
  }
  // Closed once idle for the idle timeout, every one.
  EXPECT_TRUE(Eventually([&] {
    for (const auto& s : idle) {
      if (!s->ClosedByServer()) return false;
    }
    return true;
  }));
  EXPECT_GE(absl::Now() - answered, absl::Seconds(1));
  EXPECT_TRUE(server_->WaitForConnectionsAtMost(0, absl::Now() + absl::Seconds(10)));
  // A fresh connection that never sends a head lasts the head deadline only.
  RawSocket silent(port());
  const absl::Time start = absl::Now();
  EXPECT_EQ(silent.ReadToClose(), "");
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(900));
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
}

TEST_F(HttpServerLimitsTest, AtTheBoundTheConnectionWaitingLongestForAHeadIsClosedFirst) {
  HttpServerOptions options;
  options.max_connections = 3;
  Start(options);
  RawSocket a(port());
  ASSERT_TRUE(Eventually([&] { return server_->connections() == 1; }));
  RawSocket b(port());
  ASSERT_TRUE(b.Send("GET /public HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half:"));
  ASSERT_TRUE(Eventually([&] { return server_->connections() == 2; }));
  RawSocket busy(port());
  ASSERT_TRUE(busy.Send("GET /block HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  ASSERT_TRUE(Eventually([&] { return blocked_ == 1; }));
  // Full: a new client makes room by closing `a`, which waited longest.
  EXPECT_EQ(RealClientGet("/public"), 200u);
  EXPECT_TRUE(Eventually([&] { return a.ClosedByServer(); }, absl::Seconds(5)));
  EXPECT_FALSE(b.ClosedByServer());
  // Full again with `c`: then `b` goes, older than `c`; the busy connection
  // is never the one closed.
  ASSERT_TRUE(server_->WaitForConnectionsAtMost(2, absl::Now() + absl::Seconds(10)));
  RawSocket c(port());
  ASSERT_TRUE(Eventually([&] { return server_->connections() == 3; }));
  EXPECT_EQ(RealClientGet("/public"), 200u);
  EXPECT_TRUE(Eventually([&] { return b.ClosedByServer(); }, absl::Seconds(5)));
  EXPECT_FALSE(c.ClosedByServer());
  release_.Notify();
  EXPECT_THAT(busy.ReadResponse(), ::testing::StartsWith("HTTP/1.1 200 OK"));
}

TEST_F(HttpServerLimitsTest, WhenEveryConnectionIsBusyOneMoreIsAnswered503) {
  HttpServerOptions options;
  options.max_connections = 2;
  Start(options);
  RawSocket first(port()), second(port());
  ASSERT_TRUE(first.Send("GET /block HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  ASSERT_TRUE(second.Send("GET /block HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  ASSERT_TRUE(Eventually([&] { return blocked_ == 2; }));
  RawSocket third(port());
  const std::string over = third.ReadToClose();
  EXPECT_THAT(over, ::testing::StartsWith("HTTP/1.1 503"));
  EXPECT_THAT(over, HasSubstr("too many connections"));
  release_.Notify();
  EXPECT_THAT(first.ReadResponse(), ::testing::StartsWith("HTTP/1.1 200 OK"));
  EXPECT_THAT(second.ReadResponse(), ::testing::StartsWith("HTTP/1.1 200 OK"));
}

TEST_F(HttpServerLimitsTest, EveryBodyReadAndEveryWriteHasADeadline) {
  HttpServerOptions options;
  options.io_timeout = absl::Milliseconds(500);
  options.max_body_bytes = 1024;
  Start(options);
  // A body that stops coming: the connection is closed, not held.
  RawSocket stalled(port());
  ASSERT_TRUE(stalled.Send("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n0123456789"));
  const absl::Time start = absl::Now();
  EXPECT_EQ(stalled.ReadToClose(), "");
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  // A client that stops reading an answer loses the connection at the
  // write's deadline...
  const int small = 4096;
  {
    RawSocket deaf(port());
    ASSERT_EQ(setsockopt(deaf.fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
    ASSERT_TRUE(deaf.Send("GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    EXPECT_TRUE(server_->WaitForConnectionsAtMost(0, absl::Now() + absl::Seconds(20)));
  }
  // ...and a handler streaming to it hears of it from its Write.
  RawSocket deaf(port());
  ASSERT_EQ(setsockopt(deaf.fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
  ASSERT_TRUE(deaf.Send("GET /flood HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  {
    absl::MutexLock lock(&mu_);
    EXPECT_TRUE(mu_.AwaitWithTimeout(absl::Condition(&big_done_), absl::Seconds(30)));
    EXPECT_EQ(big_status_.code(), absl::StatusCode::kUnavailable) << big_status_;
  }
  EXPECT_TRUE(server_->WaitForConnectionsAtMost(0, absl::Now() + absl::Seconds(20)));
  EXPECT_EQ(RealClientGet("/public"), 200u);
}

// A WebSocket handshake to /ws as `tenant`; the status line's code.
unsigned Handshake(int port, const std::string& tenant, websocket::stream<beast::tcp_stream>& ws) {
  beast::get_lowest_layer(ws).connect(
      net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
  ws.set_option(websocket::stream_base::decorator([tenant](websocket::request_type& req) {
    req.set("X-Tenant", tenant);
  }));
  beast::error_code ec;
  ws.handshake("127.0.0.1", "/ws", ec);
  return ec ? 0 : 101;
}

TEST_F(HttpServerLimitsTest, ATenantAtItsStreamCapGetsAClearErrorAndOtherTenantsAreServed) {
  HttpServerOptions options;
  options.max_streams_per_tenant = 2;
  Start(options);
  net::io_context io;
  std::vector<std::unique_ptr<websocket::stream<beast::tcp_stream>>> acme;
  for (int i = 0; i < 2; ++i) {
    acme.push_back(std::make_unique<websocket::stream<beast::tcp_stream>>(io));
    ASSERT_EQ(Handshake(port(), "acme", *acme.back()), 101u);
  }
  // A third WebSocket, or an event stream: refused, saying which setting.
  RawSocket third(port());
  ASSERT_TRUE(third.Send("GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Tenant: acme\r\nConnection: Upgrade\r\n"
                         "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"));
  const std::string refused = third.ReadToClose();
  EXPECT_THAT(refused, ::testing::StartsWith("HTTP/1.1 429"));
  EXPECT_THAT(refused, HasSubstr("http.max_streams_per_tenant"));
  RawSocket lines(port());
  ASSERT_TRUE(lines.Send("GET /lines HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Tenant: acme\r\n\r\n"));
  EXPECT_THAT(lines.ReadResponse(), ::testing::StartsWith("HTTP/1.1 429"));
  // Another tenant is not affected.
  websocket::stream<beast::tcp_stream> other(io);
  EXPECT_EQ(Handshake(port(), "other", other), 101u);
  // Once acme closes one, it may open one again.
  acme.front()->close(websocket::close_code::normal);
  EXPECT_TRUE(Eventually([&] {
    websocket::stream<beast::tcp_stream> again(io);
    return Handshake(port(), "acme", again) == 101;
  }));
}

// However many tenants stream, their streams hold at most half of the
// handler threads: the rest serve everyone's ordinary requests.
TEST_F(HttpServerLimitsTest, StreamsOfManyTenantsHoldAtMostHalfTheHandlerThreads) {
  HttpServerOptions options;
  options.handler_threads = 4;
  Start(options);
  std::vector<std::unique_ptr<RawSocket>> streams;
  for (const char* tenant : {"a", "b"}) {
    streams.push_back(std::make_unique<RawSocket>(port()));
    ASSERT_TRUE(streams.back()->Send(absl::StrCat("GET /long HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Tenant: ", tenant,
                                                  "\r\n\r\n")));
  }
  // Both streaming (each under its own tenant's cap).
  for (const auto& s : streams) EXPECT_THAT(s->ReadUntil("{}\n"), ::testing::StartsWith("HTTP/1.1 200 OK"));
  // A third tenant's stream is refused, saying what to raise...
  RawSocket third(port());
  ASSERT_TRUE(third.Send("GET /long HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Tenant: c\r\n\r\n"));
  const std::string refused = third.ReadResponse();
  EXPECT_THAT(refused, ::testing::StartsWith("HTTP/1.1 503"));
  EXPECT_THAT(refused, HasSubstr("http.handler_threads"));
  // ...while requests that block a thread, but not for a stream, are served.
  RawSocket one(port()), two(port());
  for (RawSocket* s : {&one, &two}) {
    ASSERT_TRUE(s->Send("GET /block HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Tenant: c\r\n\r\n"));
  }
  ASSERT_TRUE(Eventually([&] { return blocked_ == 2; }));
  release_.Notify();
  for (RawSocket* s : {&one, &two}) EXPECT_THAT(s->ReadResponse(), HasSubstr("released"));
}

TEST_F(HttpServerLimitsTest, BlockingHandlersLeaveTheIoThreadsFree) {
  HttpServerOptions options;
  options.io_threads = 1;
  options.handler_threads = 2;
  Start(options);
  // Every handler thread blocked (each tenant holds at most half of them),
  // and one more request waiting for a thread.
  RawSocket one(port()), two(port()), three(port());
  const char* tenants[] = {"x", "y", "z"};
  int i = 0;
  for (RawSocket* s : {&one, &two, &three}) {
    ASSERT_TRUE(s->Send(absl::StrCat("GET /block HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Tenant: ", tenants[i++], "\r\n\r\n")));
  }
  ASSERT_TRUE(Eventually([&] { return blocked_ == 2; }));
  // The one I/O thread still reads, routes and answers what never blocks.
  EXPECT_EQ(RealClientGet("/quick"), 200u);
  RawSocket half(port());
  ASSERT_TRUE(half.Send("GET /quick HTTP/1.1\r\nHost: 127.0.0.1\r\n"));
  ASSERT_TRUE(half.Send("\r\n"));
  EXPECT_THAT(half.ReadResponse(), ::testing::StartsWith("HTTP/1.1 200 OK"));
  release_.Notify();
  for (RawSocket* s : {&one, &two, &three}) EXPECT_THAT(s->ReadResponse(), HasSubstr("released"));
}

TEST_F(HttpServerLimitsTest, AThousandOpenWebSocketsHoldNoThreadEach) {
  RaiseDescriptorLimit();
  HttpServerOptions options;
  options.max_streams_per_tenant = 2000;
  Start(options);
  const int threads_before = ProcessThreads();
  net::io_context io;
  std::vector<std::unique_ptr<websocket::stream<beast::tcp_stream>>> sockets;
  for (int i = 0; i < 1000; ++i) {
    sockets.push_back(std::make_unique<websocket::stream<beast::tcp_stream>>(io));
    ASSERT_EQ(Handshake(port(), "t", *sockets.back()), 101u) << i;
  }
  EXPECT_GE(server_->connections(), 1000);
  // Every one of them answers, all open at once.
  for (int i = 0; i < 1000; ++i) {
    auto& ws = *sockets[i];
    ws.write(net::buffer(absl::StrCat("m", i)));
    beast::flat_buffer buffer;
    ws.read(buffer);
    ASSERT_EQ(beast::buffers_to_string(buffer.data()), absl::StrCat("m", i));
  }
  const int threads_open = ProcessThreads();
  EXPECT_LT(threads_open - threads_before, 40) << "threads before " << threads_before << ", with 1,000 open "
                                                << threads_open;
  for (auto& ws : sockets) ws->close(websocket::close_code::normal);
  EXPECT_TRUE(server_->WaitForConnectionsAtMost(0, absl::Now() + absl::Seconds(30)));
}


// A streaming client that closes its connection is noticed then, not at
// the stream's next write: the handler waiting on its upstream is woken
// (Hangup), and its thread and its stream are the tenant's again at once.
TEST_F(HttpServerLimitsTest, AStreamingClientThatLeavesIsNoticedWhenItsConnectionCloses) {
  HttpServerOptions options;
  options.max_streams_per_tenant = 4;
  Start(options);
  for (int round = 0; round < 3; ++round) {
    std::vector<std::unique_ptr<RawSocket>> clients;
    for (int i = 0; i < 4; ++i) {
      clients.push_back(std::make_unique<RawSocket>(port()));
      ASSERT_TRUE(clients.back()->Send("GET /wait HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Tenant: acme\r\n\r\n"));
      ASSERT_THAT(clients.back()->ReadUntil("{}\n"), ::testing::StartsWith("HTTP/1.1 200 OK")) << round;
    }
    const absl::Time left = absl::Now();
    clients.clear();  // all four leave at once
    // Long before any write could have told (the handlers write nothing
    // more): every handler has heard and returned, every stream is free.
    ASSERT_TRUE(Eventually([&] {
      absl::MutexLock lock(&mu_);
      return hangups_ == 4 * (round + 1);
    }, absl::Seconds(10)));
    ASSERT_TRUE(server_->WaitForConnectionsAtMost(0, absl::Now() + absl::Seconds(10)));
    EXPECT_LT(absl::Now() - left, absl::Seconds(5));
  }
  // And the tenant may open its four again.
  EXPECT_EQ(RealClientGet("/lines"), 200u);
}

// Of the threads streams may hold, one tenant takes at most half of those
// free: a tenant at its share is told 429, and the next still gets in.
TEST_F(HttpServerLimitsTest, OneTenantsStreamsLeaveRoomForTheNextTenantsStreams) {
  HttpServerOptions options;
  options.handler_threads = 16;  // streams hold at most 8 threads
  Start(options);
  std::vector<std::unique_ptr<RawSocket>> streams;
  auto open = [&](const std::string& tenant) {
    streams.push_back(std::make_unique<RawSocket>(port()));
    EXPECT_TRUE(streams.back()->Send(absl::StrCat("GET /long HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Tenant: ", tenant,
                                                  "\r\n\r\n")));
    return streams.back()->ReadUntil("\r\n\r\n");
  };
  // The greedy one: 4 of the 8 (each time at most half of those free).
  for (int i = 0; i < 4; ++i) EXPECT_THAT(open("greedy"), ::testing::StartsWith("HTTP/1.1 200 OK")) << i;
  RawSocket fifth(port());
  ASSERT_TRUE(fifth.Send("GET /long HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Tenant: greedy\r\n\r\n"));
  const std::string refused = fifth.ReadResponse();
  EXPECT_THAT(refused, ::testing::StartsWith("HTTP/1.1 429"));
  EXPECT_THAT(refused, HasSubstr("http.handler_threads"));
  // Another tenant gets in, and a third after it.
  EXPECT_THAT(open("other"), ::testing::StartsWith("HTTP/1.1 200 OK"));
  EXPECT_THAT(open("other"), ::testing::StartsWith("HTTP/1.1 200 OK"));
  EXPECT_THAT(open("third"), ::testing::StartsWith("HTTP/1.1 200 OK"));
  // Ordinary requests are served all along.
  EXPECT_EQ(RealClientGet("/public"), 200u);
}


// Request bodies held at once are bounded all together: one more is 503
// before it is read, and a body given back makes room again.
TEST_F(HttpServerLimitsTest, BodiesHeldAtOnceAreBoundedAllTogether) {
  HttpServerOptions options;
  options.max_body_bytes = 1 << 20;
  options.max_body_bytes_in_flight = 1 << 20;
  Start(options);
  const std::string body(600 << 10, 'b');
  // The first body comes slowly: its bytes are counted from its head on.
  RawSocket slow(port());
  ASSERT_TRUE(slow.Send(absl::StrCat("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: ", body.size(),
                                     "\r\n\r\n", body.substr(0, 1000))));
  absl::SleepFor(absl::Milliseconds(200));
  RawSocket second(port());
  ASSERT_TRUE(second.Send(absl::StrCat("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: ", body.size(),
                                       "\r\n\r\n")));
  const std::string refused = second.ReadResponse();
  EXPECT_THAT(refused, ::testing::StartsWith("HTTP/1.1 503"));
  EXPECT_THAT(refused, HasSubstr("request bodies"));
  ASSERT_TRUE(slow.Send(body.substr(1000)));
  EXPECT_THAT(slow.ReadResponse(), ::testing::StartsWith("HTTP/1.1 200 OK"));
  // Answered: its bytes are given back.
  EXPECT_TRUE(Eventually([&] {
    RawSocket third(port());
    third.Send(absl::StrCat("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: ",
                            body.size(), "\r\n\r\n", body));
    return absl::StartsWith(third.ReadResponse(), "HTTP/1.1 200 OK");
  }));
}

}  // namespace
}  // namespace warden::http
