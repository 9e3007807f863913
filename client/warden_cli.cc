// warden: the command-line client of wardend. Parses the command line,
// connects, runs the command and exits with its status; `warden --help`
// documents the commands, the environment and the exit codes.
#include <iostream>
#include <string>
#include <variant>
#include <vector>

#include "client/cli_args.h"
#include "client/commands.h"
#include "client/connection.h"
#include "client/exit_codes.h"
#include "warden/v1/executor.grpc.pb.h"

int main(int argc, char** argv) {
  using namespace warden::cli;

  std::vector<std::string> args(argv + 1, argv + argc);
  CliEnvironment env = CliEnvironment::FromProcess();
  auto invocation = ParseCommandLine(args, env);
  if (!invocation.ok()) {
    std::cerr << "warden: " << invocation.status().message() << "\n\n" << UsageFor(args);
    return kExitUsage;
  }
  if (const auto* help = std::get_if<HelpCommand>(&invocation->command)) {
    std::cout << help->text;
    return kExitOk;
  }

  auto endpoint = ParseEndpoint(invocation->address);
  if (!endpoint.ok()) {
    std::cerr << "warden: " << endpoint.status().message() << "\n";
    return kExitUsage;
  }
  auto channel = Connect(*endpoint, TlsFiles{env.ca_file, env.cert_file, env.key_file});
  if (!channel.ok()) {
    std::cerr << "warden: " << channel.status().message() << "\n";
    return kExitUsage;
  }
  auto stub = warden::v1::Executor::NewStub(*channel);
  auto agent_stub = warden::v1::Agent::NewStub(*channel);
  CommandRunner runner(stub.get(), env.token, invocation->address, {std::cin, std::cout, std::cerr},
                       /*cancel_on_signals=*/true);
  runner.set_agent_stub(agent_stub.get());
  auto templates_stub = warden::v1::Templates::NewStub(*channel);
  runner.set_templates_stub(templates_stub.get());
  auto volumes_stub = warden::v1::Volumes::NewStub(*channel);
  runner.set_volumes_stub(volumes_stub.get());
  return runner.Run(invocation->command);
}
