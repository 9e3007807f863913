#include "fronts/e2b/envd_front.h"

#include <signal.h>

#include <algorithm>
#include <climits>
#include <deque>
#include <memory>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "envd/filesystem.pb.h"
#include "envd/process.pb.h"
#include "fronts/e2b/connect.h"
#include "fronts/e2b/home_path.h"
#include "fronts/e2b/stream_events.h"
#include "fronts/http/exchange.h"
#include "fronts/http/upstream.h"

namespace warden::e2b {
namespace {

constexpr char kListHint[] = "give the directory's path, e.g. /home/user";

using CommandEvents = StreamEvents<v1::CommandEvent>;

// Go's os.ProcessState.String(), which envd reports as the end's status.
std::string SignalName(int signal) {
  switch (signal) {
    case 9: return "killed";
    case 15: return "terminated";
    case 2: return "interrupt";
    case 6: return "aborted";
    case 11: return "segmentation fault";
    case 13: return "broken pipe";
    default: return absl::StrCat("signal ", signal);
  }
}

process::ProcessEvent::EndEvent EndEventOf(const v1::CommandEnd& end) {
  process::ProcessEvent::EndEvent out;
  switch (end.outcome()) {
    case v1::OUTCOME_OK:
    case v1::OUTCOME_NONZERO_EXIT:
      out.set_exit_code(end.exit_code());
      out.set_exited(true);
      out.set_status(absl::StrCat("exit status ", end.exit_code()));
      break;
    case v1::OUTCOME_SIGNALED:
      out.set_exit_code(-1);
      out.set_status(absl::StrCat("signal: ", SignalName(end.signal())));
      break;
    default: {
      // A limit stopped it, or the sandbox failed: not an exit.
      out.set_exit_code(end.exit_code() != 0 ? end.exit_code() : -1);
      std::string outcome = absl::AsciiStrToLower(v1::Outcome_Name(end.outcome()));
      if (absl::StartsWith(outcome, "outcome_")) outcome = outcome.substr(8);
      out.set_status(outcome);
      out.set_error(end.message().empty() ? outcome : end.message());
    }
  }
  return out;
}

// Go's FileMode.String() for the permission bits of a type.
std::string Permissions(const v1::FileInfo& file) {
  std::string out = file.type() == "directory" ? "d" : file.type() == "symlink" ? "L" : "-";
  const char* rwx = "rwxrwxrwx";
  for (int bit = 8; bit >= 0; --bit) out.push_back(file.mode() & (1u << bit) ? rwx[8 - bit] : '-');
  return out;
}

filesystem::EntryInfo EntryOf(const v1::FileInfo& file) {
  filesystem::EntryInfo entry;
  const std::string path = HomePath(file.path());
  entry.set_path(path);
  entry.set_name(path.substr(path.rfind('/') + 1));
  entry.set_type(file.type() == "file"        ? filesystem::FILE_TYPE_FILE
                 : file.type() == "directory" ? filesystem::FILE_TYPE_DIRECTORY
                 : file.type() == "symlink"   ? filesystem::FILE_TYPE_SYMLINK
                                              : filesystem::FILE_TYPE_UNSPECIFIED);
  entry.set_size(file.size());
  entry.set_mode(file.mode());
  entry.set_permissions(Permissions(file));
  entry.set_owner(file.owner().empty() ? "user" : file.owner());
  entry.set_group(file.group().empty() ? "user" : file.group());
  entry.mutable_metadata()->insert(file.metadata().begin(), file.metadata().end());
  entry.mutable_modified_time()->set_seconds(file.modified_unix_ms() / 1000);
  entry.mutable_modified_time()->set_nanos(static_cast<int32_t>(file.modified_unix_ms() % 1000) * 1'000'000);
  if (file.type() == "symlink") {
    // As envd reports it: absolute, a relative target taken from the link's
    // own directory.
    std::string target = file.symlink_target();
    if (!absl::StartsWith(target, "/")) target = absl::StrCat(path.substr(0, path.rfind('/')), "/", target);
    entry.set_symlink_target(target);
  }
  return entry;
}

class EnvdFront {
 public:
  EnvdFront(v1::Executor::StubInterface* executor, FindSandbox find_sandbox, EnvdOptions options)
      : executor_(executor), find_sandbox_(std::move(find_sandbox)), options_(options) {}

