// The command table: each command's flags, operands, help and the builder
// that turns its parsed arguments into a typed Command. CLI11 parses the
// command line from a tree of apps built from the table; help is generated
// from the same table, so --help lists exactly what is accepted.
#include "client/cli_args.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <optional>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "client/connection.h"
#include "client/exit_codes.h"

namespace warden::cli {
namespace {

// ---- Flags ----

struct FlagSpec {
  absl::string_view name;   // "--language"
  absl::string_view value;  // its placeholder in help ("L"); empty for a switch
  absl::string_view help;
};

// Accepted by every command.
constexpr FlagSpec kAddrFlag{"--addr", "ADDR", "the daemon's address (default: $WARDEN_ADDR)"};
constexpr FlagSpec kHelpFlag{"--help", "", "show this help (also -h)"};

constexpr FlagSpec kJsonFlag{"--json", "", "print JSON instead of text"};
constexpr FlagSpec kSessionFlag{"--session", "ID", "run in this session (default: one-shot)"};
constexpr FlagSpec kFilesSessionFlag{"--session", "ID", "the session (default: $WARDEN_SESSION)"};
constexpr FlagSpec kLanguageFlag{"--language", "L", "python, javascript, bash, typescript, r or java"};
constexpr FlagSpec kLabelFlag{"--label", "K=V", "a label; repeat for more"};

// One command's arguments as CLI11 parsed them: its flags by name, then
// its operands in order.
class ParsedArgs {
 public:
  ParsedArgs(const CLI::App& command, std::vector<std::string> operands)
      : operands(std::move(operands)), command_(command) {}

  bool Has(absl::string_view flag) const { return !Values(flag).empty(); }
  // The last value given (a later flag wins), or "" when absent.
  std::string Value(absl::string_view flag) const {
    std::vector<std::string> values = Values(flag);
    return values.empty() ? "" : values.back();
  }
  std::vector<std::string> Values(absl::string_view flag) const {
    const CLI::Option* option = command_.get_option_no_throw(std::string(flag));
    return option == nullptr ? std::vector<std::string>{} : option->results();
  }

  const std::vector<std::string> operands;

 private:
  const CLI::App& command_;
};

bool IsOption(absl::string_view arg) { return arg.size() > 1 && arg[0] == '-'; }  // "-" is stdin

// ---- Flag values ----

absl::StatusOr<int64_t> PositiveNumber(const ParsedArgs& args, absl::string_view flag) {
  if (!args.Has(flag)) return 0;  // the server's default
  std::string text = args.Value(flag);
  int64_t value;
  if (!absl::SimpleAtoi(text, &value) || value <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " needs a positive whole number, not '", text, "'"));
  }
  return value;
}

// Whole seconds ("600") or an absl duration ("10m", "1h30m").
absl::StatusOr<int64_t> Seconds(const ParsedArgs& args, absl::string_view flag) {
  if (!args.Has(flag)) return 0;  // the server's default
  std::string text = args.Value(flag);
  int64_t seconds;
  if (absl::SimpleAtoi(text, &seconds) && seconds > 0) return seconds;
  absl::Duration duration;
  if (absl::ParseDuration(text, &duration) && duration >= absl::Seconds(1)) {
    return absl::ToInt64Seconds(duration);
  }
  return absl::InvalidArgumentError(
      absl::StrCat(flag, " needs seconds (600) or a duration (10m, 1h30m), not '", text, "'"));
}

absl::StatusOr<std::map<std::string, std::string>> Labels(const ParsedArgs& args) {
  std::map<std::string, std::string> labels;
  for (const std::string& label : args.Values("--label")) {
    size_t eq = label.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(absl::StrCat("--label needs KEY=VALUE, not '", label, "'"));
    }
    labels[label.substr(0, eq)] = label.substr(eq + 1);
  }
  return labels;
}

absl::StatusOr<v1::Language> LanguageFlag(const ParsedArgs& args) {
  if (!args.Has("--language")) return v1::LANGUAGE_UNSPECIFIED;
  return ParseLanguage(args.Value("--language"));
}

// --volume NAME:PATH[:ro|:rw], as docker run -v names a volume's mount.
absl::StatusOr<v1::VolumeMount> VolumeFlag(const std::string& flag) {
  std::vector<std::string> parts = absl::StrSplit(flag, ':');
  v1::VolumeMount mount;
  if (parts.size() == 3 && (parts[2] == "ro" || parts[2] == "rw")) {
    mount.set_read_only(parts[2] == "ro");
    parts.pop_back();
  }
  if (parts.size() != 2 || parts[0].empty() || !absl::StartsWith(parts[1], "/")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--volume needs NAME:PATH or NAME:PATH:ro with PATH absolute, like data:/mnt/data; not '", flag, "'"));
  }
  mount.set_volume(parts[0]);
  mount.set_path(parts[1]);
  return mount;
}

// Files live in a session's workspace, so `files` always needs one.
absl::StatusOr<std::string> FilesSession(const ParsedArgs& args, const CliEnvironment& env) {
  std::string session = args.Has("--session") ? args.Value("--session") : env.session;
  if (session.empty()) {
    return absl::InvalidArgumentError(
        "files live in a session's workspace: pass --session ID or set WARDEN_SESSION "
        "(start one with 'warden session create')");
  }
  return session;
}

// ---- Builders: parsed arguments -> Command ----

using Builder = absl::StatusOr<Command> (*)(const ParsedArgs&, const CliEnvironment&);

absl::StatusOr<Command> BuildExec(const ParsedArgs& args, const CliEnvironment&) {
  ExecCommand command;
  command.source = args.operands[0];
  command.json = args.Has("--json");
  v1::ExecuteRequest& request = command.request;
  request.set_session_id(args.Value("--session"));
  auto language = LanguageFlag(args);
  if (!language.ok()) return language.status();
  // A session has its own language; one-shot code can go by its file name.
  if (*language == v1::LANGUAGE_UNSPECIFIED && request.session_id().empty()) {
    language = LanguageFromPath(command.source);
  }
  request.set_language(*language);
  auto wall_ms = PositiveNumber(args, "--timeout-ms");
  if (!wall_ms.ok()) return wall_ms.status();
  auto memory_mb = PositiveNumber(args, "--memory-mb");
  if (!memory_mb.ok()) return memory_mb.status();
  auto cpu_ms = PositiveNumber(args, "--cpu-ms");
  if (!cpu_ms.ok()) return cpu_ms.status();
  if (*wall_ms > 0) request.mutable_limits()->set_wall_ms(*wall_ms);
  if (*memory_mb > 0) request.mutable_limits()->set_memory_mb(*memory_mb);
  if (*cpu_ms > 0) request.mutable_limits()->set_cpu_ms(*cpu_ms);
  request.set_template_(args.Value("--template"));
  if (!request.template_().empty() && !request.session_id().empty()) {
    return absl::InvalidArgumentError("--template is for a one-shot: a session runs in the template it was created in");
  }
  return command;
}

