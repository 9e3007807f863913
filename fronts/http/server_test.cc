// HttpServer over real TCP on loopback, with Beast as the client: bounded
// bodies, malformed requests, authentication, errors in each protocol's
// shape, chunked streaming and the WebSocket handshake. The server must
// keep serving after every bad request.
#include "fronts/http/server.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "boost/asio/connect.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/read.hpp"
#include "boost/asio/write.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "boost/beast/websocket.hpp"
#include "fronts/http/credentials.h"
#include "fronts/http/exchange.h"
#include "fronts/http/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace warden::http {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace websocket = boost::beast::websocket;
using ::testing::HasSubstr;
using nlohmann::json;

constexpr char kToken[] = "tok-0123456789abcdef";

// A front speaking JSON errors {"error": {"code": N, "message": M}}, with
// the credential in X-API-KEY.
std::shared_ptr<Protocol> JsonProtocol() {
  auto p = std::make_shared<Protocol>();
  p->name = "test";
  p->cors_request_headers = {"X-API-KEY", "Content-Type"};
  p->cors_expose_headers = {"Location"};
  p->find_token = [](const Request& r) { return HeaderToken(r, "X-API-KEY"); };
  p->render_error = [](unsigned status, const absl::Status& error, const Request&) {
    return Response::Json(status, {{"error", {{"code", status}, {"message", std::string(error.message())}}}});
  };
  return p;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto router = std::make_shared<Router>();
    auto protocol = JsonProtocol();
    router->Add(protocol, "POST", "/echo", [this](Request& r, Exchange& e) {
      ++echoes_;
      return e.Send(Response::Json(200, {{"body", r.body()}, {"tenant", r.tenant}}));
    });
    router->Add(protocol, "GET", "/things/{id}", [](Request& r, Exchange& e) {
      if (r.Param("id") == "missing") return absl::NotFoundError("no thing 'missing'");
      return e.Send(Response::Json(200, {{"id", r.Param("id")}, {"q", r.Query("q")}}));
    });
    router->Add(protocol, "POST", "/busy", [](Request& r, Exchange& e) {
      return absl::ResourceExhaustedError(absl::StrCat("40 requests wait ahead of yours; retry in about ", r.body(),
                                                       " ms"));
    });
    router->Add(protocol, "GET", "/lines", [](Request& r, Exchange& e) {
      auto stream = e.StartStream(200, "application/x-ndjson");
      if (!stream.ok()) return stream.status();
      for (int i = 0; i < 3; ++i) {
        if (auto s = (*stream)->Write(json({{"n", i}}).dump() + "\n"); !s.ok()) return s;
      }
      return (*stream)->Finish();
    });
    router->Add(protocol, "GET", "/ws", [](Request& r, Exchange& e) {
      auto ws = e.AcceptWebSocket({"v1.kernel.websocket.jupyter.org"});
      if (!ws.ok()) return ws.status();
      std::shared_ptr<WebSocket> socket = *ws;
      return socket->Run([&socket](WebSocket::Message m) {
        (void)socket->Send({absl::StrCat(socket->subprotocol(), "|", m.data), m.binary});
      });
    });
    // Like /ws, but the socket outlives its connection in kept_ (as a
    // kernel's close callback may hold it after the client has gone).
    router->Add(protocol, "GET", "/ws-kept", [this](Request& r, Exchange& e) {
      auto ws = e.AcceptWebSocket({});
      if (!ws.ok()) return ws.status();
      {
        absl::MutexLock lock(&kept_mu_);
        kept_ = *ws;
      }
      return (*ws)->Run([](WebSocket::Message) {});
    });
    router->Add(protocol, "GET", "/public", [](Request&, Exchange& e) { return e.Send(Response::Text(200, "hi")); },
                {.authenticate = false, .max_body_bytes = 0});
    router->Add(protocol, "POST", "/small", [](Request&, Exchange& e) { return e.Send(Response::Text(200, "ok")); },
                {.authenticate = true, .max_body_bytes = 16});
    router->Claim(protocol, "/");

    HttpServerOptions options;
    options.listen = "127.0.0.1:0";
    options.max_body_bytes = 1024;
    options.access.check_host = true;
    options.access.allowed_hosts = {"warden.test"};
    options.access.allowed_origins = {"https://app.example"};
    auto server = HttpServer::Start(options, router, [](absl::string_view token) -> absl::StatusOr<std::string> {
      if (token == kToken) return std::string("acme");
      return absl::UnauthenticatedError(token.empty() ? "no token" : "unknown token");
    });
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  net::ip::tcp::endpoint Endpoint() const {
    return {net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(server_->port())};
  }

  // One request on a fresh connection; the whole response.
  bhttp::response<bhttp::string_body> Call(bhttp::verb method, const std::string& target, std::string body = "",
                                           bool with_token = true) {
    net::io_context io;
    beast::tcp_stream stream(io);
    stream.connect(Endpoint());
    bhttp::request<bhttp::string_body> req{method, target, 11};
    req.set(bhttp::field::host, "localhost");
    if (with_token) req.set("X-API-KEY", kToken);
    req.body() = std::move(body);
    req.prepare_payload();
    bhttp::write(stream, req);
    beast::flat_buffer buffer;
    bhttp::response<bhttp::string_body> res;
    beast::error_code ec;
    bhttp::read(stream, buffer, res, ec);
    EXPECT_FALSE(ec) << ec.message();
    return res;
  }

  // Raw bytes in, everything the server sends until it closes (or, with
  // head_only, until the end of the response head).
  std::string Raw(const std::string& bytes, bool head_only = false) {
    net::io_context io;
    net::ip::tcp::socket socket(io);
    socket.connect(Endpoint());
    net::write(socket, net::buffer(bytes));
    std::string out;
    beast::error_code ec;
    char buf[4096];
    while (!ec && !(head_only && out.find("\r\n\r\n") != std::string::npos)) {
      const size_t n = socket.read_some(net::buffer(buf), ec);
      out.append(buf, n);
    }
    return out;
  }

  absl::Mutex kept_mu_;
  std::shared_ptr<WebSocket> kept_ ABSL_GUARDED_BY(kept_mu_);

  // The socket /ws-kept's handler kept, taken from the fixture.
  std::shared_ptr<WebSocket> TakeKept() {
    absl::MutexLock lock(&kept_mu_);
    return std::move(kept_);
  }

  void ExpectStillServing() {
    auto res = Call(bhttp::verb::get, "/public");
    EXPECT_EQ(res.result_int(), 200);
  }

  std::unique_ptr<HttpServer> server_;
  std::atomic<int> echoes_{0};
};

