// Session snapshots end to end, over real gRPC to an in-process wardend with
// real sandboxes: SnapshotSession + RestoreSnapshot round trips (values, a
// DataFrame, a function, a class instance, a file), what cannot be captured
// is named, ForkSession diverges without touching its source, hibernation
// is invisible to the caller, snapshots are private to their tenant and
// bounded per tenant, and they outlive the daemon. Sessions with a shared
// workspace (E2B's sandboxes) snapshot, restore and fork as such, and pause
// (frozen, or filesystem only) and resume, also at their TTL's end.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "server/daemon.h"
#include "warden/v1/executor.grpc.pb.h"

namespace warden {
namespace {

using v1::Executor;

constexpr char kAliceToken[] = "alice-Snap7Hq2Vx9LmR4sTk8W";
constexpr char kBobToken[] = "bob-Snap5Fw1QcN6yUg0XbE2rA";

// The text/plain of the cell's value, "" if it has none.
std::string TextResult(const v1::ExecuteResponse& response) {
  for (const v1::Result& result : response.results()) {
    if (result.is_result() && result.data().count("text/plain")) return result.data().at("text/plain");
  }
  return "";
}

class SnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/warden-snapshot-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    tokens_file_ = dir_ + "/tokens.json";
    std::ofstream(tokens_file_) << absl::StrCat(R"({"tokens": [{"token": ")", kAliceToken,
                                                R"(", "tenant": "alice"}, {"token": ")", kBobToken,
                                                R"(", "tenant": "bob"}]})");
    chmod(tokens_file_.c_str(), 0600);
  }
  void TearDown() override {
    StopDaemon();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  DaemonOptions Options() {
    DaemonOptions options;
    options.listen = {"127.0.0.1:0"};
    options.allow_insecure_loopback = true;
    options.auth.tokens_file = tokens_file_;
    options.pools = {{"python", 2, {"numpy", "pandas"}}, {"javascript", 0, {}}, {"bash", 0, {}}};
    // Apart from the other daemon tests' ranges: ctest may run them at once.
    options.executor.host_id_base = static_cast<uid_t>(9'000'000 + (getpid() % 4096) * 512);
    options.executor.host_id_count = 512;
    options.queue.max_wait_ms = 30'000;
    options.shutdown_grace_ms = 5'000;
    options.snapshots.dir = dir_ + "/snapshots";
    return options;
  }
  void StartDaemon(const DaemonOptions& options) {
    auto daemon = Daemon::Create(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
    daemon_ = std::move(*daemon);
    absl::Status started = daemon_->Start();
    ASSERT_TRUE(started.ok()) << started.ToString();
    stub_ = Executor::NewStub(grpc::CreateChannel(daemon_->listening().front(),
                                                  grpc::InsecureChannelCredentials()));
  }
  void StopDaemon() {
    if (daemon_) daemon_->Shutdown(absl::Seconds(5));
    daemon_.reset();
  }

  static std::unique_ptr<grpc::ClientContext> As(const std::string& token) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    ctx->AddMetadata("authorization", std::string("Bearer ") + token);
    return ctx;
  }

  std::string CreateSession(const std::string& token = kAliceToken) {
    v1::CreateSessionRequest request;
    v1::Session session;
    grpc::Status s = stub_->CreateSession(As(token).get(), request, &session);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return session.id();
  }
  // Runs a cell that must succeed; returns its result's text/plain.
  std::string Run(const std::string& session, const std::string& code,
                  const std::string& token = kAliceToken) {
    v1::ExecuteRequest request;
    request.set_session_id(session);
    request.set_code(code);
    v1::ExecuteResponse response;
    grpc::Status s = stub_->Execute(As(token).get(), request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(response.outcome(), v1::OUTCOME_OK)
        << code << "\n" << response.stderr() << response.error().DebugString();
    return TextResult(response);
  }
  grpc::Status Snapshot(const std::string& session, v1::Snapshot* out,
                        const std::string& token = kAliceToken) {
    v1::SnapshotSessionRequest request;
    request.set_session_id(session);
    return stub_->SnapshotSession(As(token).get(), request, out);
  }
  grpc::Status Restore(const std::string& snapshot_id, v1::Session* out,
                       const std::string& token = kAliceToken) {
    v1::RestoreSnapshotRequest request;
    request.set_snapshot_id(snapshot_id);
    return stub_->RestoreSnapshot(As(token).get(), request, out);
  }
  grpc::Status Fork(const std::string& session, v1::ForkSessionResponse* out,
                    const std::string& token = kAliceToken) {
    v1::ForkSessionRequest request;
    request.set_session_id(session);
    return stub_->ForkSession(As(token).get(), request, out);
  }
  v1::Session Get(const std::string& session) {
    v1::GetSessionRequest request;
    request.set_session_id(session);
    v1::Session out;
    grpc::Status s = stub_->GetSession(As(kAliceToken).get(), request, &out);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return out;
  }

  // Values, a DataFrame, a function, a class instance and a file.
  static constexpr char kState[] =
      "import pandas as pd\n"
      "df = pd.DataFrame({'x': range(100), 'y': [i * i for i in range(100)]})\n"
      "numbers = [1, 2, 3]\n"
      "def scaled(v):\n    return v * factor\nfactor = 10\n"
      "class Account:\n    def __init__(self, owner): self.owner = owner\n"
      "    def greet(self): return 'hi ' + self.owner\n"
      "acct = Account('ada')\n"
      "open('report.txt', 'w').write('quarterly')\n";
  static constexpr char kCheck[] =
      "(int(df.y.sum()), numbers, scaled(4), acct.greet(), open('report.txt').read())";
  static constexpr char kExpected[] = "(328350, [1, 2, 3], 40, 'hi ada', 'quarterly')";

  std::string dir_, tokens_file_;
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<Executor::Stub> stub_;
};

TEST_F(SnapshotTest, RestoreRoundTripsValuesDataFrameFunctionInstanceAndFile) {
  StartDaemon(Options());
  const std::string id = CreateSession();
  Run(id, kState);
  v1::Snapshot snapshot;
  grpc::Status s = Snapshot(id, &snapshot);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(snapshot.complete());
  EXPECT_TRUE(snapshot.left_out().empty());
  EXPECT_EQ(snapshot.session_id(), id);
  EXPECT_EQ(snapshot.execution_count(), 1);
  EXPECT_GT(snapshot.size_bytes(), 0);

  v1::Session restored;
  s = Restore(snapshot.snapshot_id(), &restored);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_NE(restored.id(), id);
  EXPECT_EQ(restored.execution_count(), 1);
  EXPECT_EQ(Run(restored.id(), kCheck), kExpected);

  // On disk: private to the daemon's user.
  struct stat st;
  ASSERT_EQ(stat((dir_ + "/snapshots").c_str(), &st), 0);
  v1::ListSnapshotsResponse listed;
  ASSERT_TRUE(stub_->ListSnapshots(As(kAliceToken).get(), {}, &listed).ok());
  ASSERT_EQ(listed.snapshots_size(), 1);
  EXPECT_GE(listed.used_bytes(), snapshot.size_bytes());  // and its small record
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir_ + "/snapshots")) {
    const auto perms = entry.status().permissions() & std::filesystem::perms::all;
    EXPECT_EQ(perms, entry.is_directory() ? std::filesystem::perms::owner_all
                                          : (std::filesystem::perms::owner_read |
                                             std::filesystem::perms::owner_write))
        << entry.path();
  }
}

