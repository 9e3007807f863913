// Runs one parsed command against the daemon and prints what came back;
// each command returns the CLI's exit status. The stub and the streams are
// not owned.
#pragma once

#include <functional>
#include <istream>
#include <memory>
#include <ostream>
#include <string>
#include <variant>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/cli_args.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "nlohmann/json.hpp"
#include "warden/v1/agent.grpc.pb.h"
#include "warden/v1/executor.grpc.pb.h"
#include "warden/v1/images.grpc.pb.h"

namespace warden::cli {

// Deadlines. Unary calls may start or restart an interpreter; transfers are
// bounded by the server's file cap. An execution gets its wall-clock limit
// plus a margin for building the sandbox and waiting in the server's queue.
inline constexpr absl::Duration kUnaryDeadline = absl::Seconds(60);
inline constexpr absl::Duration kTransferDeadline = absl::Minutes(10);
inline constexpr absl::Duration kExecMargin = absl::Seconds(30);
// Without --timeout-ms the server's default limit applies, unknown here.
inline constexpr absl::Duration kExecDefaultDeadline = absl::Minutes(10);
inline constexpr size_t kUploadChunkBytes = 64 * 1024;

absl::Duration ExecDeadline(int64_t wall_ms);

// How an upload's chunks ended: all sent, refused by the server (Finish
// says why), or the local file could not be read.
enum class UploadEnd { kSent, kStreamBroken, kReadFailed };

// The content of `in` as chunk messages after the header, kUploadChunkBytes
// each: `files put` (UploadFileRequest) and `volume put` (WriteVolumeFileRequest).
template <typename Request, typename Stream>
UploadEnd SendChunks(std::istream& in, Stream& stream) {
  std::string buffer(kUploadChunkBytes, '\0');
  Request message;
  while (true) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    if (in.bad()) return UploadEnd::kReadFailed;
    size_t n = static_cast<size_t>(in.gcount());
    if (n > 0) {
      message.set_chunk(buffer.data(), n);
      if (!stream.Write(message)) return UploadEnd::kStreamBroken;
    }
    if (in.eof()) return UploadEnd::kSent;
  }
}

struct CliStreams {
  std::istream& in;
  std::ostream& out;
  std::ostream& err;
};

class CommandRunner {
 public:
  // `address` is only for error messages. With `cancel_on_signals`, SIGINT
  // and SIGTERM cancel a running exec (see CancelOnSignal).
  CommandRunner(v1::Executor::StubInterface* stub, std::string token, std::string address,
                CliStreams streams, bool cancel_on_signals)
      : stub_(stub),
        token_(std::move(token)),
        address_(std::move(address)),
        io_(streams),
        cancel_on_signals_(cancel_on_signals) {}

  int Run(const Command& command) { return std::visit(*this, command); }

  int operator()(const HelpCommand& command);
  int operator()(const ExecCommand& command);
  int operator()(const SessionCreateCommand& command);
  int operator()(const SessionListCommand& command);
  int operator()(const SessionShowCommand& command);
  int operator()(const SessionCloseCommand& command);
  int operator()(const SessionInterruptCommand& command);
  int operator()(const SessionNetworkCommand& command);
  int operator()(const SessionRestartCommand& command);
  int operator()(const SessionForkCommand& command);
  int operator()(const SessionShellCommand& command);  // client/shell_command.cc
  int operator()(const FilesPutCommand& command);
  int operator()(const FilesGetCommand& command);
  int operator()(const FilesLsCommand& command);
  int operator()(const TemplateImportCommand& command);  // client/template_command.cc
  int operator()(const TemplateBuildCommand& command);
  int operator()(const TemplateListCommand& command);
  int operator()(const TemplateShowCommand& command);
  int operator()(const TemplateRmCommand& command);
  int operator()(const VolumeCreateCommand& command);  // client/volume_command.cc
  int operator()(const VolumeLsCommand& command);
  int operator()(const VolumeRmCommand& command);
  int operator()(const VolumePutCommand& command);
  int operator()(const VolumeGetCommand& command);
  int operator()(const AgentCommand& command);  // client/agent_command.cc
  int operator()(const McpCommand& command);    // client/mcp_command.cc

  // The Agent service's stub (not owned); `warden agent` needs it.
  void set_agent_stub(v1::Agent::StubInterface* stub) { agent_stub_ = stub; }
  // The Templates service's stub (not owned); `warden template` needs it.
  void set_templates_stub(v1::Templates::StubInterface* stub) { templates_stub_ = stub; }
  // The Volumes service's stub (not owned); `warden volume` needs it.
  void set_volumes_stub(v1::Volumes::StubInterface* stub) { volumes_stub_ = stub; }

 private:
  // A unary call with the token and kUnaryDeadline.
  template <typename Request, typename Response>
  grpc::Status Call(grpc::Status (v1::Executor::StubInterface::*method)(grpc::ClientContext*,
                                                                        const Request&, Response*),
                    const Request& request, Response* response) {
    auto context = NewCallContext(kUnaryDeadline);
    return (stub_->*method)(context.get(), request, response);
  }

  std::unique_ptr<grpc::ClientContext> NewCallContext(absl::Duration timeout) const;
  int PrintSessionId(const grpc::Status& status, const v1::Session& session, bool json);
  // A download (`files get`, `volume get`): the chunks of the stream `open`
  // starts, into `local` (replaced only once all of it arrived) or stdout
  // ("-"); the exit status.
  using OpenDownload =
      std::function<std::unique_ptr<grpc::ClientReaderInterface<v1::FileChunk>>(grpc::ClientContext* context)>;
  int Download(const std::string& local, const OpenDownload& open);
  int RpcFailed(const grpc::Status& status);    // prints the one-line error; 125
  int LocalFailed(const absl::Status& status);  // a local file; 2
  void PrintJson(const nlohmann::json& json);

  v1::Executor::StubInterface* stub_;
  v1::Agent::StubInterface* agent_stub_ = nullptr;
  v1::Templates::StubInterface* templates_stub_ = nullptr;
  v1::Volumes::StubInterface* volumes_stub_ = nullptr;
  std::string token_;
  std::string address_;
  CliStreams io_;
  bool cancel_on_signals_;
};

}  // namespace warden::cli
