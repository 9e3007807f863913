#include "egress/proxy.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <limits>
#include <list>
#include <optional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "egress/address_guard.h"
#include "egress/asio.h"
#include "egress/client_hello.h"

namespace warden::egress {

using boost::system::error_code;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kChunk = 64 * 1024;
// Bodies are relayed, never held: no limit (Beast 1.74 takes boost::none
// for a limit of 0 when the length is known).
constexpr std::uint64_t kUnlimited = std::numeric_limits<std::uint64_t>::max();

// A status line's reason phrase: printable ASCII, bounded.
std::string ReasonPhrase(absl::string_view message) {
  std::string out;
  for (char c : message.substr(0, 400)) out.push_back(c >= 0x20 && c < 0x7f ? c : ' ');
  return out;
}

bool LooksLikeHttpRequest(absl::string_view data) {
  static constexpr absl::string_view kMethods[] = {"GET ",  "POST ",    "HEAD ",    "PUT ",  "DELETE ",
                                                   "PATCH ", "OPTIONS ", "TRACE ", "CONNECT "};
  for (absl::string_view m : kMethods) {
    if (absl::StartsWith(data, m)) return true;
  }
  return false;
}

// A prefix of some method above: more bytes may make it one.
bool CouldBecomeHttpRequest(absl::string_view data) {
  static constexpr absl::string_view kMethods[] = {"GET ",  "POST ",    "HEAD ",    "PUT ",  "DELETE ",
                                                   "PATCH ", "OPTIONS ", "TRACE ", "CONNECT "};
  for (absl::string_view m : kMethods) {
    if (data.size() < m.size() && absl::StartsWith(m, data)) return true;
  }
  return false;
}

absl::string_view View(const beast::flat_buffer& buffer) {
  auto d = buffer.data();
  return absl::string_view(static_cast<const char*>(d.data()), d.size());
}

}  // namespace

// ---- The shared core: I/O threads, resolver, guard, upstream TLS, tenants

class Proxy::Core : public std::enable_shared_from_this<Proxy::Core> {
 public:
  explicit Core(ProxyOptions o)
      : options(std::move(o)), guard(options.allow_internal), upstream_tls(ssl::context::tls_client) {}

  absl::Status Start() {
    upstream_tls.set_verify_mode(ssl::verify_peer);
    error_code ec;
    if (options.upstream_ca_file.empty()) {
      upstream_tls.set_default_verify_paths(ec);
    } else {
      upstream_tls.load_verify_file(options.upstream_ca_file, ec);
    }
    if (ec) {
      return absl::InvalidArgumentError(absl::StrCat(
          "egress: the CA bundle for upstream TLS (",
          options.upstream_ca_file.empty() ? "the host's trust store" : options.upstream_ca_file, "): ", ec.message()));
    }
    SSL_CTX_set_min_proto_version(upstream_tls.native_handle(), TLS1_2_VERSION);
    static const unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
    SSL_CTX_set_alpn_protos(upstream_tls.native_handle(), kHttp11, sizeof(kHttp11));
    auto resolver = Resolver::Start(options.resolver);
    if (!resolver.ok()) return resolver.status();
    this->resolver = *std::move(resolver);
    work.emplace(net::make_work_guard(io));
    for (int i = 0; i < std::max(1, options.io_threads); ++i) {
      threads.emplace_back([this] { io.run(); });
    }
    return absl::OkStatus();
  }

  void Stop();

  // Tenant-wide accounting. False: the tenant is at its bound.
  bool OpenForTenant(const std::string& tenant) {
    absl::MutexLock lock(&mu);
    Usage& u = tenants[tenant];
    if (options.max_connections_per_tenant > 0 && u.open >= options.max_connections_per_tenant) {
      ++u.refused;
      return false;
    }
    ++u.open;
    ++u.connections;
    return true;
  }
  void CloseForTenant(const std::string& tenant) {
    absl::MutexLock lock(&mu);
    --tenants[tenant].open;
  }
  void RefusedForTenant(const std::string& tenant) {
    absl::MutexLock lock(&mu);
    ++tenants[tenant].refused;
  }
  void BytesForTenant(const std::string& tenant, int64_t out, int64_t in) {
    absl::MutexLock lock(&mu);
    Usage& u = tenants[tenant];
    u.bytes_out += out;
    u.bytes_in += in;
  }

  ProxyOptions options;
  net::io_context io;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  std::unique_ptr<Resolver> resolver;
  AddressGuard guard;
  ssl::context upstream_tls;
  std::atomic<bool> stopped{false};

  mutable absl::Mutex mu;
  std::map<std::string, Usage> tenants ABSL_GUARDED_BY(mu);
  std::list<std::weak_ptr<Channel::State>> channels ABSL_GUARDED_BY(mu);
};

class Connection;

struct Channel::State : std::enable_shared_from_this<Channel::State> {
  explicit State(std::shared_ptr<Proxy::Core> c) : core(std::move(c)), strand(net::make_strand(core->io)) {}

  // Stops accepting and ends every connection; on the strand (or with the
  // I/O threads gone).
  void Shut();

  std::shared_ptr<Proxy::Core> core;
  Strand strand;
  std::shared_ptr<tcp::acceptor> acceptor;  // on the strand

  mutable absl::Mutex mu;
  Identity identity ABSL_GUARDED_BY(mu);
  std::shared_ptr<const Rules> rules ABSL_GUARDED_BY(mu);
  Usage usage ABSL_GUARDED_BY(mu);
  std::list<std::weak_ptr<Connection>> live ABSL_GUARDED_BY(mu);