  // A unary method: `method` turns the request into the response.
  template <class Request, class Response>
  http::Handler Unary(absl::Status (EnvdFront::*method)(const EnvdSandbox&, const Request&, Response*)) {
    return [this, method](http::Request& request, http::Exchange& exchange) -> absl::Status {
      ASSIGN_OR_RETURN(ConnectCall call, ParseConnectCall(request, /*streaming=*/false));
      ASSIGN_OR_RETURN(EnvdSandbox sandbox, find_sandbox_(request));
      Request in;
      RETURN_IF_ERROR(DecodeRequest(call, request.body(), &in));
      Response out;
      RETURN_IF_ERROR((this->*method)(sandbox, in, &out));
      http::Response response;
      response.content_type = call.encoding == ConnectEncoding::kJson ? "application/json" : "application/proto";
      response.body = EncodeMessage(call, out);
      return exchange.Send(response);
    };
  }

  static http::Handler Refuse(absl::Status status) {
    return [status](http::Request&, http::Exchange&) { return status; };
  }

  // ---- process.Process ----

  absl::Status Start(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(ConnectCall call, ParseConnectCall(request, /*streaming=*/true));
    ASSIGN_OR_RETURN(EnvdSandbox sandbox, find_sandbox_(request));
    process::StartRequest start;
    RETURN_IF_ERROR(DecodeRequest(call, request.body(), &start));
    if (start.process().cmd().empty()) return absl::InvalidArgumentError("process.cmd is empty: name the program");
    v1::RunCommandRequest run;
    run.set_session_id(sandbox.id);
    run.add_argv(start.process().cmd());
    for (const std::string& arg : start.process().args()) run.add_argv(arg);
    for (const auto& [key, value] : start.process().envs()) (*run.mutable_env())[key] = value;
    // As envd: a relative cwd (or "~/...") is taken from the user's home.
    ASSIGN_OR_RETURN(std::string cwd, ResolveHome(start.process().has_cwd() ? start.process().cwd() : ""));
    run.set_cwd(cwd.empty() ? kHome : cwd);
    run.set_stdin(start.stdin());
    run.set_tag(start.tag());
    run.set_background(true);  // envd's processes outlive their stream
    if (start.has_pty()) {
      run.mutable_terminal()->set_cols(start.pty().size().cols());
      run.mutable_terminal()->set_rows(start.pty().size().rows());
    }
    if (call.timeout != absl::InfiniteDuration()) run.set_timeout_ms(absl::ToInt64Milliseconds(call.timeout));
    return Stream<process::StartResponse>(request, exchange, call, sandbox, start.has_pty(),
                                          [this, run](grpc::ClientContext* ctx) {
                                            return executor_->RunCommand(ctx, run);
                                          });
  }

  absl::Status Connect(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(ConnectCall call, ParseConnectCall(request, /*streaming=*/true));
    ASSIGN_OR_RETURN(EnvdSandbox sandbox, find_sandbox_(request));
    process::ConnectRequest connect;
    RETURN_IF_ERROR(DecodeRequest(call, request.body(), &connect));
    v1::ConnectCommandRequest follow;
    follow.set_session_id(sandbox.id);
    ASSIGN_OR_RETURN(int32_t id, CommandId(sandbox, connect.process()));
    follow.set_command_id(id);
    bool terminal = false;
    ASSIGN_OR_RETURN(v1::ListCommandsResponse commands, Commands(sandbox));
    for (const v1::CommandInfo& command : commands.commands()) {
      if (command.command_id() == id) terminal = command.terminal();
    }
    return Stream<process::ConnectResponse>(request, exchange, call, sandbox, terminal,
                                            [this, follow](grpc::ClientContext* ctx) {
                                              return executor_->ConnectCommand(ctx, follow);
                                            });
  }

