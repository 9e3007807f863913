// The admin endpoints on the HTTP front, over real TCP on loopback, driven
// by plain blocking sockets. Also the HTTP server's own behaviour towards
// misbehaving clients (bounds, deadlines, the connection cap, Stop).
#include "fronts/admin/admin_front.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sandbox/unique_fd.h"
#include "fronts/http/server.h"

namespace warden::fronts {
namespace {

using http::HttpServer;
using http::HttpServerOptions;

using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// A safety net so a broken server fails a test instead of hanging it; no
// test waits for this to expire.
constexpr int kClientTimeoutSeconds = 20;

UniqueFd Connect(int port, int family = AF_INET) {
  UniqueFd fd(socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EXPECT_TRUE(fd.valid()) << strerror(errno);
  timeval tv = {kClientTimeoutSeconds, 0};
  setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  int rc;
  if (family == AF_INET6) {
    sockaddr_in6 addr = {};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_loopback;
    addr.sin6_port = htons(port);
    rc = connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  } else {
    sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    rc = connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  }
  if (rc != 0) {
    ADD_FAILURE() << "connect: " << strerror(errno);
    return UniqueFd();
  }
  return fd;
}

void SendAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    ASSERT_GT(n, 0) << strerror(errno);
    data.remove_prefix(n);
  }
}

// Everything up to EOF. `reset` is set if the connection ended in an error.
std::string ReadToEof(int fd, bool* reset = nullptr) {
  std::string out;
  char buf[65536];
  while (true) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      EXPECT_NE(errno, EAGAIN) << "the server neither answered nor closed";
      if (reset != nullptr) *reset = true;
      return out;
    }
    if (n == 0) return out;
    out.append(buf, n);
  }
}

struct Reply {
  int code = 0;  // 0: closed without a (complete) status line
  std::string head;
  std::string body;
};

Reply ParseReply(const std::string& raw) {
  Reply reply;
  const size_t end = raw.find("\r\n\r\n");
  if (end == std::string::npos) return reply;
  reply.head = raw.substr(0, end + 2);
  reply.body = raw.substr(end + 4);
  if (raw.rfind("HTTP/1.1 ", 0) == 0) {
    (void)absl::SimpleAtoi(raw.substr(9, 3), &reply.code);
  }
  return reply;
}

Reply Exchange(int port, absl::string_view request) {
  UniqueFd fd = Connect(port);
  if (!fd) return {};
  SendAll(fd.get(), request);
  return ParseReply(ReadToEof(fd.get()));
}