// --env NAME=VALUE, repeated.
absl::StatusOr<std::map<std::string, std::string>> EnvFlags(const ParsedArgs& args) {
  std::map<std::string, std::string> out;
  for (const std::string& kv : args.Values("--env")) {
    const size_t eq = kv.find('=');
    if (eq == 0 || eq == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("--env takes NAME=VALUE, not '", kv, "'"));
    }
    out[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return out;
}

// --allow, --deny and --allow-all as a policy; nullopt without any of them.
std::optional<v1::NetworkPolicy> NetworkFlags(const ParsedArgs& args) {
  const std::vector<std::string> allow = args.Values("--allow");
  const std::vector<std::string> deny = args.Values("--deny");
  if (allow.empty() && deny.empty() && !args.Has("--allow-all")) return std::nullopt;
  v1::NetworkPolicy network;
  network.set_allow_by_default(args.Has("--allow-all"));
  for (const std::string& entry : allow) network.add_allow(entry);
  for (const std::string& entry : deny) network.add_deny(entry);
  return network;
}

absl::StatusOr<Command> BuildSessionCreate(const ParsedArgs& args, const CliEnvironment&) {
  SessionCreateCommand command;
  command.json = args.Has("--json");
  v1::CreateSessionRequest& request = command.request;
  auto language = LanguageFlag(args);
  if (!language.ok()) return language.status();
  request.set_language(*language);
  auto memory_mb = PositiveNumber(args, "--memory-mb");
  if (!memory_mb.ok()) return memory_mb.status();
  if (*memory_mb > 0) request.mutable_limits()->set_memory_mb(*memory_mb);
  auto ttl = Seconds(args, "--ttl");
  if (!ttl.ok()) return ttl.status();
  request.set_ttl_seconds(*ttl);
  auto idle = Seconds(args, "--idle-timeout");
  if (!idle.ok()) return idle.status();
  request.set_idle_timeout_seconds(*idle);
  auto labels = Labels(args);
  if (!labels.ok()) return labels.status();
  request.mutable_labels()->insert(labels->begin(), labels->end());
  request.set_shared_workspace(args.Has("--machine"));
  auto env = EnvFlags(args);
  if (!env.ok()) return env.status();
  if (!env->empty() && !request.shared_workspace()) {
    return absl::InvalidArgumentError("--env needs --machine: a plain session's interpreter starts warm, before it");
  }
  request.mutable_env()->insert(env->begin(), env->end());
  // Its network policy (docs/api.md "Network"): only when asked for, so
  // that without these flags it gets its pool's, as before.
  if (std::optional<v1::NetworkPolicy> network = NetworkFlags(args)) *request.mutable_network() = *network;
  if (args.Has("--public-ports")) request.mutable_ports()->set_public_(true);
  request.set_template_(args.Value("--template"));
  for (const std::string& flag : args.Values("--volume")) {
    auto mount = VolumeFlag(flag);
    if (!mount.ok()) return mount.status();
    *request.add_volumes() = *std::move(mount);
  }
  return command;
}

absl::StatusOr<Command> BuildSessionList(const ParsedArgs& args, const CliEnvironment&) {
  SessionListCommand command;
  command.json = args.Has("--json");
  auto labels = Labels(args);
  if (!labels.ok()) return labels.status();
  command.request.mutable_labels()->insert(labels->begin(), labels->end());
  return command;
}

absl::StatusOr<Command> BuildSessionShow(const ParsedArgs& args, const CliEnvironment&) {
  SessionShowCommand command;
  command.json = args.Has("--json");
  command.request.set_session_id(args.operands[0]);
  return command;
}

absl::StatusOr<Command> BuildSessionClose(const ParsedArgs& args, const CliEnvironment&) {
  SessionCloseCommand command;
  command.request.set_session_id(args.operands[0]);
  return command;
}

absl::StatusOr<Command> BuildSessionInterrupt(const ParsedArgs& args, const CliEnvironment&) {
  SessionInterruptCommand command;
  command.json = args.Has("--json");
  command.request.set_session_id(args.operands[0]);
  return command;
}

absl::StatusOr<Command> BuildSessionNetwork(const ParsedArgs& args, const CliEnvironment&) {
  SessionNetworkCommand command;
  command.json = args.Has("--json");
  command.request.set_session_id(args.operands[0]);
  std::optional<v1::NetworkPolicy> network = NetworkFlags(args);
  if (network && args.Has("--none")) {
    return absl::InvalidArgumentError("--none takes the network away: give it alone, without --allow, --deny or --allow-all");
  }
  if (!network && !args.Has("--none")) {
    return absl::InvalidArgumentError(
        "say where the session may connect from now on: --allow DEST (repeatable), --deny DEST, --allow-all, "
        "or --none for no network");
  }
  // --none: a policy of its own that allows nothing (unset would fall back
  // to its pool's, which may allow something).
  *command.request.mutable_network() = network.value_or(v1::NetworkPolicy());
  return command;
}

absl::StatusOr<Command> BuildSessionRestart(const ParsedArgs& args, const CliEnvironment&) {
  SessionRestartCommand command;
  command.json = args.Has("--json");
  command.request.set_session_id(args.operands[0]);
  command.request.set_clear_workspace(args.Has("--clear-workspace"));
  return command;
}

absl::StatusOr<Command> BuildSessionFork(const ParsedArgs& args, const CliEnvironment&) {
  SessionForkCommand command;
  command.json = args.Has("--json");
  command.request.set_session_id(args.operands[0]);
  auto labels = Labels(args);
  if (!labels.ok()) return labels.status();
  command.request.mutable_labels()->insert(labels->begin(), labels->end());
  return command;
}

absl::StatusOr<Command> BuildSessionShell(const ParsedArgs& args, const CliEnvironment& env) {
  SessionShellCommand command;
  command.request.set_session_id(args.operands[0]);
  // The program: what follows the ID (after "--"), else a login shell.
  if (args.operands.size() > 1) {
    for (size_t i = 1; i < args.operands.size(); ++i) command.request.add_argv(args.operands[i]);
  } else {
    for (const char* arg : {"/bin/bash", "-l"}) command.request.add_argv(arg);
  }
  command.request.set_cwd(args.Value("--cwd"));
  (*command.request.mutable_env())["TERM"] = env.term.empty() ? "xterm-256color" : env.term;
  auto vars = EnvFlags(args);
  if (!vars.ok()) return vars.status();
  for (const auto& [name, value] : *vars) (*command.request.mutable_env())[name] = value;
  return command;
}

absl::StatusOr<Command> BuildFilesPut(const ParsedArgs& args, const CliEnvironment& env) {
  FilesPutCommand command;
  auto session = FilesSession(args, env);
  if (!session.ok()) return session.status();
  command.header.set_session_id(*session);
  command.local = args.operands[0];
  command.header.set_path(args.operands[1]);
  command.json = args.Has("--json");
  return command;
}

absl::StatusOr<Command> BuildFilesGet(const ParsedArgs& args, const CliEnvironment& env) {
  FilesGetCommand command;
  auto session = FilesSession(args, env);
  if (!session.ok()) return session.status();
  command.request.set_session_id(*session);
  command.request.set_path(args.operands[0]);
  command.local = args.operands[1];
  return command;
}

absl::StatusOr<Command> BuildFilesLs(const ParsedArgs& args, const CliEnvironment& env) {
  FilesLsCommand command;
  auto session = FilesSession(args, env);
  if (!session.ok()) return session.status();
  command.request.set_session_id(*session);
  if (!args.operands.empty()) command.request.set_path(args.operands[0]);
  command.json = args.Has("--json");
  return command;
}

absl::StatusOr<Command> BuildTemplateImport(const ParsedArgs& args, const CliEnvironment&) {
  TemplateImportCommand command;
  command.archive = args.operands[0];
  command.json = args.Has("--json");
  if (!args.Has("--name") || args.Value("--name").empty()) {
    return absl::InvalidArgumentError("warden template import needs --name NAME: what sessions will ask for");
  }
  command.header.set_name(args.Value("--name"));
  command.header.set_ref(args.Value("--ref"));
  command.header.set_private_(args.Has("--private"));
  return command;
}

absl::StatusOr<Command> BuildTemplateBuild(const ParsedArgs& args, const CliEnvironment&) {
  TemplateBuildCommand command;
  command.context = args.operands.empty() ? "." : args.operands[0];
  command.dockerfile = args.Has("--file") ? args.Value("--file") : command.context + "/Dockerfile";
  command.json = args.Has("--json");
  if (!args.Has("--name") || args.Value("--name").empty()) {
    return absl::InvalidArgumentError("warden template build needs --name NAME: what sessions will ask for");
  }
  command.header.set_name(args.Value("--name"));
  command.header.set_private_(args.Has("--private"));
  for (const std::string& arg : args.Values("--build-arg")) {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(absl::StrCat("--build-arg '", arg, "': give NAME=VALUE"));
    }
    (*command.header.mutable_build_args())[arg.substr(0, eq)] = arg.substr(eq + 1);
  }
  return command;
}

