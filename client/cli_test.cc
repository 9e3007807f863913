// Unit tests of the CLI's pure parts: argument parsing, JSON and text
// rendering, the outcome -> exit code table, addresses and credentials,
// and how streamed events are assembled and printed. commands_test.cc runs
// the commands themselves against a fake daemon.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "client/cli_args.h"
#include "client/cli_output.h"
#include "client/commands.h"
#include "client/connection.h"
#include "client/execution_stream.h"
#include "client/exit_codes.h"
#include "client/local_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace warden::cli {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

// ---- Parsing ----

absl::StatusOr<Invocation> Parse(std::vector<std::string> args, CliEnvironment env = {}) {
  return ParseCommandLine(args, env);
}

template <typename T>
T Get(const absl::StatusOr<Invocation>& invocation) {
  EXPECT_TRUE(invocation.ok()) << invocation.status();
  EXPECT_TRUE(std::holds_alternative<T>(invocation->command));
  return std::get<T>(invocation->command);
}

TEST(ParseCommandLineTest, ExecTakesEveryFlag) {
  auto exec = Get<ExecCommand>(Parse({"exec", "--language", "bash", "--session=s-1", "--timeout-ms",
                                      "5000", "--cpu-ms", "1500", "--memory-mb", "256", "--json", "job.py"}));
  EXPECT_EQ(exec.source, "job.py");
  EXPECT_TRUE(exec.json);
  EXPECT_EQ(exec.request.language(), v1::LANGUAGE_BASH);
  EXPECT_EQ(exec.request.session_id(), "s-1");
  EXPECT_EQ(exec.request.limits().wall_ms(), 5000);
  EXPECT_EQ(exec.request.limits().memory_mb(), 256);
  EXPECT_EQ(exec.request.limits().cpu_ms(), 1500);
  EXPECT_TRUE(exec.request.code().empty());  // read when it runs
}

TEST(ParseCommandLineTest, TemplatesAreAskedForByName) {
  EXPECT_EQ(Get<ExecCommand>(Parse({"exec", "--template", "myimage", "a.py"})).request.template_(), "myimage");
  EXPECT_EQ(Get<SessionCreateCommand>(Parse({"session", "create", "--template=myimage"})).request.template_(),
            "myimage");
  auto session_exec = Parse({"exec", "--template", "myimage", "--session", "s-1", "a.py"});
  ASSERT_FALSE(session_exec.ok());
  EXPECT_NE(session_exec.status().message().find("a session runs in the template it was created in"),
            std::string::npos);
  auto import = Get<TemplateImportCommand>(
      Parse({"template", "import", "image.tar", "--name", "myimage", "--ref", "app:1.0", "--private", "--json"}));
  EXPECT_EQ(import.archive, "image.tar");
  EXPECT_EQ(import.header.name(), "myimage");
  EXPECT_EQ(import.header.ref(), "app:1.0");
  EXPECT_TRUE(import.header.private_());
  EXPECT_TRUE(import.json);
  auto unnamed = Parse({"template", "import", "image.tar"});
  ASSERT_FALSE(unnamed.ok());
  EXPECT_NE(unnamed.status().message().find("needs --name NAME"), std::string::npos);
  EXPECT_TRUE(Get<TemplateListCommand>(Parse({"template", "list", "--json"})).json);
  EXPECT_EQ(Get<TemplateShowCommand>(Parse({"template", "show", "myimage"})).request.name(), "myimage");
  EXPECT_EQ(Get<TemplateRmCommand>(Parse({"template", "rm", "myimage"})).name, "myimage");
  EXPECT_FALSE(Parse({"template", "rm"}).ok());
  auto build = Get<TemplateBuildCommand>(
      Parse({"template", "build", "app", "--name", "built", "--build-arg", "A=1", "--build-arg", "B=x=y"}));
  EXPECT_EQ(build.context, "app");
  EXPECT_EQ(build.dockerfile, "app/Dockerfile");
  EXPECT_EQ(build.header.name(), "built");
  EXPECT_EQ(build.header.build_args().at("A"), "1");
  EXPECT_EQ(build.header.build_args().at("B"), "x=y");
  EXPECT_EQ(Get<TemplateBuildCommand>(Parse({"template", "build", "--name", "b", "--file", "D"})).dockerfile, "D");
  EXPECT_EQ(Get<TemplateBuildCommand>(Parse({"template", "build", "--name", "b"})).context, ".");
  auto bad_arg = Parse({"template", "build", "--name", "b", "--build-arg", "NOVALUE"});
  ASSERT_FALSE(bad_arg.ok());
  EXPECT_NE(bad_arg.status().message().find("give NAME=VALUE"), std::string::npos);
}