  absl::Status List(const EnvdSandbox& sandbox, const process::ListRequest&, process::ListResponse* out) {
    ASSIGN_OR_RETURN(v1::ListCommandsResponse commands, Commands(sandbox));
    for (const v1::CommandInfo& command : commands.commands()) {
      if (!command.running()) continue;  // envd lists the living only
      process::ProcessInfo* info = out->add_processes();
      info->set_pid(static_cast<uint32_t>(command.command_id()));
      if (!command.tag().empty()) info->set_tag(command.tag());
      // (A terminal's process is listed like any other, as envd does.)
      process::ProcessConfig* config = info->mutable_config();
      if (!command.argv().empty()) config->set_cmd(command.argv(0));
      for (int i = 1; i < command.argv_size(); ++i) config->add_args(command.argv(i));
      for (const auto& [key, value] : command.env()) (*config->mutable_envs())[key] = value;
      config->set_cwd(command.cwd());
    }
    return absl::OkStatus();
  }

  absl::Status SendInput(const EnvdSandbox& sandbox, const process::SendInputRequest& in,
                         process::SendInputResponse*) {
    v1::SendCommandInputRequest input;
    input.set_session_id(sandbox.id);
    ASSIGN_OR_RETURN(int32_t id, CommandId(sandbox, in.process()));
    input.set_command_id(id);
    input.set_data(in.input().has_pty() ? in.input().pty() : in.input().stdin());
    v1::SendCommandInputResponse sent;
    return http::FromGrpc(executor_->SendCommandInput(Context(sandbox).get(), input, &sent));
  }

  absl::Status CloseStdin(const EnvdSandbox& sandbox, const process::CloseStdinRequest& in,
                          process::CloseStdinResponse*) {
    v1::SendCommandInputRequest input;
    input.set_session_id(sandbox.id);
    ASSIGN_OR_RETURN(int32_t id, CommandId(sandbox, in.process()));
    input.set_command_id(id);
    input.set_close(true);
    v1::SendCommandInputResponse sent;
    return http::FromGrpc(executor_->SendCommandInput(Context(sandbox).get(), input, &sent));
  }

  absl::Status SendSignal(const EnvdSandbox& sandbox, const process::SendSignalRequest& in,
                          process::SendSignalResponse*) {
    if (in.signal() != process::SIGNAL_SIGKILL && in.signal() != process::SIGNAL_SIGTERM) {
      return absl::InvalidArgumentError("signal must be SIGNAL_SIGKILL or SIGNAL_SIGTERM");
    }
    v1::SignalCommandRequest signal;
    signal.set_session_id(sandbox.id);
    ASSIGN_OR_RETURN(int32_t id, CommandId(sandbox, in.process()));
    signal.set_command_id(id);
    signal.set_signal(static_cast<int32_t>(in.signal()));  // the enum's numbers are the signals'
    v1::SignalCommandResponse signaled;
    return EndedIsNotFound(http::FromGrpc(executor_->SignalCommand(Context(sandbox).get(), signal, &signaled)), id);
  }

  // A terminal's new size.
  absl::Status Update(const EnvdSandbox& sandbox, const process::UpdateRequest& in, process::UpdateResponse*) {
    if (!in.has_pty()) return absl::OkStatus();  // nothing else to change
    v1::ResizeTerminalRequest resize;
    resize.set_session_id(sandbox.id);
    ASSIGN_OR_RETURN(int32_t id, CommandId(sandbox, in.process()));
    resize.set_command_id(id);
    resize.mutable_size()->set_cols(in.pty().size().cols());
    resize.mutable_size()->set_rows(in.pty().size().rows());
    v1::ResizeTerminalResponse resized;
    return http::FromGrpc(executor_->ResizeTerminal(Context(sandbox).get(), resize, &resized));
  }

  // ---- filesystem.Filesystem ----