TEST_F(HttpServerTest, RoutesWithParametersQueriesAndTheTenant) {
  auto res = Call(bhttp::verb::get, "/things/a%2Fb?q=x+y");
  EXPECT_EQ(res.result_int(), 200);
  EXPECT_EQ(json::parse(res.body()), json({{"id", "a/b"}, {"q", "x y"}}));
  res = Call(bhttp::verb::post, "/echo", "hello");
  EXPECT_EQ(json::parse(res.body()), json({{"body", "hello"}, {"tenant", "acme"}}));
}

TEST_F(HttpServerTest, KeepsAConnectionAliveAcrossRequests) {
  net::io_context io;
  beast::tcp_stream stream(io);
  stream.connect(Endpoint());
  beast::flat_buffer buffer;
  for (int i = 0; i < 3; ++i) {
    bhttp::request<bhttp::string_body> req{bhttp::verb::get, absl::StrCat("/things/", i), 11};
    req.set("X-API-KEY", kToken);
    bhttp::write(stream, req);
    bhttp::response<bhttp::string_body> res;
    bhttp::read(stream, buffer, res);
    EXPECT_EQ(json::parse(res.body())["id"], absl::StrCat(i));
  }
}

TEST_F(HttpServerTest, HandlerErrorsAndMissesComeInTheProtocolsShape) {
  auto res = Call(bhttp::verb::get, "/things/missing");
  EXPECT_EQ(res.result_int(), 404);
  EXPECT_EQ(json::parse(res.body())["error"]["message"], "no thing 'missing'");
  res = Call(bhttp::verb::get, "/no/such/path");
  EXPECT_EQ(res.result_int(), 404);
  EXPECT_THAT(json::parse(res.body())["error"]["message"].get<std::string>(), HasSubstr("/no/such/path"));
  res = Call(bhttp::verb::delete_, "/echo");
  EXPECT_EQ(res.result_int(), 405);
  EXPECT_EQ(res[bhttp::field::allow], "POST");
  ExpectStillServing();
}

