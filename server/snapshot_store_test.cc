// SnapshotStore against what a disk may hold: records damaged, hand-edited
// or written by another version, which are reported and skipped (never a
// crash), and errors that never show the daemon's own paths to a tenant.
#include "server/snapshot_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace warden {
namespace {

class SnapshotStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/warden-snapstore-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // An archive of `bytes` bytes, as a kernel would leave one.
  SnapshotArchive Archive(size_t bytes) {
    const std::string path = dir_ + "/archive-src";
    std::ofstream(path) << std::string(bytes, 'a');
    UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    unlink(path.c_str());
    return SnapshotArchive{std::move(fd), static_cast<int64_t>(bytes)};
  }
  SnapshotRecord Taken(SnapshotStore& store) {
    SnapshotRecord record{.tenant = "alice", .session_id = "s-1", .created = absl::Now(), .env = {"A=1"}};
    auto stored = store.Put(record, Archive(100));
    EXPECT_TRUE(stored.ok()) << stored.status();
    return stored.ok() ? *stored : record;
  }
  std::string RecordPath(const SnapshotStore& store, const SnapshotRecord& r) const {
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir_)) {
      if (e.path().filename() == r.id + ".json") return e.path();
    }
    ADD_FAILURE() << "no record file for " << r.id;
    return "";
  }

  std::string dir_;
};

TEST_F(SnapshotStoreTest, ADamagedRecordIsReportedAndSkippedAndTheOthersAreListed) {
  SnapshotStore store(dir_ + "/snaps", 1 << 20);
  const SnapshotRecord good = Taken(store);
  // What a damaged disk, a hand edit or another version may leave, field
  // by field: each makes its record unreadable, never the daemon.
  const std::vector<std::pair<std::string, std::string>> damages = {
      {"env", R"("A=1")"},             // the reported one: a string for a list
      {"env", R"([1, 2])"},
      {"env", R"(["no equals sign"])"},
      {"left_out", R"(["a"])"},
      {"left_out", R"({"a": 1})"},
      {"execution_count", R"("7")"},
      {"execution_count", R"(-1)"},
      {"memory_mb", R"(1e99)"},
      {"size_bytes", R"(18446744073709551615)"},
      {"hibernation", R"("yes")"},
      {"language", R"("cobol")"},
      {"workspace_path", R"("relative")"},
      {"workspace_aliases", R"(["/ok", "rel"])"},
      {"id", R"("snap-000000000000000000000000")"},
      {"name", R"({"a": 1})"},
  };
  for (const auto& [field, value] : damages) {
    const SnapshotRecord bad = Taken(store);
    const std::string path = RecordPath(store, bad);
    nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
    j[field] = nlohmann::json::parse(value);
    std::ofstream(path, std::ios::trunc) << j.dump();
    const std::string what = absl::StrCat(field, " = ", value);

    auto listed = store.List("alice");
    ASSERT_EQ(listed.size(), 1u) << what;
    EXPECT_EQ(listed[0].id, good.id) << what;
    auto got = store.Get("alice", bad.id);
    ASSERT_TRUE(absl::IsDataLoss(got.status())) << what << ": " << got.status();
    EXPECT_TRUE(absl::StrContains(got.status().message(), "DeleteSnapshot")) << got.status();
    EXPECT_FALSE(absl::StrContains(got.status().message(), dir_)) << got.status();
    EXPECT_TRUE(store.Delete("alice", bad.id).ok()) << what;
  }
  // Not JSON at all, a record too large, a directory in a record's place.
  for (const std::string& text : {std::string("{not json"), std::string("[]"), std::string(2 << 20, ' ')}) {
    const SnapshotRecord bad = Taken(store);
    std::ofstream(RecordPath(store, bad), std::ios::trunc) << text;
    EXPECT_EQ(store.List("alice").size(), 1u);
    EXPECT_TRUE(absl::IsDataLoss(store.Get("alice", bad.id).status()));
    EXPECT_TRUE(store.Delete("alice", bad.id).ok());
  }
  const SnapshotRecord dir_in_place = Taken(store);
  const std::string path = RecordPath(store, dir_in_place);
  std::filesystem::remove(path);
  std::filesystem::create_directory(path);
  EXPECT_EQ(store.List("alice").size(), 1u);
  EXPECT_FALSE(store.Get("alice", dir_in_place.id).ok());
  // Its archive gone: restoring says the snapshot is damaged, not where.
  const SnapshotRecord no_archive = Taken(store);
  std::filesystem::remove(std::filesystem::path(RecordPath(store, no_archive)).replace_extension(".tar"));
  auto archive = store.OpenArchive("alice", no_archive.id);
  EXPECT_TRUE(absl::IsDataLoss(archive.status())) << archive.status();
  EXPECT_FALSE(absl::StrContains(archive.status().message(), dir_)) << archive.status();
}

TEST_F(SnapshotStoreTest, ErrorsNeverNameTheDaemonsPaths) {
  // The snapshot directory cannot be made: a file is in its way.
  std::ofstream(dir_ + "/blocked") << "x";
  SnapshotStore store(dir_ + "/blocked/snaps", 1 << 20);
  SnapshotRecord record{.tenant = "alice", .session_id = "s-1", .created = absl::Now()};
  auto stored = store.Put(record, Archive(10));
  ASSERT_FALSE(stored.ok());
  EXPECT_FALSE(absl::StrContains(stored.status().message(), dir_)) << stored.status();
  EXPECT_TRUE(absl::StrContains(stored.status().message(), "operator")) << stored.status();
}

}  // namespace
}  // namespace warden
