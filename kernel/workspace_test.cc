#include "kernel/workspace.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>

#include "gtest/gtest.h"

namespace warden {
namespace {

class WorkspaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/warden-workspace-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    top_ = tmpl;
    ws_ = top_ + "/ws";
    ASSERT_EQ(mkdir(ws_.c_str(), 0755), 0);
    root_.Reset(open(ws_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(root_.valid());
    // A secret next to the workspace: what escapes would reach.
    WriteHost(top_ + "/secret", "top secret");
  }
  void TearDown() override { system(("rm -rf " + top_).c_str()); }
  static void WriteHost(const std::string& path, const std::string& data) {
    FILE* f = fopen(path.c_str(), "w");
    fwrite(data.data(), 1, data.size(), f);
    fclose(f);
  }

  std::string top_, ws_;
  UniqueFd root_;
};

TEST_F(WorkspaceTest, WritesReadsAndCreatesParents) {
  std::string blob("\0\1\2\xff binary", 11);
  ASSERT_TRUE(WriteWorkspaceFile(root_.get(), "a/b/c.bin", blob, 1 << 20).ok());
  auto back = ReadWorkspaceFile(root_.get(), "a/b/c.bin", 1 << 20);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, blob);
}

TEST_F(WorkspaceTest, NeverFollowsSymlinks) {
  ASSERT_EQ(symlink((top_ + "/secret").c_str(), (ws_ + "/abs").c_str()), 0);
  ASSERT_EQ(symlink("../secret", (ws_ + "/rel").c_str()), 0);
  ASSERT_EQ(symlink("..", (ws_ + "/up").c_str()), 0);
  ASSERT_EQ(mkdir((ws_ + "/inner").c_str(), 0755), 0);
  ASSERT_EQ(symlink("ok.txt", (ws_ + "/inner/inside").c_str()), 0);  // even within the workspace
  for (const char* path : {"abs", "rel", "up/secret", "inner/inside"}) {
    auto read = ReadWorkspaceFile(root_.get(), path, 1 << 20);
    EXPECT_TRUE(absl::IsPermissionDenied(read.status())) << path << ": " << read.status();
  }
  EXPECT_FALSE(WriteWorkspaceFile(root_.get(), "up/planted", "x", 100).ok());
  EXPECT_FALSE(WriteWorkspaceFile(root_.get(), "abs", "overwrite", 100).ok());
  EXPECT_NE(access((top_ + "/planted").c_str(), F_OK), 0);
  auto secret = ReadWorkspaceFile(root_.get(), "up/secret", 1 << 20);
  EXPECT_FALSE(secret.ok());
}

TEST_F(WorkspaceTest, RejectsPathsThatAreNotPlainAndRelative) {
  for (const char* bad : {"", "/etc/passwd", "..", "../secret", "a/../../secret", "a//b", "./a"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(ReadWorkspaceFile(root_.get(), bad, 100).status())) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(WriteWorkspaceFile(root_.get(), bad, "x", 100)))
        << bad;
  }
}

TEST_F(WorkspaceTest, EnforcesTheSizeCap) {
  EXPECT_TRUE(absl::IsInvalidArgument(WriteWorkspaceFile(root_.get(), "big", std::string(101, 'x'), 100)));
  WriteHost(ws_ + "/big", std::string(101, 'x'));
  EXPECT_TRUE(absl::IsResourceExhausted(ReadWorkspaceFile(root_.get(), "big", 100).status()));
}

TEST_F(WorkspaceTest, ReadsOnlyRegularFiles) {
  ASSERT_EQ(mkfifo((ws_ + "/fifo").c_str(), 0644), 0);
  ASSERT_EQ(mkdir((ws_ + "/dir").c_str(), 0755), 0);
  EXPECT_TRUE(absl::IsFailedPrecondition(ReadWorkspaceFile(root_.get(), "fifo", 100).status()));
  EXPECT_FALSE(ReadWorkspaceFile(root_.get(), "dir", 100).ok());
}

TEST_F(WorkspaceTest, ListsRecursivelyWithoutFollowingLinks) {
  WriteHost(ws_ + "/a.txt", "abc");
  ASSERT_EQ(mkdir((ws_ + "/sub").c_str(), 0755), 0);
  WriteHost(ws_ + "/sub/b.txt", "hello");
  ASSERT_EQ(symlink("/", (ws_ + "/sub/root").c_str()), 0);
  auto listing = ListWorkspace(root_.get(), "");
  ASSERT_TRUE(listing.ok()) << listing.status();
  std::map<std::string, std::pair<char, int64_t>> seen;
  for (const auto& e : *listing) seen[e.path] = {e.type, e.size};
  EXPECT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen["a.txt"], std::make_pair('f', int64_t{3}));
  EXPECT_EQ(seen["sub"].first, 'd');
  EXPECT_EQ(seen["sub/b.txt"], std::make_pair('f', int64_t{5}));
  EXPECT_EQ(seen["sub/root"].first, 'l');
}

