// Every warden.v1 request a client can send, built from fuzzed protobuf
// bytes, against a real wardend in this process over its real UNIX socket:
// the first byte picks the RPC, the rest is parsed as that RPC's request
// message (inputs that do not parse are skipped, as gRPC would refuse them).
// Whatever the fields hold, the call ends with a status before its
// deadline, never UNKNOWN (an unhandled failure), and the daemon still
// answers a ListSessions afterwards. Requests that name the session "S" are
// pointed at one live bash session, so paths, commands and files reach the
// workspace code; anything else a request created is closed after it.
//
// It needs root (namespaces and cgroups for the sandboxes), unlike the other
// targets: ctest label "daemon" besides "fuzz".
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "server/daemon.h"
#include "tests/fuzz/fuzz_check.h"
#include "warden/v1/executor.grpc.pb.h"

namespace {

using warden::v1::Executor;
namespace v1 = warden::v1;

struct Harness {
  std::unique_ptr<warden::Daemon> daemon;
  std::unique_ptr<Executor::Stub> stub;
  std::string session;  // the live session "S" stands for
  std::string dir;
};

std::unique_ptr<grpc::ClientContext> Context(int seconds = 20) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return ctx;
}

void StartLiveSession(Harness& h);

Harness& TheHarness() {
  static Harness* harness = [] {
    auto* h = new Harness;
    char dir[] = "/tmp/warden-fuzz-api-XXXXXX";
    FUZZ_CHECK(mkdtemp(dir) != nullptr);
    h->dir = dir;
    warden::DaemonOptions options;
    options.listen = {"unix:" + h->dir + "/w.sock"};
    options.pools = {{"python", 0, {}}, {"javascript", 0, {}}, {"bash", 0, {}}};
    options.zygote.enabled = false;  // Python starts cold: no fork server to keep warm
    options.executor.host_id_base = static_cast<uid_t>(5'000'000 + (getpid() % 4096) * 256);
    options.executor.host_id_count = 256;
    options.limits.max_code_bytes = 64 * 1024;
    options.limits.max_file_bytes = 1 << 20;
    options.sessions.max_per_tenant = 4;
    options.queue.max_wait_ms = 10'000;
    options.shutdown_grace_ms = 1'000;
    auto daemon = warden::Daemon::Create(options);
    if (!daemon.ok()) {
      std::fprintf(stderr, "api_requests: wardend did not start: %s\n", daemon.status().ToString().c_str());
      std::abort();
    }
    h->daemon = std::move(*daemon);
    FUZZ_CHECK(h->daemon->Start().ok());
    h->stub = Executor::NewStub(
        grpc::CreateChannel(h->daemon->listening().front(), grpc::InsecureChannelCredentials()));
    StartLiveSession(*h);
    std::atexit([] {
      Harness& h = TheHarness();
      h.daemon->Shutdown(absl::Seconds(2));
      h.daemon.reset();
      std::error_code ignored;
      std::filesystem::remove_all(h.dir, ignored);
    });
    return h;
  }();
  return *harness;
}

// Points a request's "S" at the live session.
void Aim(std::string* session_id) {
  if (*session_id == "S") *session_id = TheHarness().session;
}

// Any request with a session_id: "S" is the live session.
template <typename Request>
void AimAt(Request* r) {
  Aim(r->mutable_session_id());
}

// Code runs at most 5 s, well inside the call's deadline (a fuzzed limit
// could otherwise ask for hours, and the client would give up first).
void AimExecute(v1::ExecuteRequest* r) {
  Aim(r->mutable_session_id());
  if (r->limits().wall_ms() <= 0 || r->limits().wall_ms() > 5000) r->mutable_limits()->set_wall_ms(5000);
  if (r->limits().cpu_ms() <= 0 || r->limits().cpu_ms() > 5000) r->mutable_limits()->set_cpu_ms(5000);
}

template <typename Request>
bool Parse(const uint8_t* data, size_t size, Request* request) {
  return request->ParseFromArray(data, static_cast<int>(size));
}

