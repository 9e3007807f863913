// E2B access tokens (access_token.h): a token opens to its API key only
// for its own sandbox, under the key it was sealed with, unaltered.
#include "fronts/e2b/access_token.h"

#include <fstream>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"

namespace warden::e2b {
namespace {

const std::string kKey(32, 'k');

AccessTokens Tokens(const std::string& key = kKey) { return *AccessTokens::WithKey(key); }

TEST(AccessTokenTest, OpensToItsApiKeyUnderTheSameKeyInAnotherInstance) {
  const std::string token = Tokens().Seal("node1-s1", "api-key-of-alice");
  // Another front (a restarted gateway) with the same key opens it.
  absl::StatusOr<std::string> key = Tokens().Open(token, "node1-s1");
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(*key, "api-key-of-alice");
  EXPECT_EQ(token.find("api-key-of-alice"), std::string::npos);  // sealed, not encoded
  EXPECT_NE(Tokens().Seal("node1-s1", "api-key-of-alice"), token);  // a fresh nonce each time
  EXPECT_EQ(*Tokens().Open(Tokens().Seal("s", ""), "s"), "");  // no tokens configured: the empty key
}

TEST(AccessTokenTest, AnotherSandboxsIdIsRefused) {
  const std::string token = Tokens().Seal("node1-s1", "k");
  EXPECT_EQ(Tokens().Open(token, "node1-s2").status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_FALSE(Tokens().Open(token, "node1-s").ok());
  EXPECT_FALSE(Tokens().Open(token, "").ok());
}

TEST(AccessTokenTest, AnotherKeyIsRefused) {
  const std::string token = Tokens().Seal("s1", "k");
  EXPECT_FALSE(Tokens(std::string(32, 'j')).Open(token, "s1").ok());
  EXPECT_FALSE(AccessTokens::Random().Open(token, "s1").ok());
  EXPECT_FALSE(AccessTokens::WithKey("short").ok());
}

TEST(AccessTokenTest, EveryAlteredByteIsRefused) {
  const std::string token = Tokens().Seal("s1", "secret-key");
  std::string raw;
  ASSERT_TRUE(absl::WebSafeBase64Unescape(token.substr(4), &raw));
  for (size_t i = 0; i < raw.size(); ++i) {
    std::string altered = raw;
    altered[i] ^= 0x01;
    EXPECT_FALSE(Tokens().Open("wa1_" + absl::WebSafeBase64Escape(altered), "s1").ok()) << "byte " << i;
  }
  EXPECT_FALSE(Tokens().Open(token.substr(0, token.size() - 2), "s1").ok());  // truncated
  EXPECT_FALSE(Tokens().Open(token + "AA", "s1").ok());                       // extended
  EXPECT_FALSE(Tokens().Open("", "s1").ok());
  EXPECT_FALSE(Tokens().Open("wa1_", "s1").ok());
  EXPECT_FALSE(Tokens().Open("0123456789abcdef0123456789abcdef", "s1").ok());  // an old random token
  EXPECT_FALSE(Tokens().Open("wa1_!!!", "s1").ok());
}

TEST(AccessTokenTest, KeyFileHoldsRawBytesOrHex) {
  const std::string dir = ::testing::TempDir();
  auto write = [&dir](const std::string& name, const std::string& content) {
    std::ofstream(dir + name, std::ios::binary) << content;
    return dir + name;
  };
  EXPECT_EQ(*ReadAccessKey(write("raw", kKey)), kKey);
  EXPECT_EQ(*ReadAccessKey(write("hex", absl::BytesToHexString(kKey) + "\n")), kKey);
  absl::StatusOr<std::string> bad = ReadAccessKey(write("bad", "too short\n"));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("64 hex digits"), std::string::npos);
  EXPECT_EQ(ReadAccessKey(dir + "absent").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace warden::e2b
