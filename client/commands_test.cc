// The commands run against a fake daemon over an in-process channel: what
// they send (the token, the code, upload chunks), what they print, and the
// exit status. No wardend and no privileges needed.
#include "client/commands.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "client/cli_args.h"
#include "gmock/gmock.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "warden/v1/executor.grpc.pb.h"

namespace warden::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Answers from a script and records what it was sent.
class FakeDaemon final : public v1::Executor::Service {
 public:
  // What ExecuteStream sends back; with hang_after_events, it then calls
  // after_events and waits until the client cancels the call.
  std::vector<v1::ExecuteEvent> events;
  bool hang_after_events = false;
  std::function<void()> after_events;
  absl::Notification cancelled;
  std::string file_content = "0123456789";

  std::string authorization() const {
    absl::MutexLock lock(&mu_);
    return authorization_;
  }
  v1::ExecuteRequest last_execute() const {
    absl::MutexLock lock(&mu_);
    return last_execute_;
  }
  std::vector<v1::UploadFileRequest> uploaded() const {
    absl::MutexLock lock(&mu_);
    return uploaded_;
  }

  grpc::Status ExecuteStream(grpc::ServerContext* context, const v1::ExecuteRequest* request,
                             grpc::ServerWriter<v1::ExecuteEvent>* writer) override {
    Record(context);
    {
      absl::MutexLock lock(&mu_);
      last_execute_ = *request;
    }
    for (const v1::ExecuteEvent& event : events) writer->Write(event);
    if (!hang_after_events) return grpc::Status::OK;
    if (after_events) after_events();
    // The sync API has no cancellation callback: check with a deadline.
    absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (!context->IsCancelled() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
    if (context->IsCancelled()) cancelled.Notify();
    return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
  }

  grpc::Status CreateSession(grpc::ServerContext* context, const v1::CreateSessionRequest* request,
                             v1::Session* session) override {
    Record(context);
    session->set_id("s-new");
    session->set_language(request->language());
    session->set_state(v1::SESSION_STATE_IDLE);
    return grpc::Status::OK;
  }

  grpc::Status GetSession(grpc::ServerContext* context, const v1::GetSessionRequest* request,
                          v1::Session*) override {
    Record(context);
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "no session " + request->session_id());
  }

  grpc::Status UploadFile(grpc::ServerContext* context,
                          grpc::ServerReader<v1::UploadFileRequest>* reader,
                          v1::FileInfo* info) override {
    Record(context);
    v1::UploadFileRequest message;
    int64_t size = 0;
    while (reader->Read(&message)) {
      absl::MutexLock lock(&mu_);
      uploaded_.push_back(message);
      if (message.has_header()) info->set_path(message.header().path());
      size += static_cast<int64_t>(message.chunk().size());
    }
    info->set_size(size);
    info->set_type("file");
    return grpc::Status::OK;
  }

  grpc::Status DownloadFile(grpc::ServerContext* context, const v1::DownloadFileRequest* request,
                            grpc::ServerWriter<v1::FileChunk>* writer) override {
    Record(context);
    if (request->path() != "present.txt") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such file");
    }
    v1::FileChunk chunk;
    chunk.set_total_size(static_cast<int64_t>(file_content.size()));
    chunk.set_data(file_content.substr(0, 4));
    writer->Write(chunk);
    chunk.clear_total_size();
    chunk.set_data(file_content.substr(4));
    writer->Write(chunk);
    return grpc::Status::OK;
  }

 private:
  void Record(grpc::ServerContext* context) {
    auto it = context->client_metadata().find("authorization");
    absl::MutexLock lock(&mu_);
    authorization_ = it == context->client_metadata().end()
                         ? ""
                         : std::string(it->second.data(), it->second.size());
  }

  mutable absl::Mutex mu_;
  std::string authorization_ ABSL_GUARDED_BY(mu_);
  v1::ExecuteRequest last_execute_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::UploadFileRequest> uploaded_ ABSL_GUARDED_BY(mu_);
};

