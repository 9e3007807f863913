// The proxy over real sockets on loopback: upstream HTTP and HTTPS servers
// of the test's own (127.0.0.2-4, certificates from a test CA), a channel
// whose listener the test opens as a sandbox's init would, and clients
// speaking CONNECT, TLS and plain HTTP to it.
#include "egress/proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "egress/asio.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace warden::egress {
namespace {

using ::testing::HasSubstr;

Host Name(const char* n) {
  Host h;
  h.name = n;
  return h;
}

// An HTTP(S) server on one loopback address: answers every request with the
// request's head (one "name: value" line per field), or /big?BYTES with
// that many bytes, or /redirect with a 302; records every head.
class Upstream {
 public:
  Upstream(const char* ip, std::shared_ptr<SSL_CTX> tls) : tls_(std::move(tls)), acceptor_(io_) {
    tcp::endpoint endpoint(net::ip::make_address(ip), 0);
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { Accept(); });
  }
  ~Upstream() {
    // Blocking calls in other threads wake on shutdown(2), not close(2).
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    thread_.join();
    std::list<std::thread> handlers;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& s : sockets_) ::shutdown(s->native_handle(), SHUT_RDWR);
      handlers.swap(handlers_);
    }
    for (auto& t : handlers) t.join();
  }
  uint16_t port() const { return port_; }
  std::vector<std::string> heads() {
    std::lock_guard<std::mutex> lock(mu_);
    return heads_;
  }

 private:
  void Accept() {
    for (;;) {
      auto socket = std::make_shared<tcp::socket>(io_);
      boost::system::error_code ec;
      acceptor_.accept(*socket, ec);
      if (ec) return;
      std::lock_guard<std::mutex> lock(mu_);
      sockets_.push_back(socket);
      handlers_.emplace_back([this, socket] { Serve(socket); });
    }
  }
  template <class Stream>
  void Answer(Stream& stream) {
    beast::flat_buffer buffer;
    for (;;) {
      http::request<http::string_body> req;
      boost::system::error_code ec;
      http::read(stream, buffer, req, ec);
      if (ec) return;
      std::string head = absl::StrCat(std::string(req.method_string()), " ", std::string(req.target()), "\n");
      for (const auto& f : req) {
        absl::StrAppend(&head, std::string(f.name_string()), ": ", std::string(f.value()), "\n");
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        heads_.push_back(head);
      }
      http::response<http::string_body> res{http::status::ok, 11};
      const std::string target(req.target());
      if (absl::StartsWith(target, "/big?")) {
        res.body() = std::string(std::stoul(target.substr(5)), 'x');
      } else if (absl::StartsWith(target, "/redirect")) {
        res.result(http::status::found);
        res.set(http::field::location, "https://other.test/");
      } else {
        res.body() = head;
      }
      res.keep_alive(req.keep_alive());
      res.prepare_payload();
      http::write(stream, res, ec);
      if (ec || !req.keep_alive()) return;
    }
  }
  void Serve(std::shared_ptr<tcp::socket> socket) {
    if (!tls_) {
      Answer(*socket);
    } else {
      SSL_CTX_up_ref(tls_.get());
      ssl::context context(tls_.get());
      ssl::stream<tcp::socket&> stream(*socket, context);
      boost::system::error_code ec;
      stream.handshake(ssl::stream_base::server, ec);
      if (!ec) Answer(stream);
    }
    ::shutdown(socket->native_handle(), SHUT_RDWR);  // as a server does when its client leaves
  }

  std::shared_ptr<SSL_CTX> tls_;
  net::io_context io_;
  tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> heads_;
  std::list<std::shared_ptr<tcp::socket>> sockets_;
  std::list<std::thread> handlers_;
};

