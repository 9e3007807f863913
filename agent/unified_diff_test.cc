#include "agent/unified_diff.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace warden::agent {
namespace {

using ::testing::HasSubstr;

TEST(UnifiedDiffTest, AppliesAHunkThatMoved) {
  const std::string before = "a\nb\nc\nd\ne\n";
  auto patches = ParseUnifiedDiff("--- a/f.py\n+++ b/f.py\n@@ -1,3 +1,3 @@\n c\n-d\n+D\n e\n");
  ASSERT_TRUE(patches.ok()) << patches.status();
  ASSERT_EQ(patches->size(), 1u);
  EXPECT_EQ((*patches)[0].path(), "f.py");
  auto after = ApplyFilePatch((*patches)[0], before);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(**after, "a\nb\nc\nD\ne\n");
}

TEST(UnifiedDiffTest, RefusesAHunkWhoseContextChanged) {
  auto patches = ParseUnifiedDiff("--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n x\n-y\n+z\n");
  ASSERT_TRUE(patches.ok());
  auto after = ApplyFilePatch((*patches)[0], std::string("x\nq\n"));
  ASSERT_FALSE(after.ok());
  EXPECT_THAT(after.status().message(), HasSubstr("does not apply"));
}

TEST(UnifiedDiffTest, CreatesAndDeletesFiles) {
  auto created = ParseUnifiedDiff("--- /dev/null\n+++ b/new.py\n@@ -0,0 +1,2 @@\n+one\n+two\n");
  ASSERT_TRUE(created.ok()) << created.status();
  auto content = ApplyFilePatch((*created)[0], std::nullopt);
  ASSERT_TRUE(content.ok()) << content.status();
  EXPECT_EQ(**content, "one\ntwo\n");
  auto deleted = ParseUnifiedDiff("--- a/old.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-gone\n");
  ASSERT_TRUE(deleted.ok());
  auto none = ApplyFilePatch((*deleted)[0], std::string("gone\n"));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(UnifiedDiffTest, RejectsACountMismatch) {
  auto patches = ParseUnifiedDiff("--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n x\n-y\n+z\n");
  ASSERT_FALSE(patches.ok());
  EXPECT_THAT(patches.status().message(), HasSubstr("header says"));
}

TEST(UnifiedDiffTest, MakeThenApplyRoundTrips) {
  std::string before, after;
  for (int i = 0; i < 40; ++i) before += "line " + std::to_string(i) + "\n";
  after = before;
  after.replace(after.find("line 5\n"), 7, "line five\n");
  after.replace(after.find("line 30\n"), 8, "");
  after += "tail\n";
  const std::string diff = MakeUnifiedDiff("m.py", before, after);
  EXPECT_THAT(diff, HasSubstr("--- a/m.py\n+++ b/m.py\n@@ -3,7 +3,7 @@"));
  auto patches = ParseUnifiedDiff(diff);
  ASSERT_TRUE(patches.ok()) << patches.status() << "\n" << diff;
  EXPECT_EQ((*patches)[0].hunks.size(), 3u);
  auto applied = ApplyFilePatch((*patches)[0], before);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(**applied, after);
  EXPECT_EQ(MakeUnifiedDiff("m.py", before, before), "");
}

TEST(UnifiedDiffTest, DiffOfANewFile) {
  EXPECT_EQ(MakeUnifiedDiff("n.py", std::nullopt, std::string("a\n")), "--- /dev/null\n+++ b/n.py\n@@ -0,0 +1,1 @@\n+a\n");
}

}  // namespace
}  // namespace warden::agent