// A status that says the daemon handled the call, whatever it decided.
void CheckStatus(const grpc::Status& s) {
  if (s.error_code() == grpc::StatusCode::UNKNOWN) {
    std::fprintf(stderr, "UNKNOWN: %s\n", s.error_message().c_str());
  }
  FUZZ_CHECK(s.error_code() != grpc::StatusCode::UNKNOWN);
  FUZZ_CHECK(s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED);
}

using Call = std::function<bool(Executor::Stub&, const uint8_t*, size_t)>;

template <typename Request, typename Response>
Call Unary(grpc::Status (Executor::Stub::*method)(grpc::ClientContext*, const Request&, Response*),
           std::function<void(Request*)> aim = nullptr) {
  return [method, aim](Executor::Stub& stub, const uint8_t* data, size_t size) {
    Request request;
    if (!Parse(data, size, &request)) return false;
    if (aim) aim(&request);
    Response response;
    CheckStatus((stub.*method)(Context().get(), request, &response));
    return true;
  };
}

template <typename Request, typename Event>
Call Streaming(std::unique_ptr<grpc::ClientReader<Event>> (Executor::Stub::*method)(grpc::ClientContext*,
                                                                                     const Request&),
               std::function<void(Request*)> aim = nullptr) {
  return [method, aim](Executor::Stub& stub, const uint8_t* data, size_t size) {
    Request request;
    if (!Parse(data, size, &request)) return false;
    if (aim) aim(&request);
    auto ctx = Context();
    std::unique_ptr<grpc::ClientReader<Event>> reader = (stub.*method)(ctx.get(), request);
    Event event;
    while (reader->Read(&event)) {
    }
    CheckStatus(reader->Finish());
    return true;
  };
}

// WatchPath: a watch lasts until its client leaves, so the call ends after
// its first event (the watch in place) or its refusal.
bool Watch(Executor::Stub& stub, const uint8_t* data, size_t size) {
  v1::WatchPathRequest request;
  if (!Parse(data, size, &request)) return false;
  Aim(request.mutable_session_id());
  auto ctx = Context();
  auto reader = stub.WatchPath(ctx.get(), request);
  v1::WatchEvent event;
  if (reader->Read(&event)) {
    FUZZ_CHECK(event.started());
    ctx->TryCancel();
    while (reader->Read(&event)) {
    }
    (void)reader->Finish();  // CANCELLED, ours
    return true;
  }
  CheckStatus(reader->Finish());
  return true;
}

// CreateWatcher, then (if it made one) GetWatcherEvents and RemoveWatcher of
// it, so that the live session's watchers never pile up to their bound.
bool PolledWatch(Executor::Stub& stub, const uint8_t* data, size_t size) {
  v1::CreateWatcherRequest request;
  if (!Parse(data, size, &request)) return false;
  Aim(request.mutable_session_id());
  v1::Watcher watcher;
  const grpc::Status created = stub.CreateWatcher(Context().get(), request, &watcher);
  CheckStatus(created);
  if (!created.ok()) return true;
  v1::GetWatcherEventsRequest get;
  get.set_session_id(request.session_id());
  get.set_watcher_id(watcher.watcher_id());
  v1::GetWatcherEventsResponse events;
  CheckStatus(stub.GetWatcherEvents(Context().get(), get, &events));
  v1::RemoveWatcherRequest remove;
  remove.set_session_id(request.session_id());
  remove.set_watcher_id(watcher.watcher_id());
  v1::RemoveWatcherResponse removed;
  FUZZ_CHECK(stub.RemoveWatcher(Context().get(), remove, &removed).ok());
  return true;
}

// PauseSession, then ResumeSession of the same session, so that the live
// one goes on serving the inputs after it.
bool PauseThenResume(Executor::Stub& stub, const uint8_t* data, size_t size) {
  v1::PauseSessionRequest request;
  if (!Parse(data, size, &request)) return false;
  Aim(request.mutable_session_id());
  v1::Session session;
  CheckStatus(stub.PauseSession(Context().get(), request, &session));
  v1::ResumeSessionRequest resume;
  resume.set_session_id(request.session_id());
  CheckStatus(stub.ResumeSession(Context().get(), resume, &session));
  return true;
}

