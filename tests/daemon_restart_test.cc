// wardend as an operator runs it, as a subprocess on a UNIX socket: what a
// kill -9 leaves behind is reclaimed by the next daemon, and a second
// daemon refuses to start on a state directory a live one owns.
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
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
// With `kept`, warden-keeper runs it (and runs it again when it exits), and
// pid() is the keeper's.
class Wardend {
 public:
  Wardend(const std::string& dir, const std::string& log_name, bool kept = false,
          std::vector<std::string> extra = {})
      : dir_(dir), kept_(kept) {
    log_ = dir + "/" + log_name;
    const std::string binary = std::string(WARDEN_BIN_DIR) + "/wardend";
    const std::string keeper = std::string(WARDEN_BIN_DIR) + "/warden-keeper";
    std::vector<std::string> args;
    if (kept) args = {keeper, "--socket", dir + "/keeper.sock", "--"};
    for (const std::string& a : {binary, std::string("--config"), dir + "/wardend.json",
                                 std::string("--listen"), "unix:" + socket(), std::string("--state-dir"), dir}) {
      args.push_back(a);
    }
    for (const std::string& a : extra) args.push_back(a);
    pid_ = ::fork();
    if (pid_ == 0) {
      const int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  ~Wardend() {
    if (pid_ <= 0) return;
    // A keeper is stopped for real, so that its sessions and cgroups go too.
    if (kept_ && ::kill(pid_, SIGTERM) == 0) {
      const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
      struct pollfd p = {fd, POLLIN, 0};
      ::poll(&p, 1, 30'000);
      ::close(fd);
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
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
        // A channel of its own: a shared subchannel could still be the one
        // connected to the wardend before, which is gone.
        grpc::ChannelArguments args;
        args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
        auto channel =
            grpc::CreateCustomChannel("unix:" + socket(), grpc::InsecureChannelCredentials(), args);
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
  bool kept_ = false;
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
  void TearDown() override {
    std::error_code ec;  // a keeper's launcher may be removing its socket meanwhile
    fs::remove_all(dir_, ec);
  }

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
  // The egress CA is state; egress/ holds the running daemon's CA bundle.
  EXPECT_EQ(files, (std::set<std::string>{"wardend.json", "first.log", "second.log", "w.sock", "wardend.lock",
                                          "wardend.state", "egress", "egress-ca.pem", "egress-ca.key"}));
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


// ---------------------------------------------------------------------------
// Under warden-keeper: sessions outlive wardend.

// The pid of the wardend whose record is in `dir` (0: none yet).
pid_t RecordedDaemon(const std::string& dir) {
  std::vector<std::string> lines = RecordLines(ReadText(dir + "/wardend.state"), "daemon");
  pid_t pid = 0;
  if (lines.size() == 1 && absl::SimpleAtoi(lines[0], &pid)) return pid;
  return 0;
}

class KeptSessionsTest : public DaemonRestartTest {
 protected:
  // Waits until a wardend other than `old` has written its record, then
  // until it serves.
  ::testing::AssertionResult WaitForNext(Wardend& kept, pid_t old) {
    const absl::Time deadline = absl::Now() + kStartTimeout;
    while (RecordedDaemon(dir_) == old || RecordedDaemon(dir_) == 0) {
      if (absl::Now() > deadline) {
        return ::testing::AssertionFailure() << "no new wardend:\n" << kept.log();
      }
      // The record appears when the new daemon has started; no event to wait on.
      absl::SleepFor(absl::Milliseconds(20));
    }
    return kept.WaitServing();
  }
  ::testing::AssertionResult WriteWorkspaceFile(Wardend& d, const std::string& id, const std::string& path) {
    v1::FileInfo info;
    auto ctx = Context();
    auto writer = d.stub().UploadFile(ctx.get(), &info);
    v1::UploadFileRequest header;
    header.mutable_header()->set_session_id(id);
    header.mutable_header()->set_path(path);
    v1::UploadFileRequest chunk;
    chunk.set_chunk("open");
    if (!writer->Write(header) || !writer->Write(chunk) || !writer->WritesDone()) {
      return ::testing::AssertionFailure() << "upload cut";
    }
    grpc::Status s = writer->Finish();
    if (!s.ok()) return ::testing::AssertionFailure() << s.error_message();
    return ::testing::AssertionSuccess();
  }
  v1::Session GetSession(Wardend& d, const std::string& id) {
    v1::GetSessionRequest request;
    request.set_session_id(id);
    v1::Session session;
    grpc::Status s = d.stub().GetSession(Context().get(), request, &session);
    EXPECT_TRUE(s.ok()) << s.error_message() << "\n" << d.log();
    return session;
  }
};

TEST_F(KeptSessionsTest, StateSurvivesSigtermAndKillNine) {
  Wardend kept(dir_, "kept.log", /*kept=*/true);
  ASSERT_TRUE(kept.WaitServing());
  v1::CreateSessionRequest request;
  request.set_language(v1::LANGUAGE_PYTHON);
  request.set_ttl_seconds(3600);
  request.mutable_limits()->set_memory_mb(384);
  v1::Session created;
  ASSERT_TRUE(kept.stub().CreateSession(Context().get(), request, &created).ok());
  const std::string id = created.id();
  EXPECT_EQ(Execute(kept, id,
                    "import pandas as pd\n"
                    "df = pd.DataFrame({'a': [1, 2, 3]})\n"
                    "x = 41\n"
                    "def twice(y):\n    return 2 * y\n"
                    "open('note.txt', 'w').write('kept')\n"
                    "print('ready')")
                .stdout(),
            "ready\n");
  const v1::Session before = GetSession(kept, id);

  for (int sig : {SIGTERM, SIGKILL}) {
    SCOPED_TRACE(sig == SIGTERM ? "after SIGTERM" : "after kill -9");
    const pid_t daemon = RecordedDaemon(dir_);
    ASSERT_GT(daemon, 0);
    ASSERT_EQ(::kill(daemon, sig), 0);
    ASSERT_TRUE(WaitForNext(kept, daemon));
    const v1::Session after = GetSession(kept, id);
    EXPECT_EQ(after.id(), id);
    EXPECT_EQ(after.state(), before.state());
    EXPECT_EQ(after.expires_unix_ms(), before.expires_unix_ms());
    EXPECT_EQ(after.created_unix_ms(), before.created_unix_ms());
    EXPECT_EQ(after.limits().DebugString(), before.limits().DebugString());
    const v1::ExecuteResponse r =
        Execute(kept, id, "print(x + 1, twice(4), int(df['a'].sum()), open('note.txt').read())");
    EXPECT_EQ(r.stdout(), "42 8 6 kept\n") << r.DebugString() << kept.log();
  }
  EXPECT_TRUE(absl::StrContains(kept.log(), "adopted 1 sessions from warden-keeper (" + id + ")"))
      << kept.log();
  // The session's sandbox is one of the second daemon's now: it still ends
  // when closed, and a fresh session works beside it.
  const std::string other = CreateSession(kept);
  EXPECT_EQ(Execute(kept, other, "print('x' in globals())").stdout(), "False\n");
}

TEST_F(KeptSessionsTest, ACellRunningAcrossTheRestartIsDeliveredToGetSession) {
  Wardend kept(dir_, "kept.log", /*kept=*/true);
  ASSERT_TRUE(kept.WaitServing());
  const std::string id = CreateSession(kept);
  // The cell prints, waits for a file the test writes once the restart is
  // under way, then prints again and ends with a value.
  const std::string gate = "gate";
  std::thread caller([&] {
    v1::ExecuteRequest request;
    request.set_session_id(id);
    request.set_code(
        "import os, time\n"
        "print('before', flush=True)\n"
        "while not os.path.exists('gate'): time.sleep(0.05)\n"
        "print('after', flush=True)\n"
        "6 * 7\n");
    v1::ExecuteResponse response;
    // Cut by the restart: this caller hears UNAVAILABLE.
    (void)kept.stub().Execute(Context().get(), request, &response);
  });
  // Running: the first line has gone out.
  const absl::Time deadline = absl::Now() + kStartTimeout;
  while (GetSession(kept, id).state() != v1::SESSION_STATE_BUSY && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));  // no event for "the call has begun"
  }
  const pid_t daemon = RecordedDaemon(dir_);
  ASSERT_EQ(::kill(daemon, SIGTERM), 0);
  caller.join();
  ASSERT_TRUE(WaitForNext(kept, daemon));
  // Still busy with it, and it ends once let go.
  v1::Session session = GetSession(kept, id);
  EXPECT_FALSE(session.has_detached_cell()) << session.DebugString();
  // Let it go: the workspace file the cell waits for, written as the tenant would.
  ASSERT_TRUE(WriteWorkspaceFile(kept, id, gate));
  while (!GetSession(kept, id).has_detached_cell() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));  // the cell ends on its own time
  }
  session = GetSession(kept, id);
  ASSERT_TRUE(session.has_detached_cell()) << kept.log();
  // What it printed before the restart went to the first caller (the old
  // wardend may or may not have read it); what it printed after comes here,
  // with the value of its last expression.
  EXPECT_TRUE(absl::EndsWith(session.detached_cell().stdout(), "after\n")) << session.DebugString();
  ASSERT_EQ(session.detached_cell().results_size(), 1) << session.DebugString();
  EXPECT_EQ(session.detached_cell().results(0).data().at("text/plain"), "42");
  EXPECT_EQ(session.detached_cell().outcome(), v1::OUTCOME_OK) << session.DebugString();
  EXPECT_EQ(session.state(), v1::SESSION_STATE_IDLE);
  // And the session goes on.
  EXPECT_EQ(Execute(kept, id, "print('next')").stdout(), "next\n");
}

TEST_F(KeptSessionsTest, ASecondDaemonStillRefuses) {
  Wardend kept(dir_, "kept.log", /*kept=*/true);
  ASSERT_TRUE(kept.WaitServing());
  const pid_t daemon = RecordedDaemon(dir_);
  Wardend second(dir_, "second.log");
  const int status = second.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
  EXPECT_TRUE(absl::StrContains(second.log(), absl::StrCat("another wardend (pid ", daemon, ")")))
      << second.log();
}


// Connects to the keeper's socket as `uid` in a child; what happened: 0 the
// keeper accepted and kept us, 1 connect failed, 2 the keeper closed us.
int ConnectAs(const std::string& path, uid_t uid) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (uid != 0 && (::setgid(uid) != 0 || ::setuid(uid) != 0)) ::_exit(9);
    const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
    struct sockaddr_un addr = {};
    addr.sun_family = AF_UNIX;
    ::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) ::_exit(1);
    // The keeper closes a refused peer at once; an accepted one hears
    // nothing until it speaks (bounded wait: the keeper is single-threaded
    // and answers within its poll loop).
    struct pollfd p = {fd, POLLIN, 0};
    const int n = ::poll(&p, 1, 5000);
    char c;
    if (n == 1 && ::recv(fd, &c, 1, MSG_DONTWAIT) == 0) ::_exit(2);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_F(KeptSessionsTest, KeeperSocketRefusesOthers) {
  Wardend kept(dir_, "kept.log", /*kept=*/true);
  ASSERT_TRUE(kept.WaitServing());
  const std::string path = dir_ + "/keeper.sock";
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // The file mode stops another user first...
  EXPECT_EQ(ConnectAs(path, 65534), 1);
  // ... and SO_PEERCRED stops one that gets past it.
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
  EXPECT_EQ(ConnectAs(path, 65534), 2);
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  // Root, while wardend is attached: one peer at a time.
  EXPECT_EQ(ConnectAs(path, 0), 2);
  EXPECT_TRUE(absl::StrContains(kept.log(), "refused a connection from uid 65534")) << kept.log();
  EXPECT_TRUE(absl::StrContains(kept.log(), "refused a second connection")) << kept.log();
}

// Socket inodes ("socket:[N]") among the fds of `pid`.
std::set<std::string> SocketsOf(pid_t pid) {
  std::set<std::string> out;
  const std::string dir = absl::StrCat("/proc/", pid, "/fd");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string target = fs::read_symlink(entry.path(), ec).string();
    if (absl::StartsWith(target, "socket:")) out.insert(target);
  }
  return out;
}

