#include "common/auth.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace warden {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kAliceToken[] = "alice-0123456789abcdef";
constexpr char kBobToken[] = "bob-fedcba9876543210";

// A temporary directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "/auth_test.XXXXXX";
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  // Writes a file with `mode` (0600: what LoadTokens accepts).
  std::string Write(const std::string& text, mode_t mode = 0600) const {
    const std::string file = path_ + "/tokens.json";
    std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
    ::chmod(file.c_str(), mode);
    return file;
  }

 private:
  std::string path_;
};

std::string TokensJson(const std::string& entries) { return "{\"tokens\": [" + entries + "]}"; }

absl::StatusOr<TokenTable> Load(const std::string& text) {
  TempDir dir;
  return LoadTokens(dir.Write(text));
}

// The error LoadTokens gives for `text`, checked to not contain `secret`.
std::string LoadError(const std::string& text, const std::string& secret) {
  absl::StatusOr<TokenTable> table = Load(text);
  EXPECT_FALSE(table.ok()) << text;
  if (table.ok()) return "";
  EXPECT_THAT(table.status().ToString(), Not(HasSubstr(secret))) << "the message shows a token";
  return std::string(table.status().message());
}

TokenTable AliceAndBob() {
  absl::StatusOr<TokenTable> table =
      TokenTable::Create({{kAliceToken, "alice"}, {kBobToken, "team-b.prod_1"}});
  EXPECT_TRUE(table.ok()) << table.status();
  return *std::move(table);
}

// ---------------------------------------------------------------------------
// The tokens file.

TEST(LoadTokensTest, MapsEachTokenToItsTenant) {
  absl::StatusOr<TokenTable> table = Load(TokensJson(
      R"({"token": "alice-0123456789abcdef", "tenant": "alice"},
         {"token": "alice-second-token-for-rotation", "tenant": "alice"},
         {"tenant": "team-b.prod_1", "token": "bob-fedcba9876543210"})"));
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->size(), 3u);
  ASSERT_NE(table->Lookup(kAliceToken), nullptr);
  EXPECT_EQ(*table->Lookup(kAliceToken), "alice");
  EXPECT_EQ(*table->Lookup("alice-second-token-for-rotation"), "alice");
  EXPECT_EQ(*table->Lookup(kBobToken), "team-b.prod_1");
}

TEST(LoadTokensTest, ShippedExampleLoads) {
  const std::filesystem::path example =
      std::filesystem::path(__FILE__).parent_path().parent_path() / "deploy" /
      "tokens.example.json";
  std::ifstream in(example);
  ASSERT_TRUE(in) << example;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  absl::StatusOr<TokenTable> table = Load(text);  // a 0600 copy
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_FALSE(table->empty());
}

TEST(LoadTokensTest, RefusesAFileGroupOrOthersCanRead) {
  for (mode_t mode : {0640, 0604, 0660, 0644}) {
    TempDir dir;
    const std::string file =
        dir.Write(TokensJson(R"({"token": "alice-0123456789abcdef", "tenant": "alice"})"), mode);
    absl::StatusOr<TokenTable> table = LoadTokens(file);
    ASSERT_FALSE(table.ok()) << std::oct << mode;
    EXPECT_EQ(table.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(table.status().message()),
                AllOf(HasSubstr("can be read by group or others"), HasSubstr("chmod 600 " + file)));
  }
  TempDir dir;
  const std::string owner_only =
      dir.Write(TokensJson(R"({"token": "alice-0123456789abcdef", "tenant": "alice"})"), 0400);
  EXPECT_TRUE(LoadTokens(owner_only).ok());
}

TEST(LoadTokensTest, MissingFileIsNotFound) {
  absl::StatusOr<TokenTable> table = LoadTokens("/nonexistent/tokens.json");
  ASSERT_FALSE(table.ok());
  EXPECT_EQ(table.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(table.status().message()), HasSubstr("auth.tokens_file"));
}

TEST(LoadTokensTest, RefusesShortTokens) {
  const std::string short_token = "short-secret";  // 12 characters
  EXPECT_THAT(LoadError(TokensJson(R"({"token": "short-secret", "tenant": "a"})"), short_token),
              HasSubstr("tokens[0]: the token is 12 characters; tokens need at least 16"));
  EXPECT_THAT(LoadError(TokensJson(R"({"token": "", "tenant": "a"})"), "\"\""),
              HasSubstr("tokens[0]: the token is empty"));
  EXPECT_THAT(LoadError(TokensJson(R"({"tenant": "a"})"), "tenant"),
              HasSubstr("tokens[0]: the token is empty"));
}