  // Counts bytes; false once the channel is past its byte limit.
  bool Count(int64_t out, int64_t in, int64_t max_bytes) {
    absl::MutexLock lock(&mu);
    usage.bytes_out += out;
    usage.bytes_in += in;
    return max_bytes <= 0 || usage.bytes_out + usage.bytes_in <= max_bytes;
  }
};

// ---- One connection from a sandbox

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<Channel::State> channel, tcp::socket client)
      : channel_(std::move(channel)),
        core_(channel_->core),
        client_(std::move(client)),
        upstream_(client_.get_executor()),
        watchdog_(client_.get_executor()),
        wake_(client_.get_executor()),
        started_(absl::Now()) {}

  void Start() {
    net::co_spawn(client_.get_executor(), Serve(shared_from_this()), net::detached);
  }

  // Ends the connection; any thread.
  void Abort(std::string why) {
    net::post(client_.get_executor(), [self = shared_from_this(), why = std::move(why)]() mutable {
      if (self->record_.reason.empty()) self->record_.reason = std::move(why);
      self->CloseSockets();
    });
  }

 private:
  // ---- The whole life of the connection.
  static net::awaitable<void> Serve(std::shared_ptr<Connection> self) {
    co_await self->Run();
    self->Finish();
  }

  net::awaitable<void> Run() {
    net::co_spawn(client_.get_executor(), Watch(shared_from_this()), net::detached);
    {
      absl::MutexLock lock(&channel_->mu);
      record_.who = channel_->identity;
      rules_ = channel_->rules;
    }
    if (rules_ == nullptr) rules_ = Rules::Closed("this sandbox's egress channel has no rules");
    beast::flat_buffer buffer;
    http::request_parser<http::empty_body> head;
    head.header_limit(static_cast<std::uint32_t>(core_->options.max_header_bytes));
    head.body_limit(kUnlimited);
    SetDeadline(core_->options.head_timeout);
    error_code ec;
    co_await http::async_read_header(client_, buffer, head, net::redirect_error(net::use_awaitable, ec));
    if (ec) {
      if (ec != http::error::end_of_stream && ec != net::error::operation_aborted && !closed_) {
        const std::string message = absl::StrCat("not an HTTP proxy request (", ec.message(),
                                          "): this is Warden's egress proxy, reached through HTTP_PROXY / HTTPS_PROXY");
        co_await Refuse(400, message);
      }
      record_.reason = record_.reason.empty() ? "no request" : record_.reason;
      co_return;
    }
    const auto& req = head.get();
    if (req.method() == http::verb::connect) {
      const std::string target(req.target());
      co_await Connect(target, buffer);
    } else {
      co_await Forward(head, buffer);
    }
  }

  // ---- CONNECT host:port
  net::awaitable<void> Connect(const std::string& target, beast::flat_buffer& buffer) {
    auto authority = ParseAuthority(target);
    if (!authority.ok()) {
      const std::string message = absl::StrCat("CONNECT ", target, ": ", authority.status().message());
      co_await Refuse(400, message);
      co_return;
    }
    const Host host = authority->first;
    const uint16_t port = authority->second;
    record_.mode = "tunnel";
    record_.host = host.ToString();
    record_.port = port;
    if (!co_await Reach(host, port)) co_return;
    const bool intercept = !host.address && (rules_->policy->Intercepts(host.name, port));
    if (intercept && buffer.size() != 0) {
      const std::string message = "the client sent data before the tunnel was established";
      co_await Refuse(400, message);
      co_return;
    }
    static constexpr char kEstablished[] = "HTTP/1.1 200 Connection established\r\n\r\n";
    error_code ec;
    SetDeadline(core_->options.idle_timeout);
    co_await net::async_write(client_, net::buffer(kEstablished, sizeof(kEstablished) - 1),
                              net::redirect_error(net::use_awaitable, ec));
    if (ec) co_return;
    if (intercept) {
      co_await Intercept(host, port);
    } else {
      co_await Tunnel(host, port, buffer);
    }
  }

  // Decides the target (before resolving, then for each address), then
  // connects upstream_ to the first allowed address. On failure the client
  // has been answered and false comes back.
  net::awaitable<bool> Reach(const Host& host, uint16_t port) {
    const Limits& limits = rules_->limits;
    if (limits.max_connections > 0 && open_in_channel_ > limits.max_connections) {
      core_->RefusedForTenant(record_.who.tenant);
      const std::string message = absl::StrCat("this sandbox has ", limits.max_connections,
                                        " connections open, its limit (max_connections_per_session in ",
                                        rules_->ceiling_source, "); close one first");
      co_await Refuse(429, message);
      co_return false;
    }
    if (limits.max_bytes > 0) {
      const Usage used = ChannelUsage();
      if (used.bytes_in + used.bytes_out >= limits.max_bytes) {
        core_->RefusedForTenant(record_.who.tenant);
        const std::string message = absl::StrCat("this sandbox has used its ", limits.max_bytes,
                                          " bytes of egress (max_bytes_per_session in ", rules_->ceiling_source, ")");
        co_await Refuse(403, message);
        co_return false;
      }
    }
    Decision decision(*rules_, host, port);
    if (absl::Status s = decision.Admit(); !s.ok()) {
      core_->RefusedForTenant(record_.who.tenant);
      const std::string message = std::string(s.message());
      co_await Refuse(403, message);
      co_return false;
    }
    std::vector<Address> addresses;
    if (host.address) {
      addresses.push_back(*host.address);
    } else {
      absl::StatusOr<std::vector<Address>> resolved = co_await Resolve(host.name);
      if (!resolved.ok()) {
        record_.allowed = true;
        const std::string message = std::string(resolved.status().message());
        co_await Refuse(502, message);
        co_return false;
      }
      addresses = *std::move(resolved);
    }
    absl::Status refusal;
    std::vector<Address> passing;
    for (const Address& a : addresses) {
      absl::Status s = decision.AdmitAddress(a);
      if (s.ok()) s = core_->guard.Check(host.ToString(), a, port);
      if (s.ok()) {
        passing.push_back(a);
      } else if (refusal.ok()) {
        refusal = s;
      }
    }
    if (passing.empty()) {
      core_->RefusedForTenant(record_.who.tenant);
      const std::string message = std::string(refusal.message());
      co_await Refuse(403, message);
      co_return false;
    }
    record_.allowed = true;
    if (!core_->OpenForTenant(record_.who.tenant)) {
      record_.allowed = false;
      const std::string message = absl::StrCat("the tenant has ", core_->options.max_connections_per_tenant,
                                        " egress connections open, its limit (egress.max_connections_per_tenant)");
      co_await Refuse(429, message);
      co_return false;
    }
    tenant_open_ = true;
    std::string failure;
    for (const Address& a : passing) {
      error_code ec;
      upstream_ = tcp::socket(client_.get_executor());
      const tcp::endpoint endpoint(a.v6 ? net::ip::address(net::ip::address_v6(a.bytes))
                                        : net::ip::address(net::ip::address_v4({a.bytes[0], a.bytes[1], a.bytes[2],
                                                                                 a.bytes[3]})),
                                   port);
      connecting_ = true;
      connect_timed_out_ = false;
      SetDeadline(core_->options.connect_timeout);
      co_await upstream_.async_connect(endpoint, net::redirect_error(net::use_awaitable, ec));
      connecting_ = false;
      if (closed_) co_return false;
      if (!ec) {
        record_.address = a.ToString();
        upstream_.set_option(tcp::no_delay(true), ec);
        co_return true;
      }
      failure = connect_timed_out_
                    ? absl::StrCat("connecting to ", a.ToString(), " port ", port, " timed out")
                    : absl::StrCat("connecting to ", a.ToString(), " port ", port, ": ", ec.message());
    }
    co_await Refuse(502, failure);
    co_return false;
  }

  net::awaitable<absl::StatusOr<std::vector<Address>>> Resolve(const std::string& name) {
    struct Pending {
      absl::StatusOr<std::vector<Address>> result = absl::UnknownError("unresolved");
      bool done = false;
    };
    auto pending = std::make_shared<Pending>();
    auto self = shared_from_this();
    core_->resolver->Resolve(name, [pending, self](absl::StatusOr<std::vector<Address>> result) {
      net::post(self->client_.get_executor(), [pending, self, result = std::move(result)]() mutable {
        pending->result = std::move(result);
        pending->done = true;
        self->wake_.cancel();
      });
    });
    while (!pending->done) co_await Sleep();
    co_return std::move(pending->result);
  }

  // Waits until wake_ is cancelled.
  net::awaitable<void> Sleep() {
    wake_.expires_at(net::steady_timer::time_point::max());
    error_code ec;
    co_await wake_.async_wait(net::redirect_error(net::use_awaitable, ec));
  }

  // ---- A tunnel: bytes pass untouched, after a look at the client's first ones.
  net::awaitable<void> Tunnel(const Host& host, uint16_t port, beast::flat_buffer& buffer) {
    record_.mode = "tunnel";
    // The upstream's bytes flow from the start (a protocol whose server
    // speaks first); none of the client's goes up before its first ones are
    // seen: a TLS ClientHello must name the CONNECT host, and plain HTTP's
    // requests must too.
    Spawn(PumpUp(shared_from_this()));
    error_code ec;
    for (;;) {
      const absl::string_view data = View(buffer);
      if (!data.empty() && static_cast<uint8_t>(data[0]) == 22) {
        const ClientHello hello = ParseClientHello(data);
        if (hello.status == ClientHello::Status::kComplete) {
          if (absl::Status s = CheckServerName(host, port, hello.server_name); !s.ok()) {
            Fail(std::string(s.message()));
            co_return;
          }
          break;
        }
        if (hello.status != ClientHello::Status::kNeedMore) {
          Fail("a malformed TLS ClientHello");
          co_return;
        }
      } else if (LooksLikeHttpRequest(data)) {
        record_.mode = "http";
        co_await Requests(client_, upstream_, buffer, host, port, /*transform=*/false, "CONNECT");
        co_await Join();
        co_return;
      } else if (!data.empty() && !CouldBecomeHttpRequest(data)) {
        break;  // another protocol on an allowed port: raw
      }
      Activity();
      const size_t n = co_await client_.async_read_some(buffer.prepare(4096), net::redirect_error(net::use_awaitable, ec));
      if (ec) {
        if (ec == net::error::eof) ShutdownSend(upstream_);
        co_await Join();
        co_return;
      }
      buffer.commit(n);
    }
    co_await Pump(client_, upstream_, &buffer, /*outbound=*/true);
    co_await Join();
  }

  // The ClientHello's server name against the CONNECT target.
  absl::Status CheckServerName(const Host& host, uint16_t port, const std::optional<std::string>& sni) {
    if (!sni) return absl::OkStatus();  // the server picks; the target was decided already
    auto named = NormalizeHostName(*sni);
    if (!named.ok()) return absl::PermissionDeniedError("the TLS server name is not a host name");
    if (!host.address) {
      if (*named == host.name) return absl::OkStatus();
      return absl::PermissionDeniedError(absl::StrCat("the TLS server name ", *named, " is not the CONNECT host ",
                                                      host.name, " (domain fronting is refused)"));
    }
    // An address was allowed; the name the client asks it for must be too.
    Host as_name;
    as_name.name = *named;
    Decision decision(*rules_, as_name, port);
    if (absl::Status s = decision.Admit(); !s.ok()) {
      return absl::PermissionDeniedError(absl::StrCat("the TLS server name ", *named, " for ", host.ToString(),
                                                      ": ", s.message()));
    }
    return absl::OkStatus();
  }

  // ---- TLS terminated: the hosts with header rules or secrets.
  net::awaitable<void> Intercept(const Host& host, uint16_t port) {
    record_.mode = "intercept";
    if (core_->options.ca == nullptr) {
      Fail("interception is off (no CA)");
      co_return;
    }
    auto context = core_->options.ca->ServerContext(host);
    if (!context.ok()) {
      Fail(std::string(context.status().message()));
      co_return;
    }
    SSL_CTX_up_ref(context->get());
    ssl::context server_context(context->get());  // takes the reference
    ssl::stream<tcp::socket&> client(client_, server_context);
    error_code ec;
    SetDeadline(core_->options.connect_timeout);
    co_await client.async_handshake(ssl::stream_base::server, net::redirect_error(net::use_awaitable, ec));
    if (ec) {
      Fail(absl::StrCat("the sandbox's TLS handshake: ", ec.message()));
      co_return;
    }
    const char* sni = SSL_get_servername(client.native_handle(), TLSEXT_NAMETYPE_host_name);
    if (sni != nullptr) {
      if (absl::Status s = CheckServerName(host, port, std::string(sni)); !s.ok()) {
        Fail(std::string(s.message()));
        co_return;
      }
    }
    ssl::stream<tcp::socket&> upstream(upstream_, core_->upstream_tls);
    SSL* native = upstream.native_handle();
    SSL_set_tlsext_host_name(native, host.name.c_str());
    SSL_set1_host(native, host.name.c_str());
    SetDeadline(core_->options.connect_timeout);
    co_await upstream.async_handshake(ssl::stream_base::client, net::redirect_error(net::use_awaitable, ec));
    beast::flat_buffer buffer;
    if (ec) {
      const long verify = SSL_get_verify_result(native);
      const std::string why = verify != X509_V_OK
                                  ? absl::StrCat("the certificate of ", host.name, " failed verification: ",
                                                 X509_verify_cert_error_string(verify))
                                  : absl::StrCat("the TLS handshake with ", host.name, ": ", ec.message());
      // Said to the client as the answer to its first request.
      http::request_parser<http::empty_body> first;
      SetDeadline(core_->options.head_timeout);
      co_await http::async_read_header(client, buffer, first, net::redirect_error(net::use_awaitable, ec));
      if (!ec) co_await Answer(client, 502, why);
      Fail(why);
      co_return;
    }
    Spawn(PumpDownTls(shared_from_this(), upstream, client));
    co_await Requests(client, upstream, buffer, host, port, /*transform=*/true,
                      sni != nullptr ? "CONNECT and the TLS server name" : "CONNECT");
    co_await Join();
  }

  // ---- Requests: parsed one by one (Host checked, headers transformed),
  // the answers flowing back raw beside them (PumpUp / PumpDownTls).
  // `named_by`: what named the target (for the refusal of another Host).
  template <class Client, class Upstream>
  net::awaitable<void> Requests(Client& client, Upstream& upstream, beast::flat_buffer& buffer, const Host& host,
                                uint16_t port, bool transform, const char* named_by) {
    std::vector<char> chunk(kChunk);
    for (;;) {
      http::request_parser<http::buffer_body> parser;
      parser.header_limit(static_cast<std::uint32_t>(core_->options.max_header_bytes));
      parser.body_limit(kUnlimited);
      error_code ec;
      Activity();
      co_await http::async_read_header(client, buffer, parser, net::redirect_error(net::use_awaitable, ec));
      if (ec) {
        if (ec == http::error::end_of_stream || ec == net::error::eof || ec == ssl::error::stream_truncated) {
          ShutdownSend(upstream);
        } else if (!closed_) {
          Fail(absl::StrCat("a request the proxy cannot read: ", ec.message()));
        }
        co_return;
      }
      auto& req = parser.get();
      if (absl::Status s = CheckHost(req, host, port, named_by); !s.ok()) {
        // Never sent on. The client is told why unless an answer of the
        // upstream's has begun to come down (this one would cut into it):
        // then the connection just ends, the reason in the audit line.
        const std::string message(s.message());
        if (record_.reason.empty()) record_.reason = message;
        if (!down_started_) {
          refusing_ = true;
          co_await Answer(client, 403, message);
        }
        Fail(message);
        co_return;
      }
      if (transform) Transform(req, host.name, port);
      const bool upgrade = beast::http::token_list(req[http::field::connection]).exists("upgrade");
      if (!co_await Relay(client, upstream, buffer, parser, chunk, /*outbound=*/true)) co_return;
      if (upgrade) {
        co_await Pump(client, upstream, &buffer, /*outbound=*/true);
        co_return;
      }
    }
  }

  // One message's header and body from `from` to `to` (the header read
  // already). False when the connection is over.
  template <class From, class To, class Parser>
  net::awaitable<bool> Relay(From& from, To& to, beast::flat_buffer& buffer, Parser& parser, std::vector<char>& chunk,
                             bool outbound) {
    using Message = std::remove_reference_t<decltype(parser.get())>;
    http::serializer<Message::is_request::value, http::buffer_body> serializer(parser.get());
    error_code ec;
    Activity();
    size_t n = co_await http::async_write_header(to, serializer, net::redirect_error(net::use_awaitable, ec));
    if (ec || !Count(outbound, n)) {
      if (ec && !closed_) Fail(absl::StrCat(outbound ? "sending a request upstream: " : "answering: ", ec.message()));
      co_return false;
    }
    do {
      if (!parser.is_done()) {
        parser.get().body().data = chunk.data();
        parser.get().body().size = chunk.size();
        Activity();
        co_await http::async_read(from, buffer, parser, net::redirect_error(net::use_awaitable, ec));
        if (ec == http::error::need_buffer) ec = {};
        if (ec) {
          if (!closed_) Fail(absl::StrCat("reading a body: ", ec.message()));
          co_return false;
        }
        parser.get().body().size = chunk.size() - parser.get().body().size;
        parser.get().body().data = chunk.data();
        parser.get().body().more = !parser.is_done();
      } else {
        parser.get().body().data = nullptr;
        parser.get().body().size = 0;
        parser.get().body().more = false;
      }
      Activity();
      n = co_await http::async_write(to, serializer, net::redirect_error(net::use_awaitable, ec));
      if (ec == http::error::need_buffer) ec = {};
      if (ec || !Count(outbound, n)) {
        if (ec && !closed_) Fail(absl::StrCat("relaying a body: ", ec.message()));
        co_return false;
      }
    } while (!parser.is_done() && !serializer.is_done());
    co_return true;
  }

  // The Host header must name the target, as `named_by` named it (CONNECT,
  // the TLS server name, the URL's authority).
  template <class Message>
  absl::Status CheckHost(const Message& req, const Host& host, uint16_t port, absl::string_view named_by) {
    const auto it = req.find(http::field::host);
    if (it == req.end()) {
      if (req.version() < 11) return absl::OkStatus();
      return absl::PermissionDeniedError("a request without a Host header");
    }
    const absl::string_view value(it->value().data(), it->value().size());
    auto named = ParseAuthority(value, port);
    if (!named.ok()) return absl::PermissionDeniedError(absl::StrCat("a Host header '", value, "' that is not a host"));
    const bool same_host = named->first.address ? host.address && *named->first.address == *host.address
                                                : !host.address && named->first.name == host.name;
    if (!same_host || named->second != port) {
      return absl::PermissionDeniedError(absl::StrCat("the Host header names ", value, " but ", named_by, " named ",
                                                      host.ToString(), ":", port,
                                                      ": domain fronting is refused (ask for ", value, " itself)"));
    }
    return absl::OkStatus();
  }

  // Secrets in place of their placeholders, then the header rule's headers.
  template <class Message>
  void Transform(Message& req, const std::string& name, uint16_t port) {
    const Policy& policy = *rules_->policy;
    std::vector<const SecretBinding*> secrets;
    for (const SecretBinding& s : policy.secrets) {
      if (std::any_of(s.hosts.begin(), s.hosts.end(), [&](const Destination& d) { return d.MatchesName(name, port); })) {
        secrets.push_back(&s);
      }
    }
    if (!secrets.empty()) {
      std::vector<std::pair<std::string, std::string>> changed;
      for (auto it = req.begin(); it != req.end();) {
        std::string value(it->value());
        bool replaced = false;
        for (const SecretBinding* s : secrets) {
          const std::string placeholder = Placeholder(s->name);
          if (value.find(placeholder) == std::string::npos) continue;
          value = absl::StrReplaceAll(value, {{placeholder, s->value}});
          replaced = true;
        }
        if (replaced) {
          changed.emplace_back(std::string(it->name_string()), std::move(value));
          it = req.erase(it);
        } else {
          ++it;
        }
      }
      for (auto& [field, value] : changed) req.insert(field, value);
      record_.secrets_used |= !changed.empty();
    }
    if (const HeaderRule* rule = policy.HeaderRuleFor(name)) {
      for (const auto& [field, value] : rule->headers) req.set(field, value);
    }
  }

  // ---- GET http://host/path: plain HTTP, forwarded request by request.
  net::awaitable<void> Forward(http::request_parser<http::empty_body>& head, beast::flat_buffer& buffer) {
    record_.mode = "http";
    std::vector<char> chunk(kChunk);
    std::optional<http::request_parser<http::buffer_body>> parser;
    parser.emplace(std::move(head));
    std::string connected;  // the authority upstream_ is connected to
    for (;;) {
      auto& req = parser->get();
      const std::string target(req.target());
      absl::string_view rest = target;
      if (!absl::ConsumePrefix(&rest, "http://")) {
        const std::string message = absl::StartsWithIgnoreCase(target, "https://")
                                 ? "an https:// URL sent to the proxy as is: send CONNECT host:443 (what "
                                   "HTTPS_PROXY clients do)"
                                 : absl::StrCat("'", target,
                                                "' is not a proxy request: this is Warden's egress proxy, reached "
                                                "through HTTP_PROXY; ask for absolute http:// URLs or CONNECT");
        co_await Refuse(400, message);
        co_return;
      }
      const size_t slash = rest.find_first_of("/?#");
      const std::string authority(rest.substr(0, slash));
      const std::string path = slash == absl::string_view::npos ? "/" : std::string(rest.substr(slash));
      auto where = ParseAuthority(authority, 80);
      if (!where.ok()) {
        const std::string message = absl::StrCat(target, ": ", where.status().message());
        co_await Refuse(400, message);
        co_return;
      }
      const Host host = where->first;
      const uint16_t port = where->second;
      if (req.find(http::field::host) != req.end()) {
        if (absl::Status s = CheckHost(req, host, port, "the request's URL"); !s.ok()) {
          const std::string message = std::string(s.message());
          co_await Refuse(403, message);
          co_return;
        }
      }
      if (authority != connected) {
        if (!connected.empty()) {
          // Another host on the same connection: decided and connected anew.
          AuditNow();
          error_code ignored;
          upstream_.close(ignored);
        }
        record_.host = host.ToString();
        record_.port = port;
        if (!co_await Reach(host, port)) co_return;
        connected = authority;
      }
      req.target(path);
      req.set(http::field::host, authority);
      req.erase(http::field::proxy_authorization);
      req.erase("Proxy-Connection");
      const bool head_request = req.method() == http::verb::head;
      const bool keep_alive = req.keep_alive();
      if (!co_await Relay(client_, upstream_, buffer, *parser, chunk, /*outbound=*/true)) co_return;
      // The answer (and 1xx interim ones before it).
      beast::flat_buffer upstream_buffer;
      for (;;) {
        http::response_parser<http::buffer_body> answer;
        answer.header_limit(static_cast<std::uint32_t>(core_->options.max_header_bytes));
        answer.body_limit(kUnlimited);
        if (head_request) answer.skip(true);
        error_code ec;
        Activity();
        co_await http::async_read_header(upstream_, upstream_buffer, answer, net::redirect_error(net::use_awaitable, ec));
        if (ec) {
          if (!closed_) {
            const std::string message = absl::StrCat("reading ", authority, "'s answer: ", ec.message());
            co_await Answer(client_, 502, message);
          }
          Fail(absl::StrCat("reading the answer: ", ec.message()));
          co_return;
        }
        const unsigned status = answer.get().result_int();
        if (!co_await Relay(upstream_, client_, upstream_buffer, answer, chunk, /*outbound=*/false)) co_return;
        if (status == 101) {
          Spawn(PumpUp(shared_from_this(), std::make_shared<beast::flat_buffer>(std::move(upstream_buffer))));
          co_await Pump(client_, upstream_, &buffer, /*outbound=*/true);
          co_await Join();
          co_return;
        }
        if (status >= 200) {
          if (!answer.get().keep_alive()) co_return;
          break;
        }
      }
      if (!keep_alive) co_return;
      parser.emplace();
      parser->header_limit(static_cast<std::uint32_t>(core_->options.max_header_bytes));
      parser->body_limit(kUnlimited);
      error_code ec;
      Activity();
      co_await http::async_read_header(client_, buffer, *parser, net::redirect_error(net::use_awaitable, ec));
      if (ec) co_return;
    }
  }

  // ---- Raw relays
  static net::awaitable<void> PumpUp(std::shared_ptr<Connection> self,
                                     std::shared_ptr<beast::flat_buffer> pending = nullptr) {
    co_await self->Pump(self->upstream_, self->client_, pending.get(), /*outbound=*/false);
  }
  static net::awaitable<void> PumpDownTls(std::shared_ptr<Connection> self, ssl::stream<tcp::socket&>& upstream,
                                          ssl::stream<tcp::socket&>& client) {
    co_await self->Pump(upstream, client, nullptr, /*outbound=*/false);
    // The upstream is done: so is the connection (a TLS close without
    // close_notify to the client is the end of its last answer), once a
    // refusal being written has gone.
    if (!self->refusing_) self->CloseSockets();
  }

  // Copies `from` to `to` until `from` ends (then `to`'s sending side is
  // shut) or anything fails (then the whole connection ends). `pending`:
  // bytes read from `from` already.
  template <class From, class To>
  net::awaitable<void> Pump(From& from, To& to, beast::flat_buffer* pending, bool outbound) {
    error_code ec;
    if (pending != nullptr && pending->size() != 0) {
      const size_t n = co_await net::async_write(to, pending->data(), net::redirect_error(net::use_awaitable, ec));
      pending->consume(pending->size());
      if (ec || !Count(outbound, n)) {
        CloseSockets();
        co_return;
      }
    }
    std::vector<char> chunk(kChunk);
    for (;;) {
      Activity();
      const size_t n = co_await from.async_read_some(net::buffer(chunk), net::redirect_error(net::use_awaitable, ec));
      if (!outbound) {
        // The client is being told why its request was refused: nothing
        // more goes to it (Requests ends the connection after).
        if (refusing_) co_return;
        down_started_ = down_started_ || !ec;
      }
      if (ec) {
        if (ec == net::error::eof || ec == ssl::error::stream_truncated) {
          ShutdownSend(to);
        } else {
          CloseSockets();
        }
        co_return;
      }
      co_await net::async_write(to, net::buffer(chunk.data(), n), net::redirect_error(net::use_awaitable, ec));
      if (ec || !Count(outbound, n)) {
        CloseSockets();
        co_return;
      }
    }
  }

  // Spawns `task` on the connection's strand; Join waits for it.
  void Spawn(net::awaitable<void> task) {
    ++spawned_;
    net::co_spawn(client_.get_executor(), std::move(task), [self = shared_from_this()](std::exception_ptr) {
      --self->spawned_;
      self->wake_.cancel();
    });
  }
  net::awaitable<void> Join() {
    while (spawned_ > 0) co_await Sleep();
  }

  // ---- Answers from the proxy itself
  // Takes only named strings: GCC 12 may destroy a temporary that is part
  // of a co_await expression twice (a double free under ASan).
  net::awaitable<void> Refuse(unsigned status, const std::string& message) {
    if (record_.reason.empty()) record_.reason = message;
    co_await Answer(client_, status, message);
    CloseSockets();
  }
  template <class Stream>
  net::awaitable<void> Answer(Stream& stream, unsigned status, const std::string& message) {
    http::response<http::string_body> res{static_cast<http::status>(status), 11};
    res.reason(ReasonPhrase(absl::StrCat("Warden egress: ", message)));
    res.set(http::field::content_type, "text/plain; charset=utf-8");
    res.set("X-Warden-Egress", status == 502 ? "upstream-failed" : "refused");
    res.body() = absl::StrCat("Warden egress: ", message, "\n");
    res.keep_alive(false);
    res.prepare_payload();
    error_code ec;
    SetDeadline(core_->options.head_timeout);
    co_await http::async_write(stream, res, net::redirect_error(net::use_awaitable, ec));
  }
  void Fail(std::string why) {
    if (record_.reason.empty()) record_.reason = std::move(why);
    CloseSockets();
  }

  // ---- Deadlines: one per connection, moved on by every operation.
  void SetDeadline(absl::Duration d) {
    const auto when = Clock::now() + absl::ToChronoNanoseconds(d);
    const bool sooner = when < deadline_;
    deadline_ = when;
    if (sooner) watchdog_.cancel();
  }
  void Activity() { deadline_ = Clock::now() + absl::ToChronoNanoseconds(core_->options.idle_timeout); }

  static net::awaitable<void> Watch(std::shared_ptr<Connection> self) {
    while (!self->finished_) {
      self->watchdog_.expires_at(self->deadline_);
      error_code ec;
      co_await self->watchdog_.async_wait(net::redirect_error(net::use_awaitable, ec));
      if (self->finished_) break;
      if (Clock::now() >= self->deadline_) {
        if (self->connecting_) {
          // Only the upstream connect is given up: Reach tries the next
          // address, or answers the client why.
          self->connect_timed_out_ = true;
          self->deadline_ = Clock::now() + absl::ToChronoNanoseconds(self->core_->options.head_timeout);
          error_code ignored;
          self->upstream_.close(ignored);
          continue;
        }
        if (self->record_.reason.empty()) {
          self->record_.reason = self->record_.allowed ? "idle too long" : "no request in time";
        }
        self->CloseSockets();
        break;
      }
    }
  }

  void CloseSockets() {
    error_code ignored;
    closed_ = true;
    client_.close(ignored);
    upstream_.close(ignored);
    wake_.cancel();
  }
  template <class Stream>
  static void ShutdownSend(Stream& stream) {
    error_code ignored;
    beast::get_lowest_layer(stream).shutdown(tcp::socket::shutdown_send, ignored);
  }

  // ---- Accounting and the audit
  bool Count(bool outbound, size_t n) {
    const int64_t out = outbound ? static_cast<int64_t>(n) : 0;
    const int64_t in = outbound ? 0 : static_cast<int64_t>(n);
    record_.bytes_out += out;
    record_.bytes_in += in;
    core_->BytesForTenant(record_.who.tenant, out, in);
    if (channel_->Count(out, in, rules_->limits.max_bytes)) return true;
    if (record_.reason.empty()) {
      record_.reason = absl::StrCat("the sandbox's egress byte limit (", rules_->limits.max_bytes,
                                    ", max_bytes_per_session in ", rules_->ceiling_source, ") was reached");
    }
    return false;
  }
  Usage ChannelUsage() const {
    absl::MutexLock lock(&channel_->mu);
    return channel_->usage;
  }

  void AuditNow() {
    record_.duration = absl::Now() - started_;
    if (core_->options.audit) core_->options.audit(record_);
    if (tenant_open_) core_->CloseForTenant(record_.who.tenant);
    tenant_open_ = false;
    const Identity who = record_.who;
    record_ = AuditRecord();
    record_.who = who;
    record_.mode = "http";
    started_ = absl::Now();
  }

  void Finish() {
    finished_ = true;
    error_code ignored;
    client_.close(ignored);
    upstream_.close(ignored);
    watchdog_.cancel();
    record_.duration = absl::Now() - started_;
    if (record_.mode.empty()) record_.mode = "none";
    if (tenant_open_) core_->CloseForTenant(record_.who.tenant);
    tenant_open_ = false;
    {
      absl::MutexLock lock(&channel_->mu);
      if (record_.allowed) ++channel_->usage.connections;
      else if (!record_.host.empty()) ++channel_->usage.refused;
      --channel_->usage.open;
    }
    if (core_->options.audit && (!record_.host.empty() || !record_.reason.empty())) core_->options.audit(record_);
  }

 public:
  int open_in_channel_ = 0;  // set by the accept loop: this one's place among the channel's open connections

 private:
  const std::shared_ptr<Channel::State> channel_;
  const std::shared_ptr<Proxy::Core> core_;
  tcp::socket client_;
  tcp::socket upstream_;
  net::steady_timer watchdog_;
  net::steady_timer wake_;
  Clock::time_point deadline_ = Clock::time_point::max();
  absl::Time started_;
  std::shared_ptr<const Rules> rules_;
  AuditRecord record_;
  int spawned_ = 0;
  bool closed_ = false;
  bool connecting_ = false;
  bool connect_timed_out_ = false;
  bool finished_ = false;
  bool tenant_open_ = false;
  // The upstream's bytes have begun to come down to the client; the proxy
  // is answering the client itself instead (a refused request).
  bool down_started_ = false;
  bool refusing_ = false;
};

