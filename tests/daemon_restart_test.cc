// wardend as an operator runs it, as a subprocess on a UNIX socket: what a
// kill -9 leaves behind is reclaimed by the next daemon, and a second
// daemon refuses to start on a state directory a live one owns.
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "sandbox/unique_fd.h"
#include "warden/v1/executor.grpc.pb.h"

namespace warden {
namespace {

namespace fs = std::filesystem;
using v1::Executor;

constexpr absl::Duration kStartTimeout = absl::Seconds(60);

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every directory under /sys/fs/cgroup (all hierarchies) whose name starts
// with `prefix`: a subtree, its groups, and (v2) its ".supervisor" leaf.
std::vector<std::string> CgroupDirsNamed(const std::string& prefix) {
  static std::vector<std::string>* found;
  static std::string wanted;
  std::vector<std::string> out;
  found = &out;
  wanted = prefix;
  ::nftw(
      "/sys/fs/cgroup",
      [](const char* path, const struct stat*, int type, struct FTW*) {
        if (type != FTW_D) return 0;
        const std::string p = path;
        const std::string base = p.substr(p.rfind('/') + 1);
        if (absl::StartsWith(base, wanted) || absl::StrContains(p, "/" + wanted + "/")) {
          found->push_back(p);
        }
        return 0;
      },
      32, FTW_PHYS);
  return out;
}

// Pids listed in the cgroup.procs of `dirs`.
std::set<pid_t> ProcsIn(const std::vector<std::string>& dirs) {
  std::set<pid_t> pids;
  for (const std::string& dir : dirs) {
    for (absl::string_view token :
         absl::StrSplit(ReadText(dir + "/cgroup.procs"), '\n', absl::SkipEmpty())) {
      pid_t pid;
      if (absl::SimpleAtoi(token, &pid)) pids.insert(pid);
    }
  }
  return pids;
}

// One line of a state record ("cgroup NAME", "process PID START WHAT").
std::vector<std::string> RecordLines(const std::string& record, const std::string& key) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(record, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, key + " ")) out.emplace_back(line.substr(key.size() + 1));
  }
  return out;
}

// A wardend subprocess; SIGKILLed and reaped if the test did not end it.
class Wardend {
 public:
  Wardend(const std::string& dir, const std::string& log_name) : dir_(dir) {
    log_ = dir + "/" + log_name;
    const std::string binary = std::string(WARDEN_BIN_DIR) + "/wardend";
    const std::string config = dir + "/wardend.json";
    const std::string listen = "unix:" + socket();
    pid_ = ::fork();
    if (pid_ == 0) {
      const int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execl(binary.c_str(), "wardend", "--config", config.c_str(), "--listen", listen.c_str(),
              "--state-dir", dir.c_str(), nullptr);
      ::_exit(127);
    }
  }
  ~Wardend() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  pid_t pid() const { return pid_; }
  std::string socket() const { return dir_ + "/w.sock"; }
  std::string log() const { return ReadText(log_); }

  // Waits until it answers on its socket; false (with the log) if it exits
  // or the deadline passes first.
  ::testing::AssertionResult WaitServing() {
    const absl::Time deadline = absl::Now() + kStartTimeout;
    while (absl::Now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return ::testing::AssertionFailure() << "wardend exited (" << status << "):\n" << log();
      }
      if (fs::exists(socket())) {
        auto channel = grpc::CreateChannel("unix:" + socket(), grpc::InsecureChannelCredentials());
        if (channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::milliseconds(200))) {
          stub_ = Executor::NewStub(channel);
          return ::testing::AssertionSuccess();
        }
      } else {
        // No notification for "a file appeared" that is simpler than this poll.
        absl::SleepFor(absl::Milliseconds(20));
      }
    }
    return ::testing::AssertionFailure() << "wardend did not serve in time:\n" << log();
  }

  // Waits for it to exit; returns the wait status.
  int Wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

  Executor::Stub& stub() { return *stub_; }

 private:
  std::string dir_, log_;
  pid_t pid_ = -1;
  std::unique_ptr<Executor::Stub> stub_;
};

std::unique_ptr<grpc::ClientContext> Context() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  return ctx;
}

class DaemonRestartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/warden-restart.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // Small pools, and a host id range of our own (ctest runs others beside).
    std::ofstream(dir_ + "/wardend.json")
        << R"({"pools": [{"language": "python", "size": 1, "warm": []}], "executor": {"host_id_base": )"
        << 7'000'000 + (getpid() % 4096) * 1024 << R"(, "host_id_count": 1024}})";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string CreateSession(Wardend& d) {
    v1::CreateSessionRequest request;
    request.set_language(v1::LANGUAGE_PYTHON);
    v1::Session session;
    grpc::Status s = d.stub().CreateSession(Context().get(), request, &session);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return session.id();
  }
  v1::ExecuteResponse Execute(Wardend& d, const std::string& session, const std::string& code) {
    v1::ExecuteRequest request;
    request.set_session_id(session);
    request.set_code(code);
    request.set_language(v1::LANGUAGE_PYTHON);
    v1::ExecuteResponse response;
    grpc::Status s = d.stub().Execute(Context().get(), request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response;
  }

  std::string dir_;
};