TEST(ParseCommandLineTest, VolumeCommandsBuildTheirRequests) {
  auto create = Get<VolumeCreateCommand>(Parse({"volume", "create", "data", "--max-mb", "64", "--max-files", "100"}));
  EXPECT_EQ(create.request.name(), "data");
  EXPECT_EQ(create.request.max_bytes(), 64 << 20);
  EXPECT_EQ(create.request.max_files(), 100);
  EXPECT_EQ(Get<VolumeCreateCommand>(Parse({"volume", "create", "data"})).request.max_bytes(), 0);  // the server's
  EXPECT_FALSE(Parse({"volume", "create", "data", "--max-mb", "0"}).ok());

  auto volumes = Get<VolumeLsCommand>(Parse({"volume", "ls", "--json"}));
  EXPECT_TRUE(volumes.files.volume().empty());
  EXPECT_TRUE(volumes.json);
  auto files = Get<VolumeLsCommand>(Parse({"volume", "ls", "data", "repo/", "--depth", "3"}));
  EXPECT_EQ(files.files.volume(), "data");
  EXPECT_EQ(files.files.path(), "repo");
  EXPECT_EQ(files.files.depth(), 3);
  auto stray_depth = Parse({"volume", "ls", "--depth", "2"});
  ASSERT_FALSE(stray_depth.ok());
  EXPECT_THAT(stray_depth.status().message(), HasSubstr("name the VOLUME"));

  EXPECT_EQ(Get<VolumeRmCommand>(Parse({"volume", "rm", "data"})).request.name(), "data");
  EXPECT_FALSE(Parse({"volume", "rm"}).ok());

  auto put = Get<VolumePutCommand>(Parse({"volume", "put", "data", "-", "bin/run.sh", "--mode", "755"}));
  EXPECT_EQ(put.header.volume(), "data");
  EXPECT_EQ(put.local, "-");
  EXPECT_EQ(put.header.path(), "bin/run.sh");
  EXPECT_TRUE(put.header.make_parents());
  EXPECT_EQ(put.header.mode(), 0755u);
  EXPECT_FALSE(Get<VolumePutCommand>(Parse({"volume", "put", "data", "a", "b"})).header.has_mode());
  auto bad_mode = Parse({"volume", "put", "data", "a", "b", "--mode", "u+x"});
  ASSERT_FALSE(bad_mode.ok());
  EXPECT_THAT(bad_mode.status().message(), HasSubstr("octal permission bits"));

  auto get = Get<VolumeGetCommand>(Parse({"volume", "get", "data", "out.csv", "-"}));
  EXPECT_EQ(get.request.volume(), "data");
  EXPECT_EQ(get.request.path(), "out.csv");
  EXPECT_EQ(get.local, "-");
  EXPECT_FALSE(Parse({"volume", "get", "data", "out.csv"}).ok());
}

TEST(ParseCommandLineTest, SessionCreateMountsVolumesAsDockerNamesThem) {
  auto create = Get<SessionCreateCommand>(
      Parse({"session", "create", "--volume", "data:/mnt/data", "--volume=cache:/cache:ro"}));
  ASSERT_EQ(create.request.volumes_size(), 2);
  EXPECT_EQ(create.request.volumes(0).volume(), "data");
  EXPECT_EQ(create.request.volumes(0).path(), "/mnt/data");
  EXPECT_FALSE(create.request.volumes(0).read_only());
  EXPECT_EQ(create.request.volumes(1).volume(), "cache");
  EXPECT_TRUE(create.request.volumes(1).read_only());
  for (const char* bad : {"data", "data:mnt", ":/mnt", "data:/mnt:rx", "a:/b:ro:x"}) {
    auto parsed = Parse({"session", "create", "--volume", bad});
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_THAT(parsed.status().message(), HasSubstr("--volume needs NAME:PATH")) << bad;
  }
}

TEST(ParseCommandLineTest, ExecReadsStdinForDash) {
  auto exec = Get<ExecCommand>(Parse({"exec", "-"}));
  EXPECT_EQ(exec.source, "-");
  EXPECT_FALSE(exec.json);
  EXPECT_FALSE(exec.request.has_limits());
}

TEST(ParseCommandLineTest, OneShotExecGuessesTheLanguageFromTheFileName) {
  EXPECT_EQ(Get<ExecCommand>(Parse({"exec", "a.py"})).request.language(), v1::LANGUAGE_PYTHON);
  EXPECT_EQ(Get<ExecCommand>(Parse({"exec", "a.js"})).request.language(), v1::LANGUAGE_JAVASCRIPT);
  EXPECT_EQ(Get<ExecCommand>(Parse({"exec", "a.sh"})).request.language(), v1::LANGUAGE_BASH);
  EXPECT_EQ(Get<ExecCommand>(Parse({"exec", "-"})).request.language(), v1::LANGUAGE_UNSPECIFIED);
  // A session has its own language: nothing is guessed.
  EXPECT_EQ(Get<ExecCommand>(Parse({"exec", "--session", "s", "a.sh"})).request.language(),
            v1::LANGUAGE_UNSPECIFIED);
}

TEST(ParseCommandLineTest, RejectsBadExecArguments) {
  EXPECT_FALSE(Parse({"exec"}).ok());
  EXPECT_FALSE(Parse({"exec", "a.py", "b.py"}).ok());
  EXPECT_FALSE(Parse({"exec", "--timeout-ms", "soon", "a.py"}).ok());
  EXPECT_FALSE(Parse({"exec", "--timeout-ms", "-5", "a.py"}).ok());
  EXPECT_FALSE(Parse({"exec", "--memory-mb", "0", "a.py"}).ok());
  EXPECT_FALSE(Parse({"exec", "--cpu-ms", "-1", "a.py"}).ok());
  EXPECT_FALSE(Parse({"exec", "--language", "cobol", "a.py"}).ok());
  EXPECT_FALSE(Parse({"exec", "--json=yes", "a.py"}).ok());
  EXPECT_FALSE(Parse({"exec", "a.py", "--timeout-ms"}).ok());
  EXPECT_FALSE(Parse({"exec", "--clear-workspace", "a.py"}).ok());
}

TEST(ParseCommandLineTest, ErrorsSayWhatIsWrong) {
  EXPECT_THAT(Parse({"exec", "--bogus", "a.py"}).status().message(),
              HasSubstr("unknown option --bogus"));
  EXPECT_THAT(Parse({"session"}).status().message(), HasSubstr("create, list, show"));
  EXPECT_THAT(Parse({"frobnicate"}).status().message(), HasSubstr("unknown command 'frobnicate'"));
  EXPECT_THAT(Parse({}).status().message(), HasSubstr("no command"));
}

TEST(ParseCommandLineTest, DoubleDashEndsOptions) {
  EXPECT_EQ(Get<ExecCommand>(Parse({"exec", "--", "--weird-name.py"})).source, "--weird-name.py");
}

