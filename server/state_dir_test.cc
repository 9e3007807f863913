// StateDir and Reclaim without a daemon: the lock, the record's format and
// trust checks, and that a recorded helper is killed only while it is still
// the same process. No cgroups needed (Reclaim is given none).
#include "server/state_dir.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sandbox/testing/paused_child.h"
#include "server/session_keeper.h"

namespace warden {
namespace {

using ::testing::HasSubstr;
using ::warden::testing::PausedChild;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/state_dir_test.XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(StateRecordTest, RoundTrips) {
  StateRecord record;
  record.daemon_pid = 4242;
  record.cgroup_subtree = "warden-4242-1";
  record.processes.push_back({99, 12345, "python zygote"});
  record.sockets = {"/run/warden/wardend.sock"};
  record.held_subtrees = {"warden-4000-7"};
  absl::StatusOr<StateRecord> back = StateRecord::Decode(record.Encode());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->Encode(), record.Encode());
  EXPECT_EQ(back->processes.at(0).what, "python zygote");
}

// A kept session's metadata (server/session_keeper.h) reads back as written,
// and a file that is not one is refused.
TEST(SessionRecordTest, RoundTripsAndRejectsWhatItDidNotWrite) {
  SessionRecord record;
  record.id = "s-0123456789abcdef01234567";
  record.tenant = "team a\n";
  record.language = Language::kBash;
  record.memory_mb = 384;
  record.labels = {{"k=1", "v 2"}};
  record.created = absl::FromUnixSeconds(1000);
  record.expires = absl::FromUnixSeconds(5000);
  record.last_used = absl::FromUnixSeconds(2000);
  record.idle_timeout = absl::Seconds(600);
  record.snapshot.execution_count = 7;
  record.snapshot.next_cell_id = 9;
  record.snapshot.program_host_uid = 7001;
  record.cgroup_subtree = "warden-1-2";
  record.cgroup_group = "run-3";
  record.busy = true;
  absl::StatusOr<SessionRecord> back = SessionRecord::Decode(record.Encode());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->Encode(), record.Encode());
  EXPECT_EQ(back->tenant, "team a\n");
  EXPECT_EQ(back->labels.at("k=1"), "v 2");
  for (const char* text : {"", "warden-session 1\nid ../../etc\ntenant t\n", "warden-session 1\nid s-00\n",
                           "warden-session 1\nid s-00\ntenant t\nmystery 1\n"}) {
    EXPECT_FALSE(SessionRecord::Decode(text).ok()) << text;
  }
}

TEST(StateRecordTest, RejectsWhatItDidNotWrite) {
  for (const char* text : {"", "daemon 1\n", "warden-state 1\nprocess 1 2 init\n",
                           "warden-state 1\nsocket relative.sock\n", "warden-state 1\nmystery 1\n"}) {
    EXPECT_FALSE(StateRecord::Decode(text).ok()) << text;
  }
}

TEST(StateDirTest, ASecondClaimFailsWhileTheFirstHoldsTheLock) {
  TempDir dir;
  auto first = StateDir::Claim(dir.path());
  ASSERT_TRUE(first.ok()) << first.status();
  StateRecord record;
  record.daemon_pid = ::getpid();
  ASSERT_TRUE((*first)->Write(record).ok());
  auto second = StateDir::Claim(dir.path());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr("another wardend (pid " + std::to_string(::getpid()) +
                        ") owns the state directory " + dir.path()));
  first->reset();  // released: the next claim succeeds
  auto third = StateDir::Claim(dir.path());
  EXPECT_TRUE(third.ok()) << third.status();
}

TEST(StateDirTest, ARecordLeftBehindIsPreviousAndACleanStopRemovesOurs) {
  TempDir dir;
  {
    auto crashed = StateDir::Claim(dir.path());
    ASSERT_TRUE(crashed.ok()) << crashed.status();
    EXPECT_FALSE((*crashed)->previous().has_value());
    StateRecord record;
    record.daemon_pid = 777;
    ASSERT_TRUE((*crashed)->Write(record).ok());
  }  // "crashed": the lock is released, the record stays
  auto next = StateDir::Claim(dir.path());
  ASSERT_TRUE(next.ok()) << next.status();
  ASSERT_TRUE((*next)->previous().has_value());
  EXPECT_EQ((*next)->previous()->daemon_pid, 777);
  // Until it writes its own, a stop keeps the predecessor's record.
  (*next)->RemoveRecord();
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/wardend.state"));
  StateRecord mine;
  mine.daemon_pid = ::getpid();
  ASSERT_TRUE((*next)->Write(mine).ok());
  (*next)->RemoveRecord();
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/wardend.state"));
}

TEST(StateDirTest, ARecordOthersCouldWriteIsNotTrusted) {
  TempDir dir;
  const std::string record = dir.path() + "/wardend.state";
  std::ofstream(record) << "warden-state 1\ndaemon 1\n";
  ASSERT_EQ(::chmod(record.c_str(), 0666), 0);
  auto claimed = StateDir::Claim(dir.path());
  ASSERT_FALSE(claimed.ok());
  EXPECT_THAT(std::string(claimed.status().message()), HasSubstr("remove it"));
}

TEST(ReclaimTest, KillsARecordedHelperOnlyWhileItIsTheSameProcess) {
  PausedChild helper;
  absl::StatusOr<uint64_t> start = ProcessStartTime(helper.pid());
  ASSERT_TRUE(start.ok()) << start.status();

  StateRecord stale;  // the pid, but another process's start time: recycled
  stale.daemon_pid = 1234;
  stale.processes.push_back({helper.pid(), *start + 1, "python zygote"});
  ReclaimReport report = Reclaim(stale, nullptr);
  EXPECT_EQ(report.processes, 0);
  EXPECT_TRUE(helper.Alive());

  StateRecord same = stale;
  same.processes[0].start_time = *start;
  report = Reclaim(same, nullptr);
  EXPECT_EQ(report.processes, 1);
  EXPECT_TRUE(report.problems.empty());
  EXPECT_FALSE(helper.Alive());
  EXPECT_THAT(report.Summary(), HasSubstr("reclaimed what wardend pid 1234 left behind: 1 processes"));
}

TEST(ReclaimTest, RemovesOnlyRecordedSocketsThatAreSockets) {
  TempDir dir;
  const std::string not_a_socket = dir.path() + "/w.sock";
  std::ofstream(not_a_socket) << "data";
  StateRecord record;
  record.sockets = {not_a_socket, dir.path() + "/missing.sock"};
  ReclaimReport report = Reclaim(record, nullptr);
  EXPECT_TRUE(report.files.empty());
  EXPECT_TRUE(std::filesystem::exists(not_a_socket));
}

// A write that fails leaves no temporary behind: the soak found
// sessions/<id>.tmp files after the state directory's disk filled. The
// rename fails here because the target is a directory that is not empty;
// the full-disk case takes the same path.
TEST(WriteFileAtomicallyTest, AFailedWriteLeavesNoTemporary) {
  TempDir dir;
  const std::string target = dir.path() + "/record";
  std::filesystem::create_directories(target + "/occupied");
  EXPECT_FALSE(WriteFileAtomically(target, "text").ok());
  EXPECT_FALSE(std::filesystem::exists(target + ".tmp"));
  EXPECT_TRUE(WriteFileAtomically(dir.path() + "/ok", "text").ok());
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/ok.tmp"));
}

}  // namespace
}  // namespace warden