absl::StatusOr<Command> BuildTemplateList(const ParsedArgs& args, const CliEnvironment&) {
  TemplateListCommand command;
  command.json = args.Has("--json");
  return command;
}

absl::StatusOr<Command> BuildTemplateShow(const ParsedArgs& args, const CliEnvironment&) {
  TemplateShowCommand command;
  command.json = args.Has("--json");
  command.request.set_name(args.operands[0]);
  return command;
}

absl::StatusOr<Command> BuildTemplateRm(const ParsedArgs& args, const CliEnvironment&) {
  TemplateRmCommand command;
  command.name = args.operands[0];
  return command;
}

absl::StatusOr<Command> BuildVolumeCreate(const ParsedArgs& args, const CliEnvironment&) {
  VolumeCreateCommand command;
  command.request.set_name(args.operands[0]);
  auto mib = PositiveNumber(args, "--max-mb");
  if (!mib.ok()) return mib.status();
  if (*mib > (int64_t{1} << 40)) {
    return absl::InvalidArgumentError(absl::StrCat("--max-mb is in MiB: ", *mib, " is past what any volume may hold"));
  }
  command.request.set_max_bytes(*mib << 20);
  auto files = PositiveNumber(args, "--max-files");
  if (!files.ok()) return files.status();
  command.request.set_max_files(*files);
  command.json = args.Has("--json");
  return command;
}

absl::StatusOr<Command> BuildVolumeLs(const ParsedArgs& args, const CliEnvironment&) {
  VolumeLsCommand command;
  command.json = args.Has("--json");
  if (args.operands.empty()) {
    if (args.Has("--depth")) return absl::InvalidArgumentError("--depth lists a volume's files: name the VOLUME");
    return command;
  }
  command.files.set_volume(args.operands[0]);
  if (args.operands.size() > 1) command.files.set_path(std::string(absl::StripSuffix(args.operands[1], "/")));
  auto depth = PositiveNumber(args, "--depth");
  if (!depth.ok()) return depth.status();
  command.files.set_depth(static_cast<int32_t>(std::min<int64_t>(*depth, std::numeric_limits<int32_t>::max())));
  return command;
}

absl::StatusOr<Command> BuildVolumeRm(const ParsedArgs& args, const CliEnvironment&) {
  VolumeRmCommand command;
  command.request.set_name(args.operands[0]);
  return command;
}

absl::StatusOr<Command> BuildVolumePut(const ParsedArgs& args, const CliEnvironment&) {
  VolumePutCommand command;
  command.header.set_volume(args.operands[0]);
  command.local = args.operands[1];
  command.header.set_path(args.operands[2]);
  command.header.set_make_parents(true);
  if (args.Has("--mode")) {
    const std::string text = args.Value("--mode");
    uint32_t mode = 0;
    bool octal = !text.empty() && text.size() <= 5 &&
                 std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '7'; });
    if (octal) mode = static_cast<uint32_t>(std::stoul(text, nullptr, 8));
    if (!octal || mode > 07777) {
      return absl::InvalidArgumentError(absl::StrCat("--mode needs octal permission bits like 644 or 755, not '", text, "'"));
    }
    command.header.set_mode(mode);
  }
  command.json = args.Has("--json");
  return command;
}

absl::StatusOr<Command> BuildVolumeGet(const ParsedArgs& args, const CliEnvironment&) {
  VolumeGetCommand command;
  command.request.set_volume(args.operands[0]);
  command.request.set_path(args.operands[1]);
  command.local = args.operands[2];
  return command;
}

// ---- The command table ----

struct CommandSpec {
  absl::string_view name;      // "session create"
  absl::string_view operands;  // for the synopsis: "FILE|-"
  size_t min_operands;
  size_t max_operands;
  absl::string_view summary;    // one line, for the command list
  absl::string_view details;    // more help; may be empty
  std::vector<FlagSpec> flags;  // besides --addr and --help
  Builder build;
};