// Found by tests/fuzz (config_files): nlohmann throws out_of_range, not
// parse_error, for a number no C++ type holds, which used to end wardend.
TEST(LoadTokensTest, ANumberTooLargeIsAnErrorNotACrash) {
  EXPECT_THAT(LoadError(R"({"tokens": [1e99999]})", "1e99999"),
              HasSubstr("holds a number too large to read"));
}

TEST(LoadTokensTest, RefusesTokensThatCannotTravelInAHeader) {
  EXPECT_THAT(LoadError(TokensJson(R"({"token": "with space 0123456789", "tenant": "a"})"),
                        "with space 0123456789"),
              HasSubstr("tokens[0]: the token has a space"));
}

TEST(LoadTokensTest, RefusesDuplicateTokens) {
  EXPECT_THAT(LoadError(TokensJson(R"({"token": "alice-0123456789abcdef", "tenant": "alice"},
                                      {"token": "bob-fedcba9876543210", "tenant": "bob"},
                                      {"token": "alice-0123456789abcdef", "tenant": "mallory"})"),
                        kAliceToken),
              HasSubstr("tokens[0] and tokens[2] have the same token"));
}

TEST(LoadTokensTest, RefusesBadTenantNames) {
  EXPECT_THAT(
      LoadError(TokensJson(R"({"token": "alice-0123456789abcdef", "tenant": ""})"), kAliceToken),
      HasSubstr("tokens[0]: the tenant is empty"));
  for (const char* tenant : {"a b", "a/b", "..", "ü", "tenant\\u0000x"}) {
    EXPECT_THAT(
        LoadError(TokensJson(std::string(R"({"token": "alice-0123456789abcdef", "tenant": ")") +
                             tenant + "\"}"),
                  kAliceToken),
        HasSubstr("tokens[0]: the tenant is not a valid tenant name: use 1 to 64 of "
                  "A-Z a-z 0-9 . _ -"))
        << tenant;
  }
  EXPECT_THAT(LoadError(TokensJson(R"({"token": "alice-0123456789abcdef", "tenant": ")" +
                                   std::string(65, 'a') + "\"}"),
                        kAliceToken),
              HasSubstr("not a valid tenant name"));
}

TEST(LoadTokensTest, RefusesAnEmptyListAndOtherShapes) {
  EXPECT_THAT(LoadError(TokensJson(""), "-"), HasSubstr("lists no tokens"));
  EXPECT_THAT(LoadError("{}", "-"), HasSubstr("no \"tokens\" key"));
  EXPECT_THAT(LoadError(R"({"tokens": {}})", "-"), HasSubstr("\"tokens\" is an object"));
  EXPECT_THAT(LoadError(R"(["x"])", "-"), HasSubstr("holds an array"));
  EXPECT_THAT(LoadError(TokensJson(R"("alice-0123456789abcdef")"), kAliceToken),
              HasSubstr("tokens[0] is a string"));
  EXPECT_THAT(LoadError(TokensJson(R"({"token": 12345678901234567890, "tenant": "a"})"),
                        "12345678901234567890"),
              HasSubstr("tokens[0].token must be a string, not a number"));
  EXPECT_THAT(LoadError(R"({"tokens": [], "tokns": 1})", "-"),
              HasSubstr("unknown key 'tokns' at the top level"));
  EXPECT_THAT(
      LoadError(TokensJson(R"({"token": "alice-0123456789abcdef", "tenant": "a", "note": "x"})"),
                kAliceToken),
      HasSubstr("unknown key 'note' in tokens[0]"));
}