Reply Get(int port, absl::string_view path) {
  return Exchange(port, absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: localhost\r\n\r\n"));
}

// A server with only the admin routes; `metrics_` is the page /metrics serves.
absl::StatusOr<std::unique_ptr<HttpServer>> StartAdmin(HttpServerOptions options,
                                                       std::function<std::string()> metrics = nullptr,
                                                       std::function<absl::Status()> readiness = nullptr) {
  auto router = std::make_shared<http::Router>();
  AddAdminRoutes(*router, {std::move(metrics), std::move(readiness)});
  options.name = "admin";
  return HttpServer::Start(options, router, [](absl::string_view) { return std::string("default"); });
}

HttpServerOptions Loopback() {
  HttpServerOptions options;
  options.listen = "127.0.0.1:0";
  // As on wardend's admin_listen: probes name the port as they reach it.
  options.access.check_host = false;
  return options;
}

class AdminHttpServerTest : public ::testing::Test {
 protected:
  void StartServer(HttpServerOptions options = Loopback()) {
    options.max_header_bytes = 8 * 1024;
    auto server = StartAdmin(
        options,
        [this] {
          absl::MutexLock lock(&mu_);
          return metrics_;
        },
        [this]() -> absl::Status {
          if (ready_) return absl::OkStatus();
          return absl::UnavailableError("warm pool python: 0 of 2 workers ready");
        });
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    port_ = server_->port();
    ASSERT_GT(port_, 0);
  }

  void SetMetrics(std::string page) {
    absl::MutexLock lock(&mu_);
    metrics_ = std::move(page);
  }

  void SetUp() override { StartServer(); }

  absl::Mutex mu_;
  std::string metrics_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> ready_{false};
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

TEST_F(AdminHttpServerTest, ServesTheMetricsPage) {
  SetMetrics("# TYPE warden_runs_total counter\nwarden_runs_total{language=\"python\"} 1\n");

  const Reply reply = Get(port_, "/metrics");
  EXPECT_EQ(reply.code, 200);
  EXPECT_THAT(reply.head, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_THAT(reply.head, HasSubstr("Connection: close\r\n"));
  EXPECT_THAT(reply.head, HasSubstr(absl::StrCat("Content-Length: ", reply.body.size(), "\r\n")));
  EXPECT_THAT(reply.body, HasSubstr("# TYPE warden_runs_total counter\n"));
  EXPECT_THAT(reply.body, HasSubstr("warden_runs_total{language=\"python\"} 1\n"));
}

TEST_F(AdminHttpServerTest, SendsAMetricsBodyLargerThanTheSocketBuffers) {
  std::string expected;
  for (int i = 0; i < 40'000; ++i) absl::StrAppend(&expected, "big{series=\"", i, "\"} ", i, "\n");
  ASSERT_GT(expected.size(), 512u << 10);
  SetMetrics(expected);

  const Reply reply = Get(port_, "/metrics");
  EXPECT_EQ(reply.code, 200);
  EXPECT_EQ(reply.body, expected);
}

TEST_F(AdminHttpServerTest, HealthzAnswersOk) {
  const Reply reply = Get(port_, "/healthz");
  EXPECT_EQ(reply.code, 200);
  EXPECT_EQ(reply.body, "ok\n");
}

TEST_F(AdminHttpServerTest, ReadyzIs503WithTheReasonUntilTheCheckPasses) {
  Reply reply = Get(port_, "/readyz");
  EXPECT_EQ(reply.code, 503);
  EXPECT_THAT(reply.body, HasSubstr("warm pool python: 0 of 2 workers ready"));

  ready_ = true;
  reply = Get(port_, "/readyz");
  EXPECT_EQ(reply.code, 200);
  EXPECT_EQ(reply.body, "ready\n");
}

TEST_F(AdminHttpServerTest, HeadSendsHeadersWithoutTheBody) {
  const Reply reply = Exchange(port_, "HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(reply.code, 200);
  EXPECT_THAT(reply.head, HasSubstr("Content-Length: 3\r\n"));
  EXPECT_EQ(reply.body, "");
}

TEST_F(AdminHttpServerTest, IgnoresTheQueryStringAndAcceptsHttp10) {
  EXPECT_EQ(Exchange(port_, "GET /healthz?verbose=1 HTTP/1.0\r\n\r\n").code, 200);
  EXPECT_EQ(Exchange(port_, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").code, 200);
}

TEST_F(AdminHttpServerTest, UnknownPathIs404) {
  EXPECT_EQ(Get(port_, "/").code, 404);
  EXPECT_EQ(Get(port_, "/metrics/extra").code, 404);
  EXPECT_EQ(Get(port_, "/healthz/").code, 404);
}

TEST_F(AdminHttpServerTest, OtherMethodsAre405WithAllow) {
  for (const char* method : {"POST", "PUT", "DELETE", "OPTIONS", "get"}) {
    const Reply reply = Exchange(
        port_, absl::StrCat(method, " /metrics HTTP/1.1\r\nContent-Length: 4\r\n\r\nbody"));
    EXPECT_EQ(reply.code, 405) << method;
    EXPECT_THAT(reply.head, HasSubstr("Allow: GET, HEAD\r\n")) << method;
  }
}

// (Obsolete line folding is not among them: Beast's parser replaces it with a
// space, which RFC 9112 5.2 allows a server to do instead of refusing.)
TEST_F(AdminHttpServerTest, MalformedRequestsAre400) {
  for (const char* request : {
           "GARBAGE\r\n\r\n",
           "GET /metrics\r\n\r\n",                              // HTTP/0.9
           "GET  /metrics HTTP/1.1\r\n\r\n",                    // two spaces
           "GET metrics HTTP/1.1\r\n\r\n",                      // not an absolute path
           "GET http://x/metrics HTTP/1.1\r\n\r\n",             // absolute form
           "GET /metrics HTTP/2.0\r\n\r\n",                     // not HTTP/1.x
           "GET /metrics HTTP/1.1\r\nNoColon\r\n\r\n",          // header without ':'
           "GET /metrics HTTP/1.1\r\nBad Name: x\r\n\r\n",      // space in field name
           "G(T /metrics HTTP/1.1\r\n\r\n",                     // not a token
           "GET /healthz HTTP/1.1\nHost: x\n\n",                // bare line feeds
       }) {
    const Reply reply = Exchange(port_, request);
    EXPECT_EQ(reply.code, 400) << request;
    EXPECT_THAT(reply.body, StartsWith("bad request: ")) << request;
  }
}

TEST_F(AdminHttpServerTest, OversizedRequestHeadIs431) {
  UniqueFd fd = Connect(port_);
  ASSERT_TRUE(fd.valid());
  // 16 KiB of headers and no blank line: the server answers once it has 8 KiB.
  std::string request = "GET /metrics HTTP/1.1\r\n";
  while (request.size() < 16 * 1024) request += "X-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
  SendAll(fd.get(), request);
  bool reset = false;
  const Reply reply = ParseReply(ReadToEof(fd.get(), &reset));
  EXPECT_FALSE(reset) << "the server should drain, not reset, so the client gets the answer";
  EXPECT_EQ(reply.code, 431);
}

TEST_F(AdminHttpServerTest, ASilentClientDoesNotBlockOthers) {
  UniqueFd silent = Connect(port_);
  ASSERT_TRUE(silent.valid());
  UniqueFd half = Connect(port_);
  ASSERT_TRUE(half.valid());
  SendAll(half.get(), "GET /healthz HTTP/1.1\r\nHost:");

  EXPECT_EQ(Get(port_, "/healthz").code, 200);
  EXPECT_EQ(Get(port_, "/metrics").code, 200);

  // The half-sent request is still served once it is finished.
  SendAll(half.get(), " x\r\n\r\n");
  EXPECT_EQ(ParseReply(ReadToEof(half.get())).code, 200);
}

TEST(AdminHttpServerTimeoutTest, ClosesAConnectionThatOutlivesTheRequestTimeout) {
  HttpServerOptions options = Loopback();
  options.head_timeout = absl::Milliseconds(200);
  auto server = StartAdmin(options);
  ASSERT_TRUE(server.ok()) << server.status();

  UniqueFd silent = Connect((*server)->port());
  ASSERT_TRUE(silent.valid());
  const auto start = std::chrono::steady_clock::now();
  bool reset = false;
  EXPECT_EQ(ReadToEof(silent.get(), &reset), "");  // blocks until the server closes
  EXPECT_FALSE(reset);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(190));
}

TEST(AdminHttpServerCapTest, AtTheCapTheConnectionWaitingLongestForAHeadMakesRoom) {
  HttpServerOptions options = Loopback();
  options.max_connections = 2;
  auto server = StartAdmin(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();

  UniqueFd first = Connect(port);
  ASSERT_TRUE(first.valid());
  // Accepted in order, so `first` has waited longest once the cap is met.
  EXPECT_EQ(Get(port, "/healthz").code, 200);
  ASSERT_TRUE((*server)->WaitForConnectionsAtMost(1, absl::Now() + absl::Seconds(10)));  // that one has gone
  UniqueFd second = Connect(port);
  ASSERT_TRUE(second.valid());
  UniqueFd third = Connect(port);
  ASSERT_TRUE(third.valid());
  SendAll(third.get(), "GET /healthz HTTP/1.1\r\n\r\n");
  EXPECT_EQ(ParseReply(ReadToEof(third.get())).code, 200);
  EXPECT_EQ(ReadToEof(first.get()), "") << "the oldest silent connection made room";

  // The one still waiting is served once it asks.
  SendAll(second.get(), "GET /healthz HTTP/1.1\r\n\r\n");
  EXPECT_EQ(ParseReply(ReadToEof(second.get())).code, 200);
}

TEST(AdminHttpServerStopTest, StopReturnsPromptlyWithIdleClientsAndRefusesNewOnes) {
  HttpServerOptions options = Loopback();
  options.head_timeout = absl::Minutes(10);
  auto server = StartAdmin(options);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();

  UniqueFd idle = Connect(port);
  ASSERT_TRUE(idle.valid());
  EXPECT_EQ(Get(port, "/healthz").code, 200);  // `idle` has been accepted by now

  const auto start = std::chrono::steady_clock::now();
  (*server)->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(ReadToEof(idle.get()), "");  // closed by Stop, not by a timeout

  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  EXPECT_NE(connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_EQ(errno, ECONNREFUSED);

  (*server)->Stop();  // idempotent; the destructor calls it a third time
}

TEST(AdminHttpServerListenTest, ReportsAPortInUseClearly) {
  HttpServerOptions options = Loopback();
  auto first = StartAdmin(options);
  ASSERT_TRUE(first.ok()) << first.status();

  options.listen = absl::StrCat("127.0.0.1:", (*first)->port());
  auto second = StartAdmin(options);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().message(), absl::StrCat("cannot listen on 127.0.0.1:", (*first)->port(),
                                                    " for the admin front: Address already in use"));
}

TEST(AdminHttpServerListenTest, RejectsMalformedListenAddresses) {
  for (const char* listen :
       {"", "9464", "127.0.0.1", "127.0.0.1:", "127.0.0.1:http", "127.0.0.1:65536", "127.0.0.1:-1",
        "::1:9464", "[::1:9464", "[nonsense]:9464", "example.com:9464", ":9464"}) {
    HttpServerOptions options;
    options.listen = listen;
    auto server = StartAdmin(options);
    ASSERT_FALSE(server.ok()) << listen;
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument) << listen;
    EXPECT_THAT(server.status().message(), HasSubstr("HOST:PORT")) << listen;
  }
}

TEST(AdminHttpServerListenTest, ListensOnLocalhost) {
  HttpServerOptions options;
  options.listen = "localhost:0";
  auto server = StartAdmin(options);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(Get((*server)->port(), "/healthz").code, 200);
}

TEST(AdminHttpServerListenTest, ListensOnIpv6Loopback) {
  UniqueFd probe(socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in6 addr = {};
  addr.sin6_family = AF_INET6;
  addr.sin6_addr = in6addr_loopback;
  // Debian 12 hosts (and CI) have IPv6 loopback; without it this test fails
  // rather than pretend to pass.
  ASSERT_TRUE(probe && bind(probe.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0)
      << "no IPv6 loopback on this host";
  probe.Reset();

  HttpServerOptions options;
  options.listen = "[::1]:0";
  auto server = StartAdmin(options);
  ASSERT_TRUE(server.ok()) << server.status();
  UniqueFd fd = Connect((*server)->port(), AF_INET6);
  ASSERT_TRUE(fd.valid());
  SendAll(fd.get(), "GET /healthz HTTP/1.1\r\n\r\n");
  EXPECT_EQ(ParseReply(ReadToEof(fd.get())).code, 200);
}

TEST(AdminHttpServerListenTest, RejectsUnusableOptions) {
  HttpServerOptions options = Loopback();
  options.max_connections = 0;
  EXPECT_EQ(StartAdmin(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace warden::fronts