TEST_F(KeptSessionsTest, SandboxHasNoWayToTheKeeper) {
  Wardend kept(dir_, "kept.log", /*kept=*/true);
  ASSERT_TRUE(kept.WaitServing());
  const std::string id = CreateSession(kept);
  // From inside: every fd of every process, and every mount.
  const v1::ExecuteResponse r = Execute(kept, id,
      "import os\n"
      "links = set()\n"
      "for p in os.listdir('/proc'):\n"
      "    if not p.isdigit(): continue\n"
      "    try:\n"
      "        for fd in os.listdir(f'/proc/{p}/fd'):\n"
      "            try: links.add(os.readlink(f'/proc/{p}/fd/{fd}'))\n"
      "            except OSError: pass\n"
      "    except OSError: pass\n"
      "print(' '.join(sorted(links)))\n"
      "print('MOUNTS', open('/proc/self/mountinfo').read().replace(chr(10), ' | '))\n");
  ASSERT_FALSE(r.stdout().empty()) << r.DebugString();
  const std::string links = r.stdout().substr(0, r.stdout().find("MOUNTS"));
  const std::string mounts = r.stdout().substr(r.stdout().find("MOUNTS"));
  EXPECT_FALSE(absl::StrContains(links, "keeper")) << links;
  EXPECT_FALSE(absl::StrContains(links, dir_)) << links;
  // One file of the daemon's directory is bound in: the sandboxes' CA
  // bundle (egress), read-only; the mount table names its host path, and
  // it leads nowhere else.
  for (absl::string_view mount : absl::StrSplit(mounts, " | ")) {
    if (!absl::StrContains(mount, dir_)) continue;
    EXPECT_TRUE(absl::StrContains(mount, absl::StrCat(dir_, "/egress/sandbox-ca-bundle.pem /etc/ssl/certs/ca-certificates.crt ro,")))
        << mount;
  }
  EXPECT_FALSE(absl::StrContains(mounts, " /run")) << mounts;
  // No socket of the keeper's is one the sandbox holds: the keeper holds
  // only wardend's ends of the sandbox's socket pairs, never the sandbox's.
  std::set<std::string> keeper_sockets = SocketsOf(kept.pid());
  ASSERT_FALSE(keeper_sockets.empty());
  for (absl::string_view link : absl::StrSplit(links, ' ', absl::SkipEmpty())) {
    EXPECT_FALSE(keeper_sockets.contains(std::string(link))) << link << " is the keeper's";
  }
}