TEST(ParseCommandLineTest, AddressComesFromFlagThenEnvironmentThenDefault) {
  CliEnvironment env;
  EXPECT_EQ(Parse({"session", "list"}, env)->address, "unix:/run/warden/wardend.sock");
  env.addr = "unix:/tmp/env.sock";
  EXPECT_EQ(Parse({"session", "list"}, env)->address, "unix:/tmp/env.sock");
  EXPECT_EQ(Parse({"--addr", "unix:/tmp/a.sock", "session", "list"}, env)->address,
            "unix:/tmp/a.sock");
  EXPECT_EQ(Parse({"session", "list", "--addr=localhost:5"}, env)->address, "localhost:5");
}

TEST(ParseCommandLineTest, HelpAnywhereShowsThatCommandsHelp) {
  EXPECT_THAT(Get<HelpCommand>(Parse({"--help"})).text, HasSubstr("usage: warden [--addr"));
  EXPECT_THAT(Get<HelpCommand>(Parse({"exec", "--help"})).text,
              HasSubstr("usage: warden exec [options] FILE|-"));
  EXPECT_THAT(Get<HelpCommand>(Parse({"exec", "-h"})).text, HasSubstr("--timeout-ms"));
  EXPECT_THAT(Get<HelpCommand>(Parse({"--help", "files", "put"})).text,
              HasSubstr("usage: warden files put"));
  EXPECT_THAT(Get<HelpCommand>(Parse({"help", "session", "create"})).text, HasSubstr("--ttl"));
  // Help wins over missing operands.
  EXPECT_THAT(Get<HelpCommand>(Parse({"session", "show", "--help"})).text, HasSubstr("ID"));
}

TEST(ParseCommandLineTest, ExecHelpDocumentsEveryOutcomesExitStatus) {
  std::string help = Get<HelpCommand>(Parse({"exec", "--help"})).text;
  for (int i = v1::Outcome_MIN + 1; i <= v1::Outcome_MAX; ++i) {
    EXPECT_THAT(help, HasSubstr(OutcomeName(static_cast<v1::Outcome>(i)))) << i;
  }
}

TEST(ParseCommandLineTest, SessionCreateBuildsTheRequest) {
  auto create = Get<SessionCreateCommand>(
      Parse({"session", "create", "--language", "js", "--memory-mb", "1024", "--ttl", "2h",
             "--idle-timeout", "90", "--label", "team=ml", "--label", "run=a=b", "--json"}));
  EXPECT_TRUE(create.json);
  EXPECT_EQ(create.request.language(), v1::LANGUAGE_JAVASCRIPT);
  EXPECT_EQ(create.request.limits().memory_mb(), 1024);
  EXPECT_EQ(create.request.ttl_seconds(), 7200);
  EXPECT_EQ(create.request.idle_timeout_seconds(), 90);
  EXPECT_THAT(create.request.labels(),
              UnorderedElementsAre(Pair("team", "ml"), Pair("run", "a=b")));
}

TEST(ParseCommandLineTest, SessionCreateTakesANetworkPolicyOnlyWhenAskedFor) {
  auto plain = Get<SessionCreateCommand>(Parse({"session", "create"}));
  EXPECT_FALSE(plain.request.has_network());  // its pool's policy, if any
  auto create = Get<SessionCreateCommand>(Parse({"session", "create", "--allow", "pypi.org", "--allow",
                                                 "*.pythonhosted.org:443", "--deny", "10.0.0.0/8"}));
  ASSERT_TRUE(create.request.has_network());
  EXPECT_FALSE(create.request.network().allow_by_default());
  EXPECT_THAT(create.request.network().allow(), ElementsAre("pypi.org", "*.pythonhosted.org:443"));
  EXPECT_THAT(create.request.network().deny(), ElementsAre("10.0.0.0/8"));
  auto open = Get<SessionCreateCommand>(Parse({"session", "create", "--allow-all", "--deny", "evil.example"}));
  EXPECT_TRUE(open.request.network().allow_by_default());
  EXPECT_THAT(open.request.network().deny(), ElementsAre("evil.example"));
}

TEST(ParseCommandLineTest, SessionNetworkReplacesThePolicyOrTakesItAway) {
  auto update = Get<SessionNetworkCommand>(Parse({"session", "network", "s-1", "--allow", "api.example"}));
  EXPECT_EQ(update.request.session_id(), "s-1");
  ASSERT_TRUE(update.request.has_network());
  EXPECT_THAT(update.request.network().allow(), ElementsAre("api.example"));
  // --none: a policy that allows nothing, not "unset" (which is its pool's).
  auto none = Get<SessionNetworkCommand>(Parse({"session", "network", "s-1", "--none"}));
  ASSERT_TRUE(none.request.has_network());
  EXPECT_FALSE(none.request.network().allow_by_default());
  EXPECT_THAT(none.request.network().allow(), ElementsAre());
  absl::StatusOr<Invocation> nothing = Parse({"session", "network", "s-1"});
  ASSERT_FALSE(nothing.ok());
  EXPECT_THAT(std::string(nothing.status().message()), HasSubstr("--none"));
  EXPECT_FALSE(Parse({"session", "network", "s-1", "--none", "--allow", "x.example"}).ok());
  EXPECT_TRUE(Get<SessionCreateCommand>(Parse({"session", "create", "--public-ports"})).request.ports().public_());
  EXPECT_FALSE(Get<SessionCreateCommand>(Parse({"session", "create"})).request.has_ports());
}

TEST(ParseCommandLineTest, SessionCreateRejectsBadValues) {
  EXPECT_FALSE(Parse({"session", "create", "--label", "novalue"}).ok());
  EXPECT_FALSE(Parse({"session", "create", "--label", "=v"}).ok());
  EXPECT_FALSE(Parse({"session", "create", "--ttl", "soon"}).ok());
  EXPECT_FALSE(Parse({"session", "create", "--ttl", "100ms"}).ok());
  EXPECT_FALSE(Parse({"session", "create", "extra"}).ok());
}