// A sandbox's client of the proxy.
class Client {
 public:
  explicit Client(uint16_t proxy_port) : socket_(io_) {
    socket_.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), proxy_port));
  }
  // The proxy's answer to CONNECT: "200 ..." or "403 <reason>".
  std::string Connect(const std::string& target) {
    const std::string req = absl::StrCat("CONNECT ", target, " HTTP/1.1\r\nHost: ", target, "\r\n\r\n");
    net::write(socket_, net::buffer(req));
    http::response_parser<http::empty_body> parser;
    parser.skip(true);
    boost::system::error_code ec;
    http::read_header(socket_, buffer_, parser, ec);
    if (ec) return absl::StrCat("error: ", ec.message());
    return absl::StrCat(parser.get().result_int(), " ", std::string(parser.get().reason()));
  }
  // A whole exchange with an absolute-form or origin-form request.
  http::response<http::string_body> Plain(const std::string& target, const std::string& host,
                                          const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    http::request<http::empty_body> req{http::verb::get, target, 11};
    if (!host.empty()) req.set(http::field::host, host);
    for (const auto& [n, v] : headers) req.set(n, v);
    boost::system::error_code ec;
    http::write(socket_, req, ec);
    http::response<http::string_body> res;
    http::read(socket_, buffer_, res, ec);
    if (ec) res.result(599);
    return res;
  }
  // TLS over the tunnel, trusting `ca_pem`, asking for `sni`.
  bool StartTls(const std::string& ca_pem, const std::string& sni) {
    tls_context_.add_certificate_authority(net::buffer(ca_pem));
    tls_context_.set_verify_mode(ssl::verify_peer);
    tls_.emplace(socket_, tls_context_);
    SSL_set_tlsext_host_name(tls_->native_handle(), sni.c_str());
    SSL_set1_host(tls_->native_handle(), sni.c_str());
    boost::system::error_code ec;
    tls_->handshake(ssl::stream_base::client, ec);
    return !ec;
  }
  http::response<http::string_body> Https(const std::string& target, const std::string& host,
                                          const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    http::request<http::empty_body> req{http::verb::get, target, 11};
    req.set(http::field::host, host);
    for (const auto& [n, v] : headers) req.set(n, v);
    boost::system::error_code ec;
    http::write(*tls_, req, ec);
    http::response<http::string_body> res;
    beast::flat_buffer buffer;
    http::read(*tls_, buffer, res, ec);
    if (ec) res.result(599);
    return res;
  }
  tcp::socket& socket() { return socket_; }
  beast::flat_buffer& buffer() { return buffer_; }

 private:
  net::io_context io_;
  tcp::socket socket_;
  beast::flat_buffer buffer_;
  ssl::context tls_context_{ssl::context::tls_client};
  std::optional<ssl::stream<tcp::socket&>> tls_;
};

class ProxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto upstream_ca = CertificateAuthority::Create("test upstream CA");
    ASSERT_TRUE(upstream_ca.ok());
    upstream_ca_ = *std::move(upstream_ca);
    api_ = std::make_unique<Upstream>("127.0.0.2", *upstream_ca_->ServerContext(Name("api.test")));
    plain_ = std::make_unique<Upstream>("127.0.0.3", nullptr);
    // Serves a certificate for another name than the one it is reached by.
    wrong_ = std::make_unique<Upstream>("127.0.0.4", *upstream_ca_->ServerContext(Name("other.test")));
    ca_file_ = absl::StrCat("/tmp/egress-proxy-test-ca-", getpid(), ".pem");
    std::ofstream(ca_file_) << upstream_ca_->certificate_pem();

    ProxyOptions options;
    options.resolver.hosts["api.test"] = {*Address::Parse("127.0.0.2")};
    options.resolver.hosts["plain.test"] = {*Address::Parse("127.0.0.3")};
    options.resolver.hosts["wrong.test"] = {*Address::Parse("127.0.0.4")};
    options.resolver.hosts["other.test"] = {*Address::Parse("127.0.0.2")};
    options.resolver.hosts["metadata.test"] = {*Address::Parse("169.254.169.254")};
    options.resolver.hosts["loopback.test"] = {*Address::Parse("127.0.0.1")};
    options.resolver.servers = {"127.0.0.1:1"};  // nothing else resolves
    for (const char* internal : {"127.0.0.2", "127.0.0.3", "127.0.0.4"}) {
      options.allow_internal.push_back(*ParseDestination(internal));
    }
    options.upstream_ca_file = ca_file_;
    auto daemon_ca = CertificateAuthority::Create("daemon egress CA");
    daemon_ca_ = std::shared_ptr<CertificateAuthority>(std::move(*daemon_ca));
    options.ca = daemon_ca_;
    options.idle_timeout = absl::Seconds(5);
    options.head_timeout = absl::Seconds(5);
    options.audit = [this](const AuditRecord& r) {
      absl::MutexLock lock(&mu_);
      audits_.push_back(r);
    };
    auto proxy = Proxy::Start(options);
    ASSERT_TRUE(proxy.ok()) << proxy.status();
    proxy_ = *std::move(proxy);
    channel_ = proxy_->NewChannel({"s-1", "team"}, Allow({"*"}));
    Listen();
  }
  void TearDown() override {
    channel_.reset();
    proxy_.reset();
    unlink(ca_file_.c_str());
  }

  // What a sandbox's init does: a listener, handed to the channel.
  void Listen() {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(listen(fd, 64), 0);
    socklen_t len = sizeof(addr);
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    proxy_port_ = ntohs(addr.sin_port);
    channel_->Open(UniqueFd(fd));
  }

  std::shared_ptr<const Rules> Allow(std::vector<std::string> allow, PolicySpec more = {}, Limits limits = {}) {
    auto rules = std::make_shared<Rules>();
    rules->ceiling = std::make_shared<const Policy>(*Policy::Build(PolicySpec{.allow = {"*"}}, "ceiling"));
    rules->ceiling_source = "egress.default_ceiling";
    more.allow = std::move(allow);
    auto policy = Policy::Build(more, "network");
    EXPECT_TRUE(policy.ok()) << policy.status();
    rules->policy = std::make_shared<const Policy>(*std::move(policy));
    rules->policy_source = "session s-1's network policy";
    rules->limits = limits;
    return rules;
  }

  // The audit records once `n` have come (they come as connections end).
  std::vector<AuditRecord> Audits(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return audits_.size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(10));
    return audits_;
  }

  std::unique_ptr<CertificateAuthority> upstream_ca_;
  std::shared_ptr<CertificateAuthority> daemon_ca_;
  std::unique_ptr<Upstream> api_, plain_, wrong_;
  std::string ca_file_;
  std::unique_ptr<Proxy> proxy_;
  std::shared_ptr<Channel> channel_;
  uint16_t proxy_port_ = 0;
  absl::Mutex mu_;
  std::vector<AuditRecord> audits_ ABSL_GUARDED_BY(mu_);
};