TEST_F(DaemonRestartTest, KillNineLeavesNothingOnceTheNextDaemonStarts) {
  auto first = std::make_unique<Wardend>(dir_, "first.log");
  ASSERT_TRUE(first->WaitServing());
  const std::string a = CreateSession(*first);
  const std::string b = CreateSession(*first);
  EXPECT_EQ(Execute(*first, a, "x = 41\nprint(x + 1)").stdout(), "42\n");
  // A cell still running when the daemon dies.
  std::thread running([&] {
    v1::ExecuteRequest request;
    request.set_session_id(b);
    request.set_code("import time\nwhile True: time.sleep(1)");
    v1::ExecuteResponse response;
    (void)first->stub().Execute(Context().get(), request, &response);
  });

  // A session of several processes, whose cgroups nest in the session's.
  v1::CreateSessionRequest shared_request;
  shared_request.set_shared_workspace(true);
  v1::Session shared;
  ASSERT_TRUE(first->stub().CreateSession(Context().get(), shared_request, &shared).ok());
  v1::RunCommandRequest command;
  command.set_session_id(shared.id());
  for (const char* arg : {"/bin/bash", "-c", "echo up; exec sleep 600"}) command.add_argv(arg);
  command.set_background(true);
  grpc::ClientContext command_ctx;
  auto command_reader = first->stub().RunCommand(&command_ctx, command);
  v1::CommandEvent event;
  ASSERT_TRUE(command_reader->Read(&event));  // started
  ASSERT_TRUE(command_reader->Read(&event));
  EXPECT_EQ(event.stdout(), "up\n");

  // What the first daemon made: its cgroup subtree in every hierarchy, the
  // processes in it, its zygote. Pinned by pidfd, so pid reuse cannot fool us.
  const std::string record = ReadText(dir_ + "/wardend.state");
  const std::vector<std::string> subtree = RecordLines(record, "cgroup");
  ASSERT_EQ(subtree.size(), 1u) << record;
  std::vector<std::string> cgroups = CgroupDirsNamed(subtree[0]);
  ASSERT_FALSE(cgroups.empty());
  EXPECT_TRUE(std::any_of(cgroups.begin(), cgroups.end(), [](const std::string& dir) {
    return absl::StrContains(dir, "/group-") && absl::StrContains(dir, "/run-");
  })) << "no session cgroup with nested ones";
  std::set<pid_t> pids = ProcsIn(cgroups);
  for (const std::string& p : RecordLines(record, "process")) {
    pid_t pid;
    ASSERT_TRUE(absl::SimpleAtoi(p.substr(0, p.find(' ')), &pid)) << p;
    pids.insert(pid);
  }
  EXPECT_GE(pids.size(), 3u) << "two sessions and the zygote";
  std::vector<UniqueFd> pidfds;
  for (pid_t pid : pids) {
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (fd >= 0) pidfds.emplace_back(fd);
  }

  ASSERT_EQ(::kill(first->pid(), SIGKILL), 0);
  const pid_t first_pid = first->pid();
  const int status = first->Wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  running.join();
  command_ctx.TryCancel();
  (void)command_reader->Finish();

  Wardend second(dir_, "second.log");
  ASSERT_TRUE(second.WaitServing());
  EXPECT_TRUE(absl::StrContains(second.log(), absl::StrCat("reclaimed what wardend pid ", first_pid)))
      << second.log();
  EXPECT_FALSE(absl::StrContains(second.log(), "NOT reclaimed")) << second.log();
  // Nothing else removes a dead daemon's cgroups: the reclaim did.
  EXPECT_FALSE(absl::StrContains(second.log(), "cgroups removed: none")) << second.log();
  // Reclaiming ends before the new daemon listens: nothing is left.
  for (const UniqueFd& fd : pidfds) {
    struct pollfd p = {fd.get(), POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 0), 1) << "a process of the dead daemon still runs";
  }
  for (const std::string& dir : cgroups) EXPECT_FALSE(fs::exists(dir)) << dir;
  // The record is the new daemon's now; no other file was left.
  EXPECT_TRUE(absl::StrContains(ReadText(dir_ + "/wardend.state"), absl::StrCat("daemon ", second.pid())));
  std::set<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir_)) files.insert(entry.path().filename());
  EXPECT_EQ(files, (std::set<std::string>{"wardend.json", "first.log", "second.log", "w.sock",
                                          "wardend.lock", "wardend.state"}));
  // And it works.
  const std::string c = CreateSession(second);
  EXPECT_EQ(Execute(second, c, "print('alive')").stdout(), "alive\n");

  // A clean stop leaves nothing of its own either.
  const std::vector<std::string> second_subtree =
      RecordLines(ReadText(dir_ + "/wardend.state"), "cgroup");
  ASSERT_EQ(second_subtree.size(), 1u);
  ASSERT_EQ(::kill(second.pid(), SIGTERM), 0);
  const int stopped = second.Wait();
  EXPECT_TRUE(WIFEXITED(stopped) && WEXITSTATUS(stopped) == 0) << stopped;
  EXPECT_TRUE(CgroupDirsNamed(second_subtree[0]).empty());
  EXPECT_FALSE(fs::exists(dir_ + "/wardend.state"));
  EXPECT_FALSE(fs::exists(dir_ + "/w.sock"));
}

TEST_F(DaemonRestartTest, ASecondDaemonRefusesTheStateALiveOneOwns) {
  Wardend first(dir_, "first.log");
  ASSERT_TRUE(first.WaitServing());
  Wardend second(dir_, "second.log");
  const int status = second.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
  EXPECT_TRUE(absl::StrContains(second.log(), absl::StrCat("another wardend (pid ", first.pid(),
                                                           ") owns the state directory ", dir_)))
      << second.log();
  // The first one keeps its socket and its sessions.
  const std::string s = CreateSession(first);
  EXPECT_EQ(Execute(first, s, "print(6 * 7)").stdout(), "42\n");
}

}  // namespace
}  // namespace warden
