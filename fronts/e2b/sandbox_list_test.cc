// GET /v2/sandboxes' query and paging (sandbox_list.h), as E2B's OpenAPI
// spec and API define them.
#include "fronts/e2b/sandbox_list.h"

#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace warden::e2b {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

http::Request Query(std::initializer_list<std::pair<std::string, std::string>> params) {
  http::Request request;
  for (const auto& [key, value] : params) request.query[key] = value;
  return request;
}

const absl::Time kT0 = absl::FromUnixSeconds(1'790'000'000);

ListedSandbox Sandbox(const std::string& id, int seconds, bool paused = false,
                      std::map<std::string, std::string> metadata = {}) {
  return {id, kT0 + absl::Seconds(seconds), paused, {"code-interpreter-v1", "base"}, std::move(metadata)};
}

std::vector<std::string> Ids(const SandboxPage& page, const std::vector<ListedSandbox>& sandboxes) {
  std::vector<std::string> ids;
  for (size_t i : page.items) ids.push_back(sandboxes[i].id);
  return ids;
}

TEST(SandboxQueryTest, ReadsEveryParameterOfTheSpec) {
  // The SDKs quote each key and value, then encode the pairs: metadata
  // arrives encoded twice ("user=a b&app=x&y" here).
  auto query = ParseSandboxQuery(Query({{"metadata", "user%3Da%2520b%26app%3Dx%2526y"},
                                        {"state", "paused"},
                                        {"order", "asc"},
                                        {"startedAfter", "2026-09-21T10:00:00.5+02:00"},
                                        {"template", "base"},
                                        {"limit", "7"}}),
                                 /*v2=*/true);
  ASSERT_TRUE(query.ok()) << query.status();
  ASSERT_TRUE(query->metadata.has_value());
  EXPECT_EQ(*query->metadata, (std::map<std::string, std::string>{{"user", "a b"}, {"app", "x&y"}}));
  EXPECT_FALSE(query->running);
  EXPECT_TRUE(query->paused);
  EXPECT_TRUE(query->ascending);
  EXPECT_EQ(*query->started_after,
            absl::FromCivil(absl::CivilSecond(2026, 9, 21, 8, 0, 0), absl::UTCTimeZone()) + absl::Milliseconds(500));
  EXPECT_EQ(*query->template_name, "base");
  EXPECT_EQ(query->limit, 7);

  auto defaults = ParseSandboxQuery(Query({}), true);
  ASSERT_TRUE(defaults.ok());
  EXPECT_TRUE(defaults->running && defaults->paused);
  EXPECT_FALSE(defaults->ascending);
  EXPECT_EQ(defaults->limit, 100);
  EXPECT_FALSE(defaults->metadata || defaults->started_after || defaults->template_name || defaults->cursor);
}

TEST(SandboxQueryTest, TheDeprecatedListTakesMetadataAndListsTheRunningOnes) {
  auto query = ParseSandboxQuery(Query({{"metadata", "a%3D1"}, {"state", "paused"}, {"limit", "1"}}), false);
  ASSERT_TRUE(query.ok());
  EXPECT_TRUE(query->running);
  EXPECT_FALSE(query->paused);
  EXPECT_GT(query->limit, 1000);
  EXPECT_EQ(query->metadata->at("a"), "1");
}

TEST(SandboxQueryTest, RefusesWhatTheSpecDoesNotAllowSayingHowToWriteIt) {
  struct Case {
    std::string key, value, says;
  };
  for (const Case& c : std::vector<Case>{{"limit", "0", "from 1 to 100"},
                                         {"limit", "101", "from 1 to 100"},
                                         {"limit", "ten", "from 1 to 100"},
                                         {"state", "running,dead", "running and paused"},
                                         {"order", "newest", "neither asc nor desc"},
                                         {"startedAfter", "yesterday", "RFC 3339"},
                                         {"template", "base:v2", "not tag-scoped"},
                                         {"metadata", "novalue", "key=value"},
                                         {"metadata", "", "key=value"},
                                         {"nextToken", "not-a-cursor", "X-Next-Token"}}) {
    auto query = ParseSandboxQuery(Query({{c.key, c.value}}), true);
    ASSERT_FALSE(query.ok()) << c.key << "=" << c.value;
    EXPECT_TRUE(absl::IsInvalidArgument(query.status()));
    EXPECT_THAT(std::string(query.status().message()), HasSubstr(c.says)) << c.key << "=" << c.value;
  }
  // A cursor made for one order replayed under the other would serve the
  // same sandboxes again.
  const std::string descending = EncodeCursor({kT0, "s-1", false});
  auto replayed = ParseSandboxQuery(Query({{"nextToken", descending}, {"order", "asc"}}), true);
  EXPECT_THAT(std::string(replayed.status().message()), HasSubstr("other order"));
}

TEST(SandboxQueryTest, CursorsAreE2bsBase64urlOfTimeAndId) {
  const ListCursor cursor{kT0 + absl::Milliseconds(123), "s-abc", true};
  const std::string token = EncodeCursor(cursor);
  std::string text;
  ASSERT_TRUE(absl::WebSafeBase64Unescape(token, &text));
  EXPECT_EQ(text, "2026-09-21T14:13:20.123+00:00__s-abc__asc");
  auto back = DecodeCursor(token);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->time, cursor.time);
  EXPECT_EQ(back->id, "s-abc");
  EXPECT_TRUE(back->ascending);
  // One E2B's API made (Go's RFC3339Nano, descending: two parts).
  std::string go = "2026-09-21T14:13:20.123456789Z__isx0abc";
  auto from_go = DecodeCursor(absl::StrReplaceAll(absl::Base64Escape(go), {{"+", "-"}, {"/", "_"}}));
  ASSERT_TRUE(from_go.ok()) << from_go.status();
  EXPECT_EQ(from_go->id, "isx0abc");
  EXPECT_FALSE(from_go->ascending);
  EXPECT_FALSE(DecodeCursor(absl::WebSafeBase64Escape("2026-09-21__s__desc")).ok());
}