  absl::Status Stat(const EnvdSandbox& sandbox, const filesystem::StatRequest& in, filesystem::StatResponse* out) {
    v1::StatPathRequest stat;
    stat.set_session_id(sandbox.id);
    ASSIGN_OR_RETURN(std::string path, WorkspacePath(in.path().empty() ? kHome : in.path(), ""));
    stat.set_path(path);
    v1::FileInfo info;
    RETURN_IF_ERROR(http::FromGrpc(executor_->StatPath(Context(sandbox).get(), stat, &info)));
    *out->mutable_entry() = EntryOf(info);
    return absl::OkStatus();
  }

  absl::Status ListDir(const EnvdSandbox& sandbox, const filesystem::ListDirRequest& in,
                       filesystem::ListDirResponse* out) {
    v1::ListFilesRequest list;
    list.set_session_id(sandbox.id);
    ASSIGN_OR_RETURN(std::string path, WorkspacePath(in.path().empty() ? kHome : in.path(), kListHint));
    list.set_path(path);
    list.set_depth(static_cast<int32_t>(std::clamp<uint32_t>(in.depth(), 1, 64)));
    v1::ListFilesResponse files;
    RETURN_IF_ERROR(http::FromGrpc(executor_->ListFiles(Context(sandbox).get(), list, &files)));
    for (const v1::FileInfo& file : files.files()) *out->add_entries() = EntryOf(file);
    return absl::OkStatus();
  }

  absl::Status MakeDir(const EnvdSandbox& sandbox, const filesystem::MakeDirRequest& in,
                       filesystem::MakeDirResponse* out) {
    v1::MakeDirectoryRequest make;
    make.set_session_id(sandbox.id);
    ASSIGN_OR_RETURN(std::string path, WorkspacePath(in.path(), "give the new directory's path"));
    make.set_path(path);
    v1::FileInfo info;
    RETURN_IF_ERROR(http::FromGrpc(executor_->MakeDirectory(Context(sandbox).get(), make, &info)));
    *out->mutable_entry() = EntryOf(info);
    return absl::OkStatus();
  }

  absl::Status Move(const EnvdSandbox& sandbox, const filesystem::MoveRequest& in, filesystem::MoveResponse* out) {
    v1::MovePathRequest move;
    move.set_session_id(sandbox.id);
    ASSIGN_OR_RETURN(std::string from, WorkspacePath(in.source(), "give the path to move in source"));
    ASSIGN_OR_RETURN(std::string to, WorkspacePath(in.destination(), "give the new path in destination"));
    move.set_from(from);
    move.set_to(to);
    v1::FileInfo info;
    RETURN_IF_ERROR(http::FromGrpc(executor_->MovePath(Context(sandbox).get(), move, &info)));
    *out->mutable_entry() = EntryOf(info);
    return absl::OkStatus();
  }

  absl::Status Remove(const EnvdSandbox& sandbox, const filesystem::RemoveRequest& in, filesystem::RemoveResponse*) {
    v1::RemovePathRequest remove;
    remove.set_session_id(sandbox.id);
    ASSIGN_OR_RETURN(std::string path, WorkspacePath(in.path(), "give the path to remove"));
    remove.set_path(path);
    v1::RemovePathResponse removed;
    absl::Status status = http::FromGrpc(executor_->RemovePath(Context(sandbox).get(), remove, &removed));
    if (absl::IsNotFound(status)) return absl::OkStatus();  // gone already, as envd answers
    return status;
  }

  // The polled watcher (the synchronous Python SDK's files.watch_dir): the
  // daemon's (warden.v1's CreateWatcher), so that any front or gateway
  // serves its polls.
  absl::Status CreateWatcher(const EnvdSandbox& sandbox, const filesystem::CreateWatcherRequest& in,
                             filesystem::CreateWatcherResponse* out) {
    v1::CreateWatcherRequest create;
    create.set_session_id(sandbox.id);
    ASSIGN_OR_RETURN(std::string path, WorkspacePath(in.path(), "give the directory's path, e.g. /home/user"));
    create.set_path(path);
    create.set_recursive(in.recursive());
    create.set_include_entry(in.include_entry());
    v1::Watcher watcher;
    RETURN_IF_ERROR(http::FromGrpc(executor_->CreateWatcher(Context(sandbox).get(), create, &watcher)));
    out->set_watcher_id(watcher.watcher_id());
    return absl::OkStatus();
  }