// ---- Channel

namespace {

net::awaitable<void> AcceptLoop(std::shared_ptr<Channel::State> state, std::shared_ptr<tcp::acceptor> acceptor) {
  for (;;) {
    tcp::socket socket(net::make_strand(state->core->io));
    error_code ec;
    co_await acceptor->async_accept(socket, net::redirect_error(net::use_awaitable, ec));
    if (ec == net::error::operation_aborted || !acceptor->is_open()) co_return;
    if (ec) {
      // Out of descriptors, or the like: breathe, then go on.
      net::steady_timer pause(state->strand, std::chrono::milliseconds(100));
      co_await pause.async_wait(net::redirect_error(net::use_awaitable, ec));
      if (!acceptor->is_open()) co_return;
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);
    auto connection = std::make_shared<Connection>(state, std::move(socket));
    {
      absl::MutexLock lock(&state->mu);
      connection->open_in_channel_ = ++state->usage.open;
      state->live.remove_if([](const std::weak_ptr<Connection>& w) { return w.expired(); });
      state->live.push_back(connection);
    }
    connection->Start();
  }
}

}  // namespace

void Channel::State::Shut() {
  if (acceptor) {
    error_code ignored;
    acceptor->close(ignored);
    acceptor.reset();
  }
  std::list<std::weak_ptr<Connection>> live_now;
  {
    absl::MutexLock lock(&mu);
    live_now.swap(live);
  }
  for (auto& w : live_now) {
    if (auto c = w.lock()) c->Abort("the sandbox ended");
  }
}