// The fake daemon serving in this process, and the CLI's streams.
class FakeDaemonHarness {
 public:
  FakeDaemonHarness() {
    grpc::ServerBuilder builder;
    builder.RegisterService(&daemon);
    server_ = builder.BuildAndStart();
    stub_ = v1::Executor::NewStub(server_->InProcessChannel(grpc::ChannelArguments()));
  }
  ~FakeDaemonHarness() { server_->Shutdown(absl::ToChronoTime(absl::Now())); }

  // Runs `args` as the CLI would, with token "secret" and WARDEN_SESSION s-1.
  int Run(const std::vector<std::string>& args, const std::string& stdin_data = "",
          bool cancel_on_signals = false) {
    CliEnvironment env;
    env.session = "s-1";
    auto invocation = ParseCommandLine(args, env);
    EXPECT_TRUE(invocation.ok()) << invocation.status();
    if (!invocation.ok()) return -1;
    std::istringstream in(stdin_data);
    out.str("");
    err.str("");
    CommandRunner runner(stub_.get(), "secret", invocation->address, {in, out, err},
                         cancel_on_signals);
    return runner.Run(invocation->command);
  }

  FakeDaemon daemon;
  std::ostringstream out;
  std::ostringstream err;

 private:
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Executor::Stub> stub_;
};

v1::ExecuteEvent Output(bool to_stderr, const std::string& data) {
  v1::ExecuteEvent event;
  to_stderr ? event.set_stderr(data) : event.set_stdout(data);
  return event;
}

v1::ExecuteEvent Summary(v1::Outcome outcome, int exit_code) {
  v1::ExecuteEvent event;
  event.mutable_summary()->set_outcome(outcome);
  event.mutable_summary()->set_exit_code(exit_code);
  return event;
}

class CommandRunnerTest : public ::testing::Test {
 protected:
  FakeDaemonHarness harness_;
  FakeDaemon& daemon_ = harness_.daemon;
};

TEST_F(CommandRunnerTest, ExecSendsTheCodeAndTokenAndStreamsTheOutput) {
  daemon_.events = {Output(false, "out 1\n"), Output(true, "err\n"), Output(false, "out 2\n"),
                    Summary(v1::OUTCOME_NONZERO_EXIT, 3)};
  EXPECT_EQ(harness_.Run({"exec", "--timeout-ms", "2000", "-"}, "echo hi; exit 3\n"), 3);
  EXPECT_EQ(harness_.out.str(), "out 1\nout 2\n");
  EXPECT_EQ(harness_.err.str(), "err\n");
  EXPECT_EQ(daemon_.authorization(), "Bearer secret");
  v1::ExecuteRequest request = daemon_.last_execute();
  EXPECT_EQ(request.code(), "echo hi; exit 3\n");
  EXPECT_EQ(request.limits().wall_ms(), 2000);
}

TEST_F(CommandRunnerTest, ExecJsonPrintsExactlyOneObject) {
  daemon_.events = {Output(false, "a"), Output(false, "b"), Summary(v1::OUTCOME_OK, 0)};
  EXPECT_EQ(harness_.Run({"exec", "--json", "-"}, "print('ab')"), 0);
  nlohmann::json json = nlohmann::json::parse(harness_.out.str());
  EXPECT_EQ(json["outcome"], "OK");
  EXPECT_EQ(json["stdout"], "ab");
  EXPECT_EQ(harness_.err.str(), "");
}

TEST_F(CommandRunnerTest, ExecWithoutASummaryIsAWardenFailure) {
  daemon_.events = {Output(false, "a")};
  EXPECT_EQ(harness_.Run({"exec", "-"}, "x"), 125);
  EXPECT_THAT(harness_.err.str(), HasSubstr("without a summary"));
}

TEST_F(CommandRunnerTest, ExecOfAMissingFileIsAUsageError) {
  EXPECT_EQ(harness_.Run({"exec", "/no/such/code.py"}), 2);
  EXPECT_THAT(harness_.err.str(), HasSubstr("/no/such/code.py"));
}