  absl::Status GetWatcherEvents(const EnvdSandbox& sandbox, const filesystem::GetWatcherEventsRequest& in,
                                filesystem::GetWatcherEventsResponse* out) {
    v1::GetWatcherEventsRequest get;
    get.set_session_id(sandbox.id);
    get.set_watcher_id(in.watcher_id());
    v1::GetWatcherEventsResponse events;
    RETURN_IF_ERROR(http::FromGrpc(executor_->GetWatcherEvents(Context(sandbox).get(), get, &events)));
    for (const v1::WatchEvent& event : events.events()) {
      filesystem::FilesystemEvent* e = out->add_events();
      e->set_name(event.name());
      e->set_type(static_cast<filesystem::EventType>(event.type()));  // the same numbers
      if (event.has_entry()) *e->mutable_entry() = EntryOf(event.entry());
    }
    return absl::OkStatus();
  }

  absl::Status RemoveWatcher(const EnvdSandbox& sandbox, const filesystem::RemoveWatcherRequest& in,
                             filesystem::RemoveWatcherResponse*) {
    v1::RemoveWatcherRequest remove;
    remove.set_session_id(sandbox.id);
    remove.set_watcher_id(in.watcher_id());
    v1::RemoveWatcherResponse removed;
    return http::FromGrpc(executor_->RemoveWatcher(Context(sandbox).get(), remove, &removed));
  }

  // WatchDir: a stream of the directory's changes (WatchPath), each with
  // its entry when asked for, until the client stops it.
  absl::Status WatchDir(http::Request& request, http::Exchange& exchange) {
    ASSIGN_OR_RETURN(ConnectCall call, ParseConnectCall(request, /*streaming=*/true));
    ASSIGN_OR_RETURN(EnvdSandbox sandbox, find_sandbox_(request));
    filesystem::WatchDirRequest in;
    RETURN_IF_ERROR(DecodeRequest(call, request.body(), &in));
    v1::WatchPathRequest watch;
    watch.set_session_id(sandbox.id);
    ASSIGN_OR_RETURN(std::string path, WorkspacePath(in.path(), "give the directory's path, e.g. /home/user"));
    watch.set_path(path);
    watch.set_recursive(in.recursive());
    StreamEvents<v1::WatchEvent> events(http::UpstreamContext(sandbox.token), [this, watch](grpc::ClientContext* ctx) {
      return executor_->WatchPath(ctx, watch);
    });
    v1::WatchEvent event;
    StreamEvents<v1::WatchEvent>::Next next = events.Wait(absl::Now() + options_.call_timeout, &event);
    if (next == StreamEvents<v1::WatchEvent>::Next::kEnd) return http::FromGrpc(events.status());
    if (next == StreamEvents<v1::WatchEvent>::Next::kQuiet) {
      return absl::DeadlineExceededError("the watch did not start in time; try again");
    }
    const absl::Duration keepalive = KeepaliveInterval(request);
    const absl::Time end = call.timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + call.timeout;
    ASSIGN_OR_RETURN(auto stream, exchange.StartStream(200, StreamType(call)));
    // A client that leaves ends the watch at once, not at the next keepalive.
    auto hangup = http::Hangup::Subscribe(stream->hangup(), [&events] { events.Cancel(); });
    absl::Status end_status;
    for (;;) {
      filesystem::WatchDirResponse out;
      if (next == StreamEvents<v1::WatchEvent>::Next::kQuiet) {
        if (absl::Now() >= end) break;
        out.mutable_keepalive();
      } else if (next == StreamEvents<v1::WatchEvent>::Next::kEnd) {
        end_status = http::FromGrpc(events.status());
        if (!end_status.ok() && SandboxGone(sandbox)) end_status = StreamCutOff(sandbox);
        break;
      } else if (event.started()) {
        out.mutable_start();
      } else {
        filesystem::FilesystemEvent* e = out.mutable_filesystem();
        e->set_name(event.name());
        e->set_type(static_cast<filesystem::EventType>(event.type()));  // the same numbers
        if (in.include_entry() && event.has_entry()) *e->mutable_entry() = EntryOf(event.entry());
      }
      if (!stream->Write(EncodeMessage(call, out)).ok()) return absl::OkStatus();  // gone
      next = events.Wait(std::min(absl::Now() + keepalive, end), &event);
    }
    (void)stream->Write(EndOfStream(end_status));
    return stream->Finish();
  }