TEST_F(KeptSessionsTest, DropSessionsAndRealStopLeaveNothing) {
  auto kept = std::make_unique<Wardend>(dir_, "kept.log", /*kept=*/true);
  ASSERT_TRUE(kept->WaitServing());
  const std::string id = CreateSession(*kept);
  EXPECT_EQ(Execute(*kept, id, "y = 1\nprint(y)").stdout(), "1\n");
  const std::string first_subtree = RecordLines(ReadText(dir_ + "/wardend.state"), "cgroup").at(0);
  const pid_t first = RecordedDaemon(dir_);
  // The session's sandbox processes, pinned.
  std::vector<UniqueFd> pidfds;
  for (pid_t pid : ProcsIn(CgroupDirsNamed(first_subtree))) {
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (fd >= 0) pidfds.emplace_back(fd);
  }
  ASSERT_FALSE(pidfds.empty());

  // A real stop: SIGTERM to the keeper (what systemctl stop sends).
  ASSERT_EQ(::kill(kept->pid(), SIGTERM), 0);
  const int status = kept->Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << kept->log();
  for (const UniqueFd& fd : pidfds) {
    struct pollfd p = {fd.get(), POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 0), 1) << "a sandbox process outlived the stop";
  }
  EXPECT_TRUE(CgroupDirsNamed(first_subtree).empty());
  EXPECT_TRUE(CgroupDirsNamed(absl::StrCat("warden-", first)).empty());
  std::set<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir_)) files.insert(entry.path().filename());
  // The egress CA is state: sessions kept across a restart trust it still.
  EXPECT_EQ(files, (std::set<std::string>{"wardend.json", "kept.log", "wardend.lock", "egress-ca.pem", "egress-ca.key"}))
      << kept->log();

  // --drop-sessions: a session, a kill -9 of wardend, and the next wardend
  // (run with that flag too) drops it instead of adopting it.
  Wardend dropping(dir_, "dropping.log", /*kept=*/true, {"--drop-sessions"});
  ASSERT_TRUE(dropping.WaitServing());
  const std::string doomed = CreateSession(dropping);
  EXPECT_EQ(Execute(dropping, doomed, "print(2)").stdout(), "2\n");
  const std::string second_subtree = RecordLines(ReadText(dir_ + "/wardend.state"), "cgroup").at(0);
  const pid_t daemon = RecordedDaemon(dir_);
  ASSERT_EQ(::kill(daemon, SIGKILL), 0);
  ASSERT_TRUE(WaitForNext(dropping, daemon));
  v1::GetSessionRequest get;
  get.set_session_id(doomed);
  v1::Session session;
  EXPECT_EQ(dropping.stub().GetSession(Context().get(), get, &session).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(dropping.log(), doomed + ": wardend --drop-sessions")) << dropping.log();
  EXPECT_TRUE(CgroupDirsNamed(second_subtree).empty()) << dropping.log();
  EXPECT_TRUE(fs::is_empty(dir_ + "/sessions")) << dropping.log();
}