TEST_F(HttpServerTest, ARefusalThatSaysWhenToRetryIs429WithRetryAfterInWholeSeconds) {
  auto res = Call(bhttp::verb::post, "/busy", "1500");
  EXPECT_EQ(res.result_int(), 429);
  EXPECT_EQ(res["Retry-After"], "2");
  EXPECT_THAT(json::parse(res.body())["error"]["message"].get<std::string>(), HasSubstr("retry in about 1500 ms"));
  EXPECT_EQ(Call(bhttp::verb::post, "/busy", "1")["Retry-After"], "1");
  // No hint, no header.
  EXPECT_EQ(Call(bhttp::verb::get, "/things/missing").count("Retry-After"), 0u);
  EXPECT_EQ(RetryAfterSeconds(absl::ResourceExhaustedError("full; retry in about 0 ms")), 0);
  EXPECT_EQ(RetryAfterSeconds(absl::ResourceExhaustedError("retry in about soon")), std::nullopt);
  ExpectStillServing();
}

TEST_F(HttpServerTest, AMissingOrWrongTokenIs401AndPublicRoutesNeedNone) {
  auto res = Call(bhttp::verb::post, "/echo", "x", /*with_token=*/false);
  EXPECT_EQ(res.result_int(), 401);
  EXPECT_EQ(json::parse(res.body())["error"]["message"], "no token");
  EXPECT_EQ(Call(bhttp::verb::get, "/public", "", /*with_token=*/false).result_int(), 200);
  const std::string raw = Raw("GET /things/1 HTTP/1.1\r\nX-API-KEY: wrong-token-000000\r\nConnection: close\r\n\r\n");
  EXPECT_THAT(raw, HasSubstr("401 Unauthorized"));
  EXPECT_THAT(raw, HasSubstr("unknown token"));
  ExpectStillServing();
}

TEST_F(HttpServerTest, BodiesOverTheLimitAre413BeforeTheyAreRead) {
  // Declared too large: refused from the head alone.
  std::string raw = Raw(absl::StrCat("POST /echo HTTP/1.1\r\nX-API-KEY: ", kToken,
                                     "\r\nContent-Length: 1000000000\r\n\r\n"));
  EXPECT_THAT(raw, HasSubstr("413 Payload Too Large"));
  EXPECT_THAT(raw, HasSubstr("exceeds 1024 bytes"));
  // Chunked, growing past the limit while read.
  std::string chunked = absl::StrCat("POST /echo HTTP/1.1\r\nX-API-KEY: ", kToken,
                                     "\r\nTransfer-Encoding: chunked\r\n\r\n");
  for (int i = 0; i < 10; ++i) chunked += "200\r\n" + std::string(0x200, 'x') + "\r\n";
  chunked += "0\r\n\r\n";
  raw = Raw(chunked);
  EXPECT_THAT(raw, HasSubstr("413 Payload Too Large"));
  // A route's own, smaller limit.
  EXPECT_EQ(Call(bhttp::verb::post, "/small", std::string(17, 'x')).result_int(), 413);
  EXPECT_EQ(Call(bhttp::verb::post, "/small", std::string(16, 'x')).result_int(), 200);
  ExpectStillServing();
}