TEST_F(ProxyTest, WithoutANetworkEveryAttemptIsToldWhyAtOnce) {
  channel_->SetRules(Rules::Closed("this sandbox has no network: give its session a network policy"));
  Client c(proxy_port_);
  EXPECT_EQ(c.Connect(absl::StrCat("api.test:", api_->port())),
            "403 Warden egress: this sandbox has no network: give its session a network policy");
  Client plain(proxy_port_);
  auto res = plain.Plain("http://plain.test/", "plain.test");
  EXPECT_EQ(res.result_int(), 403u);
  EXPECT_THAT(res.body(), HasSubstr("give its session a network policy"));
  auto audits = Audits(2);
  ASSERT_EQ(audits.size(), 2u);
  EXPECT_FALSE(audits[0].allowed);
  EXPECT_EQ(audits[0].who.session, "s-1");
  EXPECT_EQ(audits[0].who.tenant, "team");
  EXPECT_EQ(audits[0].host, "api.test");
  EXPECT_TRUE(api_->heads().empty());
}

TEST_F(ProxyTest, ATunnelCarriesTlsUntouched) {
  channel_->SetRules(Allow({"api.test"}));
  Client c(proxy_port_);
  ASSERT_EQ(c.Connect(absl::StrCat("api.test:", api_->port())), "200 Connection established");
  ASSERT_TRUE(c.StartTls(upstream_ca_->certificate_pem(), "api.test"));  // the upstream's own certificate
  auto res = c.Https("/hello", absl::StrCat("api.test:", api_->port()), {{"Authorization", "Bearer x"}});
  EXPECT_EQ(res.result_int(), 200u);
  EXPECT_THAT(res.body(), HasSubstr("Authorization: Bearer x"));
  c.socket().close();
  auto audits = Audits(1);
  ASSERT_EQ(audits.size(), 1u);
  EXPECT_TRUE(audits[0].allowed);
  EXPECT_EQ(audits[0].mode, "tunnel");
  EXPECT_EQ(audits[0].address, "127.0.0.2");
  EXPECT_GT(audits[0].bytes_in, 0);
  EXPECT_GT(audits[0].bytes_out, 0);
  EXPECT_GT(channel_->usage().bytes_in, 0);
  EXPECT_GT(proxy_->TenantUsage()["team"].bytes_in, 0);
}

TEST_F(ProxyTest, ATlsServerNameOtherThanTheConnectHostIsRefused) {
  channel_->SetRules(Allow({"api.test", "other.test"}));
  Client c(proxy_port_);
  ASSERT_EQ(c.Connect(absl::StrCat("api.test:", api_->port())), "200 Connection established");
  EXPECT_FALSE(c.StartTls(upstream_ca_->certificate_pem(), "other.test"));
  auto audits = Audits(1);
  ASSERT_EQ(audits.size(), 1u);
  EXPECT_THAT(audits[0].reason, HasSubstr("domain fronting"));
  EXPECT_TRUE(api_->heads().empty());
}