TEST(ParseCommandLineTest, SessionCommandsTakeTheirId) {
  EXPECT_EQ(Get<SessionShowCommand>(Parse({"session", "show", "s-1"})).request.session_id(), "s-1");
  EXPECT_EQ(Get<SessionCloseCommand>(Parse({"session", "close", "s-2"})).request.session_id(),
            "s-2");
  EXPECT_EQ(
      Get<SessionInterruptCommand>(Parse({"session", "interrupt", "s-3"})).request.session_id(),
      "s-3");
  auto restart =
      Get<SessionRestartCommand>(Parse({"session", "restart", "s-4", "--clear-workspace"}));
  EXPECT_EQ(restart.request.session_id(), "s-4");
  EXPECT_TRUE(restart.request.clear_workspace());
  auto fork = Get<SessionForkCommand>(Parse({"session", "fork", "s-5", "--label", "branch=b"}));
  EXPECT_EQ(fork.request.session_id(), "s-5");
  EXPECT_EQ(fork.request.labels().at("branch"), "b");
  EXPECT_FALSE(Parse({"session", "fork"}).ok());
  EXPECT_FALSE(Parse({"session", "close"}).ok());
  EXPECT_FALSE(Parse({"session", "close", "a", "b"}).ok());
}

TEST(ParseCommandLineTest, SessionShellRunsALoginShellOrTheGivenCommand) {
  CliEnvironment env;
  env.term = "screen";
  auto shell = Get<SessionShellCommand>(Parse({"session", "shell", "s-1", "--env", "A=b"}, env));
  EXPECT_EQ(shell.request.session_id(), "s-1");
  EXPECT_THAT(shell.request.argv(), ElementsAre("/bin/bash", "-l"));
  EXPECT_EQ(shell.request.env().at("TERM"), "screen");
  EXPECT_EQ(shell.request.env().at("A"), "b");
  auto command = Get<SessionShellCommand>(Parse({"session", "shell", "s-1", "--cwd", "/tmp", "--", "top", "-b"}));
  EXPECT_THAT(command.request.argv(), ElementsAre("top", "-b"));
  EXPECT_EQ(command.request.cwd(), "/tmp");
  EXPECT_EQ(command.request.env().at("TERM"), "xterm-256color");
  EXPECT_FALSE(Parse({"session", "shell"}).ok());
  EXPECT_THAT(Parse({"session", "shell", "s-1", "--env", "nope"}).status().message(), HasSubstr("NAME=VALUE"));
  auto machine = Get<SessionCreateCommand>(Parse({"session", "create", "--machine", "--env", "X=1"}));
  EXPECT_TRUE(machine.request.shared_workspace());
  EXPECT_EQ(machine.request.env().at("X"), "1");
  EXPECT_THAT(Parse({"session", "create", "--env", "X=1"}).status().message(), HasSubstr("--machine"));
}

TEST(ParseCommandLineTest, SessionListFiltersByLabel) {
  auto list = Get<SessionListCommand>(Parse({"session", "list", "--label", "team=ml"}));
  EXPECT_THAT(list.request.labels(), ElementsAre(Pair("team", "ml")));
}

TEST(ParseCommandLineTest, FilesNeedASessionFromFlagOrEnvironment) {
  EXPECT_THAT(Parse({"files", "ls"}).status().message(), HasSubstr("WARDEN_SESSION"));
  CliEnvironment env;
  env.session = "from-env";
  EXPECT_EQ(Get<FilesLsCommand>(Parse({"files", "ls"}, env)).request.session_id(), "from-env");
  EXPECT_EQ(
      Get<FilesLsCommand>(Parse({"files", "ls", "--session", "flag"}, env)).request.session_id(),
      "flag");
}

TEST(ParseCommandLineTest, FilesCommandsTakeTheirPaths) {
  CliEnvironment env;
  env.session = "s";
  auto put = Get<FilesPutCommand>(Parse({"files", "put", "local.csv", "data/in.csv"}, env));
  EXPECT_EQ(put.local, "local.csv");
  EXPECT_EQ(put.header.path(), "data/in.csv");
  EXPECT_EQ(put.header.session_id(), "s");
  auto get = Get<FilesGetCommand>(Parse({"files", "get", "out.png", "-"}, env));
  EXPECT_EQ(get.request.path(), "out.png");
  EXPECT_EQ(get.local, "-");
  auto ls = Get<FilesLsCommand>(Parse({"files", "ls", "data", "--json"}, env));
  EXPECT_EQ(ls.request.path(), "data");
  EXPECT_TRUE(ls.json);
  EXPECT_FALSE(Parse({"files", "put", "only-one"}, env).ok());
  EXPECT_FALSE(Parse({"files", "get", "a", "b", "c"}, env).ok());
}

TEST(UsageForTest, NamesTheCommandOrListsThemAll) {
  EXPECT_THAT(UsageFor({"exec", "--bogus"}), HasSubstr("usage: warden exec"));
  EXPECT_THAT(UsageFor({"frob"}), HasSubstr("session create"));
}

// ---- Exit codes ----

v1::ExecuteResponse Response(v1::Outcome outcome, int exit_code = -1, int signal = 0) {
  v1::ExecuteResponse response;
  response.set_outcome(outcome);
  response.set_exit_code(exit_code);
  response.set_signal(signal);
  return response;
}