// UploadFile: the input is a sequence of messages, each prefixed by its
// length (one byte).
bool Upload(Executor::Stub& stub, const uint8_t* data, size_t size) {
  auto ctx = Context();
  v1::FileInfo info;
  std::unique_ptr<grpc::ClientWriter<v1::UploadFileRequest>> writer = stub.UploadFile(ctx.get(), &info);
  while (size > 0) {
    const size_t n = std::min<size_t>(data[0], size - 1);
    v1::UploadFileRequest message;
    if (!Parse(data + 1, n, &message)) break;
    if (message.has_header()) Aim(message.mutable_header()->mutable_session_id());
    if (!writer->Write(message)) break;
    data += 1 + n;
    size -= 1 + n;
  }
  writer->WritesDone();
  CheckStatus(writer->Finish());
  return true;
}

const std::vector<Call>& Calls() {
  static const auto* calls = new std::vector<Call>{
      Unary(&Executor::Stub::Execute, std::function<void(v1::ExecuteRequest*)>(AimExecute)),
      Streaming(&Executor::Stub::ExecuteStream, std::function<void(v1::ExecuteRequest*)>(AimExecute)),
      Unary(&Executor::Stub::CreateSession),
      Unary(&Executor::Stub::CloseSession),  // never the live one: its id is not guessable
      Unary(&Executor::Stub::RestartSession, std::function<void(v1::RestartSessionRequest*)>(AimAt<v1::RestartSessionRequest>)),
      Unary(&Executor::Stub::GetSession, std::function<void(v1::GetSessionRequest*)>(AimAt<v1::GetSessionRequest>)),
      Unary(&Executor::Stub::ListSessions),
      Unary(&Executor::Stub::InterruptSession,
            std::function<void(v1::InterruptSessionRequest*)>(AimAt<v1::InterruptSessionRequest>)),
      Upload,
      Streaming(&Executor::Stub::DownloadFile, std::function<void(v1::DownloadFileRequest*)>(AimAt<v1::DownloadFileRequest>)),
      Unary(&Executor::Stub::ListFiles, std::function<void(v1::ListFilesRequest*)>(AimAt<v1::ListFilesRequest>)),
      Unary(&Executor::Stub::SetSessionTtl, std::function<void(v1::SetSessionTtlRequest*)>([](v1::SetSessionTtlRequest* r) {
              Aim(r->mutable_session_id());
              // The live session must outlive the run: no TTL shorter than an hour.
              if (r->session_id() == TheHarness().session && r->ttl_seconds() < 3600) r->set_ttl_seconds(3600);
            })),
      Unary(&Executor::Stub::CreateContext, std::function<void(v1::CreateContextRequest*)>(AimAt<v1::CreateContextRequest>)),
      Unary(&Executor::Stub::ListContexts, std::function<void(v1::ListContextsRequest*)>(AimAt<v1::ListContextsRequest>)),
      Unary(&Executor::Stub::RestartContext, std::function<void(v1::RestartContextRequest*)>(AimAt<v1::RestartContextRequest>)),
      Unary(&Executor::Stub::RemoveContext, std::function<void(v1::RemoveContextRequest*)>(AimAt<v1::RemoveContextRequest>)),
      Streaming(&Executor::Stub::RunCommand, std::function<void(v1::RunCommandRequest*)>([](v1::RunCommandRequest* r) {
                  Aim(r->mutable_session_id());
                  // Bounded, so that a fuzzed `sleep` cannot outlast the call's deadline.
                  if (r->timeout_ms() <= 0 || r->timeout_ms() > 5000) r->set_timeout_ms(5000);
                })),
      Streaming(&Executor::Stub::ConnectCommand, std::function<void(v1::ConnectCommandRequest*)>(AimAt<v1::ConnectCommandRequest>)),
      Unary(&Executor::Stub::SendCommandInput,
            std::function<void(v1::SendCommandInputRequest*)>(AimAt<v1::SendCommandInputRequest>)),
      Unary(&Executor::Stub::SignalCommand, std::function<void(v1::SignalCommandRequest*)>(AimAt<v1::SignalCommandRequest>)),
      Unary(&Executor::Stub::ListCommands, std::function<void(v1::ListCommandsRequest*)>(AimAt<v1::ListCommandsRequest>)),
      Unary(&Executor::Stub::StatPath, std::function<void(v1::StatPathRequest*)>(AimAt<v1::StatPathRequest>)),
      Unary(&Executor::Stub::MakeDirectory, std::function<void(v1::MakeDirectoryRequest*)>(AimAt<v1::MakeDirectoryRequest>)),
      Unary(&Executor::Stub::MovePath, std::function<void(v1::MovePathRequest*)>(AimAt<v1::MovePathRequest>)),
      Unary(&Executor::Stub::RemovePath, std::function<void(v1::RemovePathRequest*)>(AimAt<v1::RemovePathRequest>)),
      Unary(&Executor::Stub::SnapshotSession,
            std::function<void(v1::SnapshotSessionRequest*)>(AimAt<v1::SnapshotSessionRequest>)),
      Unary(&Executor::Stub::RestoreSnapshot),
      Unary(&Executor::Stub::ListSnapshots),
      Unary(&Executor::Stub::DeleteSnapshot),
      Unary(&Executor::Stub::ForkSession, std::function<void(v1::ForkSessionRequest*)>(AimAt<v1::ForkSessionRequest>)),
      Unary(&Executor::Stub::ResizeTerminal,
            std::function<void(v1::ResizeTerminalRequest*)>(AimAt<v1::ResizeTerminalRequest>)),
      Watch,
      PauseThenResume,
      Unary(&Executor::Stub::ResumeSession, std::function<void(v1::ResumeSessionRequest*)>(AimAt<v1::ResumeSessionRequest>)),
      // Appended, so that the corpus's first bytes keep picking what they picked.
      PolledWatch,
      Unary(&Executor::Stub::GetWatcherEvents,
            std::function<void(v1::GetWatcherEventsRequest*)>(AimAt<v1::GetWatcherEventsRequest>)),
      Unary(&Executor::Stub::RemoveWatcher, std::function<void(v1::RemoveWatcherRequest*)>(AimAt<v1::RemoveWatcherRequest>)),
  };
  return *calls;
}