TEST_F(ProxyTest, AHostHeaderOtherThanTheTargetIsRefused) {
  channel_->SetRules(Allow({"plain.test", "other.test"}));
  Client tunnel(proxy_port_);
  ASSERT_EQ(tunnel.Connect(absl::StrCat("plain.test:", plain_->port())), "200 Connection established");
  auto tunnelled = tunnel.Plain("/", "other.test");
  EXPECT_EQ(tunnelled.result_int(), 403u);
  EXPECT_THAT(tunnelled.body(), HasSubstr(absl::StrCat("the Host header names other.test but CONNECT named plain.test:",
                                                       plain_->port(), ": domain fronting is refused")));
  Client forward(proxy_port_);
  auto res = forward.Plain(absl::StrCat("http://plain.test:", plain_->port(), "/"), "other.test");
  EXPECT_EQ(res.result_int(), 403u);
  EXPECT_THAT(res.body(), HasSubstr(absl::StrCat("the Host header names other.test but the request's URL named "
                                                 "plain.test:", plain_->port(), ": domain fronting is refused")));
  EXPECT_TRUE(plain_->heads().empty());
  // The same Host as the target passes, in both forms.
  Client ok(proxy_port_);
  ASSERT_EQ(ok.Connect(absl::StrCat("plain.test:", plain_->port())), "200 Connection established");
  EXPECT_EQ(ok.Plain("/x", absl::StrCat("plain.test:", plain_->port())).result_int(), 200u);
}

TEST_F(ProxyTest, PlainHttpIsForwardedAndNeverTransformed) {
  PolicySpec more;
  more.header_rules = {{"plain.test", {{"X-Injected", "secret-value"}}}};
  more.secrets = {{"TOKEN", "real-token", {"plain.test"}}};
  channel_->SetRules(Allow({"plain.test"}, more));
  Client c(proxy_port_);
  auto res = c.Plain(absl::StrCat("http://plain.test:", plain_->port(), "/path?q=1"), "",
                     {{"Authorization", Placeholder("TOKEN")}});
  EXPECT_EQ(res.result_int(), 200u);
  EXPECT_THAT(res.body(), HasSubstr("GET /path?q=1"));
  EXPECT_THAT(res.body(), HasSubstr("Authorization: warden-secret-TOKEN"));
  EXPECT_THAT(res.body(), ::testing::Not(HasSubstr("real-token")));
  EXPECT_THAT(res.body(), ::testing::Not(HasSubstr("X-Injected")));
  // Kept alive: a second request on the same connection.
  auto again = c.Plain(absl::StrCat("http://plain.test:", plain_->port(), "/again"), "");
  EXPECT_EQ(again.result_int(), 200u);
  EXPECT_THAT(again.body(), HasSubstr("GET /again"));
}

TEST_F(ProxyTest, InterceptedHostsGetTheirSecretsAndHeadersOverVerifiedTls) {
  PolicySpec more;
  more.header_rules = {{"api.test", {{"X-Injected", "rule-value"}}}};
  more.secrets = {{"API_KEY", "sk-real-value", {"api.test"}}, {"OTHER", "other-value", {"elsewhere.test"}}};
  channel_->SetRules(Allow({"api.test"}, more));
  Client c(proxy_port_);
  ASSERT_EQ(c.Connect(absl::StrCat("api.test:", api_->port())), "200 Connection established");
  // The sandbox trusts the daemon's CA, which signed what it sees.
  ASSERT_TRUE(c.StartTls(daemon_ca_->certificate_pem(), "api.test"));
  auto res = c.Https("/v1", absl::StrCat("api.test:", api_->port()),
                     {{"Authorization", absl::StrCat("Bearer ", Placeholder("API_KEY"))},
                      {"X-Other", Placeholder("OTHER")},
                      {"X-Injected", "from-the-sandbox"}});
  EXPECT_EQ(res.result_int(), 200u);
  const std::vector<std::string> heads = api_->heads();
  ASSERT_EQ(heads.size(), 1u);
  EXPECT_THAT(heads[0], HasSubstr("Authorization: Bearer sk-real-value"));
  EXPECT_THAT(heads[0], HasSubstr("X-Injected: rule-value"));
  EXPECT_THAT(heads[0], ::testing::Not(HasSubstr("from-the-sandbox")));
  // A secret bound elsewhere stays a placeholder.
  EXPECT_THAT(heads[0], HasSubstr("X-Other: warden-secret-OTHER"));
  c.socket().close();
  auto audits = Audits(1);
  ASSERT_EQ(audits.size(), 1u);
  EXPECT_EQ(audits[0].mode, "intercept");
  EXPECT_TRUE(audits[0].secrets_used);
  EXPECT_THAT(audits[0].reason, ::testing::Not(HasSubstr("sk-real")));
}