absl::StatusOr<Command> BuildAgent(const ParsedArgs& args, const CliEnvironment&) {
  AgentCommand command;
  command.json = args.Has("--json");
  v1::RunAgentRequest& request = command.request;
  request.set_task(args.operands.empty() ? "" : args.operands[0]);
  static const std::pair<const char*, v1::AgentMode> kModes[] = {
      {"solve", v1::AGENT_MODE_SOLVE}, {"test", v1::AGENT_MODE_TEST}, {"debug", v1::AGENT_MODE_DEBUG},
      {"tdd", v1::AGENT_MODE_TDD},     {"repair", v1::AGENT_MODE_REPAIR}};
  if (args.Has("--mode")) {
    const std::string mode = args.Value("--mode");
    bool found = false;
    for (const auto& [name, value] : kModes) {
      if (mode == name) request.set_mode(value), found = true;
    }
    if (!found) {
      return absl::InvalidArgumentError(
          absl::StrCat("--mode is '", mode, "'; it must be solve, test, debug, tdd or repair"));
    }
  }
  auto language = LanguageFlag(args);
  if (!language.ok()) return language.status();
  request.set_language(*language);
  auto iterations = PositiveNumber(args, "--max-iterations");
  if (!iterations.ok()) return iterations.status();
  auto tokens = PositiveNumber(args, "--max-tokens");
  if (!tokens.ok()) return tokens.status();
  auto wall = PositiveNumber(args, "--max-time-ms");
  if (!wall.ok()) return wall.status();
  request.mutable_budget()->set_max_iterations(static_cast<int32_t>(*iterations));
  request.mutable_budget()->set_max_tokens(*tokens);
  request.mutable_budget()->set_max_wall_ms(*wall);
  request.set_model(args.Value("--model"));
  request.set_keep_session(args.Has("--keep-session"));
  request.set_rollback_failed_steps(args.Has("--rollback"));
  request.set_error(args.Value("--error"));
  request.set_verify_command(args.Value("--verify"));
  for (const std::string& path : args.Values("--allow")) request.add_allowed_paths(path);
  command.files = args.Values("--file");
  command.code_file = args.Value("--code");
  const v1::AgentMode mode = request.mode();
  if ((mode == v1::AGENT_MODE_TEST || mode == v1::AGENT_MODE_DEBUG) && command.code_file.empty()) {
    return absl::InvalidArgumentError("--mode test and --mode debug need --code FILE (the code to test or fix)");
  }
  if (mode == v1::AGENT_MODE_REPAIR && request.verify_command().empty()) {
    return absl::InvalidArgumentError("--mode repair needs --verify CMD, e.g. --verify 'python3 -m pytest -q'");
  }
  if (request.rollback_failed_steps() && request.language() != v1::LANGUAGE_UNSPECIFIED &&
      request.language() != v1::LANGUAGE_PYTHON) {
    return absl::InvalidArgumentError("--rollback needs --language python: only Python sessions can be forked");
  }
  if (request.task().empty() && mode != v1::AGENT_MODE_TEST && mode != v1::AGENT_MODE_DEBUG) {
    return absl::InvalidArgumentError("warden agent needs a TASK");
  }
  return command;
}

absl::StatusOr<Command> BuildMcp(const ParsedArgs&, const CliEnvironment&) { return McpCommand{}; }