TEST_F(HttpServerTest, MalformedRequestsAre400AndTheServerCarriesOn) {
  for (const char* request : {"GARBAGE\r\n\r\n", "GET /x HTTP/9.9\r\n\r\n", "GET x HTTP/1.1\r\n\r\n",
                              "GET /x HTTP/1.1\r\nBad Name: y\r\n\r\n",
                              "POST /echo HTTP/1.1\r\nContent-Length: zz\r\n\r\n",
                              "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"}) {
    const std::string raw = Raw(request);
    EXPECT_THAT(raw, HasSubstr("400 Bad Request")) << request;
    EXPECT_THAT(raw, HasSubstr("bad request")) << request;
  }
  ExpectStillServing();
}

TEST_F(HttpServerTest, StreamsChunkedNdjson) {
  auto res = Call(bhttp::verb::get, "/lines");
  EXPECT_EQ(res.result_int(), 200);
  EXPECT_TRUE(res.chunked());
  EXPECT_EQ(res[bhttp::field::content_type], "application/x-ndjson");
  EXPECT_EQ(res.body(), "{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n");
}

TEST(SseEventTest, FramesEachLine) {
  EXPECT_EQ(SseEvent("a\nb", "message"), "event: message\ndata: a\ndata: b\n\n");
  EXPECT_EQ(SseEvent("{}"), "data: {}\n\n");
}

// A WebSocket client on its own connection.
struct WsClient {
  net::io_context io;
  websocket::stream<beast::tcp_stream> ws{io};

  // Connects to `at` and opens `target` with the token, no subprotocol.
  void Open(const net::ip::tcp::endpoint& at, const std::string& target) {
    beast::get_lowest_layer(ws).connect(at);
    ws.set_option(
        websocket::stream_base::decorator([](websocket::request_type& req) { req.set("X-API-KEY", kToken); }));
    ws.handshake("localhost", target);
  }
};

TEST_F(HttpServerTest, WebSocketHandshakeNegotiatesTheSubprotocol) {
  WsClient client;
  beast::get_lowest_layer(client.ws).connect(Endpoint());
  client.ws.set_option(websocket::stream_base::decorator([](websocket::request_type& req) {
    req.set(bhttp::field::sec_websocket_protocol, "other, v1.kernel.websocket.jupyter.org");
    req.set("X-API-KEY", kToken);
  }));
  websocket::response_type response;
  client.ws.handshake(response, "localhost", "/ws");
  EXPECT_EQ(response[bhttp::field::sec_websocket_protocol], "v1.kernel.websocket.jupyter.org");
  client.ws.write(net::buffer(std::string("ping")));
  beast::flat_buffer buffer;
  client.ws.read(buffer);
  EXPECT_EQ(beast::buffers_to_string(buffer.data()), "v1.kernel.websocket.jupyter.org|ping");
  client.ws.close(websocket::close_code::normal);
  ExpectStillServing();
}

TEST_F(HttpServerTest, WebSocketWithoutASubprotocolIsPlain) {
  WsClient client;
  beast::get_lowest_layer(client.ws).connect(Endpoint());
  client.ws.set_option(websocket::stream_base::decorator(
      [](websocket::request_type& req) { req.set("X-API-KEY", kToken); }));
  websocket::response_type response;
  client.ws.handshake(response, "localhost", "/ws");
  EXPECT_EQ(response.count(bhttp::field::sec_websocket_protocol), 0u);
  client.ws.write(net::buffer(std::string("{}")));
  beast::flat_buffer buffer;
  client.ws.read(buffer);
  EXPECT_EQ(beast::buffers_to_string(buffer.data()), "|{}");
}

// An upgrade request for /ws, raw, with the given extra header lines.
std::string Upgrade(const std::string& extra) {
  return absl::StrCat("GET /ws HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                      "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
                      extra, "\r\n");
}