Channel::~Channel() { Close(); }

void Channel::Open(UniqueFd listener) {
  auto state = state_;
  if (state->core->stopped) return;
  const int fd = listener.Release();
  net::post(state->strand, [state, fd] {
    state->Shut();
    auto acceptor = std::make_shared<tcp::acceptor>(state->strand);
    error_code ec;
    acceptor->assign(tcp::v4(), fd, ec);
    if (ec) {
      ::close(fd);
      return;
    }
    state->acceptor = acceptor;
    net::co_spawn(state->strand, AcceptLoop(state, acceptor), net::detached);
  });
}

void Channel::Close() {
  auto state = state_;
  if (state->core->stopped || state->strand.running_in_this_thread()) {
    state->Shut();
    return;
  }
  std::promise<void> done;
  std::future<void> shut = done.get_future();
  net::post(state->strand, [state, &done] {
    state->Shut();
    done.set_value();
  });
  // The I/O threads may stop meanwhile (the proxy ending): then the posted
  // handler is destroyed unrun, and the acceptor with the context.
  while (shut.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
    if (state->core->stopped) return;
  }
}

void Channel::SetIdentity(Identity identity) {
  absl::MutexLock lock(&state_->mu);
  state_->identity = std::move(identity);
}

void Channel::SetRules(std::shared_ptr<const Rules> rules) {
  absl::MutexLock lock(&state_->mu);
  state_->rules = std::move(rules);
}

