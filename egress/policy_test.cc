#include "egress/policy.h"

#include "egress/rules.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace warden::egress {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<const Policy> Make(PolicySpec spec) {
  auto p = Policy::Build(spec, "network");
  EXPECT_TRUE(p.ok()) << p.status();
  return std::make_shared<const Policy>(p.ok() ? *std::move(p) : Policy());
}

Host Name(const char* n) {
  Host h;
  h.name = n;
  return h;
}
Host Literal(const char* a) {
  Host h;
  h.address = Address::Parse(a);
  return h;
}

struct Fixture {
  Rules rules;
  Fixture(PolicySpec ceiling, PolicySpec policy) {
    rules.ceiling = Make(std::move(ceiling));
    rules.ceiling_source = "egress.tenants.t";
    rules.policy = Make(std::move(policy));
    rules.policy_source = "session s's network policy";
  }
  // "" for allowed; else the refusal.
  std::string Decide(const Host& host, uint16_t port, const char* resolved = nullptr) {
    Decision d(rules, host, port);
    absl::Status s = d.Admit();
    if (!s.ok()) return std::string(s.message());
    const Address a = host.address ? *host.address : *Address::Parse(resolved);
    s = d.AdmitAddress(a);
    return s.ok() ? "" : std::string(s.message());
  }
};

PolicySpec Everything() { return PolicySpec{.allow = {"*"}}; }

TEST(PolicyTest, DenyAllIsTheDefault) {
  Fixture f(Everything(), PolicySpec{});
  EXPECT_THAT(f.Decide(Name("example.com"), 443, "93.184.216.34"), HasSubstr("session s's network policy"));
  EXPECT_THAT(f.Decide(Literal("1.1.1.1"), 443), HasSubstr("no allow entry matches"));
}

TEST(PolicyTest, AllowBeatsDenyWhichBeatsTheDefault) {
  // E2B's allowOut beats denyOut: deny everything, allow one address.
  Fixture f(Everything(), PolicySpec{.allow = {"1.1.1.1"}, .deny = {"*"}});
  EXPECT_EQ(f.Decide(Literal("1.1.1.1"), 443), "");
  EXPECT_THAT(f.Decide(Literal("8.8.8.8"), 443), HasSubstr("deny entry '*'"));
  // Everything but one network, by default.
  Fixture g(Everything(), PolicySpec{.allow_by_default = true, .deny = {"8.8.8.8"}});
  EXPECT_EQ(g.Decide(Literal("1.1.1.1"), 443), "");
  EXPECT_THAT(g.Decide(Literal("8.8.8.8"), 443), HasSubstr("deny entry '8.8.8.8'"));
  // ...which also holds for a name resolving there.
  EXPECT_THAT(g.Decide(Name("dns.example"), 443, "8.8.8.8"), HasSubstr("(8.8.8.8)"));
  EXPECT_EQ(g.Decide(Name("one.example"), 443, "1.1.1.1"), "");
}

TEST(PolicyTest, ANameAllowedByNameGoesWhereverItResolves) {
  Fixture f(Everything(), PolicySpec{.allow = {"*.pypi.test"}, .deny = {"0.0.0.0/0"}});
  EXPECT_EQ(f.Decide(Name("files.pypi.test"), 443, "1.2.3.4"), "");
  EXPECT_THAT(f.Decide(Name("pypi.test"), 443, "1.2.3.4"), HasSubstr("refused"));
}

TEST(PolicyTest, NamesThatOnlyAnAddressEntryCouldAllowAreNeverResolved) {
  Fixture f(Everything(), PolicySpec{.allow = {"93.184.216.0/24"}});
  Decision d(f.rules, Name("example.com"), 443);
  absl::Status s = d.Admit();  // refused before any resolution
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("allow the name itself"));
}

