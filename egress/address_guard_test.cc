#include "egress/address_guard.h"

#include <ifaddrs.h>
#include <netinet/in.h>

#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace warden::egress {
namespace {

using ::testing::HasSubstr;

Address A(const char* text) {
  auto a = Address::Parse(text);
  EXPECT_TRUE(a.has_value()) << text;
  return a.value_or(Address());
}

TEST(AddressGuardTest, ClassifiesTheRangesTheHostReaches) {
  EXPECT_EQ(Classify(A("127.0.0.1")), AddressClass::kLoopback);
  EXPECT_EQ(Classify(A("::1")), AddressClass::kLoopback);
  EXPECT_EQ(Classify(A("169.254.169.254")), AddressClass::kMetadata);
  EXPECT_EQ(Classify(A("fd00:ec2::254")), AddressClass::kMetadata);
  EXPECT_EQ(Classify(A("169.254.1.1")), AddressClass::kLinkLocal);
  EXPECT_EQ(Classify(A("fe80::1")), AddressClass::kLinkLocal);
  EXPECT_EQ(Classify(A("10.1.2.3")), AddressClass::kPrivate);
  EXPECT_EQ(Classify(A("172.31.0.1")), AddressClass::kPrivate);
  EXPECT_EQ(Classify(A("192.168.1.1")), AddressClass::kPrivate);
  EXPECT_EQ(Classify(A("fd12::1")), AddressClass::kPrivate);
  EXPECT_EQ(Classify(A("100.64.0.1")), AddressClass::kShared);
  EXPECT_EQ(Classify(A("0.0.0.0")), AddressClass::kUnspecified);
  EXPECT_EQ(Classify(A("::")), AddressClass::kUnspecified);
  EXPECT_EQ(Classify(A("224.0.0.1")), AddressClass::kMulticast);
  EXPECT_EQ(Classify(A("255.255.255.255")), AddressClass::kReserved);
  EXPECT_EQ(Classify(A("203.0.113.9")), AddressClass::kReserved);
  EXPECT_EQ(Classify(A("1.1.1.1")), AddressClass::kPublic);
  EXPECT_EQ(Classify(A("2606:4700:4700::1111")), AddressClass::kPublic);
}

TEST(AddressGuardTest, IPv6FormsCarryingAnIPv4AddressAreThatAddress) {
  EXPECT_EQ(Classify(A("::ffff:127.0.0.1")), AddressClass::kLoopback);
  EXPECT_EQ(Classify(A("64:ff9b::a9fe:a9fe")), AddressClass::kMetadata);  // NAT64 of 169.254.169.254
  EXPECT_EQ(Classify(A("2002:0a00:0001::")), AddressClass::kPrivate);     // 6to4 of 10.0.0.1
  EXPECT_EQ(Classify(A("2002:0101:0101::")), AddressClass::kPublic);      // 6to4 of 1.1.1.1
  EXPECT_EQ(Classify(A("::127.0.0.1")), AddressClass::kReserved);         // IPv4-compatible
  EXPECT_EQ(Classify(A("2001:0:4136:e378::1")), AddressClass::kReserved); // Teredo
}

TEST(AddressGuardTest, InternalAddressesAreRefusedUnlessTheirNetworkIsListed) {
  AddressGuard closed;
  absl::Status s = closed.Check("metadata.test", A("169.254.169.254"), 80);
  EXPECT_TRUE(absl::IsPermissionDenied(s));
  EXPECT_THAT(std::string(s.message()), HasSubstr("resolves to 169.254.169.254"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("metadata"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("egress.allow_internal"));
  EXPECT_TRUE(closed.Check("1.1.1.1", A("1.1.1.1"), 443).ok());
  AddressGuard open({*ParseDestination("10.77.0.0/24:443")});
  EXPECT_TRUE(open.Check("pypi.test", A("10.77.0.2"), 443).ok());
  EXPECT_FALSE(open.Check("pypi.test", A("10.77.0.2"), 80).ok());
  EXPECT_FALSE(open.Check("pypi.test", A("10.77.1.2"), 443).ok());
}

TEST(AddressGuardTest, TheHostsOwnAddressesNeedAnEntryOfTheirOwn) {
  // Any address of this host's interfaces other than loopback.
  std::optional<Address> own;
  ifaddrs* list = nullptr;
  ASSERT_EQ(getifaddrs(&list), 0);
  for (ifaddrs* i = list; i != nullptr && !own; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    Address a;
    std::memcpy(a.bytes.data(), &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, 4);
    if (Classify(a) != AddressClass::kLoopback) own = a;
  }
  freeifaddrs(list);
  ASSERT_TRUE(own.has_value()) << "this host has no interface address besides loopback";
  const std::string text = own->ToString();
  // Listed inside a wider network: still refused, as the host's own.
  AddressGuard wide({*ParseDestination(text + "/8")});
  absl::Status s = wide.Check(text, *own, 80);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("an address of this host"));
  AddressGuard alone({*ParseDestination(text)});
  EXPECT_TRUE(alone.Check(text, *own, 80).ok());
}

}  // namespace
}  // namespace warden::egress