  // A call refused NOT_FOUND because its sandbox ended under it (its
  // timeout passed, or it was killed elsewhere, after the access check):
  // what E2B's proxy answers for a sandbox it cannot find, `unavailable`
  // (its 502) saying "The sandbox was not found", which the SDKs report as
  // the sandbox's end (the Python SDK's SandboxNotRunningException).
  absl::Status EndedUnder(const EnvdSandbox& sandbox, absl::Status status) const {
    if (!absl::IsNotFound(status) || !SandboxGone(sandbox)) return status;
    return absl::UnavailableError(absl::StrCat("The sandbox was not found: sandbox ", sandbox.id,
                                               " is not running, it was killed or reached its end of life"));
  }

 private:
  std::unique_ptr<grpc::ClientContext> Context(const EnvdSandbox& sandbox) const {
    return http::UpstreamContext(sandbox.token, options_.call_timeout);
  }

  absl::StatusOr<v1::ListCommandsResponse> Commands(const EnvdSandbox& sandbox) {
    v1::ListCommandsRequest list;
    list.set_session_id(sandbox.id);
    v1::ListCommandsResponse commands;
    RETURN_IF_ERROR(http::FromGrpc(executor_->ListCommands(Context(sandbox).get(), list, &commands)));
    return commands;
  }

  // The command a selector names: its pid, or the running command with its tag.
  absl::StatusOr<int32_t> CommandId(const EnvdSandbox& sandbox, const process::ProcessSelector& selector) {
    if (selector.has_pid()) {
      if (selector.pid() == 0 || selector.pid() > INT32_MAX) {
        return absl::NotFoundError(absl::StrCat("sandbox ", sandbox.id, " has no process ", selector.pid()));
      }
      return static_cast<int32_t>(selector.pid());
    }
    if (!selector.has_tag()) return absl::InvalidArgumentError("name the process by pid or tag");
    ASSIGN_OR_RETURN(v1::ListCommandsResponse commands, Commands(sandbox));
    for (const v1::CommandInfo& command : commands.commands()) {
      if (command.running() && command.tag() == selector.tag()) return command.command_id();
    }
    return absl::NotFoundError(
        absl::StrCat("sandbox ", sandbox.id, " has no running process tagged '", selector.tag(), "'"));
  }

  static const char* StreamType(const ConnectCall& call) {
    return call.encoding == ConnectEncoding::kJson ? "application/connect+json" : "application/connect+proto";
  }

  // A command that has ended is gone from envd's table: a signal for it is
  // not_found there (the SDKs' kill() then returns false), where warden.v1's
  // SignalCommand says FAILED_PRECONDITION (its only one).
  static absl::Status EndedIsNotFound(absl::Status status, int32_t id) {
    if (!absl::IsFailedPrecondition(status)) return status;
    return absl::NotFoundError(absl::StrCat("process with pid ", id, " not found: it has ended"));
  }

  // How a stream ends when its sandbox was killed (or reached its end of
  // life) under it: as E2B's envd ends it, `unavailable` with a message that
  // does not say why, on a stream that is otherwise complete. The SDKs then
  // ask /health, hear 502, and report the sandbox's end: the JavaScript SDK
  // a TimeoutError, the Python SDK a SandboxNotRunningException (a
  // TimeoutException). A connection cut in the middle of a chunked body
  // would be a protocol error to the Python SDK's HTTP/1.1 client, which
  // says nothing of the sandbox.
  static absl::Status StreamCutOff(const EnvdSandbox& sandbox) {
    return absl::UnavailableError(absl::StrCat("the connection to sandbox ", sandbox.id,
                                               " ended before the stream completed"));
  }