// ---------------------------------------------------------------------------
// Under systemd (Type=notify, deploy/wardend.service): what the keeper tells
// $NOTIFY_SOCKET, here a datagram socket of the test's own standing in for
// systemd's.

class FakeSystemd {
 public:
  explicit FakeSystemd(const std::string& path) : path_(path) {
    fd_ = UniqueFd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    struct sockaddr_un addr = {};
    addr.sun_family = AF_UNIX;
    ::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    EXPECT_EQ(::bind(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << strerror(errno);
    ::setenv("NOTIFY_SOCKET", path.c_str(), 1);  // for the keeper the test starts
  }
  ~FakeSystemd() { ::unsetenv("NOTIFY_SOCKET"); }

  // The next notification, or "" if none came within `timeout`.
  std::string Receive(absl::Duration timeout = kStartTimeout) {
    struct pollfd p = {fd_.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) != 1) return "";
    char buffer[4096];
    const ssize_t n = ::recv(fd_.get(), buffer, sizeof(buffer), 0);
    return n > 0 ? std::string(buffer, n) : "";
  }
  // Notifications until one contains `wanted`; all of them, in order.
  std::vector<std::string> ReceiveUntil(const std::string& wanted) {
    std::vector<std::string> got;
    for (std::string m = Receive(); !m.empty(); m = Receive()) {
      got.push_back(m);
      if (absl::StrContains(m, wanted)) break;
    }
    return got;
  }

 private:
  std::string path_;
  UniqueFd fd_;
};

std::string Joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += "[" + l + "]\n";
  return out;
}