TEST(SandboxListTest, FiltersByEveryCriterionAndCountsTheRunningOnes) {
  const std::vector<ListedSandbox> sandboxes = {
      Sandbox("s-a", 1, false, {{"user", "abc"}, {"app", "prod"}}),
      Sandbox("s-b", 2, true, {{"user", "abc"}}),
      Sandbox("s-c", 3, false),
      {"s-d", kT0 + absl::Seconds(4), false, {"snap-1"}, {{"user", "abc"}}},
  };
  auto select = [&](std::initializer_list<std::pair<std::string, std::string>> params) {
    auto query = ParseSandboxQuery(Query(params), true);
    EXPECT_TRUE(query.ok()) << query.status();
    return Ids(SelectSandboxes(*query, sandboxes), sandboxes);
  };
  EXPECT_THAT(select({}), ElementsAre("s-d", "s-c", "s-b", "s-a"));  // newest first
  EXPECT_THAT(select({{"order", "asc"}}), ElementsAre("s-a", "s-b", "s-c", "s-d"));
  EXPECT_THAT(select({{"metadata", "user%3Dabc"}}), ElementsAre("s-d", "s-b", "s-a"));
  EXPECT_THAT(select({{"metadata", "user%3Dabc%26app%3Dprod"}}), ElementsAre("s-a"));
  EXPECT_THAT(select({{"metadata", "user%3Dnobody"}}), ElementsAre());
  EXPECT_THAT(select({{"state", "paused"}}), ElementsAre("s-b"));
  EXPECT_THAT(select({{"state", "running"}}), ElementsAre("s-d", "s-c", "s-a"));
  EXPECT_THAT(select({{"startedAfter", "2026-09-21T14:13:23Z"}}), ElementsAre("s-d", "s-c"));  // inclusive
  EXPECT_THAT(select({{"template", "base"}}), ElementsAre("s-c", "s-b", "s-a"));
  EXPECT_THAT(select({{"template", "snap-1"}}), ElementsAre("s-d"));
  EXPECT_THAT(select({{"template", "other"}}), ElementsAre());

  auto query = ParseSandboxQuery(Query({{"metadata", "user%3Dabc"}, {"limit", "1"}}), true);
  EXPECT_EQ(SelectSandboxes(*query, sandboxes).total_running, 2);  // s-a and s-d, before paging
}