TEST_F(SnapshotTest, UncapturableObjectsAreNamedAndTheRestIsKept) {
  StartDaemon(Options());
  const std::string id = CreateSession();
  Run(id, "import socket, threading\nsock = socket.socket()\nlog = open('log.txt', 'w')\n"
          "gen = (i for i in range(5))\nnext(gen)\nworker = threading.Thread(target=print)\n"
          "kept = 'yes'");
  v1::Snapshot snapshot;
  grpc::Status s = Snapshot(id, &snapshot);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(snapshot.complete());
  std::map<std::string, std::string> left_out(snapshot.left_out().begin(), snapshot.left_out().end());
  ASSERT_EQ(left_out.size(), 4u) << snapshot.DebugString();
  EXPECT_NE(left_out["sock"].find("socket"), std::string::npos);
  EXPECT_NE(left_out["log"].find("open file"), std::string::npos);
  EXPECT_NE(left_out["gen"].find("generator"), std::string::npos);
  EXPECT_NE(left_out["worker"].find("thread"), std::string::npos);

  v1::Session restored;
  ASSERT_TRUE(Restore(snapshot.snapshot_id(), &restored).ok());
  EXPECT_EQ(Run(restored.id(), "(kept, 'sock' in globals())"), "('yes', False)");
}

TEST_F(SnapshotTest, ForkDivergesWithoutTouchingItsSource) {
  StartDaemon(Options());
  const std::string source = CreateSession();
  Run(source, kState);
  v1::ForkSessionResponse fork;
  grpc::Status s = Fork(source, &fork);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(fork.left_out().empty());
  const std::string forked = fork.session().id();
  ASSERT_NE(forked, source);
  EXPECT_EQ(fork.session().state(), v1::SESSION_STATE_IDLE);

  EXPECT_EQ(Run(forked, kCheck), kExpected);
  Run(forked, "numbers.append(4)\nfactor = -1\nopen('report.txt', 'w').write('forked')");
  EXPECT_EQ(Run(forked, "(numbers, scaled(1), open('report.txt').read())"), "([1, 2, 3, 4], -1, 'forked')");
  // The source saw none of it and keeps running.
  EXPECT_EQ(Run(source, kCheck), kExpected);
  EXPECT_EQ(Get(source).execution_count(), 2);
  EXPECT_EQ(Get(forked).execution_count(), 4);
}