TEST(PolicyTest, TheCeilingNarrowsAndIsNeverWidened) {
  // The session asks for everything; the ceiling allows one domain.
  Fixture f(PolicySpec{.allow = {"*.corp.test:443"}}, Everything());
  EXPECT_EQ(f.Decide(Name("git.corp.test"), 443, "1.2.3.4"), "");
  EXPECT_THAT(f.Decide(Name("git.corp.test"), 22, "1.2.3.4"), HasSubstr("egress.tenants.t"));
  EXPECT_THAT(f.Decide(Name("example.com"), 443, "1.2.3.4"), HasSubstr("egress.tenants.t"));
  EXPECT_THAT(f.Decide(Literal("1.2.3.4"), 443), HasSubstr("egress.tenants.t"));
  // A ceiling's deny holds against a session's allow.
  Fixture g(PolicySpec{.allow_by_default = true, .deny = {"*.bank.test"}}, PolicySpec{.allow = {"*.bank.test"}});
  EXPECT_THAT(g.Decide(Name("www.bank.test"), 443, "1.2.3.4"), HasSubstr("deny entry '*.bank.test'"));
}

TEST(PolicyTest, AClosedRulesRefusesWithItsReason) {
  auto rules = Rules::Closed("egress is off on this wardend: set egress.enabled");
  Decision d(*rules, Name("example.com"), 443);
  EXPECT_EQ(d.Admit().message(), "egress is off on this wardend: set egress.enabled");
}

TEST(PolicyTest, HeaderRulesExactFirstThenTheLongestWildcard) {
  auto p = Make(PolicySpec{.header_rules = {{"*.example.com", {{"X-A", "wild"}}},
                                            {"*.api.example.com", {{"X-A", "longer"}}},
                                            {"api.example.com", {{"X-A", "exact"}}}}});
  EXPECT_EQ(p->HeaderRuleFor("api.example.com")->headers[0].second, "exact");
  EXPECT_EQ(p->HeaderRuleFor("v1.api.example.com")->headers[0].second, "longer");
  EXPECT_EQ(p->HeaderRuleFor("www.example.com")->headers[0].second, "wild");
  EXPECT_EQ(p->HeaderRuleFor("example.com"), nullptr);
  EXPECT_TRUE(p->Intercepts("www.example.com", 443));
  EXPECT_FALSE(p->Intercepts("example.org", 443));
}

TEST(PolicyTest, SecretsAreBoundToHostsAndShowOnlyAsPlaceholders) {
  auto p = Make(PolicySpec{.secrets = {{"OPENAI_API_KEY", "sk-real", {"api.openai.com"}}}});
  EXPECT_TRUE(p->Intercepts("api.openai.com", 443));
  EXPECT_FALSE(p->Intercepts("openai.com", 443));
  EXPECT_EQ(Placeholder("OPENAI_API_KEY"), "warden-secret-OPENAI_API_KEY");
  const PolicySpec shown = p->Describe();
  ASSERT_EQ(shown.secrets.size(), 1u);
  EXPECT_EQ(shown.secrets[0].value, "(hidden)");
  EXPECT_EQ(shown.secrets[0].hosts, std::vector<std::string>{"api.openai.com"});
}

TEST(PolicyTest, BadPoliciesNameTheEntryAndNeverEchoASecret) {
  auto bad = [](PolicySpec spec) {
    auto p = Policy::Build(spec, "network");
    EXPECT_FALSE(p.ok());
    return std::string(p.status().message());
  };
  EXPECT_THAT(bad(PolicySpec{.allow = {"ok.test", "bad name"}}), HasSubstr("network.allow[1]"));
  EXPECT_THAT(bad(PolicySpec{.secrets = {{"1BAD", "v", {"a.test"}}}}), HasSubstr("environment variable"));
  EXPECT_THAT(bad(PolicySpec{.secrets = {{"K", "v", {}}}}), HasSubstr("name the hosts"));
  EXPECT_THAT(bad(PolicySpec{.secrets = {{"K", "v", {"*"}}}}), HasSubstr("every host"));
  std::string m = bad(PolicySpec{.secrets = {{"K", "sk-line\r\nbreak", {"a.test"}}}});
  EXPECT_THAT(m, HasSubstr("without CR, LF or NUL"));
  EXPECT_THAT(m, ::testing::Not(HasSubstr("sk-line")));
  EXPECT_THAT(bad(PolicySpec{.header_rules = {{"api.test", {{"Host", "x"}}}}}), HasSubstr("cannot be set"));
  EXPECT_THAT(bad(PolicySpec{.header_rules = {{"*", {{"X", "x"}}}}}), HasSubstr("host name"));
}

}  // namespace
}  // namespace warden::egress