TEST(ExitCodeForTest, MapsEveryOutcome) {
  EXPECT_EQ(ExitCodeFor(Response(v1::OUTCOME_OK, 0)), 0);
  EXPECT_EQ(ExitCodeFor(Response(v1::OUTCOME_ERROR)), 1);
  EXPECT_EQ(ExitCodeFor(Response(v1::OUTCOME_NONZERO_EXIT, 3)), 3);
  EXPECT_EQ(ExitCodeFor(Response(v1::OUTCOME_SIGNALED, -1, 11)), 139);
  EXPECT_EQ(ExitCodeFor(Response(v1::OUTCOME_WALL_TIMEOUT)), 124);
  EXPECT_EQ(ExitCodeFor(Response(v1::OUTCOME_CPU_TIMEOUT)), 124);
  EXPECT_EQ(ExitCodeFor(Response(v1::OUTCOME_SETUP_ERROR)), 125);
  EXPECT_EQ(ExitCodeFor(Response(v1::OUTCOME_INTERNAL)), 125);
  EXPECT_EQ(ExitCodeFor(Response(v1::OUTCOME_SESSION_LOST)), 126);
  EXPECT_EQ(ExitCodeFor(Response(v1::OUTCOME_INTERRUPTED)), 130);
  EXPECT_EQ(ExitCodeFor(Response(v1::OUTCOME_MEMORY_LIMIT)), 137);
  EXPECT_EQ(ExitCodeFor(Response(v1::OUTCOME_OUTPUT_LIMIT)), 153);
  EXPECT_EQ(ExitCodeFor(Response(v1::OUTCOME_VIOLATION)), 159);
  EXPECT_EQ(ExitCodeFor(Response(v1::OUTCOME_UNSPECIFIED)), 125);
}

TEST(ExitCodeForTest, AFailedBashCellExitsWithItsStatus) {
  EXPECT_EQ(ExitCodeFor(Response(v1::OUTCOME_ERROR, 7)), 7);
  v1::ExecuteResponse raised = Response(v1::OUTCOME_ERROR, 7);
  raised.mutable_error()->set_name("ValueError");
  EXPECT_EQ(ExitCodeFor(raised), 1);
}

TEST(ExitCodeForTest, NonzeroExitNeverExitsZero) {
  EXPECT_EQ(ExitCodeFor(Response(v1::OUTCOME_NONZERO_EXIT, 0)), 1);
  EXPECT_EQ(ExitCodeFor(Response(v1::OUTCOME_NONZERO_EXIT, 300)), 1);
  EXPECT_EQ(ExitCodeFor(Response(v1::OUTCOME_NONZERO_EXIT, 255)), 255);
}

TEST(ExitCodeForTest, OnlyOkExitsZero) {
  for (int i = v1::Outcome_MIN; i <= v1::Outcome_MAX; ++i) {
    auto outcome = static_cast<v1::Outcome>(i);
    EXPECT_EQ(ExitCodeFor(Response(outcome, 0, 0)) == 0, outcome == v1::OUTCOME_OK)
        << OutcomeName(outcome);
  }
}

// ---- JSON ----

v1::ExecuteResponse RichResponse() {
  v1::ExecuteResponse response = Response(v1::OUTCOME_ERROR, -1);
  response.set_stdout("hello\n");
  response.set_stderr("warn\n");
  response.set_execution_count(4);
  response.set_wall_ms(120);
  response.set_cpu_ms(80);
  response.set_peak_memory_bytes(1 << 20);
  response.set_session_id("s-1");
  v1::Result* figure = response.add_results();
  (*figure->mutable_data())["text/plain"] = "<Figure>";
  (*figure->mutable_data())["image/png"] = std::string("\x89PNG\r\n\x1a\n\0", 9);
  response.mutable_error()->set_name("ZeroDivisionError");
  response.mutable_error()->set_value("division by zero");
  response.mutable_error()->add_traceback("Traceback (most recent call last):");
  response.mutable_error()->add_traceback("ZeroDivisionError: division by zero");
  return response;
}

TEST(ExecuteResponseToJsonTest, HasEveryDocumentedKey) {
  nlohmann::json json = ExecuteResponseToJson(RichResponse());
  for (const char* key :
       {"outcome", "exit_code", "stdout", "stderr", "error", "results", "execution_count",
        "wall_ms", "cpu_ms", "peak_memory_bytes", "session_id", "signal", "violation", "message",
        "stdout_truncated", "stderr_truncated"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
  EXPECT_EQ(json["outcome"], "ERROR");
  EXPECT_EQ(json["exit_code"], -1);
  EXPECT_EQ(json["stdout"], "hello\n");
  EXPECT_EQ(json["stderr"], "warn\n");
  EXPECT_EQ(json["execution_count"], 4);
  EXPECT_EQ(json["wall_ms"], 120);
  EXPECT_EQ(json["cpu_ms"], 80);
  EXPECT_EQ(json["peak_memory_bytes"], 1 << 20);
  EXPECT_EQ(json["session_id"], "s-1");
  EXPECT_TRUE(json["violation"].is_null());
  EXPECT_EQ(json["error"]["name"], "ZeroDivisionError");
  EXPECT_EQ(json["error"]["value"], "division by zero");
  EXPECT_EQ(json["error"]["traceback"].size(), 2u);
}

TEST(ExecuteResponseToJsonTest, EncodesBinaryMimeTypesInBase64) {
  nlohmann::json results = ExecuteResponseToJson(RichResponse())["results"];
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0]["text/plain"], "<Figure>");
  std::string png;
  ASSERT_TRUE(absl::Base64Unescape(results[0]["image/png"].get<std::string>(), &png));
  EXPECT_EQ(png, std::string("\x89PNG\r\n\x1a\n\0", 9));
}

TEST(ExecuteResponseToJsonTest, ErrorIsNullWithoutOne) {
  nlohmann::json json = ExecuteResponseToJson(Response(v1::OUTCOME_OK, 0));
  EXPECT_TRUE(json["error"].is_null());
  EXPECT_TRUE(json["results"].is_array());
  EXPECT_TRUE(json["session_id"].is_null());
}

