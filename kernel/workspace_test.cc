#include "kernel/workspace.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
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


// Metadata a sandbox sets on its own files (a tmpfs takes hundreds of 64 KiB
// values) is read only as far as E2B's bound per file, and what is not
// UTF-8 is left out: describing a file costs the daemon at most that.
TEST(WorkspaceMetadataTest, WhatIsReadOfAFilesMetadataIsBoundedWhateverItHolds) {
  char tmpl[] = "/dev/shm/warden-metadata-test-XXXXXX";  // a tmpfs, as a sandbox's /tmp
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const std::string file = dir + "/f";
  FILE* f = fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fclose(f);
  ASSERT_EQ(setxattr(file.c_str(), "user.e2b.a-small", "one", 3, 0), 0);
  ASSERT_EQ(setxattr(file.c_str(), "user.e2b.bad", "\xff\xfe", 2, 0), 0);  // not UTF-8
  const std::string big(60'000, 'x');
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(setxattr(file.c_str(), absl::StrCat("user.e2b.big", i).c_str(), big.data(), big.size(), 0), 0)
        << strerror(errno);
  }
  for (int i = 0; i < 100; ++i) {
    const std::string value(30, 'v');
    ASSERT_EQ(setxattr(file.c_str(), absl::StrCat("user.e2b.k", i).c_str(), value.data(), value.size(), 0), 0);
  }
  UniqueFd root(open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  auto stat = StatWorkspacePath(root.get(), "f");
  ASSERT_TRUE(stat.ok()) << stat.status();
  size_t total = 0;
  for (const auto& [key, value] : stat->metadata) {
    total += 9 + key.size() + value.size();
    EXPECT_FALSE(absl::StartsWith(key, "big")) << "a 60,000-byte value was read";
    EXPECT_NE(key, "bad");
  }
  EXPECT_LE(total, kMaxFileMetadataBytes);
  EXPECT_EQ(stat->metadata.at("a-small"), "one");
  EXPECT_GE(stat->metadata.size(), 50u);  // what fits is kept
  auto listing = ListWorkspace(root.get(), "");
  ASSERT_TRUE(listing.ok()) << listing.status();
  ASSERT_EQ(listing->size(), 1u);
  EXPECT_EQ((*listing)[0].metadata, stat->metadata);
  system(("rm -rf " + dir).c_str());
}

TEST(WorkspaceMetadataTest, WrittenMetadataIsBoundAsE2bBoundsIt) {
  EXPECT_TRUE(ValidateFileMetadata({{"author", "me"}, {std::string(246, 'k'), "v"}}).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateFileMetadata({{std::string(247, 'k'), "v"}})));
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateFileMetadata({{"a/b", "v"}})));
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateFileMetadata({{"k", "\xff"}})));
  EXPECT_TRUE(ValidateFileMetadata({{"k", std::string(4096 - 10, 'v')}}).ok());  // 9 + 1 + 4086
  absl::Status over = ValidateFileMetadata({{"k", std::string(4096 - 9, 'v')}});
  EXPECT_TRUE(absl::IsInvalidArgument(over));
  EXPECT_TRUE(absl::StrContains(over.message(), "4096")) << over;
}

TEST_F(WorkspaceTest, AListingPastItsBudgetIsRefusedSayingWhatToDo) {
  ASSERT_EQ(mkdir((ws_ + "/d").c_str(), 0755), 0);
  for (int i = 0; i < 200; ++i) WriteHost(absl::StrCat(ws_, "/d/", std::string(100, 'n'), i), "x");
  auto small = ListWorkspace(root_.get(), "", 10'000, 0, Resolve::kBeneath, /*max_bytes=*/8 << 10);
  ASSERT_TRUE(absl::IsResourceExhausted(small.status())) << small.status();
  EXPECT_TRUE(absl::StrContains(small.status().message(), "depth")) << small.status();
  auto enough = ListWorkspace(root_.get(), "", 10'000, 0, Resolve::kBeneath, /*max_bytes=*/64 << 10);
  ASSERT_TRUE(enough.ok()) << enough.status();
  EXPECT_EQ(enough->size(), 201u);
}

}  // namespace
}  // namespace warden