TEST_F(SnapshotTest, HibernationIsInvisibleToTheCaller) {
  DaemonOptions options = Options();
  options.sessions.hibernate_after_seconds = 1;
  StartDaemon(options);
  const std::string id = CreateSession();
  Run(id, kState);
  // Idle past a second: the reaper (once a second) hibernates it.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (Get(id).state() != v1::SESSION_STATE_HIBERNATED && absl::Now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(Get(id).state(), v1::SESSION_STATE_HIBERNATED);
  v1::ListSessionsResponse listed;
  ASSERT_TRUE(stub_->ListSessions(As(kAliceToken).get(), {}, &listed).ok());
  ASSERT_EQ(listed.sessions_size(), 1);
  EXPECT_EQ(listed.sessions(0).state(), v1::SESSION_STATE_HIBERNATED);
  EXPECT_EQ(listed.sessions(0).execution_count(), 1);

  // The next call just works, with everything in place, and the count goes on.
  v1::ExecuteRequest request;
  request.set_session_id(id);
  request.set_code(kCheck);
  v1::ExecuteResponse response;
  ASSERT_TRUE(stub_->Execute(As(kAliceToken).get(), request, &response).ok());
  EXPECT_EQ(response.outcome(), v1::OUTCOME_OK) << response.stderr();
  EXPECT_EQ(TextResult(response), kExpected);
  EXPECT_EQ(response.execution_count(), 2);
  EXPECT_NE(Get(id).state(), v1::SESSION_STATE_HIBERNATED);
}

// sessions.max_live 2: a third session (created, or woken) sends the least
// recently used idle one to disk first, whatever hibernate_after_seconds
// says; every one still answers with its own state.
TEST_F(SnapshotTest, MaxLiveHibernatesTheLeastRecentlyUsedBeforeAnotherGoesLive) {
  DaemonOptions options = Options();
  options.sessions.max_live = 2;
  StartDaemon(options);
  const std::string a = CreateSession(), b = CreateSession();
  Run(a, "x = 'a'");
  Run(b, "x = 'b'");
  EXPECT_NE(Get(a).state(), v1::SESSION_STATE_HIBERNATED);
  const std::string c = CreateSession();
  EXPECT_EQ(Get(a).state(), v1::SESSION_STATE_HIBERNATED);  // the least recently used
  EXPECT_NE(Get(b).state(), v1::SESSION_STATE_HIBERNATED);
  Run(c, "x = 'c'");
  // Waking a sends b, now the least recently used, to disk.
  EXPECT_EQ(Run(a, "x"), "'a'");
  EXPECT_EQ(Get(b).state(), v1::SESSION_STATE_HIBERNATED);
  EXPECT_NE(Get(a).state(), v1::SESSION_STATE_HIBERNATED);
  EXPECT_EQ(Run(b, "x"), "'b'");
  EXPECT_EQ(Run(c, "x"), "'c'");
  int live = 0;
  for (const std::string& id : {a, b, c}) live += Get(id).state() != v1::SESSION_STATE_HIBERNATED;
  EXPECT_EQ(live, 2);
}

