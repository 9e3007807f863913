// egress_bench: what the egress proxy (egress/proxy.h) adds to an HTTPS
// request and to a download, beside the same client going directly, all on
// loopback: an HTTPS server of its own on 127.0.0.2 (a test CA's
// certificate for bench.test), the proxy with one channel on 127.0.0.1 (its
// listener opened as a sandbox's init would), and a client that makes each
// request on a fresh connection (TCP, CONNECT through the proxy, TLS
// handshake, GET, answer), the way a sandbox's pip or curl does for every
// host it meets.
//
//   egress_bench [--requests N] [--download-mb M]
//
// Prints JSON: latency p50/p99 (ms) direct, tunnelled and intercepted (the
// proxy terminating TLS with its CA, as for a host with secrets), and one
// download's MB/s direct and tunnelled.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "egress/asio.h"
#include "egress/certificate_authority.h"
#include "egress/proxy.h"

namespace warden::egress {
namespace {

using Clock = std::chrono::steady_clock;

// An HTTPS server: /generate_204, and /big?N (N bytes).
class Server {
 public:
  explicit Server(std::shared_ptr<SSL_CTX> tls) : tls_(std::move(tls)), acceptor_(io_) {
    tcp::endpoint endpoint(net::ip::make_address("127.0.0.2"), 0);
    acceptor_.open(endpoint.protocol());
    acceptor_.bind(endpoint);
    acceptor_.listen(256);
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] {
      for (;;) {
        auto socket = std::make_shared<tcp::socket>(io_);
        boost::system::error_code ec;
        acceptor_.accept(*socket, ec);
        if (ec) return;
        std::thread([this, socket] { Serve(socket); }).detach();
      }
    });
  }
  ~Server() {
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    thread_.join();
  }
  uint16_t port() const { return port_; }

 private:
  void Serve(std::shared_ptr<tcp::socket> socket) {
    socket->set_option(tcp::no_delay(true));
    SSL_CTX_up_ref(tls_.get());
    ssl::context context(tls_.get());
    ssl::stream<tcp::socket&> stream(*socket, context);
    boost::system::error_code ec;
    stream.handshake(ssl::stream_base::server, ec);
    if (ec) return;
    beast::flat_buffer buffer;
    http::request<http::empty_body> req;
    http::read(stream, buffer, req, ec);
    if (ec) return;
    const std::string target(req.target());
    if (target.rfind("/big?", 0) == 0) {
      size_t n = std::stoul(target.substr(5));
      const std::string head = absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", n, "\r\nConnection: close\r\n\r\n");
      net::write(stream, net::buffer(head), ec);
      std::string chunk(256 * 1024, 'x');
      while (n > 0 && !ec) {
        const size_t k = std::min(n, chunk.size());
        net::write(stream, net::buffer(chunk.data(), k), ec);
        n -= k;
      }
    } else {
      static const std::string kAnswer = "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n";
      net::write(stream, net::buffer(kAnswer), ec);
    }
    stream.shutdown(ec);
  }

  std::shared_ptr<SSL_CTX> tls_;
  net::io_context io_;
  tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::thread thread_;
};

struct Client {
  // One request on a fresh connection; through the proxy when proxy_port is
  // set. Returns the bytes of the answer's body (or -1 on failure).
  static int64_t Request(uint16_t proxy_port, uint16_t server_port, const std::string& ca_pem, const std::string& path) {
    net::io_context io;
    tcp::socket socket(io);
    boost::system::error_code ec;
    const bool proxied = proxy_port != 0;
    socket.connect(tcp::endpoint(net::ip::make_address(proxied ? "127.0.0.1" : "127.0.0.2"),
                                 proxied ? proxy_port : server_port), ec);
    if (ec) return -1;
    socket.set_option(tcp::no_delay(true));
    beast::flat_buffer buffer;
    if (proxied) {
      const std::string connect = absl::StrCat("CONNECT bench.test:", server_port, " HTTP/1.1\r\nHost: bench.test:",
                                               server_port, "\r\n\r\n");
      net::write(socket, net::buffer(connect), ec);
      http::response_parser<http::empty_body> parser;
      parser.skip(true);
      http::read_header(socket, buffer, parser, ec);
      if (ec || parser.get().result_int() != 200) return -1;
    }
    ssl::context context(ssl::context::tls_client);
    context.add_certificate_authority(net::buffer(ca_pem));
    context.set_verify_mode(ssl::verify_peer);
    ssl::stream<tcp::socket&> tls(socket, context);
    SSL_set_tlsext_host_name(tls.native_handle(), "bench.test");
    SSL_set1_host(tls.native_handle(), "bench.test");
    tls.handshake(ssl::stream_base::client, ec);
    if (ec) return -1;
    http::request<http::empty_body> req{http::verb::get, path, 11};
    req.set(http::field::host, absl::StrCat("bench.test:", server_port));
    http::write(tls, req, ec);
    if (ec) return -1;
    http::response_parser<http::buffer_body> res;
    res.body_limit(std::numeric_limits<std::uint64_t>::max());
    beast::flat_buffer in;
    http::read_header(tls, in, res, ec);
    if (ec) return -1;
    int64_t total = 0;
    std::vector<char> chunk(256 * 1024);
    while (!res.is_done()) {
      res.get().body().data = chunk.data();
      res.get().body().size = chunk.size();
      http::read(tls, in, res, ec);
      if (ec == http::error::need_buffer) ec = {};
      if (ec) break;
      total += static_cast<int64_t>(chunk.size() - res.get().body().size);
    }
    return total;
  }
};

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

