// How the CLI reaches wardend: which address, which channel credentials
// (plaintext only on a UNIX socket or loopback TCP, TLS otherwise), the
// bearer token on every call, and gRPC errors rendered as one line.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/status.h"

namespace warden::cli {

inline constexpr char kDefaultAddress[] = "unix:/run/warden/wardend.sock";

// --addr if given, else $WARDEN_ADDR if set, else the default socket.
std::string ResolveAddress(absl::string_view flag, absl::string_view env);

enum class Transport {
  kUnixSocket,   // unix:PATH / unix-abstract:NAME: plaintext, the socket's mode guards it
  kLoopbackTcp,  // 127.0.0.0/8, ::1, localhost: plaintext
  kTls,          // any other host: TLS
};

struct Endpoint {
  std::string target;  // what grpc::CreateChannel takes
  std::string host;    // the host part; empty for UNIX sockets
  Transport transport;
};

// Accepts unix:PATH, unix-abstract:NAME, an absolute socket path, HOST:PORT,
// [IPV6]:PORT, and gRPC's dns:, ipv4: and ipv6: target forms.
absl::StatusOr<Endpoint> ParseEndpoint(absl::string_view address);

// localhost, 127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104.
bool IsLoopbackHost(absl::string_view host);

// PEM files for TLS, from WARDEN_CA_FILE, WARDEN_CERT_FILE, WARDEN_KEY_FILE.
struct TlsFiles {
  std::string ca_file;    // empty: the system's roots
  std::string cert_file;  // with key_file: a client certificate (mTLS)
  std::string key_file;
};

// The SSL options those files ask for; errors name the unreadable file.
absl::StatusOr<grpc::SslCredentialsOptions> SslOptionsFrom(const TlsFiles& files);

std::shared_ptr<grpc::ChannelCredentials> CredentialsFor(Transport transport,
                                                         const grpc::SslCredentialsOptions& ssl);

absl::StatusOr<std::shared_ptr<grpc::Channel>> Connect(const Endpoint& endpoint,
                                                       const TlsFiles& files);

// A context for one call: "authorization: Bearer TOKEN" when token is set,
// and a deadline `timeout` from now.
std::unique_ptr<grpc::ClientContext> NewContext(absl::string_view token, absl::Duration timeout);

// "UNAVAILABLE", "NOT_FOUND", ...
std::string StatusCodeName(grpc::StatusCode code);

// "<CODE NAME>: <message>", with a hint at what to do for the codes that
// usually mean a setup problem (no daemon, no token).
std::string DescribeRpcError(const grpc::Status& status, absl::string_view address);

}  // namespace warden::cli