// TLS terminated for a host with a secret: a request inside it for another
// host (here one at the same address, as a CDN's) is refused, saying why,
// and never goes on, its secret least of all.
TEST_F(ProxyTest, InsideInterceptedTlsAHostHeaderOtherThanTheTargetIsRefusedSayingWhy) {
  PolicySpec more;
  more.secrets = {{"API_KEY", "sk-real-value", {"api.test"}}};
  channel_->SetRules(Allow({"api.test", "other.test"}, more));
  const std::string target = absl::StrCat("api.test:", api_->port());
  const std::string other = absl::StrCat("other.test:", api_->port());
  const std::vector<std::pair<std::string, std::string>> secret = {{"Authorization", Placeholder("API_KEY")}};
  Client c(proxy_port_);
  ASSERT_EQ(c.Connect(target), "200 Connection established");
  ASSERT_TRUE(c.StartTls(daemon_ca_->certificate_pem(), "api.test"));
  auto res = c.Https("/", other, secret);
  EXPECT_EQ(res.result_int(), 403u);
  EXPECT_THAT(res.body(), HasSubstr(absl::StrCat("the Host header names ", other,
                                                 " but CONNECT and the TLS server name named ", target,
                                                 ": domain fronting is refused")));
  EXPECT_TRUE(api_->heads().empty());
  auto audits = Audits(1);
  ASSERT_EQ(audits.size(), 1u);
  EXPECT_EQ(audits[0].mode, "intercept");
  EXPECT_THAT(audits[0].reason, HasSubstr("domain fronting"));
  EXPECT_FALSE(audits[0].secrets_used);
  // After an answer of the upstream's, another Host on the same connection
  // ends it (a refusal would cut into that answer), and goes nowhere.
  Client k(proxy_port_);
  ASSERT_EQ(k.Connect(target), "200 Connection established");
  ASSERT_TRUE(k.StartTls(daemon_ca_->certificate_pem(), "api.test"));
  EXPECT_EQ(k.Https("/first", target, secret).result_int(), 200u);
  EXPECT_EQ(k.Https("/second", other, secret).result_int(), 599u);
  const std::vector<std::string> heads = api_->heads();
  ASSERT_EQ(heads.size(), 1u);
  EXPECT_THAT(heads[0], HasSubstr("GET /first"));
  audits = Audits(2);
  ASSERT_EQ(audits.size(), 2u);
  EXPECT_THAT(audits[1].reason, HasSubstr("domain fronting"));
}

TEST_F(ProxyTest, AnInterceptedUpstreamWhoseCertificateFailsIsNotSpokenTo) {
  PolicySpec more;
  more.secrets = {{"API_KEY", "sk-real-value", {"wrong.test"}}};
  channel_->SetRules(Allow({"wrong.test"}, more));
  Client c(proxy_port_);
  ASSERT_EQ(c.Connect(absl::StrCat("wrong.test:", wrong_->port())), "200 Connection established");
  ASSERT_TRUE(c.StartTls(daemon_ca_->certificate_pem(), "wrong.test"));
  auto res = c.Https("/", "wrong.test", {{"Authorization", Placeholder("API_KEY")}});
  EXPECT_EQ(res.result_int(), 502u);
  EXPECT_THAT(res.body(), HasSubstr("failed verification"));
  EXPECT_THAT(res.body(), ::testing::Not(HasSubstr("sk-real-value")));
  EXPECT_TRUE(wrong_->heads().empty());
}

TEST_F(ProxyTest, InternalAddressesAreRefusedAfterResolution) {
  channel_->SetRules(Allow({"*"}));
  for (const char* target : {"metadata.test:80", "loopback.test:80", "169.254.169.254:80", "[::1]:80",
                             "[::ffff:127.0.0.1]:80"}) {
    Client c(proxy_port_);
    const std::string answer = c.Connect(target);
    EXPECT_THAT(answer, HasSubstr("403")) << target;
    EXPECT_THAT(answer, HasSubstr("egress.allow_internal")) << target;
  }
  Client c(proxy_port_);
  EXPECT_THAT(c.Connect("metadata.test:80"), HasSubstr("resolves to 169.254.169.254, which is a cloud metadata"));
}