TEST(DumpJsonTest, NonUtf8OutputStillMakesValidJson) {
  v1::ExecuteResponse response = Response(v1::OUTCOME_OK, 0);
  response.set_stdout(std::string("ok \xff\xfe bytes", 11));
  std::string text = DumpJson(ExecuteResponseToJson(response));
  nlohmann::json parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(parsed.is_discarded()) << text;
  EXPECT_THAT(parsed["stdout"].get<std::string>(), HasSubstr("ok "));
  EXPECT_THAT(parsed["stdout"].get<std::string>(), HasSubstr("\xEF\xBF\xBD"));  // U+FFFD
}

TEST(IsBinaryMimeTest, TextTypesStayText) {
  EXPECT_FALSE(IsBinaryMime("text/plain"));
  EXPECT_FALSE(IsBinaryMime("text/html"));
  EXPECT_FALSE(IsBinaryMime("image/svg+xml"));
  EXPECT_FALSE(IsBinaryMime("application/json"));
  EXPECT_FALSE(IsBinaryMime("application/vnd.vegalite.v5+json"));
  EXPECT_TRUE(IsBinaryMime("image/png"));
  EXPECT_TRUE(IsBinaryMime("image/jpeg"));
  EXPECT_TRUE(IsBinaryMime("application/pdf"));
}

TEST(SessionToJsonTest, NamesEnumsAndSortsLabels) {
  v1::Session session;
  session.set_id("s-1");
  session.set_language(v1::LANGUAGE_PYTHON);
  session.set_state(v1::SESSION_STATE_IDLE);
  (*session.mutable_labels())["b"] = "2";
  (*session.mutable_labels())["a"] = "1";
  session.set_execution_count(3);
  session.mutable_limits()->set_memory_mb(512);
  nlohmann::json json = SessionToJson(session);
  EXPECT_EQ(json["id"], "s-1");
  EXPECT_EQ(json["language"], "PYTHON");
  EXPECT_EQ(json["state"], "IDLE");
  EXPECT_EQ(json["labels"].dump(), R"({"a":"1","b":"2"})");
  EXPECT_EQ(json["execution_count"], 3);
  EXPECT_EQ(json["limits"]["memory_mb"], 512);
  EXPECT_TRUE(json["lost_reason"].is_null());
}

// ---- Text ----

TEST(RenderResultTextTest, ShowsTextPlainAndNotesImages) {
  EXPECT_EQ(RenderResultText(RichResponse().results(0)), "<Figure>\n[image/png, 9 bytes]\n");
  v1::Result image_only;
  (*image_only.mutable_data())["image/png"] = std::string(12345, 'x');
  EXPECT_EQ(RenderResultText(image_only), "[image/png, 12345 bytes]\n");
  v1::Result html;
  (*html.mutable_data())["text/plain"] = "df";
  (*html.mutable_data())["text/html"] = "<table/>";
  EXPECT_EQ(RenderResultText(html), "df\n");  // text/plain stands for the other text types
}

TEST(RenderErrorTextTest, PrefersTheTraceback) {
  EXPECT_EQ(RenderErrorText(RichResponse().error()),
            "Traceback (most recent call last):\nZeroDivisionError: division by zero\n");
  v1::Error bare;
  bare.set_name("SyntaxError");
  bare.set_value("invalid syntax");
  EXPECT_EQ(RenderErrorText(bare), "SyntaxError: invalid syntax\n");
}

TEST(RenderOutcomeNotesTest, SaysWhatTheOutputCannot) {
  EXPECT_EQ(RenderOutcomeNotes(Response(v1::OUTCOME_OK, 0)), "");
  EXPECT_EQ(RenderOutcomeNotes(Response(v1::OUTCOME_NONZERO_EXIT, 2)), "");
  v1::ExecuteResponse timeout = Response(v1::OUTCOME_WALL_TIMEOUT);
  timeout.set_message("wall-clock limit of 1000 ms");
  EXPECT_EQ(RenderOutcomeNotes(timeout), "warden: WALL_TIMEOUT: wall-clock limit of 1000 ms\n");
  v1::ExecuteResponse violation = Response(v1::OUTCOME_VIOLATION);
  violation.set_violation("ptrace");
  EXPECT_EQ(RenderOutcomeNotes(violation), "warden: VIOLATION: forbidden system call ptrace\n");
  v1::ExecuteResponse truncated = Response(v1::OUTCOME_OK, 0);
  truncated.set_stdout_truncated(true);
  EXPECT_THAT(RenderOutcomeNotes(truncated), HasSubstr("stdout was truncated"));
}