int Main(int argc, char** argv) {
  int requests = 400;
  int64_t download_mb = 256;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--requests") requests = std::atoi(argv[i + 1]);
    if (flag == "--download-mb") download_mb = std::atoll(argv[i + 1]);
  }
  auto upstream_ca = CertificateAuthority::Create("bench upstream CA");
  Host name;
  name.name = "bench.test";
  Server server(*(*upstream_ca)->ServerContext(name));
  const std::string ca_file = absl::StrCat("/tmp/egress-bench-ca-", getpid(), ".pem");
  std::ofstream(ca_file) << (*upstream_ca)->certificate_pem();
  auto daemon_ca = std::shared_ptr<CertificateAuthority>(*CertificateAuthority::Create("bench daemon CA"));

  ProxyOptions options;
  options.resolver.hosts["bench.test"] = {*Address::Parse("127.0.0.2")};
  options.resolver.servers = {"127.0.0.1:1"};
  options.allow_internal.push_back(*ParseDestination("127.0.0.2"));
  options.upstream_ca_file = ca_file;
  options.ca = daemon_ca;
  auto proxy = Proxy::Start(options);
  if (!proxy.ok()) {
    fprintf(stderr, "egress_bench: %s\n", proxy.status().ToString().c_str());
    return 1;
  }
  auto rules = [](bool intercept) {
    auto r = std::make_shared<Rules>();
    r->ceiling = std::make_shared<const Policy>(*Policy::Build(PolicySpec{.allow = {"*"}}, "ceiling"));
    PolicySpec spec{.allow = {"bench.test"}};
    if (intercept) spec.header_rules = {{"bench.test", {{"X-Bench", "1"}}}};
    r->policy = std::make_shared<const Policy>(*Policy::Build(spec, "network"));
    return std::shared_ptr<const Rules>(r);
  };
  auto channel = (*proxy)->NewChannel({"bench", "bench"}, rules(false));
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  listen(fd, 256);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const uint16_t proxy_port = ntohs(addr.sin_port);
  channel->Open(UniqueFd(fd));

  auto latency = [&](uint16_t via, const std::string& ca) {
    std::vector<double> ms;
    for (int i = 0; i < requests; ++i) {
      const auto start = Clock::now();
      if (Client::Request(via, server.port(), ca, "/generate_204") < 0) return std::vector<double>{};
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
    return ms;
  };
  // Interleaved rounds, so that load from elsewhere hits all three alike.
  std::vector<double> direct, tunnel, intercept;
  const std::string upstream_pem = (*upstream_ca)->certificate_pem();
  for (int round = 0; round < 4; ++round) {
    const int saved = requests;
    requests = saved / 4;
    auto d = latency(0, upstream_pem);
    channel->SetRules(rules(false));
    auto t = latency(proxy_port, upstream_pem);
    channel->SetRules(rules(true));
    auto x = latency(proxy_port, daemon_ca->certificate_pem());
    requests = saved;
    if (d.empty() || t.empty() || x.empty()) {
      fprintf(stderr, "egress_bench: a request failed\n");
      return 1;
    }
    direct.insert(direct.end(), d.begin(), d.end());
    tunnel.insert(tunnel.end(), t.begin(), t.end());
    intercept.insert(intercept.end(), x.begin(), x.end());
  }
  channel->SetRules(rules(false));
  auto download = [&](uint16_t via) {
    const auto start = Clock::now();
    const int64_t n = Client::Request(via, server.port(), upstream_pem, absl::StrCat("/big?", download_mb << 20));
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    return n == (download_mb << 20) ? static_cast<double>(n) / (1 << 20) / s : 0.0;
  };
  const double direct_mbs = std::max(download(0), download(0));
  const double tunnel_mbs = std::max(download(proxy_port), download(proxy_port));
  unlink(ca_file.c_str());
  printf("{\"requests\": %d, "
         "\"direct\": {\"p50_ms\": %.3f, \"p99_ms\": %.3f}, "
         "\"tunnel\": {\"p50_ms\": %.3f, \"p99_ms\": %.3f}, "
         "\"intercept\": {\"p50_ms\": %.3f, \"p99_ms\": %.3f}, "
         "\"download_mb\": %lld, \"direct_mb_per_s\": %.1f, \"tunnel_mb_per_s\": %.1f}\n",
         static_cast<int>(direct.size()), Percentile(direct, 0.5), Percentile(direct, 0.99), Percentile(tunnel, 0.5),
         Percentile(tunnel, 0.99), Percentile(intercept, 0.5), Percentile(intercept, 0.99),
         static_cast<long long>(download_mb), direct_mbs, tunnel_mbs);
  return 0;
}

}  // namespace
}  // namespace warden::egress

int main(int argc, char** argv) { return warden::egress::Main(argc, argv); }