TEST_F(ProxyTest, ANameThePolicyRefusesIsNeverResolved) {
  channel_->SetRules(Allow({"127.0.0.0/8"}));
  Client c(proxy_port_);
  const std::string answer = c.Connect("exfiltrate-this.attacker.test:443");
  EXPECT_THAT(answer, HasSubstr("403"));
  EXPECT_THAT(answer, HasSubstr("allow the name itself"));
  // An unknown name that is allowed goes to the (unreachable) name server.
  channel_->SetRules(Allow({"*.attacker.test"}));
  Client d(proxy_port_);
  EXPECT_THAT(d.Connect("exfiltrate-this.attacker.test:443"), HasSubstr("502"));
}

TEST_F(ProxyTest, TheByteLimitEndsAConnectionAndRefusesTheNext) {
  channel_->SetRules(Allow({"plain.test"}, {}, Limits{.max_bytes = 64 * 1024}));
  Client c(proxy_port_);
  auto res = c.Plain(absl::StrCat("http://plain.test:", plain_->port(), "/big?1000000"), "");
  EXPECT_NE(res.result_int(), 200u);  // cut off midway
  auto audits = Audits(1);
  ASSERT_GE(audits.size(), 1u);
  EXPECT_THAT(audits[0].reason, HasSubstr("byte limit"));
  EXPECT_LT(audits[0].bytes_in, 200 * 1024);
  Client next(proxy_port_);
  auto refused = next.Plain(absl::StrCat("http://plain.test:", plain_->port(), "/"), "");
  EXPECT_EQ(refused.result_int(), 403u);
  EXPECT_THAT(refused.body(), HasSubstr("max_bytes_per_session"));
}

TEST_F(ProxyTest, TheConnectionLimitRefusesOneMore) {
  channel_->SetRules(Allow({"plain.test"}, {}, Limits{.max_connections = 2}));
  Client a(proxy_port_), b(proxy_port_);
  ASSERT_EQ(a.Connect(absl::StrCat("plain.test:", plain_->port())), "200 Connection established");
  ASSERT_EQ(b.Connect(absl::StrCat("plain.test:", plain_->port())), "200 Connection established");
  Client c(proxy_port_);
  EXPECT_THAT(c.Connect(absl::StrCat("plain.test:", plain_->port())), HasSubstr("429"));
}

TEST_F(ProxyTest, RulesChangeForTheNextConnection) {
  channel_->SetRules(Allow({"plain.test"}));
  Client a(proxy_port_);
  EXPECT_EQ(a.Connect(absl::StrCat("plain.test:", plain_->port())), "200 Connection established");
  channel_->SetRules(Allow({"api.test"}));
  Client b(proxy_port_);
  EXPECT_THAT(b.Connect(absl::StrCat("plain.test:", plain_->port())), HasSubstr("403"));
}

TEST_F(ProxyTest, ClosingTheChannelClosesItsListenerAndConnections) {
  channel_->SetRules(Allow({"plain.test"}));
  Client a(proxy_port_);
  ASSERT_EQ(a.Connect(absl::StrCat("plain.test:", plain_->port())), "200 Connection established");
  channel_->Close();
  // The open tunnel ends...
  char byte;
  boost::system::error_code ec;
  a.socket().read_some(net::buffer(&byte, 1), ec);
  EXPECT_TRUE(ec);
  // ...and nothing listens any more.
  net::io_context io;
  tcp::socket s(io);
  s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), proxy_port_), ec);
  EXPECT_EQ(ec, net::error::connection_refused);
}

TEST_F(ProxyTest, NotAProxyRequestIsToldWhatThisIs) {
  Client c(proxy_port_);
  auto res = c.Plain("/", "127.0.0.1");
  EXPECT_EQ(res.result_int(), 400u);
  EXPECT_THAT(res.body(), HasSubstr("HTTP_PROXY"));
  Client d(proxy_port_);
  auto https = d.Plain("https://api.test/", "api.test");
  EXPECT_EQ(https.result_int(), 400u);
  EXPECT_THAT(https.body(), HasSubstr("CONNECT"));
}

}  // namespace
}  // namespace warden::egress
