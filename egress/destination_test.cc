#include "egress/destination.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace warden::egress {
namespace {

using ::testing::HasSubstr;

Destination Parse(const char* text) {
  auto d = ParseDestination(text);
  EXPECT_TRUE(d.ok()) << text << ": " << d.status();
  return d.ok() ? *d : Destination();
}

Address A(const char* text) { return *Address::Parse(text); }

TEST(DestinationTest, NamesMatchExactlyAndCaseInsensitively) {
  Destination d = Parse("Example.COM.");
  EXPECT_EQ(d.kind, Destination::Kind::kName);
  EXPECT_TRUE(d.MatchesName("example.com", 443));
  EXPECT_FALSE(d.MatchesName("www.example.com", 443));
  EXPECT_FALSE(d.MatchesName("badexample.com", 443));
  EXPECT_FALSE(d.MatchesAddress(A("93.184.216.34"), 443));
}

TEST(DestinationTest, WildcardsMatchSubdomainsAtAnyDepthButNotTheApex) {
  Destination d = Parse("*.example.com");
  EXPECT_TRUE(d.MatchesName("a.example.com", 80));
  EXPECT_TRUE(d.MatchesName("a.b.example.com", 80));
  EXPECT_FALSE(d.MatchesName("example.com", 80));
  EXPECT_FALSE(d.MatchesName("aexample.com", 80));
  EXPECT_FALSE(d.MatchesName("example.com.evil.net", 80));
}

TEST(DestinationTest, PortsAndRanges) {
  EXPECT_TRUE(Parse("example.com:443").MatchesName("example.com", 443));
  EXPECT_FALSE(Parse("example.com:443").MatchesName("example.com", 80));
  Destination range = Parse("10.0.0.0/8:8000-8999");
  EXPECT_TRUE(range.MatchesAddress(A("10.1.2.3"), 8500));
  EXPECT_FALSE(range.MatchesAddress(A("10.1.2.3"), 9000));
  EXPECT_TRUE(Parse("*:80").MatchesName("anything.test", 80));
  EXPECT_FALSE(Parse("*:80").MatchesAddress(A("1.1.1.1"), 443));
}

TEST(DestinationTest, AddressesAndNetworksOfBothFamilies) {
  EXPECT_TRUE(Parse("203.0.113.0/24").MatchesAddress(A("203.0.113.200"), 1));
  EXPECT_FALSE(Parse("203.0.113.0/24").MatchesAddress(A("203.0.114.1"), 1));
  EXPECT_TRUE(Parse("1.1.1.1").MatchesAddress(A("1.1.1.1"), 443));
  EXPECT_FALSE(Parse("1.1.1.1").MatchesAddress(A("1.1.1.2"), 443));
  EXPECT_TRUE(Parse("2001:db8::/32").MatchesAddress(A("2001:db8:1::5"), 443));
  EXPECT_TRUE(Parse("[2001:db8::1]:443").MatchesAddress(A("2001:db8::1"), 443));
  EXPECT_FALSE(Parse("[2001:db8::1]:443").MatchesAddress(A("2001:db8::1"), 80));
  EXPECT_TRUE(Parse("[2001:db8::]/32:443").MatchesAddress(A("2001:db8::9"), 443));
  // An IPv4-mapped IPv6 address is the IPv4 address, both ways.
  EXPECT_TRUE(Parse("::ffff:10.0.0.1").MatchesAddress(A("10.0.0.1"), 1));
  EXPECT_TRUE(Parse("10.0.0.0/8").MatchesAddress(A("::ffff:10.9.9.9"), 1));
  // Families never match each other.
  EXPECT_FALSE(Parse("0.0.0.0/0").MatchesAddress(A("2001:db8::1"), 1));
  EXPECT_TRUE(Parse("::/0").MatchesAddress(A("2001:db8::1"), 1));
}

TEST(DestinationTest, EverythingMatchesNamesAndAddresses) {
  Destination d = Parse("*");
  EXPECT_EQ(d.kind, Destination::Kind::kEverything);
  EXPECT_TRUE(d.MatchesName("x.test", 1));
  EXPECT_TRUE(d.MatchesAddress(A("::1"), 1));
}

TEST(DestinationTest, MalformedEntriesSayHowToWriteThem) {
  for (const char* bad : {"", "exa mple.com", "*example.com", "a.*.com", "[::1", "[example.com]"}) {
    auto d = ParseDestination(bad);
    EXPECT_FALSE(d.ok()) << bad;
    EXPECT_THAT(std::string(d.status().message()), HasSubstr("*.example.com")) << bad;
  }
  for (const char* bad : {"10.0.0.0/33", "1.2.3.4/x"}) {
    auto d = ParseDestination(bad);
    EXPECT_FALSE(d.ok()) << bad;
    EXPECT_THAT(std::string(d.status().message()), HasSubstr("prefix length")) << bad;
  }
  for (const char* bad : {"example.com:0", "example.com:70000", "example.com:9-3"}) {
    auto d = ParseDestination(bad);
    EXPECT_FALSE(d.ok()) << bad;
    EXPECT_THAT(std::string(d.status().message()), HasSubstr("the port must be 1-65535")) << bad;
  }
}

TEST(HostTest, TargetsAreAddressesOrNames) {
  auto name = ParseHost("API.Example.com");
  ASSERT_TRUE(name.ok());
  EXPECT_EQ(name->name, "api.example.com");
  auto v6 = ParseHost("[2001:db8::1]");
  ASSERT_TRUE(v6.ok());
  ASSERT_TRUE(v6->address.has_value());
  EXPECT_EQ(v6->ToString(), "[2001:db8::1]");
  // Numeric forms some resolvers take as addresses are neither.
  EXPECT_FALSE(ParseHost("0x7f.1").ok());
  EXPECT_FALSE(ParseHost("127.1").ok());
  EXPECT_FALSE(ParseHost("2130706433").ok());
  auto authority = ParseAuthority("[::1]:8443");
  ASSERT_TRUE(authority.ok());
  EXPECT_EQ(authority->second, 8443);
  EXPECT_FALSE(ParseAuthority("example.com").ok());
  EXPECT_EQ(ParseAuthority("example.com", 80)->second, 80);
  EXPECT_FALSE(ParseAuthority("example.com:99999").ok());
}

}  // namespace
}  // namespace warden::egress
