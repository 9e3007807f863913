#include "client/connection.h"

#include <arpa/inet.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/channel_arguments.h"

namespace warden::cli {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view what) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  if (!in || content.str().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read ", what, " '", path, "': check the path and its permissions"));
  }
  return content.str();
}

// "host:port", "[v6]:port", "host" or a bare IPv6 address -> the host.
absl::string_view HostOf(absl::string_view host_port) {
  if (absl::StartsWith(host_port, "[")) {
    size_t close = host_port.find(']');
    return close == absl::string_view::npos ? host_port.substr(1) : host_port.substr(1, close - 1);
  }
  size_t colon = host_port.find(':');
  if (colon == absl::string_view::npos) return host_port;
  if (host_port.find(':', colon + 1) != absl::string_view::npos) return host_port;  // bare IPv6
  return host_port.substr(0, colon);
}

}  // namespace

std::string ResolveAddress(absl::string_view flag, absl::string_view env) {
  if (!flag.empty()) return std::string(flag);
  if (!env.empty()) return std::string(env);
  return kDefaultAddress;
}

bool IsLoopbackHost(absl::string_view host) {
  if (absl::EqualsIgnoreCase(host, "localhost") || absl::EqualsIgnoreCase(host, "localhost.")) {
    return true;
  }
  std::string text(host);
  in_addr v4;
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6;
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

absl::StatusOr<Endpoint> ParseEndpoint(absl::string_view address) {
  if (address.empty()) return absl::InvalidArgumentError("the daemon address is empty");
  if (absl::StartsWith(address, "unix:") || absl::StartsWith(address, "unix-abstract:")) {
    return Endpoint{std::string(address), "", Transport::kUnixSocket};
  }
  if (absl::StartsWith(address, "/")) {
    return Endpoint{absl::StrCat("unix:", address), "", Transport::kUnixSocket};
  }

  // Everything else is TCP: find the host (or hosts, for ipv4:/ipv6: lists).
  absl::string_view rest = address;
  std::vector<absl::string_view> hosts;
  if (absl::ConsumePrefix(&rest, "ipv4:") || absl::ConsumePrefix(&rest, "ipv6:")) {
    for (absl::string_view one : absl::StrSplit(rest, ',')) hosts.push_back(HostOf(one));
  } else {
    if (absl::ConsumePrefix(&rest, "dns:") && absl::ConsumePrefix(&rest, "//")) {
      size_t slash = rest.find('/');  // skip the DNS server authority
      rest = slash == absl::string_view::npos ? "" : rest.substr(slash + 1);
    }
    if (absl::StrContains(rest, "://") || absl::StrContains(rest, "/")) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot use address '", address,
                       "': write unix:/path/to.sock, HOST:PORT or [IPV6]:PORT"));
    }
    hosts.push_back(HostOf(rest));
  }

  bool all_loopback = true;
  for (absl::string_view host : hosts) {
    if (host.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("address '", address, "' has no host: write HOST:PORT"));
    }
    all_loopback = all_loopback && IsLoopbackHost(host);
  }
  return Endpoint{std::string(address), std::string(hosts.front()),
                  all_loopback ? Transport::kLoopbackTcp : Transport::kTls};
}

absl::StatusOr<grpc::SslCredentialsOptions> SslOptionsFrom(const TlsFiles& files) {
  grpc::SslCredentialsOptions options;
  if (!files.ca_file.empty()) {
    auto roots = ReadPem(files.ca_file, "WARDEN_CA_FILE");
    if (!roots.ok()) return roots.status();
    options.pem_root_certs = *std::move(roots);
  }
  if (files.cert_file.empty() != files.key_file.empty()) {
    return absl::InvalidArgumentError(
        "mTLS needs both WARDEN_CERT_FILE and WARDEN_KEY_FILE; set both or neither");
  }
  if (!files.cert_file.empty()) {
    auto cert = ReadPem(files.cert_file, "WARDEN_CERT_FILE");
    if (!cert.ok()) return cert.status();
    auto key = ReadPem(files.key_file, "WARDEN_KEY_FILE");
    if (!key.ok()) return key.status();
    options.pem_cert_chain = *std::move(cert);
    options.pem_private_key = *std::move(key);
  }
  return options;
}

std::shared_ptr<grpc::ChannelCredentials> CredentialsFor(Transport transport,
                                                         const grpc::SslCredentialsOptions& ssl) {
  switch (transport) {
    case Transport::kUnixSocket:
    case Transport::kLoopbackTcp:
      return grpc::InsecureChannelCredentials();
    case Transport::kTls:
      return grpc::SslCredentials(ssl);
  }
  return grpc::SslCredentials(ssl);  // unreachable; never fall back to plaintext
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> Connect(const Endpoint& given,
                                                       const TlsFiles& files) {
  // Loopback is plain text, unless TLS files are given: then the caller
  // means a TLS listener (e.g. one reached through an ssh tunnel).
  Endpoint endpoint = given;
  if (endpoint.transport == Transport::kLoopbackTcp &&
      (!files.ca_file.empty() || !files.cert_file.empty())) {
    endpoint.transport = Transport::kTls;
  }
  grpc::SslCredentialsOptions ssl;
  if (endpoint.transport == Transport::kTls) {
    auto options = SslOptionsFrom(files);
    if (!options.ok()) return options.status();
    ssl = *std::move(options);
  }
  grpc::ChannelArguments args;
  // A summary carries both output streams (up to the server's cap each) and
  // every rich result; gRPC's default 4 MiB receive limit is too small.
  args.SetMaxReceiveMessageSize(-1);
  return grpc::CreateCustomChannel(endpoint.target, CredentialsFor(endpoint.transport, ssl), args);
}

std::unique_ptr<grpc::ClientContext> NewContext(absl::string_view token, absl::Duration timeout) {
  auto context = std::make_unique<grpc::ClientContext>();
  if (!token.empty()) context->AddMetadata("authorization", absl::StrCat("Bearer ", token));
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return context;
}

std::string StatusCodeName(grpc::StatusCode code) {
  static constexpr const char* kNames[] = {
      "OK",
      "CANCELLED",
      "UNKNOWN",
      "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED",
      "NOT_FOUND",
      "ALREADY_EXISTS",
      "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED",
      "FAILED_PRECONDITION",
      "ABORTED",
      "OUT_OF_RANGE",
      "UNIMPLEMENTED",
      "INTERNAL",
      "UNAVAILABLE",
      "DATA_LOSS",
      "UNAUTHENTICATED",
  };
  int index = static_cast<int>(code);
  if (index < 0 || index >= static_cast<int>(std::size(kNames))) {
    return absl::StrCat("CODE_", index);
  }
  return kNames[index];
}

std::string DescribeRpcError(const grpc::Status& status, absl::string_view address) {
  std::string line =
      absl::StrCat(StatusCodeName(status.error_code()), ": ", status.error_message());
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      // The daemon answered, but its pool cannot start sandboxes: the fix
      // is the operator's, not the address.
      if (absl::StrContains(status.error_message(), " workers cannot start: ")) {
        absl::StrAppend(&line, " (wardend runs but cannot start these sandboxes: its operator "
                               "can see why with wardend --check)");
        break;
      }
      absl::StrAppend(&line, " (is wardend running and listening on ", address,
                      "? pass --addr or set WARDEN_ADDR)");
      break;
    case grpc::StatusCode::UNAUTHENTICATED:
      absl::StrAppend(&line, " (set WARDEN_TOKEN to a token the daemon accepts)");
      break;
    default:
      break;
  }
  return line;
}

}  // namespace warden::cli