// A live bash session for "S" (again, when a request ended it: code may
// `exit`, which is the session's own business).
void StartLiveSession(Harness& h) {
  v1::CreateSessionRequest create;
  create.set_language(v1::LANGUAGE_BASH);
  create.set_shared_workspace(true);  // so that contexts and commands run in it
  v1::Session session;
  const grpc::Status s = h.stub->CreateSession(Context(60).get(), create, &session);
  if (!s.ok()) std::fprintf(stderr, "api_requests: no session: %s\n", s.error_message().c_str());
  FUZZ_CHECK(s.ok());
  h.session = session.id();
}

// Closes what an input created, so that the next starts from the same daemon:
// every session but the live one.
void CloseOthers(Harness& h) {
  v1::ListSessionsRequest list;
  v1::ListSessionsResponse sessions;
  const grpc::Status s = h.stub->ListSessions(Context().get(), list, &sessions);
  FUZZ_CHECK(s.ok());  // the daemon still serves
  bool live = false;
  for (const v1::Session& session : sessions.sessions()) {
    if (session.id() == h.session) {
      live = true;
      continue;
    }
    v1::CloseSessionRequest close;
    close.set_session_id(session.id());
    v1::CloseSessionResponse closed;
    CheckStatus(h.stub->CloseSession(Context().get(), close, &closed));
  }
  if (!live) StartLiveSession(h);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Harness& h = TheHarness();
  const std::vector<Call>& calls = Calls();
  if (calls[data[0] % calls.size()](*h.stub, data + 1, size - 1)) CloseOthers(h);
  return 0;
}
