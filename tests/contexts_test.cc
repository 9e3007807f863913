// Sessions that are one machine, end to end over real gRPC: contexts in
// several languages, commands and terminals beside them are processes of one
// sandbox, sharing its files, process table and limits, and nothing with
// another session; commands stream output, take stdin, run in the
// background and are killed on request.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

#include "gtest/gtest.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "server/daemon.h"
#include "warden/v1/executor.grpc.pb.h"

namespace warden {
namespace {

using v1::Executor;

DaemonOptions TestOptions() {
  DaemonOptions options;
  options.listen = {"127.0.0.1:0"};
  options.allow_insecure_loopback = true;
  options.pools = {{"python", 0, {}}, {"javascript", 0, {}}, {"bash", 0, {}}};
  options.executor.host_id_base = static_cast<uid_t>(5'000'000 + (getpid() % 4096) * 512);
  options.executor.host_id_count = 512;
  options.max_concurrent_per_tenant = 64;
  options.queue.max_wait_ms = 30'000;
  options.shutdown_grace_ms = 5'000;
  return options;
}

// What a command printed and how it ended.
struct CommandRun {
  int id = 0;
  std::string out, err;
  v1::CommandEnd end;
  bool ended = false;
  grpc::Status status;
};

class ContextsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto daemon = Daemon::Create(TestOptions());
    ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
    daemon_ = std::move(*daemon);
    ASSERT_TRUE(daemon_->Start().ok());
    stub_ = Executor::NewStub(
        grpc::CreateChannel(daemon_->listening().front(), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (daemon_) daemon_->Shutdown(absl::Seconds(5));
  }

  std::unique_ptr<grpc::ClientContext> Ctx() {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return ctx;
  }
  std::string CreateShared(v1::Language language = v1::LANGUAGE_PYTHON, int64_t memory_mb = 0) {
    v1::CreateSessionRequest request;
    request.set_language(language);
    request.mutable_limits()->set_memory_mb(memory_mb);
    request.set_shared_workspace(true);
    request.add_workspace_aliases("/home/user");
    v1::Session session;
    grpc::Status s = stub_->CreateSession(Ctx().get(), request, &session);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_TRUE(session.shared_workspace());
    return session.id();
  }
  std::string CreateContext(const std::string& session, v1::Language language) {
    v1::CreateContextRequest request;
    request.set_session_id(session);
    request.set_language(language);
    v1::Context context;
    grpc::Status s = stub_->CreateContext(Ctx().get(), request, &context);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(context.language(), language);
    return context.id();
  }
  v1::ExecuteResponse Run(const std::string& session, const std::string& context, const std::string& code) {
    v1::ExecuteRequest request;
    request.set_session_id(session);
    request.set_context_id(context);
    request.set_code(code);
    v1::ExecuteResponse response;
    grpc::Status s = stub_->Execute(Ctx().get(), request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response;
  }
  // Reads a RunCommand or ConnectCommand stream to its end.
  static CommandRun Drain(grpc::ClientReaderInterface<v1::CommandEvent>& reader) {
    CommandRun run;
    v1::CommandEvent event;
    while (reader.Read(&event)) {
      if (event.has_started()) run.id = event.started();
      if (event.has_stdout()) run.out += event.stdout();
      if (event.has_stderr()) run.err += event.stderr();
      if (event.has_end()) {
        run.end = event.end();
        run.ended = true;
      }
    }
    run.status = reader.Finish();
    return run;
  }
  CommandRun Command(const std::string& session, const std::string& script) {
    v1::RunCommandRequest request;
    request.set_session_id(session);
    for (const char* arg : {"/bin/bash", "-c"}) request.add_argv(arg);
    request.add_argv(script);
    auto ctx = Ctx();
    auto reader = stub_->RunCommand(ctx.get(), request);
    return Drain(*reader);
  }
  // Starts a command in the background and returns its id once started.
  int StartBackground(const std::string& session, const std::string& script, bool stdin_open) {
    v1::RunCommandRequest request;
    request.set_session_id(session);
    for (const char* arg : {"/bin/bash", "-c"}) request.add_argv(arg);
    request.add_argv(script);
    request.set_background(true);
    request.set_stdin(stdin_open);
    grpc::ClientContext ctx;
    auto reader = stub_->RunCommand(&ctx, request);
    v1::CommandEvent event;
    EXPECT_TRUE(reader->Read(&event));
    EXPECT_TRUE(event.has_started());
    ctx.TryCancel();  // stop reading: a background command keeps going
    (void)reader->Finish();
    return event.started();
  }
  // Follows a running command until its stdout holds a whole line.
  std::string FirstLine(const std::string& session, int id) {
    v1::ConnectCommandRequest request;
    request.set_session_id(session);
    request.set_command_id(id);
    auto ctx = Ctx();
    auto reader = stub_->ConnectCommand(ctx.get(), request);
    std::string out;
    v1::CommandEvent event;
    while (out.find('\n') == std::string::npos && reader->Read(&event)) out += event.stdout();
    ctx->TryCancel();
    (void)reader->Finish();
    return out.substr(0, out.find('\n'));
  }
  v1::CommandEnd Kill(const std::string& session, int id) {
    v1::SignalCommandRequest kill;
    kill.set_session_id(session);
    kill.set_command_id(id);
    v1::SignalCommandResponse killed;
    EXPECT_TRUE(stub_->SignalCommand(Ctx().get(), kill, &killed).ok());
    return Connect(session, id).end;
  }
  void Close(const std::string& session) {
    v1::CloseSessionRequest close;
    close.set_session_id(session);
    v1::CloseSessionResponse closed;
    ASSERT_TRUE(stub_->CloseSession(Ctx().get(), close, &closed).ok());
  }
  v1::Session Get(const std::string& session) {
    v1::GetSessionRequest request;
    request.set_session_id(session);
    v1::Session out;
    EXPECT_TRUE(stub_->GetSession(Ctx().get(), request, &out).ok());
    return out;
  }
  CommandRun Connect(const std::string& session, int id) {
    v1::ConnectCommandRequest request;
    request.set_session_id(session);
    request.set_command_id(id);
    auto ctx = Ctx();
    auto reader = stub_->ConnectCommand(ctx.get(), request);
    return Drain(*reader);
  }

  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<Executor::Stub> stub_;
};

TEST_F(ContextsTest, ContextsAndCommandsShareOneWorkspace) {
  const std::string session = CreateShared();
  EXPECT_EQ(Run(session, "", "open('/home/user/from_python.txt', 'w').write('py')\n1").outcome(),
            v1::OUTCOME_OK);
  const std::string js = CreateContext(session, v1::LANGUAGE_JAVASCRIPT);
  v1::ExecuteResponse r = Run(session, js,
                              "const fs = require('fs');\n"
                              "fs.writeFileSync('/workspace/from_js.txt', 'js');\n"
                              "fs.readFileSync('/workspace/from_python.txt', 'utf8')");
  EXPECT_EQ(r.outcome(), v1::OUTCOME_OK) << r.DebugString();
  ASSERT_EQ(r.results_size(), 1);
  EXPECT_NE(r.results(0).data().at("text/plain").find("py"), std::string::npos);

  CommandRun ls = Command(session, "cd /home/user && ls && cat from_js.txt && echo made > by_cmd.txt");
  ASSERT_TRUE(ls.status.ok()) << ls.status.error_message();
  ASSERT_TRUE(ls.ended);
  EXPECT_EQ(ls.end.outcome(), v1::OUTCOME_OK) << ls.end.message();
  EXPECT_EQ(ls.end.exit_code(), 0);
  EXPECT_EQ(ls.out, "from_js.txt\nfrom_python.txt\njs");
  EXPECT_GT(ls.id, 0);

  // The command's file, seen by the interpreter, which may also remove it:
  // every process of the session is the same user.
  r = Run(session, "", "import os\nprint(open('by_cmd.txt').read(), end='')\nos.remove('by_cmd.txt')");
  EXPECT_EQ(r.stdout(), "made\n") << r.DebugString();
  v1::ListFilesRequest list;
  list.set_session_id(session);
  v1::ListFilesResponse files;
  ASSERT_TRUE(stub_->ListFiles(Ctx().get(), list, &files).ok());
  std::vector<std::string> paths;
  for (const auto& f : files.files()) paths.push_back(f.path());
  EXPECT_EQ(paths, (std::vector<std::string>{"from_js.txt", "from_python.txt"}));
}

TEST_F(ContextsTest, EachContextKeepsItsOwnState) {
  const std::string session = CreateShared();
  const std::string second = CreateContext(session, v1::LANGUAGE_PYTHON);
  EXPECT_EQ(Run(session, "", "x = 1").outcome(), v1::OUTCOME_OK);
  EXPECT_EQ(Run(session, second, "x = 2").outcome(), v1::OUTCOME_OK);
  EXPECT_EQ(Run(session, "", "x").results(0).data().at("text/plain"), "1");
  EXPECT_EQ(Run(session, session, "x").results(0).data().at("text/plain"), "1");
  EXPECT_EQ(Run(session, second, "x").results(0).data().at("text/plain"), "2");

  v1::ListContextsRequest list;
  list.set_session_id(session);
  v1::ListContextsResponse contexts;
  ASSERT_TRUE(stub_->ListContexts(Ctx().get(), list, &contexts).ok());
  ASSERT_EQ(contexts.contexts_size(), 2);
  EXPECT_EQ(contexts.contexts(0).id(), session);
  EXPECT_EQ(contexts.contexts(1).id(), second);
  EXPECT_EQ(contexts.contexts(1).execution_count(), 2);

  // A restart empties the interpreter and keeps the workspace.
  EXPECT_EQ(Run(session, second, "open('keep', 'w').write('k')").outcome(), v1::OUTCOME_OK);
  v1::RestartContextRequest restart;
  restart.set_session_id(session);
  restart.set_context_id(second);
  v1::Context restarted;
  ASSERT_TRUE(stub_->RestartContext(Ctx().get(), restart, &restarted).ok());
  EXPECT_EQ(Run(session, second, "'x' in globals(), open('keep').read()").results(0).data().at("text/plain"),
            "(False, 'k')");

  v1::RemoveContextRequest remove;
  remove.set_session_id(session);
  remove.set_context_id(second);
  v1::RemoveContextResponse removed;
  ASSERT_TRUE(stub_->RemoveContext(Ctx().get(), remove, &removed).ok());
  v1::ExecuteRequest gone;
  gone.set_session_id(session);
  gone.set_context_id(second);
  gone.set_code("1");
  v1::ExecuteResponse response;
  grpc::Status s = stub_->Execute(Ctx().get(), gone, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  remove.set_context_id(session);
  s = stub_->RemoveContext(Ctx().get(), remove, &removed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(ContextsTest, CommandsReportExitCodesAndStderr) {
  const std::string session = CreateShared(v1::LANGUAGE_BASH);
  CommandRun run = Command(session, "echo out; echo err >&2; exit 3");
  ASSERT_TRUE(run.ended);
  EXPECT_EQ(run.end.outcome(), v1::OUTCOME_NONZERO_EXIT);
  EXPECT_EQ(run.end.exit_code(), 3);
  EXPECT_EQ(run.out, "out\n");
  EXPECT_EQ(run.err, "err\n");

  // Contained as any sandboxed program: seccomp on, no network but loopback.
  run = Command(session,
                "grep -c '^Seccomp:.2' /proc/self/status; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' \\n'");
  EXPECT_EQ(run.end.outcome(), v1::OUTCOME_OK) << run.err;
  EXPECT_EQ(run.out, "1\nlo") << run.out;
}

TEST_F(ContextsTest, BackgroundCommandsTakeStdinAndCanBeFollowedLater) {
  const std::string session = CreateShared();
  const int id = StartBackground(session, "while read -r line; do echo \"got $line\"; done; echo bye", true);
  v1::SendCommandInputRequest input;
  input.set_session_id(session);
  input.set_command_id(id);
  input.set_data("one\ntwo\n");
  input.set_close(true);
  v1::SendCommandInputResponse sent;
  ASSERT_TRUE(stub_->SendCommandInput(Ctx().get(), input, &sent).ok());
  CommandRun run = Connect(session, id);
  ASSERT_TRUE(run.ended) << run.status.error_message();
  EXPECT_EQ(run.out, "got one\ngot two\nbye\n");
  EXPECT_EQ(run.end.outcome(), v1::OUTCOME_OK);
}

TEST_F(ContextsTest, CommandsCanBeListedAndKilled) {
  const std::string session = CreateShared();
  const int id = StartBackground(session, "echo started; exec sleep 600", false);
  v1::ListCommandsRequest list;
  list.set_session_id(session);
  v1::ListCommandsResponse commands;
  ASSERT_TRUE(stub_->ListCommands(Ctx().get(), list, &commands).ok());
  ASSERT_EQ(commands.commands_size(), 1);
  EXPECT_EQ(commands.commands(0).command_id(), id);
  EXPECT_TRUE(commands.commands(0).running());

  // Follow it until it runs, then kill it.
  v1::ConnectCommandRequest connect;
  connect.set_session_id(session);
  connect.set_command_id(id);
  auto ctx = Ctx();
  auto reader = stub_->ConnectCommand(ctx.get(), connect);
  v1::CommandEvent event;
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.started(), id);
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.stdout(), "started\n");
  v1::SignalCommandRequest kill;
  kill.set_session_id(session);
  kill.set_command_id(id);
  v1::SignalCommandResponse killed;
  ASSERT_TRUE(stub_->SignalCommand(Ctx().get(), kill, &killed).ok());
  // A kill answers once the process is gone: listed as ended, its pid free
  // for the next command that looks (E2B's pty/kill.test.ts: `kill -0 PID`).
  ASSERT_TRUE(stub_->ListCommands(Ctx().get(), list, &commands).ok());
  ASSERT_EQ(commands.commands_size(), 1);
  EXPECT_FALSE(commands.commands(0).running());
  EXPECT_EQ(Command(session, absl::StrCat("kill -0 ", id)).end.exit_code(), 1);
  CommandRun run = Drain(*reader);
  ASSERT_TRUE(run.ended);
  EXPECT_EQ(Connect(session, id).out, "started\n");  // and from the start, again
  EXPECT_EQ(run.end.outcome(), v1::OUTCOME_SIGNALED);
  EXPECT_EQ(run.end.signal(), SIGKILL);
}

TEST_F(ContextsTest, AKillSentAsTheCommandStartsIsNotLost) {
  const std::string session = CreateShared();
  const int id = StartBackground(session, "exec sleep 600", false);
  v1::SignalCommandRequest kill;
  kill.set_session_id(session);
  kill.set_command_id(id);
  v1::SignalCommandResponse killed;
  ASSERT_TRUE(stub_->SignalCommand(Ctx().get(), kill, &killed).ok());
  CommandRun run = Connect(session, id);
  ASSERT_TRUE(run.ended);
  EXPECT_EQ(run.end.outcome(), v1::OUTCOME_SIGNALED);
}

TEST_F(ContextsTest, ClosingTheSessionEndsItsCommands) {
  const std::string session = CreateShared();
  v1::RunCommandRequest request;
  request.set_session_id(session);
  for (const char* arg : {"/bin/bash", "-c", "echo up; exec sleep 600"}) request.add_argv(arg);
  auto ctx = Ctx();
  auto reader = stub_->RunCommand(ctx.get(), request);
  v1::CommandEvent event;
  ASSERT_TRUE(reader->Read(&event));  // started
  ASSERT_TRUE(reader->Read(&event));  // "up": it runs
  EXPECT_EQ(event.stdout(), "up\n");
  v1::CloseSessionRequest close;
  close.set_session_id(session);
  v1::CloseSessionResponse closed;
  ASSERT_TRUE(stub_->CloseSession(Ctx().get(), close, &closed).ok());
  CommandRun run = Drain(*reader);
  ASSERT_TRUE(run.ended);
  EXPECT_EQ(run.end.outcome(), v1::OUTCOME_SIGNALED);
}

TEST_F(ContextsTest, PlainSessionsSayHowToGetContexts) {
  v1::CreateSessionRequest request;
  v1::Session plain;
  ASSERT_TRUE(stub_->CreateSession(Ctx().get(), request, &plain).ok());
  EXPECT_FALSE(plain.shared_workspace());
  v1::CreateContextRequest create;
  create.set_session_id(plain.id());
  v1::Context context;
  grpc::Status s = stub_->CreateContext(Ctx().get(), create, &context);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("shared_workspace"), std::string::npos) << s.error_message();

  CommandRun run = Command("s-nope", "true");
  EXPECT_EQ(run.status.error_code(), grpc::StatusCode::NOT_FOUND);
  const std::string session = CreateShared();
  v1::RunCommandRequest empty;
  empty.set_session_id(session);
  auto ctx = Ctx();
  auto reader = stub_->RunCommand(ctx.get(), empty);
  run = Drain(*reader);
  EXPECT_EQ(run.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ContextsTest, SetSessionTtlMovesTheExpiry) {
  const std::string session = CreateShared();
  v1::SetSessionTtlRequest request;
  request.set_session_id(session);
  request.set_ttl_seconds(5);
  v1::Session updated;
  ASSERT_TRUE(stub_->SetSessionTtl(Ctx().get(), request, &updated).ok());
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  EXPECT_LE(updated.expires_unix_ms(), now_ms + 5'000);
  EXPECT_GT(updated.expires_unix_ms(), now_ms);
  request.set_ttl_seconds(-1);
  EXPECT_EQ(stub_->SetSessionTtl(Ctx().get(), request, &updated).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // 0: its TTL ends now, and the reaper closes it within about a second.
  request.set_ttl_seconds(0);
  ASSERT_TRUE(stub_->SetSessionTtl(Ctx().get(), request, &updated).ok());
  EXPECT_LE(updated.expires_unix_ms(), absl::ToUnixMillis(absl::Now()));
  v1::GetSessionRequest get;
  get.set_session_id(session);
  grpc::Status got;
  for (const absl::Time deadline = absl::Now() + absl::Seconds(10); absl::Now() < deadline;) {
    v1::Session s;
    got = stub_->GetSession(Ctx().get(), get, &s);
    if (!got.ok()) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(got.error_code(), grpc::StatusCode::NOT_FOUND) << got.error_message();
}

// ---------------------------------------------------------------------------
// One session, one accounting and limit unit: its contexts' and commands'
// cgroups are nested in the session's, which carries its limits.

// Python that forks until the kernel refuses, holding every child, and says
// how many it got.
constexpr char kForkBomb[] = R"(exec python3 - <<'EOF'
import os, signal
n = 0
while True:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        signal.pause()
        os._exit(0)
    n += 1
print('forked', n, flush=True)
signal.pause()
EOF
)";

constexpr char kForkOnce[] = R"py(import os
try:
    pid = os.fork()
except OSError as e:
    print('fork failed', e.errno)
else:
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    print('forked'))py";

// 200 MiB, written so that every page is resident.
constexpr char kAllocate[] =
    R"sh(exec python3 -c "b = bytearray(b'\x01') * (200 << 20); print('survived')")sh";

TEST_F(ContextsTest, TheSessionsMemoryLimitHoldsForAllItsProcessesTogether) {
  constexpr int64_t kLimitMb = 256;
  // Alone, the command's 200 MiB fit in the session's 256.
  const std::string alone = CreateShared(v1::LANGUAGE_PYTHON, kLimitMb);
  CommandRun fits = Command(alone, kAllocate);
  ASSERT_TRUE(fits.ended) << fits.status.error_message();
  EXPECT_EQ(fits.end.outcome(), v1::OUTCOME_OK) << fits.err;
  EXPECT_EQ(fits.out, "survived\n");
  Close(alone);

  // Beside two contexts holding 48 MiB each, they do not: the session's
  // limit holds for all three together, and the kernel's victim (the
  // command, which asks to be) is the one that ends with MEMORY_LIMIT.
  const std::string session = CreateShared(v1::LANGUAGE_PYTHON, kLimitMb);
  const std::string js = CreateContext(session, v1::LANGUAGE_JAVASCRIPT);
  EXPECT_EQ(Run(session, "", "x = bytearray(b'\\x01') * (48 << 20)\nprint(len(x))").stdout(),
            "50331648\n");
  EXPECT_EQ(Run(session, js, "globalThis.x = Buffer.alloc(48 << 20, 1); console.log(x.length)").stdout(),
            "50331648\n");
  EXPECT_GE(Get(session).memory_bytes(), 96LL << 20) << "the session's memory is its contexts' together";

  CommandRun run = Command(session, absl::StrCat("echo 1000 > /proc/self/oom_score_adj && ", kAllocate));
  ASSERT_TRUE(run.ended) << run.status.error_message();
  EXPECT_EQ(run.end.outcome(), v1::OUTCOME_MEMORY_LIMIT) << run.out << run.err;
  EXPECT_EQ(run.out, "");

  // The contexts live on with their data, and are not blamed.
  v1::ExecuteResponse py = Run(session, "", "print(len(x))");
  EXPECT_EQ(py.outcome(), v1::OUTCOME_OK);
  EXPECT_EQ(py.stdout(), "50331648\n");
  EXPECT_EQ(Run(session, js, "console.log(x.length)").stdout(), "50331648\n");
  v1::ListContextsRequest list;
  list.set_session_id(session);
  v1::ListContextsResponse contexts;
  ASSERT_TRUE(stub_->ListContexts(Ctx().get(), list, &contexts).ok());
  ASSERT_EQ(contexts.contexts_size(), 2);
  const int64_t whole = contexts.session_memory_bytes();
  EXPECT_LE(whole, kLimitMb << 20);
  EXPECT_GT(whole, (96LL + 32) << 20) << "the command's memory counts too";
  for (const v1::Context& context : contexts.contexts()) {
    EXPECT_EQ(context.state(), v1::SESSION_STATE_IDLE) << context.id();
    // The machine's, which all the session's processes share.
    EXPECT_GE(context.memory_bytes(), 96LL << 20) << context.id();
    EXPECT_LE(context.memory_bytes(), whole) << context.id();
  }
  EXPECT_EQ(Get(session).memory_bytes(), whole);

  // The daemon and other sessions carry on.
  v1::ExecuteRequest other;
  other.set_code("print(6 * 7)");
  v1::ExecuteResponse answer;
  ASSERT_TRUE(stub_->Execute(Ctx().get(), other, &answer).ok());
  EXPECT_EQ(answer.stdout(), "42\n");
}

TEST_F(ContextsTest, TheSessionsPidsLimitIsSharedByItsProcesses) {
  const std::string session = CreateShared();
  const std::string other = CreateShared();
  ASSERT_EQ(Run(session, "", kForkOnce).stdout(), "forked\n");

  const int bomb = StartBackground(session, kForkBomb, false);
  const std::string line = FirstLine(session, bomb);
  std::vector<std::string> words = absl::StrSplit(line, ' ');
  int forked = 0;
  ASSERT_EQ(words.size(), 2u) << line;
  ASSERT_TRUE(absl::SimpleAtoi(words[1], &forked)) << line;
  EXPECT_GT(forked, 8);
  EXPECT_LT(forked, 64) << "bounded by the session's pids limit (64), not by one of its own";

  // The session's interpreter, which could fork before, finds the
  // session's pids used up; another session does not.
  EXPECT_EQ(Run(session, "", kForkOnce).stdout(), "fork failed 11\n");
  EXPECT_EQ(Run(other, "", kForkOnce).stdout(), "forked\n");

  EXPECT_EQ(Kill(session, bomb).outcome(), v1::OUTCOME_SIGNALED);
  // The pids come back once the bomb's sandbox is reaped.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  std::string out;
  while ((out = Run(session, "", kForkOnce).stdout()) != "forked\n" && absl::Now() < deadline) {
  }
  EXPECT_EQ(out, "forked\n");
}

TEST_F(ContextsTest, ASessionsProcessesSeeEachOtherAndNothingOfAnotherSession) {
  const std::string session = CreateShared();
  const std::string other = CreateShared();
  ASSERT_EQ(Run(session, "", "x = 41\nprint('set')").stdout(), "set\n");
  ASSERT_EQ(Run(other, "", "open('/tmp/other-secret', 'w').write('s')\nprint('ok')").stdout(), "ok\n");
  const int sleeper = StartBackground(session, "echo up; exec sleep 600", false);
  ASSERT_EQ(FirstLine(session, sleeper), "up");

  // One machine: a command sees the session's interpreter and its other
  // command (whose id is its pid there), and may signal it.
  CommandRun run = Command(session, absl::StrCat("ps -e -o pid=,args=; kill -0 ", sleeper, " && echo can-signal"));
  ASSERT_TRUE(run.ended) << run.status.error_message();
  EXPECT_TRUE(absl::StrContains(run.out, "warden_kernel.py")) << run.out;
  EXPECT_TRUE(absl::StrContains(run.out, absl::StrCat(sleeper, " sleep 600"))) << run.out;
  EXPECT_TRUE(absl::EndsWith(run.out, "can-signal\n")) << run.out;

  // Another session sees none of it, reads none of its files, and a kill of
  // everything it may signal ends its own processes only.
  run = Command(other, "ps -e -o args=; cat /tmp/other-secret; ls /proc | grep -c '^[0-9]'");
  EXPECT_FALSE(absl::StrContains(run.out, "sleep 600")) << run.out;
  run = Command(session, "cat /tmp/other-secret");
  EXPECT_EQ(run.end.outcome(), v1::OUTCOME_NONZERO_EXIT);
  EXPECT_TRUE(absl::StrContains(run.err, "No such file")) << run.err;
  run = Command(other, "kill -KILL -1; echo still here");
  v1::ExecuteResponse after = Run(session, "", "print(x + 1)");
  EXPECT_EQ(after.outcome(), v1::OUTCOME_OK);
  EXPECT_EQ(after.stdout(), "42\n");
  EXPECT_EQ(FirstLine(session, sleeper), "up");  // still running
  v1::ListCommandsRequest list;
  list.set_session_id(session);
  v1::ListCommandsResponse commands;
  ASSERT_TRUE(stub_->ListCommands(Ctx().get(), list, &commands).ok());
  bool running = false;
  for (const auto& c : commands.commands()) running = running || (c.command_id() == sleeper && c.running());
  EXPECT_TRUE(running);
}

// The directories of this process's subtrees' names starting with `prefix`.
std::vector<std::string> Subdirectories(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  while (struct dirent* e = d != nullptr ? readdir(d) : nullptr) {
    const std::string path = dir + "/" + e->d_name;
    struct stat st;
    if (absl::StartsWith(e->d_name, prefix) && stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      out.push_back(path);
    }
  }
  if (d != nullptr) closedir(d);
  return out;
}

TEST_F(ContextsTest, EnvironmentVariablesForTheSessionAndForEachCell) {
  v1::CreateSessionRequest request;
  request.set_shared_workspace(true);
  (*request.mutable_env())["FOO"] = "session";
  v1::Session created;
  ASSERT_TRUE(stub_->CreateSession(Ctx().get(), request, &created).ok());
  const std::string session = created.id();
  EXPECT_EQ(Command(session, "echo $FOO").out, "session\n");
  EXPECT_EQ(Run(session, "", "import os; print(os.environ['FOO'])").stdout(), "session\n");
  v1::ExecuteRequest cell;
  cell.set_session_id(session);
  cell.set_code("import os; print(os.environ['FOO'], os.environ['BAR'])");
  (*cell.mutable_env())["FOO"] = "cell";
  (*cell.mutable_env())["BAR"] = "b";
  v1::ExecuteResponse r;
  ASSERT_TRUE(stub_->Execute(Ctx().get(), cell, &r).ok());
  EXPECT_EQ(r.stdout(), "cell b\n");
  // Only for that cell: the session's value is back, the new one gone.
  EXPECT_EQ(Run(session, "", "import os; print(os.environ['FOO'], 'BAR' in os.environ)").stdout(),
            "session False\n");
  const std::string bash = CreateContext(session, v1::LANGUAGE_BASH);
  cell.set_context_id(bash);
  cell.set_code("echo $FOO $BAR");
  ASSERT_TRUE(stub_->Execute(Ctx().get(), cell, &r).ok());
  EXPECT_EQ(r.stdout(), "cell b\n");
  EXPECT_EQ(Run(session, bash, "echo \"$FOO ${BAR-unset}\"").stdout(), "session unset\n");
  // A plain session takes none.
  v1::CreateSessionRequest plain;
  (*plain.mutable_env())["X"] = "1";
  EXPECT_EQ(stub_->CreateSession(Ctx().get(), plain, &created).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ContextsTest, AContextMayWorkInAnyDirectory) {
  const std::string session = CreateShared();
  v1::CreateContextRequest create;
  create.set_session_id(session);
  create.set_language(v1::LANGUAGE_PYTHON);
  create.set_cwd("/tmp");
  v1::Context context;
  ASSERT_TRUE(stub_->CreateContext(Ctx().get(), create, &context).ok());
  EXPECT_EQ(context.cwd(), "/tmp");
  EXPECT_EQ(Run(session, context.id(), "import os; print(os.getcwd())").stdout(), "/tmp\n");
  EXPECT_EQ(Run(session, "", "import os; print(os.getcwd())").stdout(), "/workspace\n");
  create.set_cwd("relative");
  EXPECT_EQ(stub_->CreateContext(Ctx().get(), create, &context).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ContextsTest, ACommandOnATerminalTakesInputAndResizes) {
  const std::string session = CreateShared();
  v1::RunCommandRequest request;
  request.set_session_id(session);
  for (const char* arg : {"/bin/sh", "-c", "stty size; read line; stty size; echo got:$line"}) request.add_argv(arg);
  request.mutable_terminal()->set_cols(90);
  request.mutable_terminal()->set_rows(20);
  auto ctx = Ctx();
  auto reader = stub_->RunCommand(ctx.get(), request);
  v1::CommandEvent event;
  ASSERT_TRUE(reader->Read(&event));
  const int id = event.started();
  std::string out;
  while (out.find("20 90") == std::string::npos && reader->Read(&event)) out += event.stdout();
  v1::ResizeTerminalRequest resize;
  resize.set_session_id(session);
  resize.set_command_id(id);
  resize.mutable_size()->set_cols(100);
  resize.mutable_size()->set_rows(30);
  v1::ResizeTerminalResponse resized;
  ASSERT_TRUE(stub_->ResizeTerminal(Ctx().get(), resize, &resized).ok());
  v1::SendCommandInputRequest input;
  input.set_session_id(session);
  input.set_command_id(id);
  input.set_data("hello\n");
  v1::SendCommandInputResponse sent;
  ASSERT_TRUE(stub_->SendCommandInput(Ctx().get(), input, &sent).ok());
  CommandRun rest = Drain(*reader);
  out += rest.out;
  EXPECT_TRUE(absl::StrContains(out, "30 100")) << out;
  EXPECT_TRUE(absl::StrContains(out, "got:hello")) << out;
  EXPECT_EQ(rest.end.outcome(), v1::OUTCOME_OK);
  // Only a command on a terminal can be resized.
  const int plain = StartBackground(session, "sleep 600", false);
  resize.set_command_id(plain);
  EXPECT_EQ(stub_->ResizeTerminal(Ctx().get(), resize, &resized).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  Kill(session, plain);
}

TEST_F(ContextsTest, WatchPathReportsChangesUnderADirectory) {
  const std::string session = CreateShared();
  ASSERT_EQ(Command(session, "mkdir -p /tmp/w/old").end.outcome(), v1::OUTCOME_OK);
  v1::WatchPathRequest request;
  request.set_session_id(session);
  request.set_path("/tmp/w");
  request.set_recursive(true);
  auto ctx = Ctx();
  auto reader = stub_->WatchPath(ctx.get(), request);
  v1::WatchEvent event;
  ASSERT_TRUE(reader->Read(&event));
  ASSERT_TRUE(event.started());
  ASSERT_EQ(Command(session, "echo x > /tmp/w/a.txt; mkdir /tmp/w/new; echo y > /tmp/w/old/b.txt").end.outcome(),
            v1::OUTCOME_OK);
  std::vector<std::string> seen;
  while (reader->Read(&event)) {
    seen.push_back(absl::StrCat(v1::WatchEvent::Type_Name(event.type()), " ", event.name()));
    if (event.name() == "a.txt" && event.type() == v1::WatchEvent::TYPE_CREATE) {
      EXPECT_EQ(event.entry().type(), "file");
      EXPECT_EQ(event.entry().path(), "/tmp/w/a.txt");
    }
    if (event.name() == "old/b.txt" && event.type() == v1::WatchEvent::TYPE_WRITE) break;
  }
  EXPECT_NE(std::find(seen.begin(), seen.end(), "TYPE_CREATE new"), seen.end()) << absl::StrJoin(seen, ", ");
  // What a new directory holds before its watch is in place is reported
  // too, once: a tree moved in whole (always so), and a directory filled
  // at once (the watcher may or may not be quicker than the shell).
  ASSERT_EQ(Command(session,
                    "mkdir -p /tmp/prep/x/y && echo q > /tmp/prep/x/y/d.txt && mv /tmp/prep /tmp/w/moved && "
                    "mkdir /tmp/w/fresh && echo r > /tmp/w/fresh/e.txt && echo s > /tmp/w/end.txt")
                .end.outcome(),
            v1::OUTCOME_OK);
  seen.clear();
  while (reader->Read(&event)) {
    seen.push_back(absl::StrCat(v1::WatchEvent::Type_Name(event.type()), " ", event.name()));
    if (event.name() == "end.txt" && event.type() == v1::WatchEvent::TYPE_WRITE) break;
  }
  for (const char* created : {"moved", "moved/x", "moved/x/y", "moved/x/y/d.txt", "fresh", "fresh/e.txt"}) {
    EXPECT_EQ(std::count(seen.begin(), seen.end(), absl::StrCat("TYPE_CREATE ", created)), 1)
        << created << " in " << absl::StrJoin(seen, ", ");
  }
  ctx->TryCancel();
  (void)reader->Finish();
  // A file, or nothing, cannot be watched.
  request.set_path("/tmp/w/a.txt");
  auto ctx2 = Ctx();
  auto file = stub_->WatchPath(ctx2.get(), request);
  while (file->Read(&event)) {
  }
  EXPECT_EQ(file->Finish().error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  request.set_path("/tmp/nothing");
  auto ctx3 = Ctx();
  auto none = stub_->WatchPath(ctx3.get(), request);
  while (none->Read(&event)) {
  }
  EXPECT_EQ(none->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

// The polled watcher (CreateWatcher, GetWatcherEvents, RemoveWatcher): the
// same watch as WatchPath, held by the daemon between calls.
TEST_F(ContextsTest, PolledWatchersKeepEventsUntilAskedAndEndWithTheirSession) {
  const std::string session = CreateShared();
  ASSERT_EQ(Command(session, "mkdir -p /tmp/p/old").end.outcome(), v1::OUTCOME_OK);
  auto create = [&](const std::string& path, bool include_entry, grpc::Status* status = nullptr) {
    v1::CreateWatcherRequest request;
    request.set_session_id(session);
    request.set_path(path);
    request.set_recursive(true);
    request.set_include_entry(include_entry);
    v1::Watcher watcher;
    grpc::Status s = stub_->CreateWatcher(Ctx().get(), request, &watcher);
    if (status != nullptr) *status = s;
    return watcher.watcher_id();
  };
  auto take = [&](const std::string& id, grpc::Status* status = nullptr) {
    v1::GetWatcherEventsRequest request;
    request.set_session_id(session);
    request.set_watcher_id(id);
    v1::GetWatcherEventsResponse response;
    grpc::Status s = stub_->GetWatcherEvents(Ctx().get(), request, &response);
    if (status != nullptr) *status = s;
    return response;
  };
  // Every event until `last` (type and name) has come; the rest stay for the next call.
  auto until = [&](const std::string& id, const std::string& last) {
    std::vector<v1::WatchEvent> events;
    for (const absl::Time deadline = absl::Now() + absl::Seconds(60); absl::Now() < deadline;) {
      const v1::GetWatcherEventsResponse taken = take(id);
      for (const v1::WatchEvent& e : taken.events()) {
        events.push_back(e);
        if (absl::StrCat(v1::WatchEvent::Type_Name(e.type()), " ", e.name()) == last) return events;
      }
      if (taken.events_size() == 0) absl::SleepFor(absl::Milliseconds(20));
    }
    ADD_FAILURE() << "no " << last << " in " << events.size() << " events";
    return events;
  };

  const std::string with_entries = create("/tmp/p", true);
  const std::string bare = create("/tmp/p", false);
  ASSERT_FALSE(with_entries.empty());
  ASSERT_NE(with_entries, bare);
  ASSERT_EQ(Command(session, "echo x > /tmp/p/a.txt; mkdir /tmp/p/new; echo y > /tmp/p/new/b.txt").end.outcome(),
            v1::OUTCOME_OK);
  std::vector<v1::WatchEvent> events = until(with_entries, "TYPE_CREATE new/b.txt");
  for (const v1::WatchEvent& e : events) {
    EXPECT_FALSE(e.started());
    if (e.name() == "a.txt" && e.type() == v1::WatchEvent::TYPE_CREATE) {
      EXPECT_EQ(e.entry().path(), "/tmp/p/a.txt");
    }
  }
  for (const v1::WatchEvent& e : until(bare, "TYPE_CREATE new/b.txt")) EXPECT_FALSE(e.has_entry()) << e.name();
  EXPECT_EQ(take(with_entries).events_size(), 0);  // handed over: not again

  // A session's watchers are its own: another session names none of them.
  const std::string other = CreateShared();
  v1::GetWatcherEventsRequest foreign;
  foreign.set_session_id(other);
  foreign.set_watcher_id(with_entries);
  v1::GetWatcherEventsResponse ignored;
  EXPECT_EQ(stub_->GetWatcherEvents(Ctx().get(), foreign, &ignored).error_code(), grpc::StatusCode::NOT_FOUND);

  // A directory that cannot be watched is refused at once.
  grpc::Status refused;
  create("/tmp/nothing", false, &refused);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::NOT_FOUND) << refused.error_message();
  create("/tmp/p/a.txt", false, &refused);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << refused.error_message();

  // At most 16 per session; a removed one is gone and frees its place.
  std::vector<std::string> more;
  for (int i = 2; i < 16; ++i) more.push_back(create("/tmp/p", false));
  create("/tmp/p", false, &refused);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_TRUE(absl::StrContains(refused.error_message(), "remove one")) << refused.error_message();
  v1::RemoveWatcherRequest remove;
  remove.set_session_id(session);
  remove.set_watcher_id(bare);
  v1::RemoveWatcherResponse removed;
  ASSERT_TRUE(stub_->RemoveWatcher(Ctx().get(), remove, &removed).ok());
  grpc::Status gone;
  take(bare, &gone);
  EXPECT_EQ(gone.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(stub_->RemoveWatcher(Ctx().get(), remove, &removed).error_code(), grpc::StatusCode::NOT_FOUND);
  const std::string again = create("/tmp/p", false, &refused);
  EXPECT_TRUE(refused.ok()) << refused.error_message();

  // More events waiting than a watcher keeps: those kept are handed over,
  // then it says it stopped. A second watcher, polled all along the flood
  // of 20000 creations (a background command), tells when it has come (both
  // see the same changes); `again` is fetched only then. Should it still
  // have been behind, that fetch drained it: another flood.
  for (const std::string& id : more) {
    remove.set_watcher_id(id);
    ASSERT_TRUE(stub_->RemoveWatcher(Ctx().get(), remove, &removed).ok());
  }
  const std::string probe = create("/tmp/p", false);
  grpc::Status full;
  int last_batch = -1;
  for (int round = 0; round < 3 && full.ok(); ++round) {
    const std::string dir = absl::StrCat("flood", round);
    StartBackground(session,
                    absl::StrCat("mkdir /tmp/p/", dir, " && cd /tmp/p/", dir,
                                 " && for i in $(seq 20000); do : > f$i; done"),
                    /*stdin_open=*/false);
    until(probe, absl::StrCat("TYPE_CREATE ", dir, "/f20000"));
    for (;;) {
      v1::GetWatcherEventsResponse batch = take(again, &full);
      if (!full.ok() || batch.events_size() == 0) break;
      last_batch = batch.events_size();
    }
  }
  EXPECT_EQ(full.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << full.error_message();
  EXPECT_TRUE(absl::StrContains(full.error_message(), "remove this watcher")) << full.error_message();
  EXPECT_EQ(last_batch, 16384);  // what it kept, handed over before it said so

  // The session's end takes its watchers with it.
  v1::CloseSessionRequest close;
  close.set_session_id(session);
  v1::CloseSessionResponse closed;
  ASSERT_TRUE(stub_->CloseSession(Ctx().get(), close, &closed).ok());
  take(with_entries, &gone);
  EXPECT_EQ(gone.error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ContextsTest, UploadsKeepTheirMetadata) {
  const std::string session = CreateShared();
  auto upload = [&](const std::string& path, const std::map<std::string, std::string>& metadata) {
    v1::FileInfo info;
    auto ctx = Ctx();
    auto writer = stub_->UploadFile(ctx.get(), &info);
    v1::UploadFileRequest header;
    header.mutable_header()->set_session_id(session);
    header.mutable_header()->set_path(path);
    header.mutable_header()->mutable_metadata()->insert(metadata.begin(), metadata.end());
    v1::UploadFileRequest chunk;
    chunk.set_chunk("data");
    writer->Write(header);
    writer->Write(chunk);
    writer->WritesDone();
    EXPECT_TRUE(writer->Finish().ok());
    return info;
  };
  v1::FileInfo info = upload("/tmp/m.txt", {{"author", "me"}});
  EXPECT_EQ(info.path(), "/tmp/m.txt");
  EXPECT_EQ(info.size(), 4);
  EXPECT_EQ(info.metadata().at("author"), "me");
  v1::ListFilesRequest list;
  list.set_session_id(session);
  list.set_path("/tmp");
  list.set_depth(1);
  v1::ListFilesResponse files;
  ASSERT_TRUE(stub_->ListFiles(Ctx().get(), list, &files).ok());
  bool listed = false;
  for (const auto& f : files.files()) listed = listed || (f.path() == "/tmp/m.txt" && f.metadata().at("author") == "me");
  EXPECT_TRUE(listed);
  v1::MovePathRequest move;
  move.set_session_id(session);
  move.set_from("/tmp/m.txt");
  move.set_to("moved.txt");
  v1::FileInfo moved;
  grpc::Status moving = stub_->MovePath(Ctx().get(), move, &moved);
  ASSERT_TRUE(moving.ok()) << moving.error_message();
  EXPECT_EQ(moved.path(), "moved.txt");
  EXPECT_EQ(moved.metadata().at("author"), "me");
  EXPECT_TRUE(upload("moved.txt", {}).metadata().empty());  // a new upload clears it
}

TEST_F(ContextsTest, AMachinesPathCallsStayInItsSandboxWhateverItsLinksSay) {
  const std::string session = CreateShared();
  // A file of the host's, at a path a link inside may name.
  const std::string host = absl::StrCat("/tmp/warden-host-secret-", getpid());
  {
    std::ofstream out(host);
    out << "host";
  }
  CommandRun run = Command(session, absl::StrCat(
      "echo inside > ", host, "-in; ln -s ", host, " /tmp/abs; ln -s ", host, "-in /tmp/abs-in; "
      "ln -s ../../../../../../..", host, " /home/user/up; ln -s /proc/1/root/etc/hostname /tmp/magic; "
      "ln -s /proc/self/root/etc/passwd /tmp/self"));
  ASSERT_EQ(run.end.outcome(), v1::OUTCOME_OK) << run.err;
  auto read = [&](const std::string& path) {
    v1::DownloadFileRequest request;
    request.set_session_id(session);
    request.set_path(path);
    auto ctx = Ctx();
    auto reader = stub_->DownloadFile(ctx.get(), request);
    std::string data;
    v1::FileChunk chunk;
    while (reader->Read(&chunk)) data += chunk.data();
    grpc::Status s = reader->Finish();
    return std::make_pair(s, data);
  };
  // Links resolve as they do inside the sandbox: from its root, never the host's.
  EXPECT_EQ(read("/tmp/abs").first.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(read("up").first.error_code(), grpc::StatusCode::NOT_FOUND);
  auto inside = read("/tmp/abs-in");
  EXPECT_TRUE(inside.first.ok()) << inside.first.error_message();
  EXPECT_EQ(inside.second, "inside\n");
  // Magic links (/proc/PID/root and kin) are never followed, named or
  // linked to; /proc/self names no process of the sandbox's to the daemon.
  EXPECT_EQ(read("/tmp/magic").first.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(read("/proc/1/root/etc/hostname").first.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(read("/tmp/self").first.error_code(), grpc::StatusCode::NOT_FOUND);
  // As the sandbox's user: its system files are read-only, its own are its own.
  v1::MakeDirectoryRequest mkdir;
  mkdir.set_session_id(session);
  mkdir.set_path("/etc/made");
  v1::FileInfo made;
  EXPECT_EQ(stub_->MakeDirectory(Ctx().get(), mkdir, &made).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  mkdir.set_path("/tmp/made");
  ASSERT_TRUE(stub_->MakeDirectory(Ctx().get(), mkdir, &made).ok());
  EXPECT_EQ(made.path(), "/tmp/made");
  EXPECT_EQ(made.owner(), "user");
  v1::StatPathRequest stat;
  stat.set_session_id(session);
  stat.set_path("/etc/passwd");
  v1::FileInfo passwd;
  ASSERT_TRUE(stub_->StatPath(Ctx().get(), stat, &passwd).ok());
  EXPECT_EQ(passwd.owner(), "root");
  std::ifstream check(host);
  std::string content;
  std::getline(check, content);
  EXPECT_EQ(content, "host");  // untouched
  unlink(host.c_str());
}

// The session groups ("group-*") in this process's wardend subtrees, in
// every hierarchy /proc/self/cgroup names.
std::vector<std::string> SessionCgroups() {
  std::ifstream in("/proc/self/cgroup");
  std::vector<std::string> bases;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    if (f[1].empty()) {
      bases.push_back("/sys/fs/cgroup" + f[2]);
      bases.push_back("/sys/fs/cgroup/unified" + f[2]);
    } else {
      for (absl::string_view c : absl::StrSplit(f[1], ',')) {
        bases.push_back(absl::StrCat("/sys/fs/cgroup/", c, f[2]));
      }
    }
  }
  std::vector<std::string> groups;
  for (const std::string& base : bases) {
    for (const std::string& subtree : Subdirectories(base, absl::StrCat("warden-", getpid(), "-"))) {
      for (const std::string& group : Subdirectories(subtree, "group-")) groups.push_back(group);
    }
  }
  std::sort(groups.begin(), groups.end());
  groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
  return groups;
}

TEST_F(ContextsTest, TheSessionsProcessesShareOneCgroupWhichGoesWithIt) {
  ASSERT_TRUE(SessionCgroups().empty());
  const std::string session = CreateShared();
  CreateContext(session, v1::LANGUAGE_JAVASCRIPT);
  const int command = StartBackground(session, "echo up; exec sleep 600", false);
  ASSERT_EQ(FirstLine(session, command), "up");
  const std::vector<std::string> groups = SessionCgroups();
  ASSERT_FALSE(groups.empty()) << "no session cgroup in any hierarchy";
  for (const std::string& group : groups) {
    // One machine: its init, the session's interpreter, the JavaScript
    // context and the command, all in the one group nested in the session's.
    const std::vector<std::string> machines = Subdirectories(group, "run-");
    ASSERT_EQ(machines.size(), 1u) << group;
    std::ifstream procs(machines[0] + "/cgroup.procs");
    int n = 0;
    for (std::string pid; std::getline(procs, pid);) ++n;
    EXPECT_GE(n, 4) << machines[0];
  }
  // Closing it ends them all and removes every group, nested ones first.
  Close(session);
  for (const std::string& group : groups) {
    struct stat st;
    EXPECT_NE(stat(group.c_str(), &st), 0) << group << " is left over";
  }
  EXPECT_TRUE(SessionCgroups().empty());
}

// TypeScript, R and Java: session languages of warden.v1 and contexts of a
// shared workspace, each keeping its state, seeing the same files.
TEST_F(ContextsTest, TypeScriptRAndJavaAreSessionsAndContexts) {
  struct Case {
    v1::Language language;
    const char* define;
    const char* use;
    const char* expected;
    const char* read_file;
  };
  const Case cases[] = {
      {v1::LANGUAGE_TYPESCRIPT, "const tsN: number = 41", "tsN + 1", "42",
       "require('fs').readFileSync('shared.txt', 'utf8')"},
      {v1::LANGUAGE_R, "rN <- 41", "rN + 1", "[1] 42", "readLines('shared.txt')"},
      {v1::LANGUAGE_JAVA, "int javaN = 41;", "javaN + 1", "42",
       "java.nio.file.Files.readString(java.nio.file.Path.of(\"shared.txt\"))"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(v1::Language_Name(c.language));
    v1::CreateSessionRequest create;
    create.set_language(c.language);
    v1::Session session;
    grpc::Status s = stub_->CreateSession(Ctx().get(), create, &session);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(session.language(), c.language);
    EXPECT_EQ(Run(session.id(), "", c.define).outcome(), v1::OUTCOME_OK);
    v1::ExecuteResponse used = Run(session.id(), "", c.use);
    ASSERT_EQ(used.results_size(), 1) << used.DebugString();
    EXPECT_EQ(used.results(0).data().at("text/plain"), c.expected);
    Close(session.id());

    const std::string shared = CreateShared();
    ASSERT_EQ(Run(shared, "", "open('shared.txt', 'w').write('from python')").outcome(), v1::OUTCOME_OK);
    const std::string context = CreateContext(shared, c.language);
    EXPECT_EQ(Run(shared, context, c.define).outcome(), v1::OUTCOME_OK);
    EXPECT_EQ(Run(shared, context, c.use).results(0).data().at("text/plain"), c.expected);
    v1::ExecuteResponse read = Run(shared, context, c.read_file);
    ASSERT_EQ(read.results_size(), 1) << read.DebugString();
    EXPECT_NE(read.results(0).data().at("text/plain").find("from python"), std::string::npos);
    Close(shared);
  }
}

// The Python kernel's rich results over warden.v1: a figure's chart and a
// DataFrame's columns, JSON under Warden's MIME types.
TEST_F(ContextsTest, ResultsCarryChartsAndDataFrames) {
  const std::string session = CreateShared();
  v1::ExecuteResponse plot = Run(session, "",
                                 "import matplotlib.pyplot as plt\nplt.bar(['a', 'b'], [3, 5])\n"
                                 "plt.title('Bars')\nplt.show()");
  ASSERT_EQ(plot.results_size(), 1) << plot.DebugString();
  const auto& data = plot.results(0).data();
  ASSERT_EQ(data.count("application/vnd.warden.chart+json"), 1u);
  const std::string& chart = data.at("application/vnd.warden.chart+json");
  EXPECT_NE(chart.find("\"type\":\"bar\""), std::string::npos) << chart;
  EXPECT_NE(chart.find("\"title\":\"Bars\""), std::string::npos) << chart;
  EXPECT_EQ(data.at("image/png").substr(1, 3), "PNG");
  v1::ExecuteResponse frame = Run(session, "", "import pandas as pd\npd.DataFrame({'a': [1, 2]})");
  EXPECT_EQ(frame.results(0).data().at("application/vnd.warden.dataframe+json"), "{\"a\":[1,2]}");
  Close(session);
}

}  // namespace
}  // namespace warden
