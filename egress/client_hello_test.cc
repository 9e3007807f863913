#include "egress/client_hello.h"

#include <openssl/bio.h>
#include <openssl/ssl.h>

#include <string>

#include "gtest/gtest.h"

namespace warden::egress {
namespace {

// The first flight a real TLS client (OpenSSL) sends, with `sni` if set.
std::string RealClientHello(const char* sni) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, in, out);
  if (sni != nullptr) SSL_set_tlsext_host_name(ssl, sni);
  SSL_connect(ssl);  // wants to read the answer; the hello is in `out`
  char* data = nullptr;
  const long n = BIO_get_mem_data(out, &data);
  std::string hello(data, static_cast<size_t>(n));
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  return hello;
}

TEST(ClientHelloTest, ReadsTheServerNameOfARealClient) {
  const std::string hello = RealClientHello("api.example.com");
  ClientHello parsed = ParseClientHello(hello);
  ASSERT_EQ(parsed.status, ClientHello::Status::kComplete);
  ASSERT_TRUE(parsed.server_name.has_value());
  EXPECT_EQ(*parsed.server_name, "api.example.com");
}

TEST(ClientHelloTest, AClientWithoutServerNameHasNone) {
  ClientHello parsed = ParseClientHello(RealClientHello(nullptr));
  ASSERT_EQ(parsed.status, ClientHello::Status::kComplete);
  EXPECT_FALSE(parsed.server_name.has_value());
}

TEST(ClientHelloTest, AskForMoreUntilTheHelloIsWhole) {
  const std::string hello = RealClientHello("a.test");
  for (size_t n : {size_t{1}, size_t{5}, size_t{40}, hello.size() - 1}) {
    EXPECT_EQ(ParseClientHello(hello.substr(0, n)).status, ClientHello::Status::kNeedMore) << n;
  }
  // Whatever follows the hello does not matter.
  EXPECT_EQ(ParseClientHello(hello + "trailing").status, ClientHello::Status::kComplete);
}

TEST(ClientHelloTest, TheHelloMaySpanRecords) {
  const std::string hello = RealClientHello("split.test");
  const std::string body = hello.substr(5);
  auto record = [](const std::string& payload) {
    std::string r = {'\x16', '\x03', '\x01', static_cast<char>(payload.size() >> 8), static_cast<char>(payload.size())};
    return r + payload;
  };
  const std::string split = record(body.substr(0, 30)) + record(body.substr(30));
  ClientHello parsed = ParseClientHello(split);
  ASSERT_EQ(parsed.status, ClientHello::Status::kComplete);
  EXPECT_EQ(parsed.server_name.value_or(""), "split.test");
}

TEST(ClientHelloTest, OtherBytesAreNotTlsAndBrokenOnesAreMalformed) {
  EXPECT_EQ(ParseClientHello("GET / HTTP/1.1\r\n").status, ClientHello::Status::kNotTls);
  EXPECT_EQ(ParseClientHello("SSH-2.0-OpenSSH").status, ClientHello::Status::kNotTls);
  std::string hello = RealClientHello("a.test");
  hello[5] = 2;  // a ServerHello, not a ClientHello
  EXPECT_EQ(ParseClientHello(hello).status, ClientHello::Status::kMalformed);
  // A record claiming more than a ClientHello may hold.
  EXPECT_EQ(ParseClientHello(std::string("\x16\x03\x01\xff\xff", 5)).status, ClientHello::Status::kMalformed);
  // Truncated inside: lengths that overrun the message.
  std::string cut = RealClientHello("a.test");
  cut[8] = static_cast<char>(0x7f);  // the handshake length's low byte: shorter than what follows
  EXPECT_NE(ParseClientHello(cut).status, ClientHello::Status::kComplete);
}

}  // namespace
}  // namespace warden::egress