TEST_F(HttpServerTest, WebSocketRefusesUnknownSubprotocolsAndPlainRequests) {
  const std::string raw =
      Raw(Upgrade(absl::StrCat("X-API-KEY: ", kToken, "\r\nSec-WebSocket-Protocol: chat\r\n")));
  EXPECT_THAT(raw, ::testing::StartsWith("HTTP/1.1 400 Bad Request"));
  EXPECT_THAT(raw, HasSubstr("offer one of: v1.kernel.websocket.jupyter.org"));

  auto res = Call(bhttp::verb::get, "/ws");
  EXPECT_EQ(res.result_int(), 400);
  EXPECT_THAT(res.body(), HasSubstr("Upgrade: websocket"));
  ExpectStillServing();
}

TEST_F(HttpServerTest, WebSocketNeedsTheToken) {
  // (With the token the handshake succeeds: WebSocketHandshakeNegotiatesTheSubprotocol.)
  EXPECT_THAT(Raw(Upgrade("")), ::testing::StartsWith("HTTP/1.1 401 Unauthorized"));
}

TEST_F(HttpServerTest, AWebSocketClientThatDropsTheConnectionFreesItsThreadAtOnce) {
  for (bool reset : {false, true}) {
    {
      WsClient client;
      client.Open(Endpoint(), "/ws");
      ASSERT_EQ(server_->connections(), 1);
      // No close frame: the TCP connection just goes (with RST, or FIN).
      net::ip::tcp::socket& socket = beast::get_lowest_layer(client.ws).socket();
      if (reset) socket.set_option(net::socket_base::linger(true, 0));
      socket.close();
    }
    // Long before the WebSocket's idle timeout (two minutes).
    EXPECT_TRUE(server_->WaitForConnectionsAtMost(0, absl::Now() + absl::Seconds(20)))
        << (reset ? "reset" : "closed") << " connection still holds a thread";
  }
  // A raw client that reads the 101 and leaves.
  EXPECT_THAT(Raw(Upgrade(absl::StrCat("X-API-KEY: ", kToken, "\r\n")), /*head_only=*/true),
              ::testing::StartsWith("HTTP/1.1 101 Switching Protocols"));
  EXPECT_TRUE(server_->WaitForConnectionsAtMost(0, absl::Now() + absl::Seconds(20)));
  ExpectStillServing();
}

// The last reference to a WebSocket may go after its connection (and the
// connection's io_context) has ended: dropping it then must touch nothing of
// the connection's (a use after free that crashed wardend when a Kernel
// Gateway kernel was deleted after its channels' client had gone; ASan sees
// it here at once).
TEST_F(HttpServerTest, AWebSocketKeptPastItsConnectionIsClosedAndSafeToDrop) {
  {
    WsClient client;
    client.Open(Endpoint(), "/ws-kept");
    beast::get_lowest_layer(client.ws).socket().close();
  }
  ASSERT_TRUE(server_->WaitForConnectionsAtMost(0, absl::Now() + absl::Seconds(20)));
  std::shared_ptr<WebSocket> kept = TakeKept();
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->Send({"late", false}).code(), absl::StatusCode::kFailedPrecondition);
  kept->Close();
  kept.reset();
  ExpectStillServing();
}