// One row per command; kept by hand in this layout for reading.
// clang-format off
const std::vector<CommandSpec>& Commands() {
  static const auto* commands = new std::vector<CommandSpec>{
      {"exec", "FILE|-", 1, 1, "Run code and stream its output.",
       "Runs FILE, or the code on stdin for \"-\", one-shot in a fresh sandbox or in a\n"
       "session. The program's stdout and stderr stream to this command's stdout and\n"
       "stderr as raw bytes; rich results print as their text/plain (images as\n"
       "\"[image/png, N bytes]\"); a traceback goes to stderr. Ctrl-C cancels the\n"
       "execution. With --json, prints one object when it ends: outcome, exit_code,\n"
       "signal, stdout, stderr, stdout_truncated, stderr_truncated, error ({name,\n"
       "value, traceback} or null), results (MIME bundles; binary types in base64),\n"
       "execution_count, wall_ms, cpu_ms, peak_memory_bytes, violation, message,\n"
       "session_id.\n",
       {{"--language", "L",
         "python, javascript, bash, typescript, r or java (default: by FILE's extension)"},
        kSessionFlag,
        {"--timeout-ms", "N", "wall-clock limit in milliseconds (default: the server's)"},
        {"--cpu-ms", "N", "CPU-time limit in milliseconds (default: the server's)"},
        {"--memory-mb", "N", "memory limit in MiB, one-shot only (default: the server's)"},
        {"--template", "NAME", "one-shot only: run in this template (default: the host's runtime)"},
        kJsonFlag},
       BuildExec},
      {"session create", "", 0, 0, "Start a session; prints its ID.",
       "A session keeps its interpreter's state and its workspace across exec calls\n"
       "until it is closed, expires (--ttl) or sits idle too long (--idle-timeout).\n",
       {{"--language", "L", "python, javascript, bash, typescript, r or java (default: the server's: python)"},
        {"--memory-mb", "N", "memory limit in MiB for the whole session"},
        {"--ttl", "S", "lifetime in seconds, or a duration like 2h (default: the server's)"},
        {"--idle-timeout", "S", "close after this long idle (default: the server's)"},
        kLabelFlag,
        {"--machine", "", "a shared workspace: one machine for its contexts, commands and terminals"},
        {"--env", "NAME=VALUE", "with --machine: an environment variable of all its processes"},
        {"--allow", "DEST", "its code may connect there (through the egress proxy): a host, *.domain, *,\n"
                            "an address or network, each with an optional :port; repeat for more"},
        {"--deny", "DEST", "refused unless an --allow entry names it; repeat for more"},
        {"--allow-all", "", "everything not denied may be reached (the operator's ceiling still narrows it)"},
        {"--public-ports", "", "its exposed ports need no token (if the operator allows public ports)"},
        {"--template", "NAME", "run in this template's image (default: the host's runtime)"},
        {"--volume", "NAME:PATH[:ro]", "mount your volume NAME at PATH (read-only with :ro); repeat for more"},
        {"--json", "", "print the session as JSON instead of its ID"}},
       BuildSessionCreate},
      {"session list", "", 0, 0, "List sessions: id, language, state, age, idle, memory, ...",
       "",
       {{"--label", "K=V", "only sessions with this label; repeat for more"}, kJsonFlag},
       BuildSessionList},
      {"session show", "ID", 1, 1, "Show one session.", "", {kJsonFlag}, BuildSessionShow},
      {"session close", "ID", 1, 1, "Close a session and delete its workspace.", "", {},
       BuildSessionClose},
      {"session interrupt", "ID", 1, 1, "Interrupt the session's running cell.",
       "Like Ctrl-C in a notebook (KeyboardInterrupt in Python); the session and its\n"
       "state survive.\n",
       {kJsonFlag},
       BuildSessionInterrupt},
      {"session network", "ID", 1, 1, "Change where a session's code may connect.",
       "The new policy applies to the session's next connections; open ones keep\n"
       "going. The operator's ceiling for the tenant still narrows it.\n",
       {{"--allow", "DEST", "a host, *.domain, *, an address or network, each with an optional :port;\n"
                            "repeat for more"},
        {"--deny", "DEST", "refused unless an --allow entry names it; repeat for more"},
        {"--allow-all", "", "everything not denied may be reached"},
        {"--none", "", "no network from now on"},
        kJsonFlag},
       BuildSessionNetwork},
      {"session restart", "ID", 1, 1, "Start a fresh interpreter in the session.",
       "The workspace is kept unless --clear-workspace.\n",
       {{"--clear-workspace", "", "also delete the session's files"}, kJsonFlag},
       BuildSessionRestart},
      {"session fork", "ID", 1, 1, "Copy a session into a new one; prints the new ID.",
       "The fork gets its own fresh sandbox with the source's limits and a copy of its\n"
       "variables and files (Python sessions); the source is not changed. What could\n"
       "not be copied (an open file, a socket, a thread) is named on stderr.\n",
       {{"--label", "K=V", "the fork's labels (default: the source's); repeat for more"}, kJsonFlag},
       BuildSessionFork},
      {"session shell", "ID [-- CMD ARGS...]", 1, 64, "Open a terminal in a session (bash, or CMD).",
       "A pseudo-terminal in the session's sandbox, as `docker exec -it` gives one:\n"
       "the session must have been created with a shared workspace (an E2B sandbox\n"
       "is one). Keys go to the remote program as typed (the local terminal is in\n"
       "raw mode while it runs) and its size follows the local window's. It ends\n"
       "when the program exits; the exit status is the program's. Without a local\n"
       "terminal (stdin piped), the input is sent as it comes.\n",
       {{"--cwd", "DIR", "the working directory (default: the session's home)"},
        {"--env", "NAME=VALUE", "an environment variable; repeat for more"}},
       BuildSessionShell},
      {"files put", "LOCAL|- REMOTE", 2, 2, "Upload a file into a session's workspace.",
       "REMOTE is relative to the workspace, e.g. data/in.csv; \"-\" reads stdin.\n",
       {kFilesSessionFlag, {"--json", "", "print the uploaded file's info as JSON"}},
       BuildFilesPut},
      {"files get", "REMOTE LOCAL|-", 2, 2, "Download a file from a session's workspace.",
       "\"-\" writes to stdout. LOCAL is only replaced once the whole file arrived.\n",
       {kFilesSessionFlag},
       BuildFilesGet},
      {"files ls", "[PATH]", 0, 1, "List a session's workspace (all of it without PATH).", "",
       {kFilesSessionFlag, kJsonFlag},
       BuildFilesLs},
      {"template import", "ARCHIVE|-", 1, 1, "Import an OCI image as a template sessions can ask for.",
       "ARCHIVE is an OCI image layout as a tar, or what `docker save` or\n"
       "`podman save` writes (gzip'd or not); \"-\" reads stdin. Its layers are\n"
       "unpacked on the server into a store shared by templates with the same\n"
       "layers (device files are left out, paths out of the root refused). The\n"
       "server then finds python3, node and bash on the image's PATH and says\n"
       "which languages its sessions can run. Progress prints on stderr; the\n"
       "template's name on stdout (with --json, the template).\n"
       "Operators import public templates; a tenant its own where the server's\n"
       "templates.tenants allows it (docs/templates.md).\n",
       {{"--name", "NAME", "the template's name ([A-Za-z0-9._-], at most 63)"},
        {"--ref", "REF", "which image of an archive holding several (its tag or ref name)"},
        {"--private", "", "an operator's own template rather than a public one"},
        kJsonFlag},
       BuildTemplateImport},
      {"template build", "[CONTEXT]", 0, 1, "Build a template from a Dockerfile (buildah, on the server).",
       "CONTEXT (default: the current directory) is sent to the server as a tar:\n"
       "what COPY and ADD take their files from (the server honours its\n"
       ".dockerignore). FROM names a template of the server (warden template\n"
       "list) or scratch - there is no registry; RUN steps run on the server,\n"
       "without network, in namespaces of their own. buildah's output prints\n"
       "on stderr as it comes; the template's name on stdout (with --json, the\n"
       "template). A failing step says which and why (docs/templates.md).\n",
       {{"--file", "PATH", "the Dockerfile (default: CONTEXT/Dockerfile)"},
        {"--name", "NAME", "the template's name ([A-Za-z0-9._-], at most 63)"},
        {"--build-arg", "NAME=VALUE", "an ARG's value; repeat for more"},
        {"--private", "", "an operator's own template rather than a public one"},
        kJsonFlag},
       BuildTemplateBuild},
      {"template list", "", 0, 0, "List the templates: your own, then the public ones.", "",
       {kJsonFlag},
       BuildTemplateList},
      {"template show", "NAME", 1, 1, "Show one template: digest, size, languages, layers.", "",
       {kJsonFlag},
       BuildTemplateShow},
      {"template rm", "NAME", 1, 1, "Delete a template.",
       "NAME is your own template of that name, else the public one (operators\n"
       "only). Sessions running in it keep running; snapshots taken in it\n"
       "restore only once an image with its digest is imported again.\n",
       {},
       BuildTemplateRm},
      {"volume create", "NAME", 1, 1, "Create a volume: files that outlive sessions.",
       "A volume is a directory tree of your own on the server, mounted into\n"
       "sessions at a path (session create --volume NAME:PATH), several at once,\n"
       "and kept when they end. Its quota is in bytes and files; a write past it\n"
       "fails with ENOSPC (docs/templates.md, \"Volumes\"). Prints its name.\n",
       {{"--max-mb", "N", "its quota in MiB (default: the server's, volumes.default_bytes)"},
        {"--max-files", "N", "the most files and directories it may hold (default: the server's)"},
        {"--json", "", "print the volume as JSON instead of its name"}},
       BuildVolumeCreate},
      {"volume ls", "[VOLUME [PATH]]", 0, 2, "List your volumes, or the files of one.",
       "Without VOLUME: your volumes, what they use of their quotas and how many\n"
       "sessions have each mounted now. With it: the entries under PATH (the\n"
       "volume's root without), --depth levels down.\n",
       {{"--depth", "N", "with VOLUME: levels below PATH to list (default 1)"}, kJsonFlag},
       BuildVolumeLs},
      {"volume rm", "NAME", 1, 1, "Delete a volume and everything in it.",
       "Refused while a session has it mounted (close those sessions first), or\n"
       "while a put or get of one of its files is under way.\n",
       {},
       BuildVolumeRm},
      {"volume put", "VOLUME LOCAL|- PATH", 3, 3, "Write a file into a volume, without a session.",
       "PATH is relative to the volume's root; missing directories are made, an\n"
       "existing file is replaced. \"-\" reads stdin.\n",
       {{"--mode", "OCTAL", "its permission bits (default 644)"},
        {"--json", "", "print the written file's entry as JSON"}},
       BuildVolumePut},
      {"volume get", "VOLUME PATH LOCAL|-", 3, 3, "Read a file out of a volume, without a session.",
       "\"-\" writes to stdout; a directory gets the file under its own name. LOCAL\n"
       "is replaced only once the whole file arrived.\n",
       {},
       BuildVolumeGet},
      {"agent", "TASK", 0, 1, "Give a task to the code agent; print its steps as they stream.",
       "The daemon's agent drives its configured LLM through generate -> execute ->\n"
       "analyze -> fix in a fresh session until the task is verifiably done or a\n"
       "budget runs out (docs/agent.md). Modes: solve (default); test (write pytest\n"
       "tests for --code); debug (fix --code, given --error); tdd (tests first, then\n"
       "the implementation); repair (patch the --file workspace until --verify\n"
       "passes, touching only --allow paths). Ctrl-C cancels the run. With --json,\n"
       "prints one JSON object per event per line, each with a \"type\"; the last is\n"
       "the final event: answer, all_succeeded, iterations, stop_reason,\n"
       "code_blocks, outputs, usage, tests, diff. Exit status: 0 when the run ended\n"
       "done on code that ran, 1 when it stopped otherwise, 125 on a Warden error.\n",
       {{"--mode", "M", "solve, test, debug, tdd or repair (default: solve)"},
        {"--language", "L", "python, javascript, bash, typescript, r or java (default: python)"},
        {"--code", "FILE", "test/debug: the code to test or fix (\"-\": stdin)"},
        {"--error", "TEXT", "debug: the error the code gives"},
        {"--file", "LOCAL[:REMOTE]", "upload into the workspace first; repeat for more"},
        {"--verify", "CMD", "repair: the command that must pass, e.g. 'python3 -m pytest -q'"},
        {"--allow", "PATH", "repair: a path or glob patches may touch; repeat for more"},
        {"--max-iterations", "N", "model turns (default: the server's)"},
        {"--max-tokens", "N", "tokens for the whole run (default: the server's)"},
        {"--max-time-ms", "N", "wall-clock budget (default: the server's)"},
        {"--model", "NAME", "ask for this model instead of the server's"},
        {"--keep-session", "", "leave the session open and print its ID"},
        {"--rollback", "", "fork before each step's code; undo a step that fails (python)"},
        {"--json", "", "print one JSON object per event per line"}},
       BuildAgent},
      {"mcp", "", 0, 0, "Serve MCP (Model Context Protocol) on stdin and stdout.",
       "For desktop MCP hosts (Claude Desktop, Cursor, VS Code): they start\n"
       "`warden mcp` and speak JSON-RPC over its stdin and stdout, one message per\n"
       "line. The tools (execute_code, create_session, ...) run on the daemon at\n"
       "WARDEN_ADDR with WARDEN_TOKEN, like every other command. Logs go to stderr;\n"
       "it exits when stdin closes (docs/integrations.md).\n",
       {},
       BuildMcp},
  };
  return *commands;
}
// clang-format on

