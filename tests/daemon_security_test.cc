// wardend's API security over real gRPC: bearer tokens and tenant isolation
// (sessions, quotas, concurrency caps), TLS and mTLS on TCP listeners, which
// listeners may run without TLS, and the UNIX socket's permissions. Each test
// runs an in-process Daemon; certificates come from the openssl CLI.
#include <fcntl.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "server/daemon.h"
#include "warden/v1/executor.grpc.pb.h"

namespace warden {
namespace {

using v1::Executor;

// The tokens file's secrets. Long enough to be accepted (>= 16 characters)
// and distinctive enough that a leak into a message is unmistakable.
constexpr char kAliceToken[] = "alice-7Hq2Vx9LmR4sTk8WzP3n";
constexpr char kBobToken[] = "bob-Jd5Fw1QcN6yUg0XbE2rA";
constexpr char kWrongToken[] = "wrong-Zq8v1Lr5Kx2Mn7PdYt4c";
// Shaped like a real session id ("s-" + 24 hex digits) but never issued.
constexpr char kGhostId[] = "s-0123456789abcdef01234567";

DaemonOptions TestOptions(int python_pool = 2) {
  DaemonOptions options;
  options.listen = {"127.0.0.1:0"};
  options.allow_insecure_loopback = true;
  options.pools = {{"python", python_pool, {}}, {"javascript", 0, {}}, {"bash", 0, {}}};
  // Not daemon_test's range (4,000,000 + ...): ctest may run both at once.
  options.executor.host_id_base = static_cast<uid_t>(7'000'000 + (getpid() % 4096) * 512);
  options.executor.host_id_count = 512;
  options.sessions.max_per_tenant = 3;
  options.max_concurrent_per_tenant = 64;
  options.queue.max_wait_ms = 30'000;
  options.shutdown_grace_ms = 5'000;
  return options;
}

std::string Bearer(const std::string& token) { return "Bearer " + token; }

// A context with a deadline; `authorization` is the header's whole value,
// sent only when not empty.
std::unique_ptr<grpc::ClientContext> Context(const std::string& authorization = "",
                                             std::chrono::seconds deadline = std::chrono::seconds(60)) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + deadline);
  if (!authorization.empty()) ctx->AddMetadata("authorization", authorization);
  return ctx;
}