TEST(LoadTokensTest, ErrorsNeverShowAToken) {
  // A syntax error right after a token: the parser's own message would quote it.
  EXPECT_THAT(LoadError("{\"tokens\": [{\"token\": \"alice-0123456789abcdef\" \"tenant\": \"a\"}]}",
                        kAliceToken),
              HasSubstr("JSON syntax error at line 1, column"));
  EXPECT_THAT(LoadError("{\"tokens\": [{\"token\": \"alice-0123456789abcdef", kAliceToken),
              HasSubstr("JSON syntax error"));
  // The position counts lines and columns from 1, as editors do.
  EXPECT_THAT(LoadError("{\n  \"tokens\": ]\n}", kAliceToken),
              HasSubstr("JSON syntax error at line 2, column 13"));
  // {"<token>": "<tenant>"}: the unknown key is the token.
  EXPECT_THAT(LoadError(TokensJson(R"({"alice-0123456789abcdef": "alice"})"), kAliceToken),
              HasSubstr("an unknown key (not shown: it may be a token) in tokens[0]"));
  // Token and tenant swapped: the tenant "name" is the token.
  EXPECT_THAT(LoadError(TokensJson(R"({"token": "alice", "tenant": "alice-0123456789+abcdef"})"),
                        "alice-0123456789+abcdef"),
              HasSubstr("tokens[0]"));
}

// ---------------------------------------------------------------------------
// Lookup and the authorization header.

TEST(TokenTableTest, OnlyTheWholeTokenMatches) {
  const TokenTable table = AliceAndBob();
  EXPECT_EQ(table.Lookup(""), nullptr);
  EXPECT_EQ(table.Lookup("alice-0123456789abcde"), nullptr);    // a prefix
  EXPECT_EQ(table.Lookup("alice-0123456789abcdefX"), nullptr);  // longer
  EXPECT_EQ(table.Lookup("Alice-0123456789abcdef"), nullptr);   // case matters
  EXPECT_EQ(table.Lookup("a"), nullptr);
  // A presented token that repeats a stored one's bytes cyclically.
  EXPECT_EQ(table.Lookup("alice-0123456789abcdefalice-0123456789abcdef"), nullptr);
  EXPECT_EQ(TokenTable().Lookup(kAliceToken), nullptr);
}

TEST(TenantFromAuthorizationTest, BearerTokenGivesItsTenant) {
  const TokenTable table = AliceAndBob();
  for (const std::string& header :
       {std::string("Bearer ") + kAliceToken, std::string("bearer ") + kAliceToken,
        std::string("BEARER   ") + kAliceToken, std::string(" Bearer\t") + kAliceToken + " "}) {
    absl::StatusOr<std::string> tenant = TenantFromAuthorization(table, header);
    ASSERT_TRUE(tenant.ok()) << header << ": " << tenant.status();
    EXPECT_EQ(*tenant, "alice");
  }
  EXPECT_EQ(*TenantFromAuthorization(table, std::string("Bearer ") + kBobToken), "team-b.prod_1");
}

TEST(TenantFromAuthorizationTest, RefusalsAreUnauthenticatedAndNeverShowTheToken) {
  const TokenTable table = AliceAndBob();
  struct Case {
    std::string header;
    std::string message;
  };
  const std::string unknown = "unknown-0123456789abcdef";
  for (const Case& c : std::vector<Case>{
           {"", "no credentials: send the metadata 'authorization: Bearer <token>'"},
           {"   ", "no credentials"},
           {"Bearer", "does not use the Bearer scheme"},
           {"Bearer ", "does not use the Bearer scheme"},
           {"Basic " + unknown, "does not use the Bearer scheme"},
           {"Token " + unknown, "does not use the Bearer scheme"},
           {"Bearer" + unknown, "does not use the Bearer scheme"},
           {unknown, "does not use the Bearer scheme"},
           {"Bearer " + unknown, "invalid bearer token"},
           {"Bearer " + std::string(kAliceToken) + "0", "invalid bearer token"},
           {"Bearer " + std::string(kAliceToken).substr(0, 10), "invalid bearer token"},
           {"Bearer " + std::string(5000, 'x'), "invalid bearer token"},
       }) {
    absl::StatusOr<std::string> tenant = TenantFromAuthorization(table, c.header);
    ASSERT_FALSE(tenant.ok()) << c.header;
    EXPECT_EQ(tenant.status().code(), absl::StatusCode::kUnauthenticated) << c.header;
    EXPECT_THAT(std::string(tenant.status().message()), HasSubstr(c.message)) << c.header;
    EXPECT_THAT(
        tenant.status().ToString(),
        AllOf(Not(HasSubstr(unknown)), Not(HasSubstr(kAliceToken)),
              Not(HasSubstr(std::string(kAliceToken).substr(0, 10))), Not(HasSubstr("xxxxxxxx"))))
        << c.header;
  }
}

}  // namespace
}  // namespace warden
