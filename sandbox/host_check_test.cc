// What `--check` says about AppArmor's restriction of unprivileged user
// namespaces (kernel.apparmor_restrict_unprivileged_userns, Ubuntu 23.10+).
// Debian's kernel has no such sysctl, so its values are given here.
#include "sandbox/host_check.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace warden {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kKnob[] = "kernel.apparmor_restrict_unprivileged_userns";

TEST(AppArmorUsernsItemTest, NamesTheSysctlWhereTheKernelHasNone) {
  const HostCheckItem item = AppArmorUsernsItem("", false, "");
  EXPECT_TRUE(item.ok);
  EXPECT_FALSE(item.required);
  EXPECT_THAT(item.detail, HasSubstr(kKnob));
  EXPECT_THAT(item.detail, HasSubstr("not on this kernel"));
}

TEST(AppArmorUsernsItemTest, OffIsFine) {
  const HostCheckItem item = AppArmorUsernsItem("0", false, "");
  EXPECT_TRUE(item.ok);
  EXPECT_THAT(item.detail, HasSubstr(std::string(kKnob) + "=0"));
}

TEST(AppArmorUsernsItemTest, RootIsLeftAloneButTheRootlessRemedyIsSaid) {
  const HostCheckItem item = AppArmorUsernsItem("1", true, "");
  EXPECT_TRUE(item.ok);
  EXPECT_THAT(item.detail, HasSubstr(std::string(kKnob) + "=1"));
  EXPECT_THAT(item.detail, HasSubstr("userns,"));
  EXPECT_THAT(item.detail, HasSubstr("sysctl -w " + std::string(kKnob) + "=0"));
}

TEST(AppArmorUsernsItemTest, AnUnprivilegedProcessItStopsIsToldWhatToDo) {
  const HostCheckItem item =
      AppArmorUsernsItem("1", false, "unshare(user, mount, net, ipc, uts, pid, cgroup) failed: Operation not permitted");
  EXPECT_FALSE(item.ok);
  EXPECT_TRUE(item.required);
  EXPECT_THAT(item.detail, HasSubstr(std::string(kKnob) + "=1"));
  EXPECT_THAT(item.detail, HasSubstr("Run wardend as root"));
  EXPECT_THAT(item.detail, HasSubstr("apparmor_parser -r /etc/apparmor.d/warden"));
  EXPECT_THAT(item.detail, HasSubstr("sysctl -w " + std::string(kKnob) + "=0"));
}

TEST(AppArmorUsernsItemTest, AProfileThatAllowsUserNamespacesIsFine) {
  const HostCheckItem item = AppArmorUsernsItem("1", false, "");
  EXPECT_TRUE(item.ok);
  EXPECT_THAT(item.detail, Not(HasSubstr("Run wardend as root")));
}

}  // namespace
}  // namespace warden