TEST_F(CommandRunnerTest, RpcErrorsAreOneLineAndExit125) {
  EXPECT_EQ(harness_.Run({"session", "show", "s-9"}), 125);
  EXPECT_EQ(harness_.err.str(), "warden: NOT_FOUND: no session s-9\n");
}

TEST_F(CommandRunnerTest, SessionCreatePrintsTheId) {
  EXPECT_EQ(harness_.Run({"session", "create", "--language", "python"}), 0);
  EXPECT_EQ(harness_.out.str(), "s-new\n");
  EXPECT_EQ(harness_.Run({"session", "create", "--json"}), 0);
  EXPECT_EQ(nlohmann::json::parse(harness_.out.str())["id"], "s-new");
}

TEST_F(CommandRunnerTest, UploadSendsTheHeaderFirstThen64KiBChunks) {
  char path[] = "/tmp/warden_upload_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string content(150 * 1024, 'x');
  ASSERT_EQ(write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
  close(fd);

  EXPECT_EQ(harness_.Run({"files", "put", path, "data/big.bin", "--json"}), 0);
  unlink(path);
  std::vector<v1::UploadFileRequest> sent = daemon_.uploaded();
  ASSERT_EQ(sent.size(), 4u);
  ASSERT_TRUE(sent[0].has_header());
  EXPECT_EQ(sent[0].header().session_id(), "s-1");
  EXPECT_EQ(sent[0].header().path(), "data/big.bin");
  EXPECT_EQ(sent[0].header().size(), 150 * 1024);
  EXPECT_EQ(sent[1].chunk().size(), 65536u);
  EXPECT_EQ(sent[2].chunk().size(), 65536u);
  EXPECT_EQ(sent[3].chunk().size(), 150u * 1024 - 2 * 65536);
  EXPECT_EQ(nlohmann::json::parse(harness_.out.str())["size"], 150 * 1024);
}

TEST_F(CommandRunnerTest, UploadFromStdin) {
  EXPECT_EQ(harness_.Run({"files", "put", "-", "in.txt"}, "from stdin"), 0);
  std::vector<v1::UploadFileRequest> sent = daemon_.uploaded();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].header().size(), 0);  // unknown ahead
  EXPECT_EQ(sent[1].chunk(), "from stdin");
}

TEST_F(CommandRunnerTest, DownloadToStdoutAndToAFile) {
  EXPECT_EQ(harness_.Run({"files", "get", "present.txt", "-"}), 0);
  EXPECT_EQ(harness_.out.str(), "0123456789");

  std::string target = ::testing::TempDir() + "/warden_download.txt";
  EXPECT_EQ(harness_.Run({"files", "get", "present.txt", target}), 0);
  std::ifstream in(target);
  std::stringstream got;
  got << in.rdbuf();
  EXPECT_EQ(got.str(), "0123456789");
  unlink(target.c_str());
}

TEST_F(CommandRunnerTest, FailedDownloadLeavesNoFile) {
  std::string target = ::testing::TempDir() + "/warden_missing.txt";
  EXPECT_EQ(harness_.Run({"files", "get", "absent.txt", target}), 125);
  EXPECT_NE(access(target.c_str(), F_OK), 0);
  EXPECT_THAT(harness_.err.str(), HasSubstr("NOT_FOUND"));
}

// Ctrl-C during exec: the call is cancelled (the daemon sees it) and the
// CLI exits 130.
TEST_F(CommandRunnerTest, CtrlCCancelsTheExecutionAndExits130) {
  daemon_.events = {Output(false, "started\n")};
  daemon_.hang_after_events = true;
  // Once the execution has begun, as a terminal would deliver it.
  daemon_.after_events = [] { kill(getpid(), SIGINT); };
  EXPECT_EQ(harness_.Run({"exec", "-"}, "while True: pass", /*cancel_on_signals=*/true), 130);
  EXPECT_TRUE(daemon_.cancelled.WaitForNotificationWithTimeout(absl::Seconds(20)));
  EXPECT_EQ(harness_.out.str(), "started\n");
  EXPECT_THAT(harness_.err.str(), HasSubstr("interrupted"));
}

}  // namespace
}  // namespace warden::cli
