// Usage errors that name what exists: `warden help` with a command that
// does not exist (ParseCommandLine, UsageFor; warden_cli.cc turns the error
// into exit status 2 and prints the usage after it).
#include <string>
#include <variant>
#include <vector>

#include "client/cli_args.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace warden::cli {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(HelpCommandTest, AnUnknownCommandIsAUsageErrorNamingTheCommandsThatExist) {
  const std::vector<std::string> args = {"help", "no-such-command"};
  auto parsed = ParseCommandLine(args, {});
  ASSERT_FALSE(parsed.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(parsed.status())) << parsed.status();
  EXPECT_THAT(parsed.status().message(), HasSubstr("unknown command 'no-such-command'"));
  EXPECT_THAT(UsageFor(args), AllOf(HasSubstr("commands:"), HasSubstr("exec FILE|-"), HasSubstr("session create"),
                                    HasSubstr("files put"), HasSubstr("agent"), HasSubstr("mcp")));
  EXPECT_FALSE(ParseCommandLine({"help", "session", "bogus"}, {}).ok());
}

TEST(HelpCommandTest, ACommandAGroupOrNothingIsHelp) {
  auto exec = ParseCommandLine({"help", "exec", "--json"}, {});
  ASSERT_TRUE(exec.ok()) << exec.status();
  EXPECT_THAT(std::get<HelpCommand>(exec->command).text, HasSubstr("usage: warden exec [options] FILE|-"));
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{{"help"}, {"help", "session"}}) {
    auto help = ParseCommandLine(args, {});
    ASSERT_TRUE(help.ok()) << help.status();
    EXPECT_THAT(std::get<HelpCommand>(help->command).text, HasSubstr("usage: warden [--addr ADDR] COMMAND"));
  }
}

}  // namespace
}  // namespace warden::cli