TEST_F(WorkspaceTest, StatsMakesMovesAndRemoves) {
  auto made = MakeWorkspaceDirectory(root_.get(), "d/e");
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(made->type, 'd');
  EXPECT_EQ(made->mode & 0700u, 0700u);
  EXPECT_TRUE(absl::IsAlreadyExists(MakeWorkspaceDirectory(root_.get(), "d/e").status()));
  ASSERT_TRUE(WriteWorkspaceFile(root_.get(), "d/e/f.txt", "hello", 100).ok());

  auto stat = StatWorkspacePath(root_.get(), "d/e/f.txt");
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_EQ(stat->type, 'f');
  EXPECT_EQ(stat->size, 5);
  EXPECT_GT(stat->modified_unix_ms, 0);
  EXPECT_EQ(StatWorkspacePath(root_.get(), "")->type, 'd');
  EXPECT_TRUE(absl::IsNotFound(StatWorkspacePath(root_.get(), "d/nope").status()));

  auto moved = MoveWorkspacePath(root_.get(), "d/e/f.txt", "g/h.txt");
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->path, "g/h.txt");
  EXPECT_EQ(*ReadWorkspaceFile(root_.get(), "g/h.txt", 100), "hello");
  EXPECT_TRUE(absl::IsNotFound(MoveWorkspacePath(root_.get(), "d/e/f.txt", "x").status()));

  auto listing = ListWorkspace(root_.get(), "", 100, /*max_depth=*/1);
  ASSERT_TRUE(listing.ok());
  EXPECT_EQ(listing->size(), 2u);  // d and g, not what they hold

  ASSERT_TRUE(RemoveWorkspacePath(root_.get(), "d").ok());  // with e inside
  ASSERT_TRUE(RemoveWorkspacePath(root_.get(), "g/h.txt").ok());
  EXPECT_TRUE(absl::IsNotFound(StatWorkspacePath(root_.get(), "d").status()));
  EXPECT_TRUE(absl::IsNotFound(RemoveWorkspacePath(root_.get(), "g/h.txt")));
  EXPECT_TRUE(absl::IsInvalidArgument(RemoveWorkspacePath(root_.get(), "")));
}

TEST_F(WorkspaceTest, PathOperationsNeverLeaveTheWorkspace) {
  ASSERT_EQ(mkdir((top_ + "/outside").c_str(), 0755), 0);
  WriteHost(top_ + "/outside/keep", "keep");
  ASSERT_EQ(symlink((top_ + "/outside").c_str(), (ws_ + "/out").c_str()), 0);
  ASSERT_EQ(symlink("..", (ws_ + "/up").c_str()), 0);
  // A symlink is stat'ed, moved and removed itself, never what it points to.
  auto link = StatWorkspacePath(root_.get(), "out");
  ASSERT_TRUE(link.ok()) << link.status();
  EXPECT_EQ(link->type, 'l');
  EXPECT_EQ(link->symlink_target, top_ + "/outside");
  EXPECT_FALSE(StatWorkspacePath(root_.get(), "out/keep").ok());  // through the link: refused
  EXPECT_FALSE(MakeWorkspaceDirectory(root_.get(), "up/planted").ok());
  EXPECT_FALSE(MoveWorkspacePath(root_.get(), "up/secret", "stolen").ok());
  EXPECT_FALSE(MoveWorkspacePath(root_.get(), "out/keep", "stolen").ok());
  EXPECT_FALSE(RemoveWorkspacePath(root_.get(), "out/keep").ok());
  EXPECT_FALSE(RemoveWorkspacePath(root_.get(), "up/secret").ok());
  for (const char* bad : {"../secret", "/etc", "a/../../secret"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(RemoveWorkspacePath(root_.get(), bad))) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(MoveWorkspacePath(root_.get(), "out", bad).status())) << bad;
  }
  ASSERT_TRUE(RemoveWorkspacePath(root_.get(), "out").ok());
  EXPECT_EQ(access((top_ + "/outside/keep").c_str(), F_OK), 0);
  EXPECT_EQ(access((top_ + "/secret").c_str(), F_OK), 0);
  EXPECT_NE(access((top_ + "/planted").c_str(), F_OK), 0);
  EXPECT_NE(access((top_ + "/stolen").c_str(), F_OK), 0);
}

}  // namespace
}  // namespace warden