  // Whether the sandbox has ended (killed, or its timeout passed).
  bool SandboxGone(const EnvdSandbox& sandbox) const {
    v1::GetSessionRequest get;
    get.set_session_id(sandbox.id);
    v1::Session session;
    return executor_->GetSession(Context(sandbox).get(), get, &session).error_code() == grpc::StatusCode::NOT_FOUND;
  }

  absl::Duration KeepaliveInterval(const http::Request& request) const {
    int64_t seconds = 0;
    if (!absl::SimpleAtoi(request.Header("Keepalive-Ping-Interval"), &seconds) || seconds <= 0) {
      return options_.default_keepalive;
    }
    return std::clamp(absl::Seconds(seconds), options_.min_keepalive, absl::Minutes(5));
  }

  // A command's events as a Connect stream of `Response` (StartResponse or
  // ConnectResponse): start, data, keepalives while it is quiet, end.
  template <class Response>
  absl::Status Stream(const http::Request& request, http::Exchange& exchange, const ConnectCall& call,
                      const EnvdSandbox& sandbox, bool terminal, const CommandEvents::Open& open) {
    CommandEvents events(http::UpstreamContext(sandbox.token), open);
    v1::CommandEvent event;
    // Refused before it started (unknown pid, bad cwd, limits): a plain error.
    CommandEvents::Next next = events.Wait(absl::Now() + options_.call_timeout, &event);
    if (next == CommandEvents::Next::kEnd) return http::FromGrpc(events.status());
    if (next == CommandEvents::Next::kQuiet) {
      return absl::DeadlineExceededError("the command did not start in time; try again");
    }
    const absl::Duration keepalive = KeepaliveInterval(request);
    ASSIGN_OR_RETURN(auto stream, exchange.StartStream(200, StreamType(call)));
    // A client that leaves frees this stream at once, not at the next
    // keepalive (the command runs on, as when a write fails).
    auto hangup = http::Hangup::Subscribe(stream->hangup(), [&events] { events.Cancel(); });
    absl::Status end_status;
    for (;;) {
      Response out;
      process::ProcessEvent* e = out.mutable_event();
      if (next == CommandEvents::Next::kQuiet) {
        e->mutable_keepalive();
      } else if (next == CommandEvents::Next::kEnd) {
        end_status = http::FromGrpc(events.status());
        if (end_status.ok()) end_status = absl::InternalError("the command's stream ended without its end");
        if (SandboxGone(sandbox)) end_status = StreamCutOff(sandbox);
        break;
      } else if (event.has_started()) {
        e->mutable_start()->set_pid(static_cast<uint32_t>(event.started()));
      } else if (event.has_stdout() && terminal) {
        e->mutable_data()->set_pty(event.stdout());
      } else if (event.has_stdout()) {
        e->mutable_data()->set_stdout(event.stdout());
      } else if (event.has_stderr()) {
        e->mutable_data()->set_stderr(event.stderr());
      } else if (event.has_end()) {
        if (event.end().outcome() == v1::OUTCOME_SIGNALED && event.end().signal() == SIGKILL &&
            SandboxGone(sandbox)) {
          end_status = StreamCutOff(sandbox);  // killed with its sandbox
          break;
        }
        if (event.end().outcome() == v1::OUTCOME_WALL_TIMEOUT && call.timeout != absl::InfiniteDuration()) {
          // What envd's clients see when timeoutMs passes.
          end_status = absl::DeadlineExceededError(absl::StrCat(
              "the command ran past its timeout (", absl::FormatDuration(call.timeout), ") and was killed"));
          break;
        }
        *e->mutable_end() = EndEventOf(event.end());
      }
      if (!stream->Write(EncodeMessage(call, out)).ok()) return absl::OkStatus();  // gone; it runs on
      if (e->has_end()) break;
      next = events.Wait(absl::Now() + keepalive, &event);
    }
    (void)stream->Write(EndOfStream(end_status));
    return stream->Finish();
  }

