// The warden command line, parsed into one typed command per subcommand,
// each carrying the request it will send. Pure: the environment comes in as
// CliEnvironment and nothing is read or printed, so tests can drive it.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "warden/v1/agent.pb.h"
#include "warden/v1/executor.pb.h"
#include "warden/v1/images.pb.h"

namespace warden::cli {

// What the CLI takes from its environment.
struct CliEnvironment {
  std::string addr;       // WARDEN_ADDR
  std::string token;      // WARDEN_TOKEN
  std::string session;    // WARDEN_SESSION: the default session for `files`
  std::string ca_file;    // WARDEN_CA_FILE
  std::string cert_file;  // WARDEN_CERT_FILE
  std::string key_file;   // WARDEN_KEY_FILE
  std::string term;       // TERM: what `session shell` tells the remote program

  static CliEnvironment FromProcess();
};

// --help anywhere, or `warden help [COMMAND]`: print `text`, exit 0. (A
// COMMAND that does not exist is a usage error naming those that do.)
struct HelpCommand {
  std::string text;
};

struct ExecCommand {
  v1::ExecuteRequest request;  // everything but the code, read when it runs
  std::string source;          // a path, or "-" for stdin
  bool json = false;
};

struct SessionCreateCommand {
  v1::CreateSessionRequest request;
  bool json = false;
};

struct SessionListCommand {
  v1::ListSessionsRequest request;
  bool json = false;
};

struct SessionShowCommand {
  v1::GetSessionRequest request;
  bool json = false;
};

struct SessionCloseCommand {
  v1::CloseSessionRequest request;
};

struct SessionInterruptCommand {
  v1::InterruptSessionRequest request;
  bool json = false;
};

// `warden session network ID`: UpdateNetwork.
struct SessionNetworkCommand {
  v1::UpdateNetworkRequest request;
  bool json = false;
};

struct SessionRestartCommand {
  v1::RestartSessionRequest request;
  bool json = false;
};

struct SessionForkCommand {
  v1::ForkSessionRequest request;
  bool json = false;
};

// `warden session shell ID [-- CMD ARGS...]`: an interactive terminal in a
// session's machine (a shared-workspace session; client/shell_command.cc).
struct SessionShellCommand {
  v1::RunCommandRequest request;  // argv, cwd, env; the terminal's size is read when it runs
};

struct FilesPutCommand {
  v1::UploadFileHeader header;  // size is filled in when the local file is opened
  std::string local;            // a path, or "-" for stdin
  bool json = false;
};

struct FilesGetCommand {
  v1::DownloadFileRequest request;
  std::string local;  // a path, or "-" for stdout
};

struct FilesLsCommand {
  v1::ListFilesRequest request;
  bool json = false;
};

// `warden agent`: a task for the daemon's code agent (docs/agent.md).
struct AgentCommand {
  v1::RunAgentRequest request;   // everything but the files, read when it runs
  std::vector<std::string> files;  // LOCAL or LOCAL:REMOTE, uploaded into the workspace
  std::string code_file;           // --code: test/debug mode's code ("-": stdin)
  bool json = false;
};

// `warden template import ARCHIVE --name NAME`: an OCI image layout (a tar)
// or a `docker save` archive, streamed to ImportTemplate
// (client/template_command.cc).
struct TemplateImportCommand {
  v1::ImportTemplateHeader header;  // size is filled in when the archive is opened
  std::string archive;              // a path, or "-" for stdin
  bool json = false;
};

struct TemplateBuildCommand {
  v1::BuildTemplateHeader header;  // the Dockerfile's text is read when the command runs
  std::string dockerfile;          // a path; default: CONTEXT/Dockerfile
  std::string context;             // a directory, sent as a tar
  bool json = false;
};

struct TemplateListCommand {
  bool json = false;
};

struct TemplateShowCommand {
  v1::GetTemplateRequest request;
  bool json = false;
};

// `warden template rm NAME`: the template NAME means for the caller (its
// own, else the public one).
struct TemplateRmCommand {
  std::string name;
};

// `warden volume create NAME`: a volume of the caller's (docs/templates.md).
struct VolumeCreateCommand {
  v1::CreateVolumeRequest request;
  bool json = false;
};

// `warden volume ls [VOLUME [PATH]]`: the caller's volumes, or one's files.
struct VolumeLsCommand {
  v1::ListVolumeFilesRequest files;  // volume empty: list the volumes themselves
  bool json = false;
};

// `warden volume rm NAME`.
struct VolumeRmCommand {
  v1::DeleteVolumeRequest request;
};

// `warden volume put VOLUME LOCAL|- PATH`, streamed to WriteVolumeFile.
struct VolumePutCommand {
  v1::WriteVolumeFileHeader header;  // size is filled in when the local file is opened
  std::string local;                 // a path, or "-" for stdin
  bool json = false;
};

// `warden volume get VOLUME PATH LOCAL|-`, from ReadVolumeFile.
struct VolumeGetCommand {
  v1::ReadVolumeFileRequest request;
  std::string local;  // a file or a directory to put it in, or "-" for stdout
};

// `warden mcp`: serve MCP on stdin/stdout for a desktop host (docs/integrations.md).
struct McpCommand {};

using Command =
    std::variant<HelpCommand, ExecCommand, SessionCreateCommand, SessionListCommand,
                 SessionShowCommand, SessionCloseCommand, SessionInterruptCommand, SessionNetworkCommand,
                 SessionRestartCommand, SessionForkCommand, SessionShellCommand, FilesPutCommand,
                 FilesGetCommand, FilesLsCommand, TemplateImportCommand, TemplateBuildCommand, TemplateListCommand,
                 TemplateShowCommand, TemplateRmCommand, VolumeCreateCommand, VolumeLsCommand,
                 VolumeRmCommand, VolumePutCommand, VolumeGetCommand, AgentCommand, McpCommand>;

struct Invocation {
  std::string address;  // --addr, else WARDEN_ADDR, else the default socket
  Command command;
};

// Parses the arguments after argv[0]. An InvalidArgument status says what is
// wrong, for a "warden: ..." line followed by UsageFor(args).
absl::StatusOr<Invocation> ParseCommandLine(const std::vector<std::string>& args,
                                            const CliEnvironment& env);

// A short usage for after a usage error: the synopsis of the command that
// `args` names, or the list of commands.
std::string UsageFor(const std::vector<std::string>& args);

// python|py, javascript|js|node, bash|sh.
absl::StatusOr<v1::Language> ParseLanguage(absl::string_view name);

// From a file name's extension (.py, .js/.mjs/.cjs, .sh/.bash);
// LANGUAGE_UNSPECIFIED when there is none to go by.
v1::Language LanguageFromPath(absl::string_view path);

}  // namespace warden::cli
