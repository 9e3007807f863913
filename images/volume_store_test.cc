#include "images/volume_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "images/fs_util.h"

namespace warden::images {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Every chunk once, then the end.
std::function<absl::StatusOr<std::string>()> Once(std::string data) {
  auto left = std::make_shared<std::string>(std::move(data));
  return [left]() -> absl::StatusOr<std::string> { return std::exchange(*left, std::string()); };
}

std::string ReadAll(VolumeStore::Mounted& v, const std::string& path) {
  std::string out;
  absl::Status s = v.Read(path, 1 << 30, [&](const std::string& chunk, int64_t) {
    out += chunk;
    return true;
  });
  return s.ok() ? out : "error: " + s.ToString();
}

class VolumeStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/warden-volumes-XXXXXX";
    dir_ = mkdtemp(tmpl);
    auto store = VolumeStore::Open({.dir = dir_ + "/store"});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }
  void TearDown() override {
    store_.reset();
    RemoveTree(dir_).IgnoreError();
  }
  std::string dir_;
  std::unique_ptr<VolumeStore> store_;
};

TEST_F(VolumeStoreTest, AVolumeKeepsItsFilesOwnedByTheSandboxUserAcrossMounts) {
  ASSERT_TRUE(store_->Create("alice", "data", 32 << 20, 256, {}).ok());
  {
    auto v = store_->Mount("alice", "data");
    ASSERT_TRUE(v.ok()) << v.status();
    auto written = (*v)->Write("dir/file.txt", Once("hello"), /*make_parents=*/true, {});
    ASSERT_TRUE(written.ok()) << written.status();
    EXPECT_EQ(written->uid, kVolumeOwner);
    EXPECT_EQ(written->size, 5);
    auto root = (*v)->Stat("");
    ASSERT_TRUE(root.ok());
    EXPECT_EQ(root->uid, kVolumeOwner);  // the sandbox user may write at the top
    auto list = (*v)->List("", 2, 100);
    ASSERT_TRUE(list.ok());
    std::vector<std::string> paths;
    for (const VolumeEntry& e : *list) paths.push_back(e.path);
    EXPECT_THAT(paths, ElementsAre("dir", "dir/file.txt"));  // no lost+found
    EXPECT_TRUE(store_->MountedHere("alice", "data"));
  }
  EXPECT_FALSE(store_->MountedHere("alice", "data"));
  auto again = store_->Mount("alice", "data");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(ReadAll(**again, "dir/file.txt"), "hello");
  auto usage = (*again)->Usage();
  ASSERT_TRUE(usage.ok());
  EXPECT_EQ(usage->used_files, 2);
}

TEST_F(VolumeStoreTest, AFullVolumeIsEnospcForBytesAndForFiles) {
  ASSERT_TRUE(store_->Create("alice", "small", 16 << 20, 32, {}).ok());
  auto v = store_->Mount("alice", "small");
  ASSERT_TRUE(v.ok());
  auto big = (*v)->Write("big", Once(std::string(20 << 20, 'x')), false, {});
  EXPECT_TRUE(absl::IsResourceExhausted(big.status())) << big.status();
  ASSERT_TRUE((*v)->Remove("big").ok());
  absl::Status last;
  int made = 0;
  for (; made < 100 && last.ok(); ++made) last = (*v)->Write("f" + std::to_string(made), Once("x"), false, {}).status();
  EXPECT_TRUE(absl::IsResourceExhausted(last)) << last;
  EXPECT_LE(made, 40);
}

TEST_F(VolumeStoreTest, PathsNeverGoThroughASymlink) {
  ASSERT_TRUE(store_->Create("alice", "links", 16 << 20, 64, {}).ok());
  auto v = store_->Mount("alice", "links");
  ASSERT_TRUE(v.ok());
  // As a sandbox would plant them.
  ASSERT_EQ(symlinkat("/etc", (*v)->fd(), "etc"), 0);
  ASSERT_EQ(symlinkat("/etc/passwd", (*v)->fd(), "passwd"), 0);
  EXPECT_THAT(ReadAll(**v, "passwd"), HasSubstr("symlink"));
  EXPECT_THAT(ReadAll(**v, "etc/passwd"), HasSubstr("symlink"));
  EXPECT_FALSE((*v)->Write("etc/planted", Once("x"), false, {}).ok());
  EXPECT_FALSE((*v)->Write("passwd", Once("x"), false, {}).ok());
  EXPECT_EQ(access("/etc/planted", F_OK), -1);
  auto stat = (*v)->Stat("passwd");
  ASSERT_TRUE(stat.ok());
  EXPECT_EQ(stat->type, 'l');
  EXPECT_EQ(stat->symlink_target, "/etc/passwd");
  EXPECT_FALSE((*v)->Stat("../x").ok());
  ASSERT_TRUE((*v)->Remove("etc").ok());  // the link, never what it points to
  EXPECT_EQ(access("/etc/passwd", F_OK), 0);
}

TEST_F(VolumeStoreTest, CeilingsNamesAndDeletion) {
  VolumeStore::Ceilings ceilings{.max_bytes = 48 << 20, .max_count = 2};
  ASSERT_TRUE(store_->Create("alice", "a", 32 << 20, 64, ceilings).ok());
  EXPECT_TRUE(absl::IsResourceExhausted(store_->Create("alice", "b", 32 << 20, 64, ceilings).status()));
  EXPECT_TRUE(store_->Create("alice", "b", 16 << 20, 64, ceilings).ok());
  EXPECT_TRUE(absl::IsResourceExhausted(store_->Create("alice", "c", 16 << 20, 64, ceilings).status()));
  EXPECT_TRUE(absl::IsAlreadyExists(store_->Create("alice", "a", 16 << 20, 64, {}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store_->Create("alice", "../x", 16 << 20, 64, {}).status()));
  EXPECT_TRUE(absl::IsNotFound(store_->Get("bob", "a").status()));
  {
    auto v = store_->Mount("alice", "a");
    ASSERT_TRUE(v.ok());
    EXPECT_TRUE(absl::IsFailedPrecondition(store_->Delete("alice", "a")));
  }
  EXPECT_TRUE(store_->Delete("alice", "a").ok());
  EXPECT_TRUE(absl::IsNotFound(store_->Get("alice", "a").status()));
  EXPECT_EQ(store_->List("alice").size(), 1u);
}

}  // namespace
}  // namespace warden::images