const CommandSpec* FindCommand(absl::string_view name) {
  for (const CommandSpec& spec : Commands()) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

// ---- Help ----

constexpr char kEnvironmentHelp[] =
    "environment:\n"
    "  WARDEN_ADDR       the daemon's address: unix:PATH, HOST:PORT or [IPV6]:PORT\n"
    "                    (default unix:/run/warden/wardend.sock). TCP to any host\n"
    "                    but 127.0.0.1, ::1 or localhost uses TLS; loopback too\n"
    "                    when WARDEN_CA_FILE or WARDEN_CERT_FILE is set.\n"
    "  WARDEN_TOKEN      sent with every call as \"authorization: Bearer TOKEN\"\n"
    "  WARDEN_SESSION    the session 'warden files' works in, unless --session\n"
    "  WARDEN_CA_FILE    PEM roots to trust instead of the system's (TLS)\n"
    "  WARDEN_CERT_FILE  a client certificate and its key, PEM, for mTLS\n"
    "  WARDEN_KEY_FILE\n";

constexpr char kOtherExitStatus[] =
    "  0 on success; 125 for a gRPC error (one \"warden: CODE: message\" line on\n"
    "  stderr); 2 for bad usage, or a local file that cannot be read or written.\n";

std::string Synopsis(const CommandSpec& spec) {
  return absl::StrCat("warden ", spec.name, " [options]", spec.operands.empty() ? "" : " ",
                      spec.operands);
}

std::string FlagLine(const FlagSpec& flag) {
  std::string left = absl::StrCat(flag.name, flag.value.empty() ? "" : " ", flag.value);
  return absl::StrFormat("  %-18s %s\n", left, flag.help);
}

std::string HelpFor(const CommandSpec& spec) {
  std::string text = absl::StrCat("usage: ", Synopsis(spec), "\n\n", spec.summary, "\n");
  if (!spec.details.empty()) absl::StrAppend(&text, "\n", spec.details);
  text += "\noptions:\n";
  for (const FlagSpec& flag : spec.flags) text += FlagLine(flag);
  text += FlagLine(kAddrFlag) + FlagLine(kHelpFlag);
  absl::StrAppend(&text, "\nexit status:\n",
                  spec.name == "exec" ? ExitStatusHelp() : kOtherExitStatus);
  return text;
}

std::string CommandList() {
  std::string text = "commands:\n";
  for (const CommandSpec& spec : Commands()) {
    std::string usage = absl::StrCat(spec.name, spec.operands.empty() ? "" : " ", spec.operands);
    absl::StrAppendFormat(&text, "  %-26s %s\n", usage, spec.summary);
  }
  absl::StrAppendFormat(&text, "  %-26s %s\n", "help [COMMAND]", "Show a command's help.");
  return text;
}

constexpr char kTopLevelUsage[] = "usage: warden [--addr ADDR] COMMAND [options] [ARGS]\n";

std::string TopLevelHelp() {
  return absl::StrCat(
      kTopLevelUsage,
      "\n"
      "The command-line client of wardend, Warden's sandbox daemon: runs untrusted\n"
      "code in isolated sandboxes, one-shot or in sessions that keep their state.\n"
      "\n",
      CommandList(), "\nRun 'warden COMMAND --help' for a command's options.\n\n", kEnvironmentHelp,
      "\nexit status of 'warden exec':\n", ExitStatusHelp(),
      "\nexit status of the other commands:\n", kOtherExitStatus);
}

// What follows a usage error: short, pointing at the full help.
std::string ShortUsage(const CommandSpec* spec) {
  if (spec == nullptr) {
    return absl::StrCat(kTopLevelUsage, "\n", CommandList(), "\nRun 'warden --help' for more.\n");
  }
  return absl::StrCat("usage: ", Synopsis(*spec), "\nRun 'warden ", spec->name,
                      " --help' for its options.\n");
}

// "create, list, show" after "session".
std::string Subcommands(absl::string_view group) {
  std::vector<absl::string_view> names;
  for (const CommandSpec& spec : Commands()) {
    absl::string_view name = spec.name;
    if (absl::ConsumePrefix(&name, absl::StrCat(group, " "))) names.push_back(name);
  }
  return absl::StrJoin(names, ", ");
}

// ---- Parsing, by CLI11 ----

// What CLI11 records for a switch given without a value.
constexpr char kSwitchGiven[] = "given";

// The command words that lead to `app`: "session", "create".
std::vector<std::string> WordsOf(const CLI::App& app) {
  std::vector<std::string> words;
  for (const CLI::App* at = &app; at->get_parent() != nullptr; at = at->get_parent()) {
    words.insert(words.begin(), at->get_name());
  }
  return words;
}

using SpecTable = std::map<const CLI::App*, const CommandSpec*>;

// Help for CLI11's apps, from the command table: a command's own help; the
// general help for the root, a group ("session") and `help`.
class HelpFormatter final : public CLI::FormatterBase {
 public:
  explicit HelpFormatter(const SpecTable& specs) : specs_(specs) {}

  std::string make_help(const CLI::App* app, std::string, CLI::AppFormatMode) const override {
    auto it = specs_.find(app);
    return it != specs_.end() ? HelpFor(*it->second) : TopLevelHelp();
  }

 private:
  const SpecTable& specs_;  // not owned
};

// The command table as CLI11 parses it. The root holds what every command
// accepts (--addr, --help); a group ("session", "files") holds its
// commands; a command holds its flags and, as one positional, its
// operands. Every app falls through to its parent, so --addr may come
// before or after the command words, and whatever no app takes (an unknown
// option, an unknown command word, an operand too many) lands in the
// root's extras for ParseCommandLine to name.
class CommandLine {
 public:
  CommandLine();
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  // Parses the arguments after argv[0]. Fails only where CLI11 refuses by
  // itself (a flag's value missing at the end); what it found stays
  // readable below after a failure too.
  absl::Status Parse(const std::vector<std::string>& args);

  // The app of the last command word given; the root without any.
  const CLI::App& command() const {
    const CLI::App* app = &root_;
    while (!app->get_subcommands().empty()) app = app->get_subcommands().front();
    return *app;
  }
  // command()'s row of the table, when it is a whole command.
  const CommandSpec* spec() const {
    auto it = specs_.find(&command());
    return it == specs_.end() ? nullptr : it->second;
  }
  bool is_help_command() const { return &command() == help_; }
  bool help_requested() const { return help_requested_; }
  // What no app took, in order ("--" left out).
  std::vector<std::string> extras() const {
    std::vector<std::string> extras;
    for (std::string& extra : root_.remaining()) {
      if (extra != "--") extras.push_back(std::move(extra));
    }
    return extras;
  }
  // command()'s flags and operands.
  ParsedArgs Args() const {
    const CLI::Option* operands = command().get_option_no_throw(kOperands);
    return ParsedArgs(command(), operands == nullptr ? std::vector<std::string>{} : operands->results());
  }
  // --addr, wherever it was given; the last one wins.
  std::string address() const { return ParsedArgs(root_, {}).Value(kAddrFlag.name); }

 private:
  static constexpr char kOperands[] = "operands";
  static void AddOperands(CLI::App& command, absl::string_view placeholder);

  SpecTable specs_;  // before root_: its formatter refers to it
  CLI::App root_{"", "warden"};
  CLI::App* help_ = nullptr;  // `warden help [COMMAND]`
  bool help_requested_ = false;
};

CommandLine::CommandLine() {
  // Inherited by every app added below.
  root_.formatter(std::make_shared<HelpFormatter>(specs_));
  root_.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  root_.set_help_flag("-h,--help", std::string(kHelpFlag.help));
  root_.fallthrough();
  // One command word per level: once "session" is given, a later "files"
  // is an operand, never a second command.
  root_.require_subcommand(-1);
  const std::string addr_help(kAddrFlag.help);
  root_.add_option(std::string(kAddrFlag.name), addr_help)->type_name(std::string(kAddrFlag.value));

  for (const CommandSpec& spec : Commands()) {
    CLI::App* app = &root_;
    for (absl::string_view word : absl::StrSplit(spec.name, ' ')) {
      CLI::App* next = nullptr;
      for (CLI::App* sub : app->get_subcommands({})) {
        if (sub->get_name() == word) next = sub;
      }
      app = next != nullptr ? next : app->add_subcommand(std::string(word));
    }
    app->description(std::string(spec.summary));
    for (const FlagSpec& flag : spec.flags) {
      const std::string help(flag.help);
      if (flag.value.empty()) {
        // Given plainly, a switch's value is the marker; `--json=true`
        // gives "true", which ParseCommandLine refuses as the old parser did.
        app->add_flag(absl::StrCat(flag.name, "{", kSwitchGiven, "}"), help);
      } else {
        app->add_option(std::string(flag.name), help)->type_name(std::string(flag.value));
      }
    }
    if (spec.max_operands > 0) AddOperands(*app, spec.operands);
    specs_[app] = &spec;
  }
  help_ = root_.add_subcommand("help", "Show a command's help.");
  AddOperands(*help_, "COMMAND");
  root_.allow_extras();
}

void CommandLine::AddOperands(CLI::App& command, absl::string_view placeholder) {
  // Every operand, counted by ParseCommandLine, which says what is missing
  // or one too many. The minimum is never reached: CLI11 lets "--" end the
  // options (and not the command) only while a positional wants more.
  constexpr int kAll = 1 << 20;
  command.add_option(kOperands)->type_name(std::string(placeholder))->expected(kAll, kAll);
}

absl::Status CommandLine::Parse(const std::vector<std::string>& args) {
  // As CLI11 takes them, reversed. Two spellings it reads otherwise than
  // warden always has: `--flag=` (CLI11 would take the next argument for
  // its value; it is an empty one), and "--" before the command, which
  // ends nothing there.
  std::vector<std::string> reversed;
  bool options_ended = false, command_seen = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--" && !command_seen) continue;
    if (arg == kAddrFlag.name && !command_seen && i + 1 < args.size()) {
      reversed.push_back(arg);
      reversed.push_back(args[++i]);
      continue;
    }
    command_seen = command_seen || !IsOption(arg);
    options_ended = options_ended || arg == "--";
    if (!options_ended && absl::StartsWith(arg, "--") && absl::EndsWith(arg, "=") && arg.size() > 3) {
      reversed.push_back(arg.substr(0, arg.size() - 1));
      reversed.push_back("");
    } else {
      reversed.push_back(arg);
    }
  }
  std::reverse(reversed.begin(), reversed.end());
  try {
    root_.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    help_requested_ = true;
  } catch (const CLI::ArgumentMismatch& error) {
    // CLI11 ran out of arguments before a flag's value: the last one is
    // that flag.
    const std::string name = args.empty() ? "" : args.back();
    for (const CLI::App* app = &command(); app != nullptr; app = app->get_parent()) {
      const CLI::Option* option = app->get_option_no_throw(name);
      if (option != nullptr && IsOption(name)) {
        return absl::InvalidArgumentError(absl::StrCat(name, " needs a value: ", option->get_type_name()));
      }
    }
    return absl::InvalidArgumentError(error.what());
  } catch (const CLI::ParseError& error) {
    return absl::InvalidArgumentError(error.what());
  }
  return absl::OkStatus();
}

