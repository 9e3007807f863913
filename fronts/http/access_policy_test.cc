// AccessPolicy on its own: which names are loopback, how configured hosts
// and origins are read, and which requests it lets through.
#include "fronts/http/access_policy.h"

#include "fronts/http/router.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace warden::http {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

Request With(std::initializer_list<std::pair<const char*, const char*>> headers,
             boost::beast::http::verb method = boost::beast::http::verb::post) {
  Request r;
  r.raw.method(method);
  r.raw.target("/x");
  for (const auto& [name, value] : headers) r.raw.set(name, value);
  return r;
}

TEST(AccessPolicyTest, LoopbackNamesAreLocalhostAnd127And1OnlyNotTheAnyAddress) {
  for (const char* name : {"localhost", "LOCALHOST", "127.0.0.1", "127.1.2.3", "[::1]", "[::ffff:127.0.0.1]"}) {
    EXPECT_TRUE(IsLoopbackName(name)) << name;
  }
  for (const char* name : {"0.0.0.0", "[::]", "evil.example", "localhost.evil.example", "127.0.0.1.nip.io",
                           "128.0.0.1", "::1", "[::ffff:10.0.0.1]", ""}) {
    EXPECT_FALSE(IsLoopbackName(name)) << name;
  }
  EXPECT_EQ(HostName("Evil.Example:8080"), "evil.example");
  EXPECT_EQ(HostName("[::1]:80"), "[::1]");
  EXPECT_EQ(HostName("localhost"), "localhost");
}

TEST(AccessPolicyTest, OriginsAreNormalizedAndWildcardsOrPathsRefused) {
  EXPECT_EQ(*NormalizeOrigin("HTTPS://App.Example.com:443/"), "https://app.example.com");
  EXPECT_EQ(*NormalizeOrigin("http://app.example.com:8080"), "http://app.example.com:8080");
  EXPECT_EQ(*NormalizeOrigin("http://[::1]:80"), "http://[::1]");
  for (const char* bad : {"*", "null", "app.example.com", "https://*.example.com", "https://app.example.com/ui",
                          "https://user@app.example.com", "https://app.example.com:99999", "https://"}) {
    absl::StatusOr<std::string> n = NormalizeOrigin(bad);
    EXPECT_FALSE(n.ok()) << bad;
    if (!n.ok()) {
      EXPECT_THAT(n.status().message(), HasSubstr("scheme://host[:port]")) << bad;
    }
  }
  EXPECT_EQ(*NormalizeAllowedHost("Warden.Internal:8080"), "warden.internal:8080");
  for (const char* bad : {"*", "*.example.com", "http://warden.internal", "warden.internal/x", ""}) {
    EXPECT_FALSE(NormalizeAllowedHost(bad).ok()) << bad;
  }
}

TEST(AccessPolicyTest, WithoutTokensTheHostMustBeLoopbackOrListed) {
  AccessPolicy policy({.check_host = true, .allowed_hosts = {"warden.internal", "box.lan:8080"}});
  for (const char* host : {"127.0.0.1:8080", "localhost:1", "[::1]:8080", "warden.internal:9", "WARDEN.internal",
                           "box.lan:8080"}) {
    EXPECT_TRUE(policy.Check(With({{"Host", host}})).ok()) << host;
  }
  EXPECT_TRUE(policy.Check(With({})).ok()) << "an HTTP/1.0 request without Host comes from no browser";
  for (const char* host : {"evil.example:8080", "box.lan:8081", "0.0.0.0:8080", "warden.internal.evil.example"}) {
    absl::Status s = policy.Check(With({{"Host", host}}));
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << host;
    EXPECT_THAT(s.message(), HasSubstr("http.allowed_hosts")) << host;
  }
  AccessPolicy tokens({.check_host = false});
  EXPECT_TRUE(tokens.Check(With({{"Host", "evil.example:8080"}})).ok());
}

TEST(AccessPolicyTest, AnOriginMustBeLoopbackOrListedWithTokensOrWithout) {
  for (bool check_host : {true, false}) {
    AccessPolicy policy({.check_host = check_host, .allowed_origins = {"https://App.Example.com:443"}});
    for (const char* origin : {"http://localhost:5173", "https://127.0.0.1", "http://[::1]:8888",
                               "https://app.example.com", "https://APP.example.com:443"}) {
      EXPECT_TRUE(policy.Check(With({{"Host", "127.0.0.1"}, {"Origin", origin}})).ok()) << origin;
    }
    for (const char* origin : {"http://evil.example", "null", "", "https://app.example.com:8443",
                               "http://app.example.com", "file://", "chrome-extension://abc"}) {
      absl::Status s = policy.Check(With({{"Host", "127.0.0.1"}, {"Origin", origin}}));
      EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << origin;
      EXPECT_THAT(s.message(), HasSubstr("http.allowed_origins")) << origin;
    }
  }
}

TEST(AccessPolicyTest, CorsHeadersGoOnlyToAllowedOriginsAndPreflightsListTheProtocolsHeaders) {
  AccessPolicy policy({.allowed_origins = {"https://app.example.com"}});
  Protocol protocol;
  protocol.cors_request_headers = {"X-API-KEY", "Content-Type"};
  protocol.cors_expose_headers = {"Location"};
  EXPECT_THAT(policy.CorsHeaders(With({}), &protocol), IsEmpty());
  EXPECT_THAT(policy.CorsHeaders(With({{"Origin", "http://evil.example"}}), &protocol), IsEmpty());
  EXPECT_THAT(policy.CorsHeaders(With({{"Origin", "https://app.example.com"}}), &protocol),
              UnorderedElementsAre(Pair("Access-Control-Allow-Origin", "https://app.example.com"),
                                   Pair("Vary", "Origin"), Pair("Access-Control-Expose-Headers", "Location")));

  Request preflight = With({{"Origin", "https://app.example.com"},
                            {"Access-Control-Request-Method", "POST"},
                            {"Access-Control-Request-Headers", "x-api-key,content-type"},
                            {"Access-Control-Request-Private-Network", "true"}},
                           boost::beast::http::verb::options);
  ASSERT_TRUE(AccessPolicy::IsPreflight(preflight));
  EXPECT_FALSE(AccessPolicy::IsPreflight(With({{"Origin", "https://app.example.com"}},
                                              boost::beast::http::verb::options)));
  Response r = policy.Preflight(preflight, &protocol, {"GET", "POST", "HEAD"});
  EXPECT_EQ(r.status, 204u);
  EXPECT_THAT(r.headers, ::testing::IsSupersetOf({Pair("Access-Control-Allow-Origin", "https://app.example.com"),
                                                  Pair("Access-Control-Allow-Methods", "GET, POST, HEAD"),
                                                  Pair("Access-Control-Allow-Headers", "X-API-KEY, Content-Type"),
                                                  Pair("Access-Control-Allow-Private-Network", "true")}));
}

}  // namespace
}  // namespace warden::http
