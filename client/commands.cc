#include "client/commands.h"

#include <cerrno>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "client/cancel_on_signal.h"
#include "client/cli_output.h"
#include "client/connection.h"
#include "client/execution_stream.h"
#include "client/exit_codes.h"
#include "client/local_file.h"

namespace warden::cli {

absl::Duration ExecDeadline(int64_t wall_ms) {
  return wall_ms > 0 ? absl::Milliseconds(wall_ms) + kExecMargin : kExecDefaultDeadline;
}

std::unique_ptr<grpc::ClientContext> CommandRunner::NewCallContext(absl::Duration timeout) const {
  return NewContext(token_, timeout);
}

int CommandRunner::RpcFailed(const grpc::Status& status) {
  io_.err << "warden: " << DescribeRpcError(status, address_) << "\n";
  return kExitWardenFailure;
}

int CommandRunner::LocalFailed(const absl::Status& status) {
  io_.err << "warden: " << status.message() << "\n";
  return kExitUsage;
}

void CommandRunner::PrintJson(const nlohmann::json& json) {
  io_.out << DumpJson(json);
  io_.out.flush();
}

int CommandRunner::operator()(const HelpCommand& command) {
  io_.out << command.text;
  return kExitOk;
}

int CommandRunner::operator()(const ExecCommand& command) {
  auto code = ReadAll(command.source, io_.in);
  if (!code.ok()) return LocalFailed(code.status());
  v1::ExecuteRequest request = command.request;
  request.set_code(*std::move(code));

  auto context = NewCallContext(ExecDeadline(request.limits().wall_ms()));
  std::optional<CancelOnSignal> canceller;
  if (cancel_on_signals_) canceller.emplace(context.get());

  ExecutionCollector collected;
  LiveTextPrinter printer(io_.out, io_.err);
  auto stream = stub_->ExecuteStream(context.get(), request);
  v1::ExecuteEvent event;
  while (stream->Read(&event)) {
    collected.Add(event);
    if (!command.json) printer.Print(event);
  }
  grpc::Status status = stream->Finish();

  int signal = canceller ? canceller->received_signal() : 0;
  canceller.reset();
  if (signal != 0) {
    io_.err << "warden: " << (signal == SIGINT ? "interrupted" : "terminated")
            << "; the execution was cancelled\n";
    return kExitSignalBase + signal;
  }
  if (!status.ok()) return RpcFailed(status);
  if (!collected.has_summary()) {
    io_.err << "warden: the daemon ended the execution without a summary\n";
    return kExitWardenFailure;
  }
  v1::ExecuteResponse response = collected.Response();
  if (command.json) {
    PrintJson(ExecuteResponseToJson(response));
  } else {
    printer.Finish(response);
  }
  return ExitCodeFor(response);
}

// Create and restart answer the same way: the session's id, or its JSON.
int CommandRunner::PrintSessionId(const grpc::Status& status, const v1::Session& session, bool json) {
  if (!status.ok()) return RpcFailed(status);
  if (json) {
    PrintJson(SessionToJson(session));
  } else {
    io_.out << session.id() << "\n";
  }
  return kExitOk;
}

int CommandRunner::operator()(const SessionCreateCommand& command) {
  v1::Session session;
  grpc::Status status =
      Call(&v1::Executor::StubInterface::CreateSession, command.request, &session);
  return PrintSessionId(status, session, command.json);
}

int CommandRunner::operator()(const SessionListCommand& command) {
  v1::ListSessionsResponse response;
  grpc::Status status =
      Call(&v1::Executor::StubInterface::ListSessions, command.request, &response);
  if (!status.ok()) return RpcFailed(status);
  if (command.json) {
    nlohmann::json sessions = nlohmann::json::array();
    for (const v1::Session& session : response.sessions())
      sessions.push_back(SessionToJson(session));
    PrintJson({{"sessions", sessions}});
  } else {
    io_.out << RenderSessionTable(response.sessions());
  }
  return kExitOk;
}

int CommandRunner::operator()(const SessionShowCommand& command) {
  v1::Session session;
  grpc::Status status = Call(&v1::Executor::StubInterface::GetSession, command.request, &session);
  if (!status.ok()) return RpcFailed(status);
  if (command.json) {
    PrintJson(SessionToJson(session));
  } else {
    io_.out << RenderSessionDetails(session);
  }
  return kExitOk;
}

int CommandRunner::operator()(const SessionCloseCommand& command) {
  v1::CloseSessionResponse response;
  grpc::Status status =
      Call(&v1::Executor::StubInterface::CloseSession, command.request, &response);
  return status.ok() ? kExitOk : RpcFailed(status);
}

int CommandRunner::operator()(const SessionInterruptCommand& command) {
  v1::InterruptSessionResponse response;
  grpc::Status status =
      Call(&v1::Executor::StubInterface::InterruptSession, command.request, &response);
  if (!status.ok()) return RpcFailed(status);
  if (command.json) {
    PrintJson({{"was_busy", response.was_busy()}});
  } else {
    io_.out << (response.was_busy() ? "interrupted the running cell\n" : "nothing was running\n");
  }
  return kExitOk;
}

int CommandRunner::operator()(const SessionNetworkCommand& command) {
  v1::Session session;
  grpc::Status status = Call(&v1::Executor::StubInterface::UpdateNetwork, command.request, &session);
  if (!status.ok()) return RpcFailed(status);
  if (command.json) {
    PrintJson(SessionToJson(session));
  } else {
    io_.out << "network: " << NetworkText(session) << "\n";
  }
  return kExitOk;
}

int CommandRunner::operator()(const SessionRestartCommand& command) {
  v1::Session session;
  grpc::Status status =
      Call(&v1::Executor::StubInterface::RestartSession, command.request, &session);
  return PrintSessionId(status, session, command.json);
}

int CommandRunner::operator()(const SessionForkCommand& command) {
  v1::ForkSessionResponse response;
  grpc::Status status = Call(&v1::Executor::StubInterface::ForkSession, command.request, &response);
  for (const auto& [name, why] : response.left_out()) {
    io_.err << "warden: not copied into the fork: " << name << " (" << why << ")\n";
  }
  return PrintSessionId(status, response.session(), command.json);
}

int CommandRunner::operator()(const FilesPutCommand& command) {
  v1::UploadFileRequest header;
  *header.mutable_header() = command.header;
  std::ifstream file;
  std::istream* in = &io_.in;
  if (command.local != "-") {
    file.open(command.local, std::ios::binary);
    if (!file) return LocalFailed(absl::ErrnoToStatus(errno, "cannot open " + command.local));
    std::error_code error;
    auto size = std::filesystem::file_size(command.local, error);
    if (!error) header.mutable_header()->set_size(static_cast<int64_t>(size));  // refuse early
    in = &file;
  }

  auto context = NewCallContext(kTransferDeadline);
  v1::FileInfo info;
  auto stream = stub_->UploadFile(context.get(), &info);
  UploadEnd end = stream->Write(header) ? SendChunks<v1::UploadFileRequest>(*in, *stream) : UploadEnd::kStreamBroken;
  if (end == UploadEnd::kReadFailed) context->TryCancel();
  if (end == UploadEnd::kSent) stream->WritesDone();
  grpc::Status status = stream->Finish();  // after a broken stream: why it broke

  if (end == UploadEnd::kReadFailed) {
    return LocalFailed(absl::DataLossError("cannot read " + command.local));
  }
  if (!status.ok()) return RpcFailed(status);
  if (command.json) PrintJson(FileInfoToJson(info));
  return kExitOk;
}

int CommandRunner::operator()(const FilesGetCommand& command) {
  return Download(command.local, [&](grpc::ClientContext* context) { return stub_->DownloadFile(context, command.request); });
}

int CommandRunner::Download(const std::string& local, const OpenDownload& open) {
  std::optional<AtomicFileWriter> file;  // none: stdout
  if (local != "-") {
    auto created = AtomicFileWriter::Create(local);
    if (!created.ok()) return LocalFailed(created.status());
    file.emplace(*std::move(created));
  }

  auto context = NewCallContext(kTransferDeadline);
  std::unique_ptr<grpc::ClientReaderInterface<v1::FileChunk>> stream = open(context.get());
  v1::FileChunk chunk;
  absl::Status written;
  while (written.ok() && stream->Read(&chunk)) {
    if (file) {
      written = file->Write(chunk.data());
    } else if (!io_.out.write(chunk.data().data(),
                              static_cast<std::streamsize>(chunk.data().size()))) {
      written = absl::DataLossError("cannot write to stdout");
    }
  }
  if (!written.ok()) context->TryCancel();
  grpc::Status status = stream->Finish();

  if (!written.ok()) return LocalFailed(written);
  if (!status.ok()) return RpcFailed(status);  // `file` removes its partial copy
  if (!file) {
    io_.out.flush();
    return kExitOk;
  }
  absl::Status committed = file->Commit();
  return committed.ok() ? kExitOk : LocalFailed(committed);
}

int CommandRunner::operator()(const FilesLsCommand& command) {
  v1::ListFilesResponse response;
  grpc::Status status = Call(&v1::Executor::StubInterface::ListFiles, command.request, &response);
  if (!status.ok()) return RpcFailed(status);
  if (command.json) {
    nlohmann::json files = nlohmann::json::array();
    for (const v1::FileInfo& file : response.files()) files.push_back(FileInfoToJson(file));
    PrintJson({{"files", files}});
  } else {
    io_.out << RenderFileTable(response.files());
  }
  return kExitOk;
}

}  // namespace warden::cli