// Whether the option `arg` came before the last of the command's `words`
// words (options may come between them: `warden --addr A session list`).
bool BeforeTheCommand(const std::vector<std::string>& args, const std::string& arg, size_t words) {
  for (size_t i = 0; i < args.size() && words > 0; ++i) {
    if (args[i] == arg) return true;
    if (args[i] == kAddrFlag.name) {
      ++i;  // its value
    } else if (!IsOption(args[i])) {
      --words;
    }
  }
  return false;
}

// The command words after `help` (`warden help exec --json` asks about
// exec): options, --addr's value and "--" left out.
std::vector<std::string> HelpTopic(const std::vector<std::string>& args) {
  std::vector<std::string> topic;
  bool after_help = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == kAddrFlag.name) {
      ++i;
    } else if (IsOption(args[i])) {
      continue;
    } else if (after_help) {
      topic.push_back(args[i]);
    } else {
      after_help = true;  // the word "help"
    }
  }
  return topic;
}

Invocation Help(std::string text) { return Invocation{"", HelpCommand{std::move(text)}}; }

}  // namespace

CliEnvironment CliEnvironment::FromProcess() {
  auto get = [](const char* name) -> std::string {
    const char* value = std::getenv(name);
    return value == nullptr ? "" : value;
  };
  return CliEnvironment{get("WARDEN_ADDR"),    get("WARDEN_TOKEN"),     get("WARDEN_SESSION"),
                        get("WARDEN_CA_FILE"), get("WARDEN_CERT_FILE"), get("WARDEN_KEY_FILE"),
                        get("TERM")};
}