Identity Channel::identity() const {
  absl::MutexLock lock(&state_->mu);
  return state_->identity;
}

std::shared_ptr<const Rules> Channel::rules() const {
  absl::MutexLock lock(&state_->mu);
  return state_->rules;
}

Usage Channel::usage() const {
  absl::MutexLock lock(&state_->mu);
  return state_->usage;
}

// ---- Proxy

void Proxy::Core::Stop() {
  std::list<std::weak_ptr<Channel::State>> all;
  {
    absl::MutexLock lock(&mu);
    all.swap(channels);
  }
  for (auto& w : all) {
    if (auto state = w.lock()) {
      net::post(state->strand, [state] { state->Shut(); });
    }
  }
  work.reset();
  // Connections end as their sockets close; give them a moment, then stop.
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  while (Clock::now() < deadline && !io.stopped()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  io.stop();
  for (std::thread& t : threads) t.join();
  threads.clear();
  stopped = true;
  resolver.reset();
}

absl::StatusOr<std::unique_ptr<Proxy>> Proxy::Start(ProxyOptions options) {
  auto core = std::make_shared<Core>(std::move(options));
  if (absl::Status s = core->Start(); !s.ok()) return s;
  return std::unique_ptr<Proxy>(new Proxy(std::move(core)));
}

Proxy::~Proxy() { core_->Stop(); }

std::shared_ptr<Channel> Proxy::NewChannel(Identity identity, std::shared_ptr<const Rules> rules) {
  auto state = std::make_shared<Channel::State>(core_);
  state->identity = std::move(identity);
  state->rules = std::move(rules);
  {
    absl::MutexLock lock(&core_->mu);
    core_->channels.remove_if([](const std::weak_ptr<Channel::State>& w) { return w.expired(); });
    core_->channels.push_back(state);
  }
  return std::shared_ptr<Channel>(new Channel(std::move(state)));
}

std::map<std::string, Usage> Proxy::TenantUsage() const {
  absl::MutexLock lock(&core_->mu);
  return core_->tenants;
}

boost::asio::io_context& Proxy::io() { return core_->io; }

}  // namespace warden::egress