  v1::Executor::StubInterface* const executor_;
  const FindSandbox find_sandbox_;
  const EnvdOptions options_;
};

}  // namespace

void AddEnvdRoutes(http::Router& router, v1::Executor::StubInterface* executor, FindSandbox find_sandbox,
                   EnvdOptions options) {
  auto protocol = std::make_shared<http::Protocol>();
  protocol->name = "envd";
  protocol->find_token = [](const http::Request&) { return std::string(); };
  protocol->render_error = [](unsigned, const absl::Status& error, const http::Request& request) {
    return ConnectErrorResponse(error, request);
  };
  protocol->render_error_sets_status = true;
  // What envd's Connect clients send from a browser (connect-web, and the
  // E2B SDK's own headers).
  protocol->cors_request_headers = {"Content-Type", "Connect-Protocol-Version", "Connect-Timeout-Ms",
                                    "Connect-Content-Encoding", "Connect-Accept-Encoding",
                                    "Keepalive-Ping-Interval", "Authorization", "X-Access-Token",
                                    "E2b-Sandbox-Id", "E2b-Sandbox-Port", "User-Agent"};
  auto front = std::make_shared<EnvdFront>(executor, find_sandbox, options);

  // The sandbox id and its access token stand for the API key: every route
  // checks them (FindSandbox) before its handler, the ones that only say
  // "unimplemented" too, so that a route cannot forget it.
  http::RouteOptions route;
  route.authenticate = false;
  route.max_body_bytes = options.max_body_bytes;
  route.tenant_of = options.tenant_of;
  auto add = [&](const std::string& service, const char* method, http::Handler handler) {
    // Keeps the front alive as long as the router holds the handler.
    router.Add(protocol, "POST", absl::StrCat("/", service, "/", method),
               [front, find_sandbox, handler = std::move(handler)](http::Request& r, http::Exchange& e) {
                 ASSIGN_OR_RETURN(EnvdSandbox sandbox, find_sandbox(r));
                 r.tenant = sandbox.tenant;  // its streams count as the owner's
                 return front->EndedUnder(sandbox, handler(r, e));
               },
               route);
  };
  auto stream = [&](absl::Status (EnvdFront::*method)(http::Request&, http::Exchange&)) -> http::Handler {
    EnvdFront* self = front.get();
    return [self, method](http::Request& r, http::Exchange& e) { return (self->*method)(r, e); };
  };
  EnvdFront& f = *front;
  const std::string process = "process.Process";
  add(process, "Start", stream(&EnvdFront::Start));
  add(process, "Connect", stream(&EnvdFront::Connect));
  add(process, "List", f.Unary(&EnvdFront::List));
  add(process, "SendInput", f.Unary(&EnvdFront::SendInput));
  add(process, "SendSignal", f.Unary(&EnvdFront::SendSignal));
  add(process, "CloseStdin", f.Unary(&EnvdFront::CloseStdin));
  add(process, "Update", f.Unary(&EnvdFront::Update));
  add(process, "StreamInput", EnvdFront::Refuse(absl::UnimplementedError(
                                  "streamed input is not supported by Warden; send stdin with commands.sendStdin")));
  const std::string files = "filesystem.Filesystem";
  add(files, "Stat", f.Unary(&EnvdFront::Stat));
  add(files, "ListDir", f.Unary(&EnvdFront::ListDir));
  add(files, "MakeDir", f.Unary(&EnvdFront::MakeDir));
  add(files, "Move", f.Unary(&EnvdFront::Move));
  add(files, "Remove", f.Unary(&EnvdFront::Remove));
  add(files, "WatchDir", stream(&EnvdFront::WatchDir));
  add(files, "CreateWatcher", f.Unary(&EnvdFront::CreateWatcher));
  add(files, "GetWatcherEvents", f.Unary(&EnvdFront::GetWatcherEvents));
  add(files, "RemoveWatcher", f.Unary(&EnvdFront::RemoveWatcher));
  router.Claim(protocol, absl::StrCat("/", process));
  router.Claim(protocol, absl::StrCat("/", files));
}

}  // namespace warden::e2b