TEST_F(HttpServerTest, AForeignHostOrOriginIsRefusedInTheProtocolsShapeBeforeTheHandlerRuns) {
  const std::string body = "code";
  for (const auto& [header, value, setting] :
       {std::tuple<const char*, const char*, const char*>{"Host", "evil.example:8080", "http.allowed_hosts"},
        {"Origin", "http://evil.example", "http.allowed_origins"},
        {"Origin", "null", "http.allowed_origins"}}) {
    const std::string raw = Raw(absl::StrCat("POST /echo HTTP/1.1\r\n",
                                             std::string(header) == "Host" ? "" : "Host: 127.0.0.1\r\n", header,
                                             ": ", value, "\r\nX-API-KEY: ", kToken,
                                             "\r\nContent-Length: 4\r\n\r\n", body));
    EXPECT_THAT(raw, ::testing::StartsWith("HTTP/1.1 403 Forbidden")) << value;
    const json error = json::parse(raw.substr(raw.find("\r\n\r\n") + 4), nullptr, false);
    EXPECT_EQ(error["error"]["code"], 403) << raw;
    EXPECT_THAT(error["error"]["message"].get<std::string>(), HasSubstr(setting)) << raw;
    EXPECT_THAT(raw, ::testing::Not(HasSubstr("Access-Control-Allow-Origin")));
  }
  EXPECT_EQ(echoes_, 0);
  // Refused before authentication too: no token needed to learn nothing.
  EXPECT_THAT(Raw("GET /things/1 HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n"),
              ::testing::StartsWith("HTTP/1.1 403 Forbidden"));
  ExpectStillServing();
}

TEST_F(HttpServerTest, ListedHostsAndOriginsAreServedAndAllowedOriginsGetCors) {
  for (const char* host : {"warden.test:8080", "127.0.0.1:1", "[::1]:8080"}) {
    const std::string raw = Raw(absl::StrCat("POST /echo HTTP/1.1\r\nHost: ", host, "\r\nX-API-KEY: ", kToken,
                                             "\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi"));
    EXPECT_THAT(raw, ::testing::StartsWith("HTTP/1.1 200 OK")) << host;
    EXPECT_THAT(raw, ::testing::Not(HasSubstr("Access-Control-Allow-Origin"))) << "no Origin, no CORS";
  }
  for (const char* origin : {"https://app.example", "http://localhost:5173"}) {
    const std::string raw = Raw(absl::StrCat("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: ", origin,
                                             "\r\nX-API-KEY: ", kToken,
                                             "\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi"));
    EXPECT_THAT(raw, ::testing::StartsWith("HTTP/1.1 200 OK")) << origin;
    EXPECT_THAT(raw, HasSubstr(absl::StrCat("Access-Control-Allow-Origin: ", origin, "\r\n")));
    EXPECT_THAT(raw, HasSubstr("Vary: Origin\r\n"));
    EXPECT_THAT(raw, HasSubstr("Access-Control-Expose-Headers: Location\r\n"));
  }
  // Errors too, so that a browser client can show them; streams as well.
  std::string raw = Raw("GET /things/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: https://app.example\r\n"
                        "Connection: close\r\n\r\n");
  EXPECT_THAT(raw, ::testing::StartsWith("HTTP/1.1 401"));
  EXPECT_THAT(raw, HasSubstr("Access-Control-Allow-Origin: https://app.example\r\n"));
  raw = Raw(absl::StrCat("GET /lines HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: https://app.example\r\nX-API-KEY: ",
                         kToken, "\r\nConnection: close\r\n\r\n"));
  EXPECT_THAT(raw, HasSubstr("Access-Control-Allow-Origin: https://app.example\r\n"));
  EXPECT_THAT(raw, HasSubstr("{\"n\":2}"));
  EXPECT_EQ(echoes_, 5);
}