TEST(SandboxListTest, PagesStayStableWhileSandboxesComeAndGo) {
  std::vector<ListedSandbox> sandboxes;
  for (int i = 0; i < 7; ++i) sandboxes.push_back(Sandbox("s-" + std::to_string(i), i));
  // Two with the same start time: ordered by id.
  sandboxes.push_back(Sandbox("s-3b", 3));

  auto page_of = [&](const std::string& token, const char* order) {
    auto query = ParseSandboxQuery(Query({{"limit", "3"}, {"nextToken", token}, {"order", order}}), true);
    EXPECT_TRUE(query.ok()) << query.status();
    return SelectSandboxes(*query, sandboxes);
  };
  SandboxPage first = page_of("", "desc");
  EXPECT_THAT(Ids(first, sandboxes), ElementsAre("s-6", "s-5", "s-4"));
  ASSERT_FALSE(first.next_token.empty());

  // Meanwhile a new sandbox starts and two of the next page's end.
  sandboxes.push_back(Sandbox("s-new", 100));
  sandboxes.erase(std::remove_if(sandboxes.begin(), sandboxes.end(),
                                 [](const ListedSandbox& s) { return s.id == "s-2" || s.id == "s-4"; }),
                  sandboxes.end());
  SandboxPage second = page_of(first.next_token, "desc");
  EXPECT_THAT(Ids(second, sandboxes), ElementsAre("s-3", "s-3b", "s-1"));
  SandboxPage third = page_of(second.next_token, "desc");
  EXPECT_THAT(Ids(third, sandboxes), ElementsAre("s-0"));
  EXPECT_TRUE(third.next_token.empty());  // the last page says so

  // Oldest first: the exact reverse, ties by id descending.
  std::vector<std::string> ascending;
  std::string token;
  do {
    SandboxPage page = page_of(token, "asc");
    for (const std::string& id : Ids(page, sandboxes)) ascending.push_back(id);
    token = page.next_token;
  } while (!token.empty());
  EXPECT_THAT(ascending, ElementsAre("s-0", "s-1", "s-3b", "s-3", "s-5", "s-6", "s-new"));
}

TEST(SandboxListTest, APageOfExactlyTheLimitHasNoNextToken) {
  std::vector<ListedSandbox> sandboxes = {Sandbox("s-a", 1), Sandbox("s-b", 2)};
  auto query = ParseSandboxQuery(Query({{"limit", "2"}}), true);
  SandboxPage page = SelectSandboxes(*query, sandboxes);
  EXPECT_EQ(page.items.size(), 2u);
  EXPECT_TRUE(page.next_token.empty());
}

TEST(SnapshotPageTest, PagesNewestFirstWithTheSameCursors) {
  const std::vector<std::pair<absl::Time, std::string>> keys = {
      {kT0, "snap-a"}, {kT0 + absl::Seconds(2), "snap-c"}, {kT0 + absl::Seconds(1), "snap-b"}};
  auto query = ParsePageQuery(Query({{"limit", "2"}}));
  ASSERT_TRUE(query.ok());
  SandboxPage first = PageOf(*query, keys);
  EXPECT_THAT(first.items, ElementsAre(1u, 2u));
  auto next = ParsePageQuery(Query({{"limit", "2"}, {"nextToken", first.next_token}}));
  ASSERT_TRUE(next.ok());
  SandboxPage second = PageOf(*next, keys);
  EXPECT_THAT(second.items, ElementsAre(0u));
  EXPECT_TRUE(second.next_token.empty());
}

}  // namespace
}  // namespace warden::e2b