// Waits for `done` to hold, polling until `timeout`; returns whether it did.
bool WaitFor(const std::function<bool()>& done, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// Runs a shell command; returns its exit code, and its output in `output`.
int Shell(const std::string& command, std::string* output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output->append(buffer, n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Reads a streamed execution until its stdout so far ends with `marker`
// (output may arrive in any number of chunks); returns whether it did.
bool ReadStdoutUntil(grpc::ClientReader<v1::ExecuteEvent>& reader, const std::string& marker,
                     std::string* out) {
  v1::ExecuteEvent event;
  while (out->size() < marker.size() || out->compare(out->size() - marker.size(), marker.size(), marker) != 0) {
    if (!reader.Read(&event)) return false;
    if (event.has_stdout()) *out += event.stdout();
  }
  return true;
}

struct RpcResult {
  std::string rpc;
  grpc::Status status;
};

// Calls every RPC that names a session, on session `id`, as `authorization`.
// The requests would change the session if they were let through: run a
// cell, upload a file, close, interrupt, restart it.
std::vector<RpcResult> CallEverySessionRpc(Executor::Stub& stub, const std::string& authorization,
                                           const std::string& id) {
  std::vector<RpcResult> out;
  {
    v1::ExecuteRequest request;
    request.set_session_id(id);
    request.set_code("intruder = True\nprint(secret)");
    v1::ExecuteResponse response;
    out.push_back({"Execute", stub.Execute(Context(authorization).get(), request, &response)});
  }
  {
    v1::ExecuteRequest request;
    request.set_session_id(id);
    request.set_code("intruder = True\nprint(secret)");
    auto ctx = Context(authorization);
    auto reader = stub.ExecuteStream(ctx.get(), request);
    v1::ExecuteEvent event;
    while (reader->Read(&event)) {
    }
    out.push_back({"ExecuteStream", reader->Finish()});
  }
  {
    v1::GetSessionRequest request;
    request.set_session_id(id);
    v1::Session response;
    out.push_back({"GetSession", stub.GetSession(Context(authorization).get(), request, &response)});
  }
  {
    v1::InterruptSessionRequest request;
    request.set_session_id(id);
    v1::InterruptSessionResponse response;
    out.push_back(
        {"InterruptSession", stub.InterruptSession(Context(authorization).get(), request, &response)});
  }
  {
    v1::RestartSessionRequest request;
    request.set_session_id(id);
    request.set_clear_workspace(true);
    v1::Session response;
    out.push_back({"RestartSession", stub.RestartSession(Context(authorization).get(), request, &response)});
  }
  {
    v1::FileInfo info;
    auto ctx = Context(authorization);
    auto writer = stub.UploadFile(ctx.get(), &info);
    v1::UploadFileRequest header;
    header.mutable_header()->set_session_id(id);
    header.mutable_header()->set_path("intruder.txt");
    v1::UploadFileRequest chunk;
    chunk.set_chunk("written by someone else");
    if (writer->Write(header)) writer->Write(chunk);
    writer->WritesDone();
    out.push_back({"UploadFile", writer->Finish()});
  }
  {
    v1::DownloadFileRequest request;
    request.set_session_id(id);
    request.set_path("secret.txt");
    auto ctx = Context(authorization);
    auto reader = stub.DownloadFile(ctx.get(), request);
    v1::FileChunk chunk;
    while (reader->Read(&chunk)) {
    }
    out.push_back({"DownloadFile", reader->Finish()});
  }
  {
    v1::ListFilesRequest request;
    request.set_session_id(id);
    v1::ListFilesResponse response;
    out.push_back({"ListFiles", stub.ListFiles(Context(authorization).get(), request, &response)});
  }
  {
    v1::CloseSessionRequest request;
    request.set_session_id(id);
    v1::CloseSessionResponse response;
    out.push_back({"CloseSession", stub.CloseSession(Context(authorization).get(), request, &response)});
  }
  return out;
}

// Every RPC kind: the session ones on `id`, plus the ones that name none.
std::vector<RpcResult> CallEveryRpc(Executor::Stub& stub, const std::string& authorization,
                                    const std::string& id) {
  std::vector<RpcResult> out = CallEverySessionRpc(stub, authorization, id);
  {
    v1::ExecuteRequest request;
    request.set_code("print('one-shot')");
    v1::ExecuteResponse response;
    out.push_back({"Execute (one-shot)", stub.Execute(Context(authorization).get(), request, &response)});
  }
  {
    v1::ExecuteRequest request;
    request.set_code("print('one-shot')");
    auto ctx = Context(authorization);
    auto reader = stub.ExecuteStream(ctx.get(), request);
    v1::ExecuteEvent event;
    while (reader->Read(&event)) {
    }
    out.push_back({"ExecuteStream (one-shot)", reader->Finish()});
  }
  {
    v1::CreateSessionRequest request;
    v1::Session response;
    out.push_back({"CreateSession", stub.CreateSession(Context(authorization).get(), request, &response)});
  }
  {
    v1::ListSessionsRequest request;
    v1::ListSessionsResponse response;
    out.push_back({"ListSessions", stub.ListSessions(Context(authorization).get(), request, &response)});
  }
  return out;
}

// A daemon per test, and a scratch directory (removed afterwards).
class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/warden-security-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    if (daemon_) daemon_->Shutdown(absl::Seconds(5));
    daemon_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  void StartDaemon(const DaemonOptions& options) {
    auto daemon = Daemon::Create(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
    daemon_ = std::move(*daemon);
    absl::Status started = daemon_->Start();
    ASSERT_TRUE(started.ok()) << started.ToString();
  }
  std::unique_ptr<Executor::Stub> Stub(std::shared_ptr<grpc::ChannelCredentials> credentials =
                                           grpc::InsecureChannelCredentials()) {
    return Executor::NewStub(grpc::CreateChannel(daemon_->listening().front(), credentials));
  }

  // Writes `text` to `name` in the scratch directory with `mode`.
  std::string WriteFile(const std::string& name, const std::string& text, mode_t mode = 0600) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    EXPECT_EQ(chmod(path.c_str(), mode), 0) << path;
    return path;
  }

  std::string dir_;
  std::unique_ptr<Daemon> daemon_;
};

// ---------------------------------------------------------------------------
// Tokens and tenants.

class TenantTest : public SecurityTest {
 protected:
  void SetUp() override {
    SecurityTest::SetUp();
    tokens_file_ = WriteFile("tokens.json", absl::StrCat(R"({"tokens": [{"token": ")", kAliceToken,
                                                         R"(", "tenant": "alice"}, {"token": ")",
                                                         kBobToken, R"(", "tenant": "bob"}]})"));
  }
  DaemonOptions Options(int python_pool = 2) {
    DaemonOptions options = TestOptions(python_pool);
    options.auth.tokens_file = tokens_file_;
    return options;
  }
  void Start(const DaemonOptions& options) {
    StartDaemon(options);
    stub_ = Stub();
  }

  // Creates a session as `token`; "" when refused (with `status` set).
  std::string CreateSession(const std::string& token, grpc::Status* status = nullptr,
                            std::map<std::string, std::string> labels = {}) {
    v1::CreateSessionRequest request;
    request.mutable_labels()->insert(labels.begin(), labels.end());
    v1::Session session;
    grpc::Status s = stub_->CreateSession(Context(Bearer(token)).get(), request, &session);
    if (status) {
      *status = s;
    } else {
      EXPECT_TRUE(s.ok()) << s.error_message();
    }
    return session.id();
  }
  v1::ExecuteResponse Execute(const std::string& token, const std::string& code,
                              const std::string& session = "", grpc::Status* status = nullptr) {
    v1::ExecuteRequest request;
    request.set_code(code);
    request.set_session_id(session);
    v1::ExecuteResponse response;
    grpc::Status s = stub_->Execute(Context(Bearer(token)).get(), request, &response);
    if (status) {
      *status = s;
    } else {
      EXPECT_TRUE(s.ok()) << s.error_message();
    }
    return response;
  }
  void Upload(const std::string& token, const std::string& id, const std::string& path,
              const std::string& data) {
    v1::FileInfo info;
    auto ctx = Context(Bearer(token));
    auto writer = stub_->UploadFile(ctx.get(), &info);
    v1::UploadFileRequest header;
    header.mutable_header()->set_session_id(id);
    header.mutable_header()->set_path(path);
    v1::UploadFileRequest chunk;
    chunk.set_chunk(data);
    ASSERT_TRUE(writer->Write(header));
    ASSERT_TRUE(writer->Write(chunk));
    writer->WritesDone();
    grpc::Status s = writer->Finish();
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  std::vector<std::string> SessionIds(const std::string& token,
                                      std::map<std::string, std::string> labels = {}) {
    v1::ListSessionsRequest request;
    request.mutable_labels()->insert(labels.begin(), labels.end());
    v1::ListSessionsResponse response;
    grpc::Status s = stub_->ListSessions(Context(Bearer(token)).get(), request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    std::vector<std::string> ids;
    for (const auto& session : response.sessions()) ids.push_back(session.id());
    return ids;
  }

  // Alice's session holding state that any successful intrusion would
  // change: a variable, and a file in the workspace.
  std::string AliceSessionWithState() {
    const std::string id = CreateSession(kAliceToken, nullptr, {{"owner", "alice"}});
    EXPECT_FALSE(id.empty());
    EXPECT_EQ(Execute(kAliceToken, "secret = 'alice-state'", id).outcome(), v1::OUTCOME_OK);
    Upload(kAliceToken, id, "secret.txt", "alice's file");
    return id;
  }
  // Asserts the session is exactly as AliceSessionWithState left it.
  void ExpectAliceSessionUntouched(const std::string& id) {
    v1::GetSessionRequest get;
    get.set_session_id(id);
    v1::Session shown;
    grpc::Status s = stub_->GetSession(Context(Bearer(kAliceToken)).get(), get, &shown);
    ASSERT_TRUE(s.ok()) << "alice's session is gone: " << s.error_message();
    EXPECT_EQ(shown.state(), v1::SESSION_STATE_IDLE);
    v1::ExecuteResponse r = Execute(kAliceToken, "print(secret, 'intruder' in globals())", id);
    EXPECT_EQ(r.stdout(), "alice-state False\n") << r.DebugString();
    v1::ListFilesRequest ls;
    ls.set_session_id(id);
    v1::ListFilesResponse files;
    ASSERT_TRUE(stub_->ListFiles(Context(Bearer(kAliceToken)).get(), ls, &files).ok());
    std::set<std::string> paths;
    for (const auto& f : files.files()) paths.insert(f.path());
    EXPECT_EQ(paths, std::set<std::string>{"secret.txt"}) << files.DebugString();
  }

  std::string tokens_file_;
  std::unique_ptr<Executor::Stub> stub_;
};

TEST_F(TenantTest, EveryRpcWithoutAValidTokenIsUnauthenticatedAndNeverShowsAToken) {
  Start(Options());
  const std::string id = AliceSessionWithState();
  ASSERT_FALSE(id.empty());
  const std::string alice(kAliceToken);
  // Each a header value that must not authenticate ("" sends none).
  const std::vector<std::string> refused = {
      "",
      "Bearer",
      "Bearer ",
      Bearer(kWrongToken),
      Bearer(alice + "x"),                       // a valid token as a prefix
      Bearer(alice.substr(0, alice.size() - 1)),  // a valid token's prefix
      Bearer(alice.substr(1)),                   // a valid token's suffix
      "Basic " + alice,                          // the right token, the wrong scheme
      alice,                                     // no scheme
      "Bearer" + alice,                          // no space after the scheme
  };
  for (const std::string& authorization : refused) {
    SCOPED_TRACE(absl::StrCat("authorization: '", authorization, "'"));
    for (const RpcResult& call : CallEveryRpc(*stub_, authorization, id)) {
      EXPECT_EQ(call.status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << call.rpc << ": " << call.status.error_message();
      EXPECT_FALSE(call.status.error_message().empty()) << call.rpc;
      const std::string said = call.status.error_message() + call.status.error_details();
      for (const std::string& secret : {std::string(kAliceToken), std::string(kBobToken),
                                        std::string(kWrongToken), alice.substr(1),
                                        alice.substr(0, alice.size() - 1)}) {
        EXPECT_EQ(said.find(secret), std::string::npos)
            << call.rpc << " shows a token: " << call.status.error_message();
      }
    }
  }
  // Nothing was created, changed or run on anybody's behalf.
  EXPECT_EQ(daemon_->engine().Stats().sessions, 1);
  ExpectAliceSessionUntouched(id);
}

TEST_F(TenantTest, AnotherTenantsSessionIsIndistinguishableFromNone) {
  Start(Options());
  const std::string id = AliceSessionWithState();
  ASSERT_FALSE(id.empty());
  ASSERT_NE(id, kGhostId);

  const std::vector<RpcResult> on_alices = CallEverySessionRpc(*stub_, Bearer(kBobToken), id);
  const std::vector<RpcResult> on_ghost = CallEverySessionRpc(*stub_, Bearer(kBobToken), kGhostId);
  ASSERT_EQ(on_alices.size(), on_ghost.size());
  for (size_t i = 0; i < on_alices.size(); ++i) {
    const RpcResult& theirs = on_alices[i];
    const RpcResult& none = on_ghost[i];
    SCOPED_TRACE(theirs.rpc);
    EXPECT_EQ(theirs.status.error_code(), grpc::StatusCode::NOT_FOUND) << theirs.status.error_message();
    EXPECT_EQ(none.status.error_code(), grpc::StatusCode::NOT_FOUND) << none.status.error_message();
    // The same answer, but for the id itself.
    EXPECT_EQ(absl::StrReplaceAll(theirs.status.error_message(), {{id, "<id>"}}),
              absl::StrReplaceAll(none.status.error_message(), {{kGhostId, "<id>"}}));
    EXPECT_EQ(theirs.status.error_message().find("alice"), std::string::npos)
        << theirs.status.error_message();
  }

  EXPECT_TRUE(SessionIds(kBobToken).empty());
  EXPECT_TRUE(SessionIds(kBobToken, {{"owner", "alice"}}).empty());
  EXPECT_EQ(SessionIds(kAliceToken), std::vector<std::string>{id});
  ExpectAliceSessionUntouched(id);
}

TEST_F(TenantTest, AnotherTenantCannotInterruptOrCloseARunningCell) {
  Start(Options());
  const std::string id = CreateSession(kAliceToken);
  ASSERT_FALSE(id.empty());
  v1::ExecuteRequest request;
  request.set_session_id(id);
  request.set_code("import time\nprint('started', flush=True)\ntime.sleep(1.5)\nprint('finished')");
  auto ctx = Context(Bearer(kAliceToken));
  auto reader = stub_->ExecuteStream(ctx.get(), request);
  std::string out;
  ASSERT_TRUE(ReadStdoutUntil(*reader, "started\n", &out)) << out;

  // The cell is running now.
  v1::InterruptSessionRequest interrupt;
  interrupt.set_session_id(id);
  v1::InterruptSessionResponse interrupted;
  grpc::Status s = stub_->InterruptSession(Context(Bearer(kBobToken)).get(), interrupt, &interrupted);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  EXPECT_FALSE(interrupted.was_busy());
  v1::CloseSessionRequest close;
  close.set_session_id(id);
  v1::CloseSessionResponse closed;
  s = stub_->CloseSession(Context(Bearer(kBobToken)).get(), close, &closed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();

  v1::ExecuteEvent event;
  v1::ExecuteResponse summary;
  while (reader->Read(&event)) {
    if (event.has_stdout()) out += event.stdout();
    if (event.has_summary()) summary = event.summary();
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(summary.outcome(), v1::OUTCOME_OK) << summary.DebugString();
  EXPECT_EQ(out, "started\nfinished\n");
}

TEST_F(TenantTest, SessionQuotaAppliesToEachTenantSeparately) {
  DaemonOptions options = Options();
  options.sessions.max_per_tenant = 2;
  Start(options);
  std::vector<std::string> alices;
  for (int i = 0; i < 2; ++i) alices.push_back(CreateSession(kAliceToken));
  ASSERT_FALSE(alices[0].empty() || alices[1].empty());
  grpc::Status s;
  CreateSession(kAliceToken, &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();

  // Alice at her cap does not stop bob; bob has a cap of his own.
  for (int i = 0; i < 2; ++i) {
    CreateSession(kBobToken, &s);
    EXPECT_TRUE(s.ok()) << "bob's session " << i << ": " << s.error_message();
  }
  CreateSession(kBobToken, &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();

  // Closing one of hers makes room for her again (and only one).
  v1::CloseSessionRequest close;
  close.set_session_id(alices[0]);
  v1::CloseSessionResponse closed;
  ASSERT_TRUE(stub_->CloseSession(Context(Bearer(kAliceToken)).get(), close, &closed).ok());
  CreateSession(kAliceToken, &s);
  EXPECT_TRUE(s.ok()) << s.error_message();
  CreateSession(kAliceToken, &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
}

TEST_F(TenantTest, ConcurrentExecutionCapAppliesToEachTenantSeparately) {
  DaemonOptions options = Options();
  options.max_concurrent_per_tenant = 1;
  options.queue.max_waiting_per_tenant = 1;
  Start(options);
  v1::ExecuteRequest request;
  request.set_code("import time\nprint('started', flush=True)\ntime.sleep(60)");
  auto ctx = Context(Bearer(kAliceToken));
  auto reader = stub_->ExecuteStream(ctx.get(), request);
  std::string out;
  ASSERT_TRUE(ReadStdoutUntil(*reader, "started\n", &out)) << out;

  // Alice's first execution is running: her second waits in her line...
  v1::ExecuteRequest second;
  second.set_code("print('second')");
  auto second_ctx = Context(Bearer(kAliceToken));
  auto second_reader = stub_->ExecuteStream(second_ctx.get(), second);
  ASSERT_TRUE(WaitFor([&] { return daemon_->engine().Stats().admission.waiting == 1; },
                      absl::Seconds(20)));
  // ...and with her line full, her third is refused, saying when to retry.
  grpc::Status s;
  Execute(kAliceToken, "print('third')", "", &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("retry in about"), std::string::npos) << s.error_message();
  // Bob still runs.
  v1::ExecuteResponse bobs = Execute(kBobToken, "print('bob runs')", "", &s);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(bobs.stdout(), "bob runs\n");

  // Once her first ends (cancelled here), her second runs.
  ctx->TryCancel();
  v1::ExecuteEvent event;
  while (reader->Read(&event)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  std::string second_out;
  while (second_reader->Read(&event)) {
    if (event.has_stdout()) second_out += event.stdout();
  }
  EXPECT_TRUE(second_reader->Finish().ok());
  EXPECT_EQ(second_out, "second\n");
  ASSERT_TRUE(WaitFor([&] { return daemon_->engine().Stats().executing == 0; }, absl::Seconds(20)));
  v1::ExecuteResponse again = Execute(kAliceToken, "print('again')", "", &s);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(again.stdout(), "again\n");
}

// Host processes whose uid is one of this daemon's sandbox ids.
int SandboxProcesses(const DaemonOptions& options) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.empty() || !isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::ifstream status(entry.path() / "status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("Uid:", 0) != 0) continue;
      const long uid = std::strtol(line.c_str() + 4, nullptr, 10);
      const long first = options.executor.host_id_base;
      if (uid >= first && uid < first + static_cast<long>(options.executor.host_id_count)) ++n;
      break;
    }
  }
  return n;
}

TEST_F(TenantTest, ABurstQueuesAndAnotherTenantsSingleRequestIsNotDelayedBehindIt) {
  DaemonOptions options = Options(/*python_pool=*/2);
  options.max_concurrent_per_tenant = 16;  // the default
  options.queue.max_wait_ms = 600'000;     // the burst waits in line, it is not refused
  Start(options);
  auto pool_full = [&] { return daemon_->engine().Stats().pools["python"].ready == 2; };
  ASSERT_TRUE(WaitFor(pool_full, absl::Seconds(60)));
  const int idle_processes = SandboxProcesses(options);

  constexpr int kBurst = 500;
  struct Call {
    grpc::ClientContext ctx;
    v1::ExecuteRequest request;
    v1::ExecuteResponse response;
    grpc::Status status;
  };
  std::vector<std::unique_ptr<Call>> burst;
  absl::Mutex mu;
  int finished = 0;  // of the burst
  for (int i = 0; i < kBurst; ++i) {
    auto call = std::make_unique<Call>();
    call->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(10));
    call->ctx.AddMetadata("authorization", Bearer(kAliceToken));
    call->request.set_code(absl::StrCat("print(", i, ")"));
    Call* c = call.get();
    stub_->async()->Execute(&c->ctx, &c->request, &c->response, [&mu, &finished, c](grpc::Status s) {
      absl::MutexLock lock(&mu);
      c->status = std::move(s);
      ++finished;
    });
    burst.push_back(std::move(call));
  }
  // All of the burst has reached the engine, most of it in alice's line,
  // before bob asks. How fast gRPC delivers calls is not the engine's
  // fairness: under ThreadSanitizer, 170 of the burst's calls had not reached
  // the engine when half of it was waiting, and bob's call, taken in after
  // them, saw 90 of alice's executions end.
  ASSERT_TRUE(WaitFor(
      [&] {
        TenantQueueStats admission = daemon_->engine().Stats().admission;
        return admission.admitted + admission.waiting == kBurst;
      },
      absl::Seconds(60)));
  // Executions that have ended, counted by the engine: the client's own
  // count lags when its threads are slow (under TSan, by 70 and more).
  auto ended = [](const TenantQueueStats& admission) { return admission.admitted - admission.running; };
  const TenantQueueStats before_bob = daemon_->engine().Stats().admission;
  const int64_t ended_before_bob = ended(before_bob);
  ASSERT_GE(before_bob.waiting, kBurst / 2) << "the burst is not in alice's line: nothing to be delayed behind";
  grpc::Status s;
  v1::ExecuteResponse bobs = Execute(kBobToken, "print('bob')", "", &s);
  const int64_t ended_with_bob = ended(daemon_->engine().Stats().admission);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(bobs.stdout(), "bob\n");
  // Bob waited for a warm worker behind at most alice's running share (16),
  // not behind the hundreds in her line.
  const int64_t alices_while_bob = ended_with_bob - ended_before_bob - 1;
  EXPECT_LE(alices_while_bob, 2 * options.max_concurrent_per_tenant)
      << "the burst had " << ended_before_bob << " done when bob asked";
  EXPECT_LT(ended_with_bob, kBurst / 2);

  {
    absl::MutexLock lock(&mu);
    auto all_done = [&finished]() { return finished == kBurst; };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&all_done), absl::Minutes(10)));
  }
  for (int i = 0; i < kBurst; ++i) {
    ASSERT_TRUE(burst[i]->status.ok()) << i << ": " << burst[i]->status.error_message();
    ASSERT_EQ(burst[i]->response.stdout(), absl::StrCat(i, "\n"));
  }
  // Nothing leaks: no slot, no waiter, and the sandboxes are torn down
  // (only the refilled pool's are left).
  EngineStats stats = daemon_->engine().Stats();
  EXPECT_EQ(stats.admission.running, 0);
  EXPECT_EQ(stats.admission.waiting, 0);
  EXPECT_EQ(stats.admission.refused, 0);
  EXPECT_EQ(stats.admission.admitted, kBurst + 1);
  EXPECT_EQ(stats.pools["python"].waiting, 0);
  EXPECT_TRUE(WaitFor([&] { return pool_full() && SandboxProcesses(options) == idle_processes; },
                      absl::Seconds(60)))
      << SandboxProcesses(options) << " sandbox processes, " << idle_processes << " when idle";
}

TEST_F(TenantTest, TokensFileOthersCanReadOrChangeIsRefused) {
  const std::string text = ReadAll(tokens_file_);
  for (mode_t mode : {0640, 0604, 0644, 0660, 0606, 0602}) {
    SCOPED_TRACE(absl::StrCat("mode 0", mode / 64, (mode / 8) % 8, mode % 8));
    ASSERT_EQ(chmod(tokens_file_.c_str(), mode), 0);
    auto daemon = Daemon::Create(Options(0));
    ASSERT_FALSE(daemon.ok());
    const std::string message(daemon.status().message());
    EXPECT_NE(message.find("chmod 600"), std::string::npos) << message;
    EXPECT_NE(message.find(tokens_file_), std::string::npos) << message;
    EXPECT_EQ(message.find(kAliceToken), std::string::npos) << message;
    EXPECT_EQ(message.find(kBobToken), std::string::npos) << message;
  }
  // Owned by another user (who could add tokens of their own).
  ASSERT_EQ(chmod(tokens_file_.c_str(), 0600), 0);
  ASSERT_EQ(chown(tokens_file_.c_str(), 65534, 65534), 0);
  auto daemon = Daemon::Create(Options(0));
  ASSERT_FALSE(daemon.ok());
  EXPECT_NE(daemon.status().message().find("chown"), std::string::npos) << daemon.status();

  // The control: the same file, ours and 0600, is accepted.
  ASSERT_EQ(chown(tokens_file_.c_str(), geteuid(), getegid()), 0);
  daemon = Daemon::Create(Options(0));
  EXPECT_TRUE(daemon.ok()) << daemon.status();
  EXPECT_EQ(ReadAll(tokens_file_), text);
}

// ---------------------------------------------------------------------------
// TLS on TCP listeners.

// A CA, a server certificate for 127.0.0.1 and localhost, a client
// certificate from the CA, and a second, unrelated CA with a client
// certificate of its own.
class TlsTest : public SecurityTest {
 protected:
  void SetUp() override {
    SecurityTest::SetUp();
    const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    for (const std::string ca : {"ca", "rogue-ca"}) {
      Run(absl::StrCat("openssl req -x509 ", ec, " -keyout ", ca, ".key -out ", ca,
                       ".pem -days 2 -subj '/CN=Warden test ", ca, "'",
                       " -addext basicConstraints=critical,CA:TRUE",
                       " -addext keyUsage=critical,keyCertSign,cRLSign"));
    }
    WriteFile("server.ext",
              "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
              "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n");
    WriteFile("client.ext",
              "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
              "extendedKeyUsage=clientAuth\n");
    for (const auto& [name, ca, ext] : std::vector<std::tuple<std::string, std::string, std::string>>{
             {"server", "ca", "server.ext"},
             {"client", "ca", "client.ext"},
             {"rogue-client", "rogue-ca", "client.ext"}}) {
      Run(absl::StrCat("openssl req ", ec, " -keyout ", name, ".key -out ", name, ".csr -subj '/CN=",
                       name == "server" ? "localhost" : name, "'"));
      Run(absl::StrCat("openssl x509 -req -in ", name, ".csr -CA ", ca, ".pem -CAkey ", ca,
                       ".key -CAcreateserial -days 2 -extfile ", ext, " -out ", name, ".pem"));
    }
  }
  void Run(const std::string& command) {
    std::string output;
    const int code = Shell(absl::StrCat("cd ", dir_, " && ", command), &output);
    ASSERT_EQ(code, 0) << command << "\n" << output;
  }
  std::string Pem(const std::string& name) { return ReadAll(dir_ + "/" + name + ".pem"); }
  std::string Key(const std::string& name) { return ReadAll(dir_ + "/" + name + ".key"); }

  DaemonOptions Options() {
    DaemonOptions options = TestOptions(/*python_pool=*/0);
    options.allow_insecure_loopback = false;
    options.tls.cert_file = dir_ + "/server.pem";
    options.tls.key_file = dir_ + "/server.key";
    return options;
  }
  // TLS trusting `ca`, presenting `client`'s certificate unless it is "".
  std::shared_ptr<grpc::ChannelCredentials> Tls(const std::string& ca, const std::string& client = "") {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = Pem(ca);
    if (!client.empty()) {
      ssl.pem_private_key = Key(client);
      ssl.pem_cert_chain = Pem(client);
    }
    return grpc::SslCredentials(ssl);
  }
  grpc::Status ListSessions(const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
    v1::ListSessionsResponse response;
    return Stub(credentials)->ListSessions(Context("", std::chrono::seconds(10)).get(),
                                           v1::ListSessionsRequest(), &response);
  }
};

TEST_F(TlsTest, TcpListenerServesTlsAndRefusesPlaintext) {
  StartDaemon(Options());
  grpc::Status s = ListSessions(Tls("ca"));
  EXPECT_TRUE(s.ok()) << s.error_code() << ": " << s.error_message();
  s = ListSessions(grpc::InsecureChannelCredentials());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  // A client that does not trust the server's CA does not talk to it.
  s = ListSessions(Tls("rogue-ca"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

TEST_F(TlsTest, MutualTlsNeedsAClientCertificateFromTheClientCa) {
  DaemonOptions options = Options();
  options.tls.client_ca_file = dir_ + "/ca.pem";
  StartDaemon(options);
  grpc::Status s = ListSessions(Tls("ca"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << "no client certificate: " << s.error_message();
  s = ListSessions(Tls("ca", "rogue-client"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << "another CA's client: " << s.error_message();
  s = ListSessions(grpc::InsecureChannelCredentials());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << "plaintext: " << s.error_message();
  s = ListSessions(Tls("ca", "client"));
  EXPECT_TRUE(s.ok()) << s.error_code() << ": " << s.error_message();
}

TEST_F(TlsTest, CliReachesATlsListenerOnLoopbackGivenTheCa) {
  StartDaemon(Options());
  const std::string cli = absl::StrCat(WARDEN_BIN_DIR, "/warden --addr ", daemon_->listening().front(),
                                       " exec -");
  std::string output;
  // Without the CA the CLI speaks plain text to loopback: refused.
  EXPECT_NE(Shell(absl::StrCat("echo 'print(6*7)' | ", cli, " 2>&1"), &output), 0) << output;
  output.clear();
  const int code = Shell(absl::StrCat("echo 'print(6*7)' | WARDEN_CA_FILE=", dir_, "/ca.pem ", cli, " 2>&1"),
                         &output);
  EXPECT_EQ(code, 0) << output;
  EXPECT_EQ(output, "42\n");
}

TEST_F(TlsTest, NetworkListenerMustAuthenticateCallers) {
  // TLS alone proves who the server is, not who the caller is.
  DaemonOptions options = Options();
  options.listen = {"0.0.0.0:0"};
  auto daemon = Daemon::Create(options);
  ASSERT_FALSE(daemon.ok());
  EXPECT_NE(daemon.status().message().find("nothing authenticates callers"), std::string::npos)
      << daemon.status();
  // Client certificates are enough (not started: it would listen on every interface).
  options.tls.client_ca_file = dir_ + "/ca.pem";
  daemon = Daemon::Create(options);
  EXPECT_TRUE(daemon.ok()) << daemon.status();
}

// ---------------------------------------------------------------------------
// Which TCP listeners may run without TLS (checked before anything starts).

TEST(ListenerTest, NonLoopbackTcpWithoutTlsIsRefused) {
  // "127.0.0.1.example.com" is a host name anyone may own, not loopback.
  for (const char* address : {"0.0.0.0:0", "[::]:0", "10.1.2.3:0", "127.0.0.1.example.com:0"}) {
    SCOPED_TRACE(address);
    DaemonOptions options = TestOptions(0);
    options.listen = {address};
    options.allow_insecure_loopback = true;  // no help off loopback
    auto daemon = Daemon::Create(options);
    ASSERT_FALSE(daemon.ok());
    const std::string message(daemon.status().message());
    EXPECT_NE(message.find(absl::StrCat("TCP listener ", address, " is not loopback and has no TLS")),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("tls.cert_file"), std::string::npos) << message;
  }
}

TEST(ListenerTest, LoopbackWithoutTlsNeedsAllowInsecureLoopback) {
  for (const char* address : {"127.0.0.1:0", "127.9.9.9:0", "localhost:0", "[::1]:0"}) {
    SCOPED_TRACE(address);
    DaemonOptions options = TestOptions(0);
    options.listen = {address};
    options.allow_insecure_loopback = false;
    auto daemon = Daemon::Create(options);
    ASSERT_FALSE(daemon.ok());
    const std::string message(daemon.status().message());
    EXPECT_NE(message.find(absl::StrCat("TCP listener ", address, " has no TLS")), std::string::npos)
        << message;
    EXPECT_NE(message.find("allow_insecure_loopback"), std::string::npos) << message;
  }
}

// What Create accepts as loopback, Start must serve: the options check and
// the daemon's credentials must agree on what loopback is.
TEST(ListenerTest, InsecureLoopbackServesEverySpellingOfLoopback) {
  for (const char* address :
       {"127.0.0.1:0", "127.0.0.2:0", "localhost:0", "[::1]:0", "LOCALHOST:0", "[::ffff:127.0.0.1]:0"}) {
    SCOPED_TRACE(address);
    DaemonOptions options = TestOptions(0);
    options.listen = {address};
    auto daemon = Daemon::Create(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    absl::Status started = (*daemon)->Start();
    EXPECT_TRUE(started.ok()) << started;
    if (started.ok()) {
      auto stub = Executor::NewStub(
          grpc::CreateChannel((*daemon)->listening().front(), grpc::InsecureChannelCredentials()));
      v1::ListSessionsResponse response;
      grpc::Status s = stub->ListSessions(Context("", std::chrono::seconds(10)).get(),
                                          v1::ListSessionsRequest(), &response);
      EXPECT_TRUE(s.ok()) << s.error_message();
    }
    (*daemon)->Shutdown(absl::Seconds(1));
  }
}

// ---------------------------------------------------------------------------
// The UNIX socket.

// In a child process that becomes `uid` (and gid), connects to the UNIX
// socket at `path`; returns 0 if it could, else the errno (or -1 if the
// child failed otherwise). Only async-signal-safe calls after fork.
// Connects as `uid` (its primary group the same number) with the given
// supplementary groups: 0, or the errno connect failed with.
int ConnectAs(uid_t uid, const std::string& path, const std::vector<gid_t>& groups = {}) {
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return -1;
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (setgroups(groups.size(), groups.data()) != 0 || setresgid(uid, uid, uid) != 0 ||
        setresuid(uid, uid, uid) != 0) {
      _exit(250);
    }
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) _exit(251);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) _exit(0);
    _exit(errno > 0 && errno < 250 ? errno : 252);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  const int code = WEXITSTATUS(status);
  return code >= 250 ? -1 : code;
}

TEST_F(SecurityTest, UnixSocketIsOnlyForTheDaemonsUser) {
  ASSERT_EQ(geteuid(), 0u) << "needs root, to become another user";
  // Anyone may enter the directory, so only the socket's own mode decides.
  ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
  const std::string path = dir_ + "/w.sock";
  DaemonOptions options = TestOptions(0);
  options.listen = {"unix:" + path};
  options.allow_insecure_loopback = false;
  StartDaemon(options);

  struct stat st;
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u) << std::oct << (st.st_mode & 07777);
  EXPECT_EQ(st.st_uid, geteuid());

  // The daemon's user gets in.
  v1::ListSessionsResponse response;
  grpc::Status s = Stub()->ListSessions(Context("", std::chrono::seconds(10)).get(),
                                        v1::ListSessionsRequest(), &response);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(ConnectAs(geteuid(), path), 0);
  // Nobody else does.
  EXPECT_EQ(ConnectAs(65534, path), EACCES);

  // The control: it is the socket's mode that stops them.
  ASSERT_EQ(chmod(path.c_str(), 0666), 0);
  EXPECT_EQ(ConnectAs(65534, path), 0);
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
}

TEST_F(SecurityTest, UnixSocketAlsoServesTheMembersOfSocketGroup) {
  ASSERT_EQ(geteuid(), 0u) << "needs root, to become another user";
  const struct group* users = getgrnam("users");  // in every Debian's base system
  ASSERT_NE(users, nullptr);
  const gid_t gid = users->gr_gid;
  ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
  const std::string path = dir_ + "/w.sock";
  DaemonOptions options = TestOptions(0);
  options.listen = {"unix:" + path};
  options.allow_insecure_loopback = false;
  options.socket_group = "users";
  StartDaemon(options);

  struct stat st;
  ASSERT_EQ(lstat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0660u) << std::oct << (st.st_mode & 07777);
  EXPECT_EQ(st.st_uid, geteuid());
  EXPECT_EQ(st.st_gid, gid);
  // A member of the group gets in; the same user without the group does not.
  EXPECT_EQ(ConnectAs(65534, path, {gid}), 0);
  EXPECT_EQ(ConnectAs(65534, path), EACCES);
}

}  // namespace
}  // namespace warden