TEST_F(HttpServerTest, PreflightsFromAllowedOriginsListTheMethodsAndHeadersForeignOnesAre403) {
  const auto preflight = [this](const std::string& origin, const std::string& path, const std::string& method) {
    return Raw(absl::StrCat("OPTIONS ", path, " HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nOrigin: ", origin,
                            "\r\nAccess-Control-Request-Method: ", method,
                            "\r\nAccess-Control-Request-Headers: x-api-key, content-type\r\n"
                            "Connection: close\r\n\r\n"));
  };
  std::string raw = preflight("https://app.example", "/echo", "POST");
  EXPECT_THAT(raw, ::testing::StartsWith("HTTP/1.1 204 No Content"));
  EXPECT_THAT(raw, HasSubstr("Access-Control-Allow-Origin: https://app.example\r\n"));
  EXPECT_THAT(raw, HasSubstr("Access-Control-Allow-Methods: POST\r\n"));
  EXPECT_THAT(raw, HasSubstr("Access-Control-Allow-Headers: X-API-KEY, Content-Type\r\n"));
  raw = preflight("https://app.example", "/things/7", "GET");
  EXPECT_THAT(raw, HasSubstr("Access-Control-Allow-Methods: GET, HEAD\r\n"));
  // No token is asked of a preflight (browsers send none), and the handler never runs.
  for (const char* origin : {"http://evil.example", "https://app.example.evil.example"}) {
    raw = preflight(origin, "/echo", "POST");
    EXPECT_THAT(raw, ::testing::StartsWith("HTTP/1.1 403 Forbidden")) << origin;
    EXPECT_THAT(raw, HasSubstr("http.allowed_origins")) << origin;
    EXPECT_THAT(raw, ::testing::Not(HasSubstr("Access-Control-Allow")));
  }
  EXPECT_THAT(preflight("https://app.example", "/nowhere", "GET"), HasSubstr("404"));
  EXPECT_EQ(echoes_, 0);
  ExpectStillServing();
}

TEST_F(HttpServerTest, AWebSocketUpgradeFromAForeignOriginOrHostIsRefused) {
  EXPECT_THAT(Raw(Upgrade(absl::StrCat("X-API-KEY: ", kToken, "\r\nOrigin: http://evil.example\r\n"))),
              ::testing::StartsWith("HTTP/1.1 403 Forbidden"));
  std::string evil_host = Upgrade(absl::StrCat("X-API-KEY: ", kToken, "\r\n"));
  evil_host.replace(evil_host.find("Host: localhost"), 15, "Host: evil.example");
  EXPECT_THAT(Raw(evil_host), ::testing::StartsWith("HTTP/1.1 403 Forbidden"));
  EXPECT_THAT(Raw(Upgrade(absl::StrCat("X-API-KEY: ", kToken, "\r\nOrigin: https://app.example\r\n")),
                  /*head_only=*/true),
              ::testing::StartsWith("HTTP/1.1 101 Switching Protocols"));
}

// And past the server: the server's io_context (which the socket's stream
// and strand belong to) is gone, and the socket must still answer every
// call and be dropped without touching it (ASan sees a use after free at
// once otherwise).
TEST_F(HttpServerTest, AWebSocketKeptPastTheServerIsSafeToCallAndDrop) {
  WsClient client;
  client.Open(Endpoint(), "/ws-kept");
  server_->Stop();  // the client is still connected: Stop ends the socket
  server_.reset();
  std::shared_ptr<WebSocket> kept = TakeKept();
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->Send({"late", false}).code(), absl::StatusCode::kFailedPrecondition);
  kept->Close();
  kept->Abort();
  absl::Status closed;
  kept->Start([](WebSocket::Message) {}, [&closed](absl::Status why) { closed = why; });
  EXPECT_EQ(closed.code(), absl::StatusCode::kUnavailable) << "a socket started after it ended says so at once";
  std::thread([kept = std::move(kept)]() mutable { kept.reset(); }).join();  // dropped from another thread
}

TEST_F(HttpServerTest, StopEndsOpenWebSocketsAndIdleConnections) {
  WsClient client;
  client.Open(Endpoint(), "/ws");
  net::io_context io;
  net::ip::tcp::socket idle(io);
  idle.connect(Endpoint());

  server_->Stop();
  beast::flat_buffer buffer;
  beast::error_code ec;
  client.ws.read(buffer, ec);
  EXPECT_TRUE(ec);  // closed by Stop, not left hanging
  char byte;
  idle.read_some(net::buffer(&byte, 1), ec);
  EXPECT_TRUE(ec);
}

}  // namespace
}  // namespace warden::http