TEST_F(KeptSessionsTest, TellsSystemdItIsReadyOnlyOnceWardendServes) {
  FakeSystemd systemd(dir_ + "/notify");
  Wardend kept(dir_, "kept.log", /*kept=*/true);
  std::vector<std::string> got = systemd.ReceiveUntil("READY=1");
  // Checked as the notification arrives: wardend listens by then.
  const bool listening = fs::exists(kept.socket());
  ASSERT_FALSE(got.empty()) << kept.log();
  ASSERT_TRUE(absl::StrContains(got.back(), "READY=1")) << Joined(got) << kept.log();
  EXPECT_TRUE(listening) << "READY=1 before wardend's socket existed";
  EXPECT_TRUE(absl::StrContains(got.back(), "STATUS=wardend (pid ")) << Joined(got);
  for (size_t i = 0; i + 1 < got.size(); ++i) EXPECT_FALSE(absl::StrContains(got[i], "READY")) << Joined(got);
  ASSERT_TRUE(kept.WaitServing());
  // Only the keeper speaks to systemd: wardend does not inherit the socket.
  const std::string environ = ReadText(absl::StrCat("/proc/", RecordedDaemon(dir_), "/environ"));
  EXPECT_FALSE(absl::StrContains(environ, "NOTIFY_SOCKET=")) << environ;
  EXPECT_TRUE(absl::StrContains(environ, "WARDEN_KEEPER_SOCKET=")) << environ;

  // A reload is a status, not a second start.
  const pid_t first = RecordedDaemon(dir_);
  ASSERT_EQ(::kill(kept.pid(), SIGHUP), 0);
  got = systemd.ReceiveUntil(") serving;");
  ASSERT_FALSE(got.empty());
  EXPECT_TRUE(absl::StrContains(got.front(), "STATUS=restarting wardend (reload)")) << Joined(got);
  EXPECT_TRUE(absl::StrContains(got.back(), ") serving;")) << Joined(got);
  EXPECT_NE(RecordedDaemon(dir_), first);
  for (const std::string& m : got) EXPECT_FALSE(absl::StrContains(m, "READY=1")) << Joined(got);

  ASSERT_EQ(::kill(kept.pid(), SIGTERM), 0);
  got = systemd.ReceiveUntil("STOPPING=1");
  ASSERT_FALSE(got.empty());
  EXPECT_TRUE(absl::StrContains(got.back(), "STOPPING=1")) << Joined(got);
  const int status = kept.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST_F(KeptSessionsTest, GivesUpWhenWardendNeverServes) {
  FakeSystemd systemd(dir_ + "/notify");
  std::ofstream(dir_ + "/wardend.json") << "{";  // wardend cannot even read its configuration
  Wardend kept(dir_, "kept.log", /*kept=*/true);
  const int status = kept.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status << kept.log();
  std::vector<std::string> got;
  for (std::string m = systemd.Receive(absl::Seconds(1)); !m.empty(); m = systemd.Receive(absl::Seconds(1))) {
    got.push_back(m);
  }
  for (const std::string& m : got) EXPECT_FALSE(absl::StrContains(m, "READY=1")) << Joined(got);
  ASSERT_FALSE(got.empty());
  EXPECT_TRUE(absl::StrContains(got.back(), "STATUS=gave up: wardend (pid ")) << Joined(got);
  EXPECT_TRUE(absl::StrContains(got.back(), "before it served")) << Joined(got);
  EXPECT_TRUE(absl::StrContains(kept.log(), "giving up (exit 1)")) << kept.log();
}

TEST_F(KeptSessionsTest, GivesUpWhenWardendKeepsFailingAfterItServed) {
  const std::string good = ReadText(dir_ + "/wardend.json");
  auto kept = std::make_unique<Wardend>(dir_, "kept.log", /*kept=*/true);
  ASSERT_TRUE(kept->WaitServing());
  const std::string id = CreateSession(*kept);
  EXPECT_EQ(Execute(*kept, id, "print(7)").stdout(), "7\n");
  std::vector<UniqueFd> pidfds;
  const std::string subtree = RecordLines(ReadText(dir_ + "/wardend.state"), "cgroup").at(0);
  for (pid_t pid : ProcsIn(CgroupDirsNamed(subtree))) {
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (fd >= 0) pidfds.emplace_back(fd);
  }
  ASSERT_FALSE(pidfds.empty());

  // An upgrade gone wrong: the configuration breaks, then a reload.
  std::ofstream(dir_ + "/wardend.json") << "{";
  ASSERT_EQ(::kill(kept->pid(), SIGHUP), 0);
  const int status = kept->Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status << kept->log();
  EXPECT_TRUE(absl::StrContains(kept->log(), "5 starts in a row did not serve; giving up")) << kept->log();
  for (const UniqueFd& fd : pidfds) {
    struct pollfd p = {fd.get(), POLLIN, 0};
    EXPECT_EQ(::poll(&p, 1, 10'000), 1) << "a held sandbox outlived the keeper that gave up";
  }

  // Mended, the next keeper's wardend reclaims what was left and serves.
  std::ofstream(dir_ + "/wardend.json", std::ios::trunc) << good;
  Wardend next(dir_, "next.log", /*kept=*/true);
  ASSERT_TRUE(next.WaitServing());
  EXPECT_TRUE(CgroupDirsNamed(subtree).empty()) << next.log();
}

// A wardend that hangs before it serves is killed after --start-timeout
// and counts as a start that failed (here a stand-in that only sleeps).
TEST_F(DaemonRestartTest, KeeperKillsAStartThatNeverServes) {
  const std::string log = dir_ + "/keeper.log";
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    ::dup2(fd, 2);
    const std::string keeper = std::string(WARDEN_BIN_DIR) + "/warden-keeper";
    const std::string socket = dir_ + "/keeper.sock";
    ::execl(keeper.c_str(), keeper.c_str(), "--socket", socket.c_str(), "--start-timeout", "1", "--",
            "/bin/sleep", "600", nullptr);
    ::_exit(127);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status << ReadText(log);
  EXPECT_TRUE(absl::StrContains(ReadText(log), "did not serve within 1s; killing it")) << ReadText(log);
  EXPECT_TRUE(absl::StrContains(ReadText(log), "killed by signal 9 before it served")) << ReadText(log);
}

}  // namespace
}  // namespace warden
