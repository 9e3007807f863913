// Proxy: the host side of every sandbox's only way out. Each sandbox's
// listener (sandbox/egress_gate.h) is served by a Channel of its own, which
// knows whose sandbox it is (session, tenant) and what it may reach
// (Rules). A connection from the sandbox speaks HTTP proxy protocol:
//
//   CONNECT host:port   a tunnel. Where the host has no header rules or
//                       secrets, the bytes pass untouched, but a TLS
//                       ClientHello's server name must be the CONNECT host
//                       and plain HTTP's Host header must be too. Where it
//                       has, the proxy terminates TLS with a certificate of
//                       the daemon's CA (certificate_authority.h), checks
//                       each request's Host, sets the rules' headers and
//                       writes secrets in place of their placeholders, and
//                       speaks TLS to the upstream, verifying its
//                       certificate against the host's trust store (or the
//                       configured CA).
//   GET http://...      plain HTTP, forwarded (never transformed: a secret
//                       never crosses the network in clear).
//
// Every target is decided before it is resolved and again for the address
// it is connected to (rules.h, address_guard.h); DNS happens here, on the
// host, for names a policy lets out. A refusal is an HTTP answer (403, or
// 502 when the upstream fails) whose status line and body say why and
// which setting would allow it, and every connection, refused or not, ends
// with an AuditRecord. Bytes and connections count per channel and per
// tenant, against Rules::limits.
//
// Asynchronous on a few I/O threads (Boost.Asio), each connection a C++20
// coroutine on a strand of its own: a protocol of several steps reads best
// as the steps in order, and no connection holds a thread while it waits.
// Everything a connection waits for is bounded: its request head, its
// upstream's connect and TLS handshake, and a quiet tunnel.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "egress/certificate_authority.h"
#include "egress/destination.h"
#include "egress/resolver.h"
#include "egress/rules.h"
#include "sandbox/egress_gate.h"
#include "sandbox/unique_fd.h"

namespace boost::asio {
class io_context;
}

namespace warden::egress {

struct Identity {
  std::string session;  // or a pool worker's name before a call takes it
  std::string tenant;
};

// One connection, when it ends (or is refused).
struct AuditRecord {
  Identity who;
  std::string host;     // as the sandbox asked: a name or an address
  uint16_t port = 0;
  std::string address;  // what the proxy connected to; empty if it did not
  bool allowed = false;
  std::string mode;     // "tunnel", "intercept" (TLS terminated), "http"
  std::string reason;   // why it was refused or ended early; empty for a normal end
  bool secrets_used = false;  // a secret was written into a request (never which, never its value)
  int64_t bytes_out = 0;  // sandbox -> upstream
  int64_t bytes_in = 0;   // upstream -> sandbox
  absl::Duration duration;
};

struct Usage {
  int64_t bytes_out = 0;
  int64_t bytes_in = 0;
  int64_t connections = 0;  // allowed, since the start
  int64_t refused = 0;
  int open = 0;             // open now
};

struct ProxyOptions {
  int io_threads = 1;
  Resolver::Options resolver;
  // Internal networks the proxy may reach all the same (egress.allow_internal).
  std::vector<Destination> allow_internal;
  // The CA bundle upstream certificates are verified against; empty: the
  // host's trust store (OpenSSL's default paths).
  std::string upstream_ca_file;
  // Signs the certificates of intercepted hosts; null: nothing is
  // intercepted (hosts with rules or secrets are refused).
  std::shared_ptr<CertificateAuthority> ca;
  absl::Duration head_timeout = absl::Seconds(30);
  absl::Duration connect_timeout = absl::Seconds(10);  // TCP connect and TLS handshake, each
  absl::Duration idle_timeout = absl::Minutes(10);     // nothing moved either way
  size_t max_header_bytes = 64 * 1024;
  // Tenant-wide bound on connections open at once; 0: none.
  int max_connections_per_tenant = 0;
  // Called once per connection, on an I/O thread; must not block.
  std::function<void(const AuditRecord&)> audit;
};

class Proxy;

// One sandbox's gate: its listener, who it belongs to and its rules, which
// may change while it serves (a pool worker taken by a session, an
// UpdateNetwork). Thread-safe.
class Channel : public EgressGate, public std::enable_shared_from_this<Channel> {
 public:
  ~Channel() override;
  void Open(UniqueFd listener) override;
  void Close() override;

  void SetIdentity(Identity identity);
  void SetRules(std::shared_ptr<const Rules> rules);
  Identity identity() const;
  std::shared_ptr<const Rules> rules() const;
  Usage usage() const;

  struct State;  // proxy.cc

 private:
  friend class Proxy;
  explicit Channel(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

class Proxy {
 public:
  static absl::StatusOr<std::unique_ptr<Proxy>> Start(ProxyOptions options);
  ~Proxy();  // ends every connection and joins the threads

  std::shared_ptr<Channel> NewChannel(Identity identity, std::shared_ptr<const Rules> rules);
  std::map<std::string, Usage> TenantUsage() const;
  // The I/O threads' context, for other relays of sandbox bytes (exposed ports).
  boost::asio::io_context& io();

  class Core;  // proxy.cc

 private:
  explicit Proxy(std::shared_ptr<Core> core) : core_(std::move(core)) {}
  std::shared_ptr<Core> core_;
};

}  // namespace warden::egress
