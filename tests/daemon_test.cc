// wardend end to end over real gRPC: an in-process Daemon on an ephemeral
// loopback port, real sandboxes and kernels behind it.
#include <signal.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/daemon.h"
#include "server/executor_service.h"
#include "server/read_file.h"
#include "warden/v1/executor.grpc.pb.h"

namespace warden {
namespace {

using v1::Executor;

DaemonOptions TestOptions() {
  DaemonOptions options;
  options.listen = {"127.0.0.1:0"};
  options.allow_insecure_loopback = true;
  options.pools = {{"python", 2, {}}, {"javascript", 0, {}}, {"bash", 1, {}}};
  options.executor.host_id_base = static_cast<uid_t>(4'000'000 + (getpid() % 4096) * 512);
  options.executor.host_id_count = 512;
  options.sessions.max_per_tenant = 3;
  options.max_concurrent_per_tenant = 64;
  options.queue.max_wait_ms = 30'000;
  options.shutdown_grace_ms = 5'000;
  return options;
}

class DaemonTest : public ::testing::Test {
 protected:
  void StartDaemon(DaemonOptions options = TestOptions()) {
    auto daemon = Daemon::Create(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
    daemon_ = std::move(*daemon);
    ASSERT_TRUE(daemon_->Start().ok());
    channel_ = grpc::CreateChannel(daemon_->listening().front(), grpc::InsecureChannelCredentials());
    stub_ = Executor::NewStub(channel_);
  }
  void SetUp() override { StartDaemon(); }
  void TearDown() override {
    if (daemon_) daemon_->Shutdown(absl::Seconds(5));
  }

  std::unique_ptr<grpc::ClientContext> Context(const std::string& token = "") {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
    return ctx;
  }
  v1::ExecuteResponse Execute(const std::string& code, const std::string& session = "",
                              v1::Language language = v1::LANGUAGE_PYTHON, grpc::Status* status = nullptr) {
    v1::ExecuteRequest request;
    request.set_code(code);
    request.set_language(language);
    request.set_session_id(session);
    v1::ExecuteResponse response;
    grpc::Status s = stub_->Execute(Context().get(), request, &response);
    if (status) *status = s;
    else EXPECT_TRUE(s.ok()) << s.error_message();
    return response;
  }
  std::string CreateSession(v1::Language language = v1::LANGUAGE_PYTHON, const std::string& token = "") {
    v1::CreateSessionRequest request;
    request.set_language(language);
    v1::Session session;
    grpc::Status s = stub_->CreateSession(Context(token).get(), request, &session);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return session.id();
  }

  std::unique_ptr<Daemon> daemon_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Executor::Stub> stub_;
};

TEST_F(DaemonTest, OneShotExecuteReturnsJupyterShapedResult) {
  v1::ExecuteResponse r = Execute("print('hi')\n6 * 7");
  EXPECT_EQ(r.outcome(), v1::OUTCOME_OK) << r.message();
  EXPECT_EQ(r.stdout(), "hi\n");
  ASSERT_EQ(r.results_size(), 1);
  EXPECT_EQ(r.results(0).data().at("text/plain"), "42");
  EXPECT_TRUE(r.results(0).is_result());
  EXPECT_EQ(r.execution_count(), 1);
  EXPECT_TRUE(r.session_id().empty());
}

TEST_F(DaemonTest, ErrorsCarryNameValueAndTraceback) {
  v1::ExecuteResponse r = Execute("raise ValueError('nope')");
  EXPECT_EQ(r.outcome(), v1::OUTCOME_ERROR);
  EXPECT_EQ(r.error().name(), "ValueError");
  EXPECT_EQ(r.error().value(), "nope");
  EXPECT_GT(r.error().traceback_size(), 0);
}

TEST_F(DaemonTest, EachOneShotRunsInAFreshSandbox) {
  EXPECT_EQ(Execute("open('/workspace/mark', 'w').write('x')\nx = 1").outcome(), v1::OUTCOME_OK);
  v1::ExecuteResponse r = Execute("import os\nprint(os.listdir('/workspace'), 'x' in globals())");
  EXPECT_EQ(r.stdout(), "[] False\n");
}

TEST_F(DaemonTest, BashAndPlotsWork) {
  v1::ExecuteResponse bash = Execute("echo $((6 * 7)); (exit 3)", "", v1::LANGUAGE_BASH);
  EXPECT_EQ(bash.stdout(), "42\n");
  EXPECT_EQ(bash.exit_code(), 3) << bash.DebugString();
  v1::ExecuteResponse plot = Execute("import matplotlib.pyplot as plt\nplt.plot([1, 2]);");
  ASSERT_EQ(plot.outcome(), v1::OUTCOME_OK) << plot.message();
  ASSERT_EQ(plot.results_size(), 1);
  EXPECT_FALSE(plot.results(0).is_result());  // a plot is display data
  EXPECT_EQ(plot.results(0).data().at("image/png").substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

TEST_F(DaemonTest, OneShotReportsWhatHappenedToTheProgramNotALostSession) {
  v1::ExecuteResponse exited = Execute("import os\nos._exit(2)");
  EXPECT_EQ(exited.outcome(), v1::OUTCOME_NONZERO_EXIT) << exited.DebugString();
  EXPECT_EQ(exited.exit_code(), 2);
  v1::ExecuteResponse killed = Execute("kill -9 $$", "", v1::LANGUAGE_BASH);
  EXPECT_EQ(killed.outcome(), v1::OUTCOME_SIGNALED) << killed.DebugString();
  EXPECT_EQ(killed.signal(), 9);
  // A cell that ignores the interrupt at its deadline is killed: for a
  // one-shot that is simply the wall-clock limit.
  v1::ExecuteRequest runaway;
  runaway.set_code("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass");
  runaway.mutable_limits()->set_wall_ms(300);
  v1::ExecuteResponse response;
  ASSERT_TRUE(stub_->Execute(Context().get(), runaway, &response).ok());
  EXPECT_EQ(response.outcome(), v1::OUTCOME_WALL_TIMEOUT) << response.DebugString();
}

TEST_F(DaemonTest, CallQueuedOnASessionThatGetsClosedIsNotFound) {
  const std::string id = CreateSession();
  std::thread first([&] { Execute("import time\ntime.sleep(1.5)", id); });
  // Wait until the first cell runs, then queue a second one behind it.
  v1::GetSessionRequest get;
  get.set_session_id(id);
  for (int i = 0; i < 1000; ++i) {
    v1::Session s;
    if (stub_->GetSession(Context().get(), get, &s).ok() && s.state() == v1::SESSION_STATE_BUSY) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  grpc::Status queued_status;
  std::thread second([&] { Execute("print(2)", id, v1::LANGUAGE_PYTHON, &queued_status); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let it queue
  v1::CloseSessionRequest close;
  close.set_session_id(id);
  v1::CloseSessionResponse closed;
  ASSERT_TRUE(stub_->CloseSession(Context().get(), close, &closed).ok());
  first.join();
  second.join();
  EXPECT_EQ(queued_status.error_code(), grpc::StatusCode::NOT_FOUND) << queued_status.error_message();
}

TEST_F(DaemonTest, ExecuteStreamSendsEventsInOrderThenTheSummary) {
  v1::ExecuteRequest request;
  request.set_code("import sys, time\nprint('one', flush=True)\ntime.sleep(0.3)\nprint('two')\n'value'");
  auto ctx = Context();
  auto reader = stub_->ExecuteStream(ctx.get(), request);
  v1::ExecuteEvent event;
  std::vector<std::string> kinds;
  std::string out;
  while (reader->Read(&event)) {
    switch (event.event_case()) {
      case v1::ExecuteEvent::kStdout: kinds.push_back("stdout"); out += event.stdout(); break;
      case v1::ExecuteEvent::kResult: kinds.push_back("result"); break;
      case v1::ExecuteEvent::kSummary: kinds.push_back("summary"); break;
      default: kinds.push_back("other");
    }
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(out, "one\ntwo\n");
  ASSERT_GE(kinds.size(), 3u);
  EXPECT_EQ(kinds.front(), "stdout");  // streamed before the sleep ended
  EXPECT_EQ(kinds[kinds.size() - 2], "result");
  EXPECT_EQ(kinds.back(), "summary");
}

TEST_F(DaemonTest, SessionsKeepStateAndCanBeListedShownAndClosed) {
  const std::string id = CreateSession();
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(Execute("import math\nr = math.sqrt(16)", id).outcome(), v1::OUTCOME_OK);
  v1::ExecuteResponse r = Execute("print(r)", id);
  EXPECT_EQ(r.stdout(), "4.0\n");
  EXPECT_EQ(r.execution_count(), 2);
  EXPECT_EQ(r.session_id(), id);

  v1::GetSessionRequest get;
  get.set_session_id(id);
  v1::Session shown;
  ASSERT_TRUE(stub_->GetSession(Context().get(), get, &shown).ok());
  EXPECT_EQ(shown.state(), v1::SESSION_STATE_IDLE);
  EXPECT_EQ(shown.execution_count(), 2);
  EXPECT_EQ(shown.language(), v1::LANGUAGE_PYTHON);

  v1::ListSessionsResponse list;
  ASSERT_TRUE(stub_->ListSessions(Context().get(), v1::ListSessionsRequest(), &list).ok());
  ASSERT_EQ(list.sessions_size(), 1);
  EXPECT_EQ(list.sessions(0).id(), id);

  v1::CloseSessionRequest close;
  close.set_session_id(id);
  v1::CloseSessionResponse closed;
  ASSERT_TRUE(stub_->CloseSession(Context().get(), close, &closed).ok());
  grpc::Status status;
  Execute("print(r)", id, v1::LANGUAGE_PYTHON, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(DaemonTest, InterruptAndRestartKeepTheSessionUsable) {
  const std::string id = CreateSession();
  ASSERT_EQ(Execute("v = 5", id).outcome(), v1::OUTCOME_OK);
  std::thread interrupter([&] {
    // Interrupt only once the cell is running.
    v1::GetSessionRequest get;
    get.set_session_id(id);
    for (int i = 0; i < 1000; ++i) {
      v1::Session s;
      if (stub_->GetSession(Context().get(), get, &s).ok() && s.state() == v1::SESSION_STATE_BUSY) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    v1::InterruptSessionRequest request;
    request.set_session_id(id);
    v1::InterruptSessionResponse response;
    EXPECT_TRUE(stub_->InterruptSession(Context().get(), request, &response).ok());
    EXPECT_TRUE(response.was_busy());
  });
  v1::ExecuteResponse r = Execute("import time\ntime.sleep(60)", id);
  interrupter.join();
  EXPECT_EQ(r.outcome(), v1::OUTCOME_INTERRUPTED) << r.DebugString();
  EXPECT_EQ(Execute("print(v)", id).stdout(), "5\n");

  v1::RestartSessionRequest restart;
  restart.set_session_id(id);
  v1::Session restarted;
  ASSERT_TRUE(stub_->RestartSession(Context().get(), restart, &restarted).ok());
  EXPECT_EQ(Execute("print('v' in globals())", id).stdout(), "False\n");
}

TEST_F(DaemonTest, FilesRoundTripThroughTheWorkspace) {
  const std::string id = CreateSession();
  std::string blob(300'000, '\0');
  for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<char>(i * 31 % 251);
  {
    v1::FileInfo info;
    auto ctx = Context();
    auto writer = stub_->UploadFile(ctx.get(), &info);
    v1::UploadFileRequest header;
    header.mutable_header()->set_session_id(id);
    header.mutable_header()->set_path("in/data.bin");
    ASSERT_TRUE(writer->Write(header));
    for (size_t off = 0; off < blob.size(); off += 65536) {
      v1::UploadFileRequest chunk;
      chunk.set_chunk(blob.substr(off, 65536));
      ASSERT_TRUE(writer->Write(chunk));
    }
    writer->WritesDone();
    grpc::Status s = writer->Finish();
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(info.size(), static_cast<int64_t>(blob.size()));
  }
  ASSERT_EQ(Execute("d = open('in/data.bin', 'rb').read()\nopen('out.bin', 'wb').write(d[::-1])", id).outcome(),
            v1::OUTCOME_OK);
  v1::DownloadFileRequest download;
  download.set_session_id(id);
  download.set_path("out.bin");
  auto ctx = Context();
  auto reader = stub_->DownloadFile(ctx.get(), download);
  std::string got;
  v1::FileChunk chunk;
  while (reader->Read(&chunk)) got += chunk.data();
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(got, std::string(blob.rbegin(), blob.rend()));

  v1::ListFilesRequest ls;
  ls.set_session_id(id);
  v1::ListFilesResponse files;
  ASSERT_TRUE(stub_->ListFiles(Context().get(), ls, &files).ok());
  std::set<std::string> paths;
  for (const auto& f : files.files()) paths.insert(f.path());
  EXPECT_TRUE(paths.count("in/data.bin") && paths.count("out.bin")) << files.DebugString();
}

TEST_F(DaemonTest, BadRequestsGetClearErrors) {
  grpc::Status status;
  v1::ExecuteRequest request;
  request.set_code("1");
  request.mutable_limits()->set_wall_ms(10'000'000);
  v1::ExecuteResponse response;
  status = stub_->Execute(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("wall_ms"), std::string::npos) << status.error_message();

  request.clear_limits();
  request.set_code(std::string(2 << 20, '#'));
  status = stub_->Execute(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  request.set_code("1");
  request.set_language(static_cast<v1::Language>(99));
  status = stub_->Execute(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  Execute("1", "s-doesnotexist", v1::LANGUAGE_PYTHON, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);

  const std::string id = CreateSession();
  v1::DownloadFileRequest download;
  download.set_session_id(id);
  for (const char* path : {"/etc/passwd", "../x", ""}) {
    download.set_path(path);
    auto ctx = Context();
    auto reader = stub_->DownloadFile(ctx.get(), download);
    v1::FileChunk chunk;
    while (reader->Read(&chunk)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT) << path;
  }
  // The daemon is unharmed.
  EXPECT_EQ(Execute("print(1)").stdout(), "1\n");
}

TEST_F(DaemonTest, SessionQuotaPerTenant) {
  for (int i = 0; i < 3; ++i) ASSERT_FALSE(CreateSession().empty());
  v1::CreateSessionRequest request;
  v1::Session session;
  grpc::Status s = stub_->CreateSession(Context().get(), request, &session);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST_F(DaemonTest, ClientDeadlineStopsTheExecution) {
  const std::string id = CreateSession();
  v1::ExecuteRequest request;
  request.set_session_id(id);
  request.set_code("import time\ntime.sleep(60)");
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  v1::ExecuteResponse response;
  grpc::Status s = stub_->Execute(&ctx, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // The cell was interrupted, not left running: a busy session would refuse
  // the next cell with FAILED_PRECONDITION instead of running it.
  v1::ExecuteResponse next = Execute("print('free')", id);
  EXPECT_EQ(next.stdout(), "free\n");
}

TEST_F(DaemonTest, PythonSessionsAndOneShotsAreClonedFromTheZygote) {
  // A clone's /proc/self/environ is the zygote's start-up environment, which
  // (unlike an exec'd kernel's) caps BLAS at one thread.
  const std::string cloned =
      "import sys\nprint(b'OPENBLAS_NUM_THREADS=1' in open('/proc/self/environ', 'rb').read())";
  daemon_->Shutdown(absl::Seconds(5));
  DaemonOptions options = TestOptions();
  options.pools = {{"python", 1, {"numpy"}}};
  StartDaemon(options);
  EXPECT_EQ(Execute(cloned, CreateSession()).stdout(), "True\n");
  EXPECT_EQ(Execute(cloned).stdout(), "True\n");
  EXPECT_EQ(Execute("import sys\nprint('numpy' in sys.modules)", CreateSession()).stdout(), "True\n");

  daemon_->Shutdown(absl::Seconds(5));
  options.zygote.enabled = false;
  StartDaemon(options);
  EXPECT_EQ(Execute(cloned, CreateSession()).stdout(), "False\n");
  EXPECT_EQ(Execute(cloned).stdout(), "False\n");
}

TEST_F(DaemonTest, OneShotsTakeTheWarmPoolOfTheirLimitsProfile) {
  daemon_->Shutdown(absl::Seconds(5));
  DaemonOptions options = TestOptions();
  options.pools = {{"python", 1, {}}, {"python", 1, {}, 96}};
  StartDaemon(options);
  v1::ExecuteRequest request;
  request.set_code("block = bytearray(200 << 20)\nprint(len(block))");
  request.mutable_limits()->set_memory_mb(96);
  v1::ExecuteResponse response;
  grpc::Status s = stub_->Execute(Context().get(), request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.outcome(), v1::OUTCOME_MEMORY_LIMIT) << response.DebugString();
  EngineStats stats = daemon_->engine().Stats();
  EXPECT_EQ(stats.pools["python:96mb"].acquired, 1);
  EXPECT_EQ(stats.pools["python"].acquired, 0);
  // The default profile's pool serves the default limits.
  EXPECT_EQ(Execute("block = bytearray(200 << 20)\nprint(len(block))").stdout(), "209715200\n");
  EXPECT_EQ(daemon_->engine().Stats().pools["python"].acquired, 1);
}

TEST_F(DaemonTest, WarmPoolGrowsWithDemandWithinItsBoundsAndCoolsDown) {
  daemon_->Shutdown(absl::Seconds(5));
  DaemonOptions options = TestOptions();
  options.pools = {{"python", 1, {}, 0, /*max_size=*/3}};
  StartDaemon(options);
  auto stats = [&] { return daemon_->engine().Stats().pools["python"]; };
  auto wait_for = [](const std::function<bool()>& done) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (!done()) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return true;
  };
  ASSERT_TRUE(wait_for([&] { return stats().ready == 1; }));
  EXPECT_EQ(stats().target, 1);
  // Three callers at once drain the pool of one: the rate of acquisitions
  // times the time a worker takes to start asks for more. The target is
  // read while they call: it holds for 2 s after the last acquisition,
  // which lets the fillers finish the workers the burst asked for (without
  // the hold, a sanitizer build's slow calls saw it cool within two start
  // times, before the second worker started), and then cools.
  absl::Mutex mu;
  WarmPoolStats busy;
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c) {
    callers.emplace_back([&] {
      for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(Execute("print(1)").stdout(), "1\n");
        const WarmPoolStats now = stats();
        absl::MutexLock lock(&mu);
        EXPECT_LE(now.target, 3);
        if (now.target > busy.target) busy = now;
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  EXPECT_GE(busy.target, 2) << busy.acquire_per_s << " acquisitions per second at most";
  EXPECT_GT(busy.capacity_per_s, 0);
  EXPECT_TRUE(wait_for([&] { return stats().ready >= 2; })) << stats().ready;
  // Nobody asks any more: it cools back to its size.
  EXPECT_TRUE(wait_for([&] { return stats().target == 1; })) << stats().target;
  EXPECT_LE(stats().ready, 3);
}

TEST_F(DaemonTest, ConcurrentClientsDoNotCrossTalk) {
  std::atomic<int> failures{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 50; ++c) {
    clients.emplace_back([&, c] {
      const std::string token = absl::StrCat("client-", c);
      if (c % 5 == 0) {
        // Some clients use a session of their own for two cells.
        v1::CreateSessionRequest create;
        v1::Session session;
        grpc::ClientContext ctx;
        // Different tenants would need tokens; one tenant, so respect its quota.
        if (!stub_->CreateSession(&ctx, create, &session).ok()) return;  // quota: fine
        v1::ExecuteRequest set;
        set.set_session_id(session.id());
        set.set_code(absl::StrCat("token = '", token, "'"));
        v1::ExecuteResponse r1, r2;
        grpc::ClientContext c1, c2;
        stub_->Execute(&c1, set, &r1);
        v1::ExecuteRequest get;
        get.set_session_id(session.id());
        get.set_code("print(token)");
        stub_->Execute(&c2, get, &r2);
        if (r2.stdout() != token + "\n") ++failures;
        grpc::ClientContext c3;
        v1::CloseSessionRequest close;
        close.set_session_id(session.id());
        v1::CloseSessionResponse closed;
        stub_->CloseSession(&c3, close, &closed);
      } else {
        v1::ExecuteRequest request;
        request.set_code(absl::StrCat("print('", token, "')"));
        v1::ExecuteResponse response;
        grpc::ClientContext ctx;
        grpc::Status s = stub_->Execute(&ctx, request, &response);
        if (!s.ok() || response.stdout() != token + "\n") {
          ++failures;
          ADD_FAILURE() << s.error_message() << " " << response.DebugString();
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(DaemonTest, KernelKilledFromOutsideIsSessionLostAndTheDaemonLivesOn) {
  const std::string id = CreateSession();
  ASSERT_EQ(Execute("import os\nopen('pid', 'w').write(str(os.getpid()))", id).outcome(), v1::OUTCOME_OK);
  // Find the kernel's host pid: the process in our id range running the kernel.
  // Processes come and go while it looks: a /proc entry read after its
  // process ended fails (ESRCH), which libstdc++'s stream iterators throw
  // as std::ios_failure, so every read here reports failure instead.
  std::thread killer([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const uid_t first = TestOptions().executor.host_id_base;
    std::error_code walk_error;
    for (std::filesystem::directory_iterator it("/proc", walk_error), end; !walk_error && it != end;
         it.increment(walk_error)) {
      const std::string name = it->path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      const absl::StatusOr<std::string> status = ReadWholeFile(it->path() / "status");
      const size_t uid_at = status.ok() ? status->find("\nUid:") : std::string::npos;
      if (uid_at == std::string::npos) continue;
      const long uid = std::strtol(status->c_str() + uid_at + 5, nullptr, 10);
      const absl::StatusOr<std::string> cmdline = ReadWholeFile(it->path() / "cmdline");
      // Only this session's kernel: the one whose workspace holds the marker.
      std::error_code ignored;
      const bool ours = uid >= first && uid < first + 512 &&
                        std::filesystem::exists(it->path() / "root/workspace/pid", ignored);
      if (ours && cmdline.ok() && cmdline->find("warden_kernel.py") != std::string::npos) {
        kill(std::stoi(name), SIGKILL);  // a process this test's daemon started
      }
    }
  });
  v1::ExecuteResponse r = Execute("import time\ntime.sleep(30)", id);
  killer.join();
  EXPECT_EQ(r.outcome(), v1::OUTCOME_SESSION_LOST) << r.DebugString();
  EXPECT_EQ(Execute("1", id).outcome(), v1::OUTCOME_SESSION_LOST);
  EXPECT_EQ(Execute("print('still serving')").stdout(), "still serving\n");
}

TEST_F(DaemonTest, GracefulShutdownLetsInFlightExecutionsFinish) {
  absl::Notification finished;
  v1::ExecuteResponse response;
  grpc::Status status;
  std::thread call([&] {
    v1::ExecuteRequest request;
    request.set_code("import time\ntime.sleep(1)\nprint('done')");
    grpc::ClientContext ctx;
    status = stub_->Execute(&ctx, request, &response);
    finished.Notify();
  });
  // Shut down once the execution is under way.
  for (int i = 0; i < 1000 && daemon_->engine().Stats().executing == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(daemon_->engine().Stats().executing, 1);
  daemon_->Shutdown(absl::Seconds(10));
  call.join();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.stdout(), "done\n");
  daemon_.reset();
}

// grpc.health.v1.Health/Check by hand: Debian ships no C++ stubs for it,
// and its wire format is tiny (an empty request; status 1 is SERVING).
TEST_F(DaemonTest, StandardHealthServiceSaysServing) {
  grpc::GenericStub generic(channel_);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Slice empty;
  grpc::ByteBuffer request(&empty, 1), response;
  absl::Notification done;
  grpc::Status status;
  generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                    [&](grpc::Status s) {
                      status = std::move(s);
                      done.Notify();
                    });
  done.WaitForNotification();
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& slice : slices) bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));  // status: SERVING
}

// A plain HTTP GET on loopback; returns the whole response.
std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\n\r\n";
  (void)!write(fd, request.data(), request.size());
  std::string response;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) response.append(buf, n);
  close(fd);
  return response;
}

TEST(DaemonAdminTest, MetricsAndReadinessAreServed) {
  DaemonOptions options = TestOptions();
  options.admin_listen = "127.0.0.1:0";
  options.pools = {{"python", 1, {}}};
  auto daemon = Daemon::Create(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  ASSERT_TRUE((*daemon)->Start().ok());
  const int port = (*daemon)->admin_port();
  ASSERT_GT(port, 0);
  EXPECT_NE(HttpGet(port, "/healthz").find("200"), std::string::npos);

  auto stub = Executor::NewStub(
      grpc::CreateChannel((*daemon)->listening().front(), grpc::InsecureChannelCredentials()));
  v1::ExecuteRequest request;
  request.set_code("print(1)");
  v1::ExecuteResponse response;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub->Execute(&ctx, request, &response).ok());

  const std::string metrics = HttpGet(port, "/metrics");
  EXPECT_NE(metrics.find("warden_executions_total{language=\"python\",mode=\"oneshot\",outcome=\"OK\"} 1"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("warden_execution_seconds_count"), std::string::npos);
  EXPECT_NE(metrics.find("warden_pool_ready{language=\"python\"}"), std::string::npos);
  // Ready once the pool has refilled.
  std::string ready;
  for (int i = 0; i < 500 && ready.find("200") == std::string::npos; ++i) {
    ready = HttpGet(port, "/readyz");
    if (ready.find("200") == std::string::npos) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_NE(ready.find("200"), std::string::npos) << ready;
  (*daemon)->Shutdown(absl::Seconds(5));
}

// ---------------------------------------------------------------------------
// The Python runtime inside the sandbox (docs/runtime.md): the libraries, pip
// from a pool's wheelhouse, IPython's line syntax in Python cells.

std::string ReadSourceFile(const std::string& relative) {
  std::ifstream in(std::string(WARDEN_SOURCE_DIR) + "/" + relative);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST_F(DaemonTest, RuntimeLibrariesImportInASandbox) {
  // scripts/runtime_probe.py, as a cell of a zygote-cloned kernel: seccomp,
  // read-only root, no network, the kernels' environment.
  v1::ExecuteRequest request;
  request.set_code(ReadSourceFile("scripts/runtime_probe.py"));
  request.mutable_limits()->set_wall_ms(300'000);
  request.mutable_limits()->set_cpu_ms(300'000);
  v1::ExecuteResponse response;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(320));
  grpc::Status s = stub_->Execute(&ctx, request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(response.outcome(), v1::OUTCOME_OK) << response.DebugString();
  const nlohmann::json report = nlohmann::json::parse(response.stdout());
  std::set<std::string> makefile_words;
  std::istringstream makefile(ReadSourceFile("Makefile"));
  for (std::string word; makefile >> word;) makefile_words.insert(word);
  ASSERT_GE(report["libraries"].size(), 40u);
  for (const nlohmann::json& library : report["libraries"]) {
    const std::string module = library["module"];
    EXPECT_TRUE(library["ok"].get<bool>()) << module << ": " << library.value("error", "");
    // `make deps` installs what the runtime promises.
    const std::string debian = library["debian"];
    EXPECT_TRUE(makefile_words.count(debian))
        << debian << " (for " << module << ") is missing from the Makefile's DEB_PACKAGES";
  }
}

TEST_F(DaemonTest, PipWithoutAWheelhouseFailsAtOnceSayingHowToGetOne) {
  v1::ExecuteResponse r = Execute("!pip install nosuchpkg\n_exit_code");
  ASSERT_EQ(r.outcome(), v1::OUTCOME_OK) << r.DebugString();
  EXPECT_EQ(r.results(0).data().at("text/plain"), "1");
  EXPECT_NE(r.stderr().find("no network and its pool has no wheelhouse"), std::string::npos) << r.stderr();
  EXPECT_NE(r.stderr().find("pools[].wheelhouse"), std::string::npos) << r.stderr();
}

// A daemon whose python and bash pools have a wheelhouse with wardentiny 1.0
// (which requires wardendep>=0.5) and wardendep 0.4 and 0.5, built by
// kernel/testing/wheels.py into a directory sandboxes can read.
class WheelhouseTest : public DaemonTest {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/warden-wheelhouse-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    wheelhouse_ = dir;
    ASSERT_EQ(chmod(dir, 0755), 0);
    for (const char* args : {"wardentiny 1.0 'VALUE = 42' 'wardendep>=0.5'",
                                    "wardendep 0.4", "wardendep 0.5 'VERSION = \"0.5\"'"}) {
      const std::string command = absl::StrCat("/usr/bin/python3 ", WARDEN_SOURCE_DIR,
                                               "/kernel/testing/wheels.py ", wheelhouse_, " ", args,
                                               " > /dev/null");
      ASSERT_EQ(std::system(command.c_str()), 0) << command;
    }
    DaemonOptions options = TestOptions();
    for (PoolOptions& pool : options.pools) {
      if (pool.language != "javascript") pool.wheelhouse = wheelhouse_;
    }
    options.zygote.enabled = zygote();
    StartDaemon(options);
  }
  void TearDown() override {
    DaemonTest::TearDown();
    std::filesystem::remove_all(wheelhouse_);
  }
  virtual bool zygote() const { return true; }

  std::string wheelhouse_;
};

// Python kernels both cloned from the zygote and exec'd.
class WheelhouseKernelTest : public WheelhouseTest, public ::testing::WithParamInterface<bool> {
 protected:
  bool zygote() const override { return GetParam(); }
};

INSTANTIATE_TEST_SUITE_P(Kernels, WheelhouseKernelTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Zygote" : "Exec";
                         });

TEST_P(WheelhouseKernelTest, PipInstallsFromTheWheelhouseAndImportsInTheSameSession) {
  const std::string session = CreateSession();
  v1::ExecuteResponse r = Execute("%pip install wardentiny", session);
  ASSERT_EQ(r.outcome(), v1::OUTCOME_OK) << r.DebugString();
  EXPECT_NE(r.stdout().find("Successfully installed wardendep-0.5 wardentiny-1.0"), std::string::npos)
      << r.stdout() << r.stderr();
  r = Execute("import wardentiny, wardendep\nwardentiny.VALUE, wardendep.VERSION, wardentiny.__file__",
              session);
  ASSERT_EQ(r.outcome(), v1::OUTCOME_OK) << r.DebugString();
  EXPECT_EQ(r.results(0).data().at("text/plain"),
            "(42, '0.5', '/workspace/.local/lib/python3.11/site-packages/wardentiny/__init__.py')");

  r = Execute("!pip install wardentiny numpy", session);
  EXPECT_NE(r.stdout().find("Requirement already satisfied: wardentiny in "
                            "/workspace/.local/lib/python3.11/site-packages (1.0)"),
            std::string::npos) << r.stdout();
  EXPECT_NE(r.stdout().find("Requirement already satisfied: numpy in /usr/lib/python3/dist-packages"),
            std::string::npos) << r.stdout();

  r = Execute("!pip install nosuchpkg\n_exit_code", session);
  ASSERT_EQ(r.outcome(), v1::OUTCOME_OK) << r.DebugString();
  EXPECT_EQ(r.results(0).data().at("text/plain"), "1");
  EXPECT_NE(r.stderr().find("No matching distribution found for nosuchpkg: it is not in the wheelhouse "
                            "/opt/warden/wheelhouse, and this sandbox has no network"),
            std::string::npos) << r.stderr();

  // The wheelhouse is the operator's: read-only inside.
  r = Execute("open('/opt/warden/wheelhouse/planted.whl', 'wb')", session);
  EXPECT_EQ(r.error().name(), "OSError") << r.DebugString();
  EXPECT_NE(r.error().value().find("Read-only file system"), std::string::npos) << r.error().value();
}

TEST_P(WheelhouseKernelTest, ShellLinesAndMagicsInPythonCells) {
  const std::string session = CreateSession();
  // In the cell's own sandbox, as its user.
  v1::ExecuteResponse r = Execute("!ls /opt/warden; id -un; grep NoNewPrivs /proc/self/status", session);
  EXPECT_EQ(r.stdout(), "bin\nkernel\nwheelhouse\nsandbox\nNoNewPrivs:\t1\n") << r.DebugString();
  r = Execute("x = !echo hi\nx", session);
  ASSERT_EQ(r.results_size(), 1) << r.DebugString();
  EXPECT_EQ(r.results(0).data().at("text/plain"), "['hi']");
  r = Execute("y = 2\ny != 1 and '!y' == '!' + 'y'", session);
  ASSERT_EQ(r.results_size(), 1) << r.DebugString();
  EXPECT_EQ(r.results(0).data().at("text/plain"), "True");
  r = Execute("%timeit y", session);
  EXPECT_EQ(r.outcome(), v1::OUTCOME_ERROR);
  EXPECT_EQ(r.error().name(), "UsageError");
  EXPECT_NE(r.error().value().find("%timeit"), std::string::npos) << r.error().value();
}

TEST_F(WheelhouseTest, BashSessionsPipInstallFromTheWheelhouseAndNeverWaitForANetwork) {
  const std::string session = CreateSession(v1::LANGUAGE_BASH);
  v1::ExecuteResponse r = Execute(
      "pip install -q wardentiny && python3 -c 'import wardentiny; print(wardentiny.VALUE)'", session,
      v1::LANGUAGE_BASH);
  EXPECT_EQ(r.stdout(), "42\n") << r.DebugString();
  // Debian's pip itself, configured by the same environment: no index, so
  // no minute of retries before it gives up.
  r = Execute("python3 -m pip install nosuchpkg", session, v1::LANGUAGE_BASH);
  EXPECT_EQ(r.exit_code(), 1) << r.DebugString();
  EXPECT_NE(r.stderr().find("No matching distribution found for nosuchpkg"), std::string::npos)
      << r.stderr();
  EXPECT_EQ(r.stderr().find("Retrying"), std::string::npos) << r.stderr();
}

}  // namespace
}  // namespace warden