// A 4 MiB array (pickled out of band), a read-only one, an alias, and a
// DataFrame of floats and strings: equal to the bit after a fork and after
// hibernation, as writable (or not) as they were, the alias still the same
// object.
TEST_F(SnapshotTest, ArraysAndDataFramesRoundTripExactlyThroughForkAndHibernation) {
  DaemonOptions options = Options();
  options.sessions.hibernate_after_seconds = 1;
  StartDaemon(options);
  const std::string id = CreateSession();
  Run(id,
      "import numpy as np, pandas as pd, hashlib\n"
      "big = np.random.default_rng(7).random((512, 1024))\n"
      "alias = big\n"
      "frozen = np.arange(5, dtype=np.int16)\nfrozen.flags.writeable = False\n"
      "df = pd.DataFrame(big[:, :8], columns=list('abcdefgh'))\n"
      "df['label'] = ['row%d' % i for i in range(512)]\n"
      "def digests():\n"
      "    return (hashlib.sha256(big.tobytes()).hexdigest(),\n"
      "            hashlib.sha256(pd.util.hash_pandas_object(df).values.tobytes()).hexdigest())\n"
      "before = digests()\n");
  const std::string check =
      "(digests() == before, alias is big, big.flags.writeable, frozen.flags.writeable, "
      "frozen.tolist(), frozen.dtype.name, df.shape, sorted(set(map(str, df.dtypes))))";
  const std::string expected =
      "(True, True, True, False, [0, 1, 2, 3, 4], 'int16', (512, 9), ['float64', 'object'])";

  v1::ForkSessionResponse fork;
  grpc::Status s = Fork(id, &fork);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(fork.left_out().empty());
  EXPECT_EQ(Run(fork.session().id(), check), expected);
  // The fork's arrays are its own.
  EXPECT_EQ(Run(fork.session().id(), "big[0, 0] = -1.0\n(alias[0, 0], digests() == before)"),
            "(-1.0, False)");
  EXPECT_EQ(Run(id, "digests() == before"), "True");

  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (Get(id).state() != v1::SESSION_STATE_HIBERNATED && absl::Now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(Get(id).state(), v1::SESSION_STATE_HIBERNATED);
  EXPECT_EQ(Run(id, check), expected);
}

TEST_F(SnapshotTest, SessionsThatCannotBeCapturedCompletelyStayLive) {
  DaemonOptions options = Options();
  options.sessions.hibernate_after_seconds = 1;
  StartDaemon(options);
  const std::string live = CreateSession();
  Run(live, "import socket\nsock = socket.socket()");
  const std::string sleeper = CreateSession();
  Run(sleeper, "x = 1");
  // The capturable one hibernates; by then the other, idle for longer, was
  // tried (the reaper takes the longest idle first, one at a time).
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (Get(sleeper).state() != v1::SESSION_STATE_HIBERNATED && absl::Now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(Get(sleeper).state(), v1::SESSION_STATE_HIBERNATED);
  EXPECT_EQ(Get(live).state(), v1::SESSION_STATE_IDLE);
  EXPECT_EQ(Run(live, "sock.fileno() >= 0"), "True");
}

TEST_F(SnapshotTest, OneTenantCannotRestoreForkReadOrDeleteAnothersSnapshot) {
  StartDaemon(Options());
  const std::string id = CreateSession();
  Run(id, "secret = 'alice-only'");
  v1::Snapshot snapshot;
  ASSERT_TRUE(Snapshot(id, &snapshot).ok());

  v1::Session session;
  EXPECT_EQ(Restore(snapshot.snapshot_id(), &session, kBobToken).error_code(), grpc::StatusCode::NOT_FOUND);
  v1::ForkSessionResponse fork;
  EXPECT_EQ(Fork(id, &fork, kBobToken).error_code(), grpc::StatusCode::NOT_FOUND);
  v1::Snapshot bobs;
  EXPECT_EQ(Snapshot(id, &bobs, kBobToken).error_code(), grpc::StatusCode::NOT_FOUND);
  v1::ListSnapshotsResponse listed;
  ASSERT_TRUE(stub_->ListSnapshots(As(kBobToken).get(), {}, &listed).ok());
  EXPECT_EQ(listed.snapshots_size(), 0);
  EXPECT_EQ(listed.used_bytes(), 0);
  v1::DeleteSnapshotRequest del;
  del.set_snapshot_id(snapshot.snapshot_id());
  v1::DeleteSnapshotResponse deleted;
  EXPECT_EQ(stub_->DeleteSnapshot(As(kBobToken).get(), del, &deleted).error_code(),
            grpc::StatusCode::NOT_FOUND);
  // A path in place of an id reaches nothing either.
  EXPECT_EQ(Restore("../t-616c696365/" + snapshot.snapshot_id(), &session, kBobToken).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // Alice's is untouched and still hers.
  ASSERT_TRUE(Restore(snapshot.snapshot_id(), &session).ok());
  EXPECT_EQ(Run(session.id(), "secret"), "'alice-only'");
}

TEST_F(SnapshotTest, QuotaPerTenantIsEnforced) {
  DaemonOptions options = Options();
  options.snapshots.max_bytes_per_tenant = 3 << 20;
  StartDaemon(options);
  const std::string id = CreateSession();
  Run(id, "blob = b'x' * (2 << 20)");
  v1::Snapshot first;
  ASSERT_TRUE(Snapshot(id, &first).ok());
  v1::Snapshot second;
  grpc::Status s = Snapshot(id, &second);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("DeleteSnapshot"), std::string::npos) << s.error_message();
  // Bob's quota is his own.
  const std::string bobs = CreateSession(kBobToken);
  Run(bobs, "blob = b'y' * (2 << 20)", kBobToken);
  ASSERT_TRUE(Snapshot(bobs, &second, kBobToken).ok());
  // Deleting makes room again.
  v1::DeleteSnapshotRequest del;
  del.set_snapshot_id(first.snapshot_id());
  v1::DeleteSnapshotResponse deleted;
  ASSERT_TRUE(stub_->DeleteSnapshot(As(kAliceToken).get(), del, &deleted).ok());
  EXPECT_TRUE(Snapshot(id, &second).ok());
}

TEST_F(SnapshotTest, SnapshotsOutliveTheDaemon) {
  StartDaemon(Options());
  const std::string id = CreateSession();
  Run(id, kState);
  v1::Snapshot snapshot;
  ASSERT_TRUE(Snapshot(id, &snapshot).ok());
  StopDaemon();
  StartDaemon(Options());
  v1::Session restored;
  grpc::Status s = Restore(snapshot.snapshot_id(), &restored);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(Run(restored.id(), kCheck), kExpected);
}

// A session with a shared workspace at /home/user, as the E2B front makes.
v1::CreateSessionRequest SharedRequest() {
  v1::CreateSessionRequest request;
  request.set_shared_workspace(true);
  request.add_workspace_aliases("/home/user");
  return request;
}

TEST_F(SnapshotTest, ASharedWorkspaceSessionSnapshotsRestoresAndForksAsOne) {
  StartDaemon(Options());
  v1::Session source;
  ASSERT_TRUE(stub_->CreateSession(As(kAliceToken).get(), SharedRequest(), &source).ok());
  Run(source.id(), "x = 41\nopen('/home/user/kept.txt', 'w').write('kept')");
  v1::CreateContextRequest js;
  js.set_session_id(source.id());
  js.set_language(v1::LANGUAGE_JAVASCRIPT);
  v1::Context context;
  ASSERT_TRUE(stub_->CreateContext(As(kAliceToken).get(), js, &context).ok());

  v1::SnapshotSessionRequest snap;
  snap.set_session_id(source.id());
  snap.set_name("before");
  v1::Snapshot snapshot;
  ASSERT_TRUE(stub_->SnapshotSession(As(kAliceToken).get(), snap, &snapshot).ok());
  EXPECT_TRUE(snapshot.shared_workspace());
  EXPECT_EQ(snapshot.name(), "before");
  // The JavaScript context's state is not in it, and it says so.
  EXPECT_EQ(snapshot.left_out().count("context " + context.id()), 1u) << snapshot.DebugString();

  v1::Session restored;
  grpc::Status restoring = Restore(snapshot.snapshot_id(), &restored);
  ASSERT_TRUE(restoring.ok()) << restoring.error_message();
  EXPECT_TRUE(restored.shared_workspace());
  EXPECT_EQ(Run(restored.id(), "(x + 1, open('/home/user/kept.txt').read(), open('kept.txt').read())"),
            "(42, 'kept', 'kept')");
  js.set_session_id(restored.id());
  ASSERT_TRUE(stub_->CreateContext(As(kAliceToken).get(), js, &context).ok());  // a shared workspace again

  v1::ForkSessionResponse fork;
  ASSERT_TRUE(Fork(source.id(), &fork).ok());
  EXPECT_TRUE(fork.session().shared_workspace());
  Run(fork.session().id(), "open('/home/user/kept.txt', 'w').write('forked')");
  EXPECT_EQ(Run(source.id(), "open('/home/user/kept.txt').read()"), "'kept'");
  EXPECT_EQ(Run(fork.session().id(), "(x, open('/home/user/kept.txt').read())"), "(41, 'forked')");
}

class PauseTest : public SnapshotTest {
 protected:
  grpc::Status Pause(const std::string& session, bool keep_memory) {
    v1::PauseSessionRequest request;
    request.set_session_id(session);
    request.set_keep_memory(keep_memory);
    v1::Session out;
    return stub_->PauseSession(As(kAliceToken).get(), request, &out);
  }
  grpc::Status Resume(const std::string& session) {
    v1::ResumeSessionRequest request;
    request.set_session_id(session);
    v1::Session out;
    return stub_->ResumeSession(As(kAliceToken).get(), request, &out);
  }
  // A background command that runs until it is killed; its id.
  int Sleeper(const std::string& session) {
    v1::RunCommandRequest request;
    request.set_session_id(session);
    for (const char* arg : {"/bin/sleep", "3600"}) request.add_argv(arg);
    request.set_background(true);
    auto ctx = As(kAliceToken);
    auto reader = stub_->RunCommand(ctx.get(), request);
    v1::CommandEvent event;
    EXPECT_TRUE(reader->Read(&event));
    ctx->TryCancel();  // stop reading: a background command keeps going
    (void)reader->Finish();
    return event.started();
  }
  bool Running(const std::string& session, int command) {
    v1::ListCommandsRequest request;
    request.set_session_id(session);
    v1::ListCommandsResponse commands;
    EXPECT_TRUE(stub_->ListCommands(As(kAliceToken).get(), request, &commands).ok());
    for (const auto& c : commands.commands()) {
      if (c.command_id() == command && c.running()) return true;
    }
    return false;
  }
};

TEST_F(PauseTest, APausedSessionIsFrozenRunsNothingAndResumesWhereItWas) {
  StartDaemon(Options());
  v1::Session session;
  ASSERT_TRUE(stub_->CreateSession(As(kAliceToken).get(), SharedRequest(), &session).ok());
  Run(session.id(), "x = 41");
  const int sleeper = Sleeper(session.id());
  ASSERT_TRUE(Pause(session.id(), /*keep_memory=*/true).ok());
  EXPECT_EQ(Get(session.id()).state(), v1::SESSION_STATE_PAUSED);
  EXPECT_EQ(Pause(session.id(), true).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  v1::ExecuteRequest cell;
  cell.set_session_id(session.id());
  cell.set_code("x");
  v1::ExecuteResponse response;
  grpc::Status refused = stub_->Execute(As(kAliceToken).get(), cell, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(refused.error_message().find("paused"), std::string::npos) << refused.error_message();

  ASSERT_TRUE(Resume(session.id()).ok());
  EXPECT_EQ(Resume(session.id()).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Run(session.id(), "x + 1"), "42");
  EXPECT_TRUE(Running(session.id(), sleeper));  // the same process, kept
}

TEST_F(PauseTest, AFilesystemOnlyPauseKeepsTheFilesAndStartsAfresh) {
  StartDaemon(Options());
  v1::Session session;
  ASSERT_TRUE(stub_->CreateSession(As(kAliceToken).get(), SharedRequest(), &session).ok());
  // Files in the workspace and in /tmp; a process left running outside any
  // command (a session of its own, made before Popen returns: setsid(1) made
  // it only once started, and the cell's end killed its group first now and
  // then); the machine's boot id, its own.
  Run(session.id(),
      "x = 41\nopen('/home/user/kept.txt', 'w').write('kept')\nopen('/tmp/kept', 'w').write('tmp')\n"
      "import subprocess\nsubprocess.Popen(['sleep', '3607'], start_new_session=True)");
  const std::string sleeping =
      "import os\ndef sleepers():\n  n = 0\n  for p in filter(str.isdigit, os.listdir('/proc')):\n"
      "    try:\n      n += b'3607' in open('/proc/%s/cmdline' % p, 'rb').read()\n"
      "    except OSError:\n      pass\n  return n\nsleepers()";
  const std::string boot_id = "open('/proc/sys/kernel/random/boot_id').read()";
  ASSERT_EQ(Run(session.id(), sleeping), "1");
  const std::string booted = Run(session.id(), boot_id);
  std::ifstream host_file("/proc/sys/kernel/random/boot_id");
  std::string host_boot_id;
  std::getline(host_file, host_boot_id);
  EXPECT_EQ(booted.size(), 2 + 36 + 2u) << booted;  // '...\n', as the kernel's own
  EXPECT_EQ(booted.find(host_boot_id), std::string::npos) << "the host's boot id shows through";
  const int sleeper = Sleeper(session.id());
  ASSERT_TRUE(Pause(session.id(), /*keep_memory=*/false).ok());
  EXPECT_EQ(Get(session.id()).state(), v1::SESSION_STATE_PAUSED);
  ASSERT_TRUE(Resume(session.id()).ok());
  EXPECT_EQ(Run(session.id(), "('x' in globals(), open('/home/user/kept.txt').read(), open('/tmp/kept').read())"),
            "(False, 'kept', 'tmp')");
  EXPECT_FALSE(Running(session.id(), sleeper));
  EXPECT_EQ(Run(session.id(), sleeping), "0");  // a reboot: every process ended
  EXPECT_NE(Run(session.id(), boot_id), booted);
}

TEST_F(PauseTest, ASessionThatPausesAtItsTtlsEndIsPausedNotClosed) {
  StartDaemon(Options());
  v1::CreateSessionRequest request = SharedRequest();
  request.set_ttl_seconds(1);
  request.set_on_expiry(v1::ON_EXPIRY_PAUSE);
  v1::Session session;
  ASSERT_TRUE(stub_->CreateSession(As(kAliceToken).get(), request, &session).ok());
  Run(session.id(), "x = 41");
  // The reaper looks once a second.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (Get(session.id()).state() != v1::SESSION_STATE_PAUSED && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_EQ(Get(session.id()).state(), v1::SESSION_STATE_PAUSED);
  ASSERT_TRUE(Resume(session.id()).ok());
  EXPECT_EQ(Run(session.id(), "x + 1"), "42");

  v1::CreateSessionRequest plain;
  plain.set_on_expiry(v1::ON_EXPIRY_PAUSE);
  EXPECT_EQ(stub_->CreateSession(As(kAliceToken).get(), plain, &session).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(SnapshotTest, OtherLanguagesSayUnimplemented) {
  StartDaemon(Options());
  v1::CreateSessionRequest request;
  request.set_language(v1::LANGUAGE_JAVASCRIPT);
  v1::Session session;
  ASSERT_TRUE(stub_->CreateSession(As(kAliceToken).get(), request, &session).ok());
  v1::Snapshot snapshot;
  grpc::Status s = Snapshot(session.id(), &snapshot);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(s.error_message().find("javascript"), std::string::npos) << s.error_message();
}

}  // namespace
}  // namespace warden