TEST(FormatTest, DurationsAndSizesReadEasily) {
  EXPECT_EQ(FormatDuration(950), "950ms");
  EXPECT_EQ(FormatDuration(42'000), "42s");
  EXPECT_EQ(FormatDuration(303'000), "5m03s");
  EXPECT_EQ(FormatDuration(7'620'000), "2h07m");
  EXPECT_EQ(FormatDuration(273'600'000), "3d04h");
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(12 * 1024), "12.0 KiB");
  EXPECT_EQ(FormatBytes(3 * 1024 * 1024 / 2), "1.5 MiB");
}

TEST(RenderSessionTableTest, OneRowPerSessionUnderAHeader) {
  google::protobuf::RepeatedPtrField<v1::Session> sessions;
  v1::Session* s = sessions.Add();
  s->set_id("s-1");
  s->set_language(v1::LANGUAGE_BASH);
  s->set_state(v1::SESSION_STATE_BUSY);
  s->set_age_ms(61'000);
  s->set_idle_ms(0);
  s->set_memory_bytes(2 * 1024 * 1024);
  s->set_execution_count(7);
  (*s->mutable_labels())["team"] = "ml";
  EXPECT_EQ(RenderSessionTable(sessions),
            "ID   LANGUAGE  STATE  AGE    IDLE  MEMORY   EXECUTIONS  LABELS\n"
            "s-1  bash      busy   1m01s  0ms   2.0 MiB  7           team=ml\n");
}

TEST(RenderFileTableTest, MarksDirectories) {
  google::protobuf::RepeatedPtrField<v1::FileInfo> files;
  v1::FileInfo* dir = files.Add();
  dir->set_path("data");
  dir->set_type("directory");
  v1::FileInfo* file = files.Add();
  file->set_path("data/in.csv");
  file->set_size(42);
  file->set_type("file");
  EXPECT_EQ(RenderFileTable(files),
            "TYPE       SIZE  PATH\n"
            "directory  -     data/\n"
            "file       42    data/in.csv\n");
}

// ---- Streamed executions ----

v1::ExecuteEvent Stdout(const std::string& data) {
  v1::ExecuteEvent event;
  event.set_stdout(data);
  return event;
}

v1::ExecuteEvent Stderr(const std::string& data) {
  v1::ExecuteEvent event;
  event.set_stderr(data);
  return event;
}

v1::ExecuteEvent Summary(const v1::ExecuteResponse& response) {
  v1::ExecuteEvent event;
  *event.mutable_summary() = response;
  return event;
}

TEST(ExecutionCollectorTest, FillsWhatTheSummaryLeftEmpty) {
  ExecutionCollector collector;
  collector.Add(Stdout("a"));
  collector.Add(Stderr("e"));
  collector.Add(Stdout("b"));
  v1::ExecuteEvent error;
  *error.mutable_error() = RichResponse().error();
  collector.Add(error);
  v1::ExecuteEvent display;
  *display.mutable_display() = RichResponse().results(0);
  collector.Add(display);
  EXPECT_FALSE(collector.has_summary());
  collector.Add(Summary(Response(v1::OUTCOME_ERROR)));
  ASSERT_TRUE(collector.has_summary());
  v1::ExecuteResponse response = collector.Response();
  EXPECT_EQ(response.outcome(), v1::OUTCOME_ERROR);
  EXPECT_EQ(response.stdout(), "ab");
  EXPECT_EQ(response.stderr(), "e");
  EXPECT_EQ(response.error().name(), "ZeroDivisionError");
  EXPECT_EQ(response.results_size(), 1);
}

TEST(ExecutionCollectorTest, TheSummaryWins) {
  ExecutionCollector collector;
  collector.Add(Stdout("partial"));
  v1::ExecuteResponse summary = Response(v1::OUTCOME_OK, 0);
  summary.set_stdout("complete");
  collector.Add(Summary(summary));
  EXPECT_EQ(collector.Response().stdout(), "complete");
}

TEST(LiveTextPrinterTest, StreamsOutputAndAddsOnlyWhatWasNotShown) {
  std::ostringstream out, err;
  LiveTextPrinter printer(out, err);
  printer.Print(Stdout("1\n"));
  printer.Print(Stderr("no newline"));
  v1::ExecuteEvent result;
  *result.mutable_result() = RichResponse().results(0);
  printer.Print(result);
  EXPECT_EQ(out.str(), "1\n<Figure>\n[image/png, 9 bytes]\n");
  EXPECT_EQ(err.str(), "no newline");

  v1::ExecuteResponse response = RichResponse();  // its error was never streamed
  response.set_stdout("1\n");
  printer.Finish(response);
  EXPECT_EQ(out.str(), "1\n<Figure>\n[image/png, 9 bytes]\n");
  EXPECT_EQ(err.str(),
            "no newline\nTraceback (most recent call last):\n"
            "ZeroDivisionError: division by zero\n");
}

TEST(LiveTextPrinterTest, PrintsASummaryOnlyResponse) {
  std::ostringstream out, err;
  LiveTextPrinter printer(out, err);
  v1::ExecuteResponse response = Response(v1::OUTCOME_MEMORY_LIMIT);
  response.set_stdout("before\n");
  response.set_message("512 MiB");
  printer.Finish(response);
  EXPECT_EQ(out.str(), "before\n");
  EXPECT_EQ(err.str(), "warden: MEMORY_LIMIT: 512 MiB\n");
}

// ---- Addresses and credentials ----

TEST(ResolveAddressTest, FlagThenEnvironmentThenDefault) {
  EXPECT_EQ(ResolveAddress("a:1", "b:2"), "a:1");
  EXPECT_EQ(ResolveAddress("", "b:2"), "b:2");
  EXPECT_EQ(ResolveAddress("", ""), kDefaultAddress);
}

struct EndpointCase {
  std::string address;
  std::string target;
  std::string host;
  Transport transport;
};

class EndpointTransportTest : public ::testing::TestWithParam<EndpointCase> {};

TEST_P(EndpointTransportTest, PlaintextOnlyForLocalTransports) {
  const EndpointCase& c = GetParam();
  auto endpoint = ParseEndpoint(c.address);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  EXPECT_EQ(endpoint->target, c.target);
  EXPECT_EQ(endpoint->host, c.host);
  EXPECT_EQ(endpoint->transport, c.transport);
}

INSTANTIATE_TEST_SUITE_P(
    Addresses, EndpointTransportTest,
    ::testing::Values(
        EndpointCase{"unix:/run/warden/wardend.sock", "unix:/run/warden/wardend.sock", "",
                     Transport::kUnixSocket},
        EndpointCase{"unix-abstract:warden", "unix-abstract:warden", "", Transport::kUnixSocket},
        EndpointCase{"/tmp/w.sock", "unix:/tmp/w.sock", "", Transport::kUnixSocket},
        EndpointCase{"127.0.0.1:50051", "127.0.0.1:50051", "127.0.0.1", Transport::kLoopbackTcp},
        EndpointCase{"127.1.2.3:50051", "127.1.2.3:50051", "127.1.2.3", Transport::kLoopbackTcp},
        EndpointCase{"localhost:50051", "localhost:50051", "localhost", Transport::kLoopbackTcp},
        EndpointCase{"[::1]:50051", "[::1]:50051", "::1", Transport::kLoopbackTcp},
        EndpointCase{"dns:///localhost:50051", "dns:///localhost:50051", "localhost",
                     Transport::kLoopbackTcp},
        EndpointCase{"ipv4:127.0.0.1:1", "ipv4:127.0.0.1:1", "127.0.0.1", Transport::kLoopbackTcp},
        EndpointCase{"ipv6:[::1]:1", "ipv6:[::1]:1", "::1", Transport::kLoopbackTcp},
        EndpointCase{"warden.example.com:443", "warden.example.com:443", "warden.example.com",
                     Transport::kTls},
        EndpointCase{"10.0.0.5:50051", "10.0.0.5:50051", "10.0.0.5", Transport::kTls},
        EndpointCase{"[2001:db8::1]:50051", "[2001:db8::1]:50051", "2001:db8::1", Transport::kTls},
        EndpointCase{"dns://8.8.8.8/warden.example.com:443", "dns://8.8.8.8/warden.example.com:443",
                     "warden.example.com", Transport::kTls},
        // Looks local, is not: a name that merely starts with "localhost".
        EndpointCase{"localhost.evil.com:443", "localhost.evil.com:443", "localhost.evil.com",
                     Transport::kTls},
        // One remote address among loopback ones makes the whole channel remote.
        EndpointCase{"ipv4:127.0.0.1:1,10.0.0.1:1", "ipv4:127.0.0.1:1,10.0.0.1:1", "127.0.0.1",
                     Transport::kTls}),
    [](const ::testing::TestParamInfo<EndpointCase>& info) {
      std::string name;
      for (char c : info.param.address)
        name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name;
    });

TEST(ParseEndpointTest, RejectsWhatIsNotAnAddress) {
  EXPECT_FALSE(ParseEndpoint("").ok());
  EXPECT_FALSE(ParseEndpoint("http://localhost:80").ok());
  EXPECT_FALSE(ParseEndpoint(":50051").ok());
}

TEST(IsLoopbackHostTest, KnowsTheLoopbackNames) {
  EXPECT_TRUE(IsLoopbackHost("localhost"));
  EXPECT_TRUE(IsLoopbackHost("LOCALHOST"));
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_TRUE(IsLoopbackHost("::ffff:127.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackHost("128.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost("::"));
  EXPECT_FALSE(IsLoopbackHost("example.com"));
}

std::string WriteTemp(const std::string& content) {
  char path[] = "/tmp/warden_cli_test_XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
  close(fd);
  return path;
}

TEST(SslOptionsFromTest, ReadsTheFilesItIsGiven) {
  std::string ca = WriteTemp("CA PEM"), cert = WriteTemp("CERT PEM"), key = WriteTemp("KEY PEM");
  auto options = SslOptionsFrom({ca, cert, key});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->pem_root_certs, "CA PEM");
  EXPECT_EQ(options->pem_cert_chain, "CERT PEM");
  EXPECT_EQ(options->pem_private_key, "KEY PEM");
  EXPECT_TRUE(SslOptionsFrom({}).ok());  // the system's roots
  for (const std::string& path : {ca, cert, key}) unlink(path.c_str());
}

TEST(SslOptionsFromTest, RefusesHalfAnIdentityOrAMissingFile) {
  std::string cert = WriteTemp("CERT PEM");
  EXPECT_THAT(SslOptionsFrom({"", cert, ""}).status().message(), HasSubstr("WARDEN_KEY_FILE"));
  EXPECT_THAT(SslOptionsFrom({"/no/such/ca.pem", "", ""}).status().message(),
              HasSubstr("/no/such/ca.pem"));
  unlink(cert.c_str());
}

TEST(DescribeRpcErrorTest, OneLineWithTheCodeName) {
  grpc::Status not_found(grpc::StatusCode::NOT_FOUND, "no session s-9");
  EXPECT_EQ(DescribeRpcError(not_found, "unix:/x"), "NOT_FOUND: no session s-9");
  grpc::Status unavailable(grpc::StatusCode::UNAVAILABLE, "connection refused");
  EXPECT_THAT(DescribeRpcError(unavailable, "unix:/x"), HasSubstr("WARDEN_ADDR"));
  grpc::Status cannot_start(grpc::StatusCode::UNAVAILABLE,
                            "python workers cannot start: bind source /k/python does not exist");
  EXPECT_THAT(DescribeRpcError(cannot_start, "unix:/x"),
              AllOf(HasSubstr("wardend --check"), Not(HasSubstr("WARDEN_ADDR"))));
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::UNAUTHENTICATED), "UNAUTHENTICATED");
  EXPECT_EQ(StatusCodeName(grpc::StatusCode::DEADLINE_EXCEEDED), "DEADLINE_EXCEEDED");
}

TEST(ExecDeadlineTest, IsTheTimeoutPlusAMargin) {
  EXPECT_EQ(ExecDeadline(5000), absl::Seconds(5) + kExecMargin);
  EXPECT_EQ(ExecDeadline(0), kExecDefaultDeadline);
}

// ---- Local files ----

TEST(AtomicFileWriterTest, ReplacesTheTargetOnlyOnCommit) {
  std::string target = WriteTemp("old");
  {
    auto writer = AtomicFileWriter::Create(target);
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE(writer->Write("new content").ok());
  }  // abandoned: the target is untouched, the temporary file gone
  EXPECT_EQ(ReadAll(target, std::cin).value(), "old");
  auto writer = AtomicFileWriter::Create(target);
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE(writer->Write("new content").ok());
  ASSERT_TRUE(writer->Commit().ok());
  EXPECT_EQ(ReadAll(target, std::cin).value(), "new content");
  unlink(target.c_str());
}

TEST(ReadAllTest, ReadsStdinForDash) {
  std::istringstream in("print(1)\n");
  EXPECT_EQ(ReadAll("-", in).value(), "print(1)\n");
  EXPECT_FALSE(ReadAll("/no/such/file.py", in).ok());
}

}  // namespace
}  // namespace warden::cli