absl::StatusOr<v1::Language> ParseLanguage(absl::string_view name) {
  static const auto* kLanguages =
      new std::map<absl::string_view, v1::Language>{{"python", v1::LANGUAGE_PYTHON},
                                                    {"py", v1::LANGUAGE_PYTHON},
                                                    {"javascript", v1::LANGUAGE_JAVASCRIPT},
                                                    {"js", v1::LANGUAGE_JAVASCRIPT},
                                                    {"node", v1::LANGUAGE_JAVASCRIPT},
                                                    {"bash", v1::LANGUAGE_BASH},
                                                    {"sh", v1::LANGUAGE_BASH},
                                                    {"typescript", v1::LANGUAGE_TYPESCRIPT},
                                                    {"ts", v1::LANGUAGE_TYPESCRIPT},
                                                    {"r", v1::LANGUAGE_R},
                                                    {"java", v1::LANGUAGE_JAVA}};
  auto it = kLanguages->find(name);
  if (it == kLanguages->end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown language '", name, "': use python, javascript, bash, typescript, r or java"));
  }
  return it->second;
}

v1::Language LanguageFromPath(absl::string_view path) {
  static constexpr std::pair<absl::string_view, v1::Language> kExtensions[] = {
      {".py", v1::LANGUAGE_PYTHON},      {".js", v1::LANGUAGE_JAVASCRIPT},
      {".mjs", v1::LANGUAGE_JAVASCRIPT}, {".cjs", v1::LANGUAGE_JAVASCRIPT},
      {".sh", v1::LANGUAGE_BASH},        {".bash", v1::LANGUAGE_BASH},
      {".ts", v1::LANGUAGE_TYPESCRIPT},  {".R", v1::LANGUAGE_R},
      {".r", v1::LANGUAGE_R},            {".java", v1::LANGUAGE_JAVA}};
  for (const auto& [extension, language] : kExtensions) {
    if (absl::EndsWith(path, extension)) return language;
  }
  return v1::LANGUAGE_UNSPECIFIED;
}

absl::StatusOr<Invocation> ParseCommandLine(const std::vector<std::string>& args,
                                            const CliEnvironment& env) {
  CommandLine line;
  if (absl::Status parsed = line.Parse(args); !parsed.ok()) return parsed;
  const CommandSpec* spec = line.spec();
  const std::vector<std::string> words = WordsOf(line.command());
  const std::string path = absl::StrJoin(words, " ");
  std::vector<std::string> operands;  // what no command took that is not an option
  for (const std::string& extra : line.extras()) {
    if (!IsOption(extra)) {
      operands.push_back(extra);
      continue;
    }
    const std::string name = extra.substr(0, extra.find('='));
    if (words.empty() || BeforeTheCommand(args, extra, words.size())) {
      return absl::InvalidArgumentError(absl::StrCat("unknown option ", name, " before the command"));
    }
    if (line.is_help_command()) continue;  // a word of the topic (HelpTopic)
    return absl::InvalidArgumentError(absl::StrCat("unknown option ", name, " for 'warden ", path, "'"));
  }
  ParsedArgs parsed = line.Args();
  if (spec != nullptr) {
    for (const FlagSpec& flag : spec->flags) {
      if (!flag.value.empty()) continue;
      for (const std::string& value : parsed.Values(flag.name)) {
        if (value != kSwitchGiven) {
          return absl::InvalidArgumentError(absl::StrCat(flag.name, " takes no value"));
        }
      }
    }
  } else if (!line.is_help_command() && !operands.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown command '", path, path.empty() ? "" : " ", operands.front(), "'"));
  }

  if (line.help_requested()) return Help(spec != nullptr ? HelpFor(*spec) : TopLevelHelp());
  if (line.is_help_command()) {
    const std::string topic = absl::StrJoin(HelpTopic(args), " ");
    if (const CommandSpec* command = FindCommand(topic)) return Help(HelpFor(*command));
    // `warden help`, or a group (`warden help session`): the command list.
    if (topic.empty() || !Subcommands(topic).empty()) return Help(TopLevelHelp());
    return absl::InvalidArgumentError(absl::StrCat("unknown command '", topic, "'"));
  }
  if (spec == nullptr) {
    if (path.empty()) return absl::InvalidArgumentError("no command given");
    return absl::InvalidArgumentError(
        absl::StrCat("'warden ", path, "' needs a subcommand: ", Subcommands(path)));
  }

  operands.insert(operands.begin(), parsed.operands.begin(), parsed.operands.end());
  if (operands.size() < spec->min_operands) {
    return absl::InvalidArgumentError(
        absl::StrCat("'warden ", spec->name, "' needs ", spec->operands));
  }
  if (operands.size() > spec->max_operands) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'warden ", spec->name, "' takes no more arguments than ",
        spec->operands.empty() ? "none" : spec->operands, ", got '", operands.back(), "'"));
  }
  auto command = spec->build(parsed, env);
  if (!command.ok()) return command.status();
  return Invocation{ResolveAddress(line.address(), env.addr), *std::move(command)};
}

std::string UsageFor(const std::vector<std::string>& args) {
  CommandLine line;
  (void)line.Parse(args);  // a failed parse still knows the command it reached
  return ShortUsage(line.spec());
}

}  // namespace warden::cli
