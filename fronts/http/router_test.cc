// Router: patterns, parameters, precedence and which protocol owns a miss.
#include "fronts/http/router.h"

#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace warden::http {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

std::shared_ptr<Protocol> Named(const char* name) {
  auto p = std::make_shared<Protocol>();
  p->name = name;
  return p;
}

Handler Tagged(int tag, int* out) {
  return [tag, out](Request&, Exchange&) {
    *out = tag;
    return absl::OkStatus();
  };
}

TEST(RouterTest, MatchesLiteralsAndDecodesParameters) {
  Router router;
  int hit = 0;
  auto jupyter = Named("jupyter");
  router.Add(jupyter, "GET", "/api/kernels/{kernel_id}/channels", Tagged(1, &hit));
  Router::Match m = router.Find("GET", "/api/kernels/a%20b/channels");
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.params.at("kernel_id"), "a b");
  EXPECT_EQ(m.protocol, jupyter.get());
  EXPECT_EQ(router.Find("GET", "/api/kernels//channels").route, nullptr);
  EXPECT_EQ(router.Find("GET", "/api/kernels/x/channels/more").route, nullptr);
}

TEST(RouterTest, LiteralSegmentsBeatParameters) {
  Router router;
  int hit = 0;
  auto e2b = Named("e2b");
  router.Add(e2b, "GET", "/sandboxes/{id}", Tagged(1, &hit));
  router.Add(e2b, "GET", "/sandboxes/list", Tagged(2, &hit));
  Router::Match m = router.Find("GET", "/sandboxes/list");
  ASSERT_NE(m.route, nullptr);
  EXPECT_THAT(m.route->segments, ElementsAre("sandboxes", "list"));
  EXPECT_TRUE(m.params.empty());
  m = router.Find("GET", "/sandboxes/abc");
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.params.at("id"), "abc");
}

TEST(RouterTest, RestParameterTakesTheRemainingPath) {
  Router router;
  int hit = 0;
  router.Add(Named("files"), "GET", "/files/{path...}", Tagged(1, &hit));
  Router::Match m = router.Find("GET", "/files/a/b%2Fc/d.txt");
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.params.at("path"), "a/b/c/d.txt");
  EXPECT_EQ(router.Find("GET", "/files").route, nullptr);
}

TEST(RouterTest, HeadIsServedByGet) {
  Router router;
  int hit = 0;
  router.Add(Named("admin"), "GET", "/healthz", Tagged(1, &hit));
  EXPECT_NE(router.Find("HEAD", "/healthz").route, nullptr);
}

TEST(RouterTest, AWrongMethodListsTheAllowedOnes) {
  Router router;
  int hit = 0;
  auto mcp = Named("mcp");
  router.Add(mcp, "POST", "/mcp", Tagged(1, &hit));
  router.Add(mcp, "DELETE", "/mcp", Tagged(2, &hit));
  Router::Match m = router.Find("PUT", "/mcp");
  EXPECT_EQ(m.route, nullptr);
  EXPECT_EQ(m.protocol, mcp.get());
  EXPECT_THAT(m.allowed, UnorderedElementsAre("POST", "DELETE"));
}

TEST(RouterTest, AMissBelongsToTheLongestClaimingPrefix) {
  Router router;
  auto root = Named("e2b"), api = Named("jupyter");
  router.Claim(root, "/");
  router.Claim(api, "/api");
  EXPECT_EQ(router.Find("GET", "/api/nothing").protocol, api.get());
  EXPECT_EQ(router.Find("GET", "/api").protocol, api.get());
  EXPECT_EQ(router.Find("GET", "/apiary").protocol, root.get());
  EXPECT_EQ(router.Find("GET", "/").protocol, root.get());
  Router unclaimed;
  EXPECT_EQ(unclaimed.Find("GET", "/x").protocol, nullptr);
  EXPECT_THAT(unclaimed.Find("GET", "/x").allowed, ElementsAre());
}

}  // namespace
}  // namespace warden::http
