// `warden agent` command-line parsing.
#include "client/cli_args.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace warden::cli {
namespace {

using ::testing::HasSubstr;

TEST(AgentArgsTest, BuildsTheRequest) {
  auto parsed = ParseCommandLine({"agent", "--mode", "repair", "--verify", "python3 -m pytest -q", "--allow",
                                  "src/*", "--allow", "lib/", "--file", "a.py", "--file", "b.py:pkg/b.py",
                                  "--max-iterations", "5", "--model", "qwen", "--json", "fix the tests"},
                                 {});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const auto& command = std::get<AgentCommand>(parsed->command);
  EXPECT_TRUE(command.json);
  EXPECT_EQ(command.request.task(), "fix the tests");
  EXPECT_EQ(command.request.mode(), v1::AGENT_MODE_REPAIR);
  EXPECT_EQ(command.request.verify_command(), "python3 -m pytest -q");
  EXPECT_THAT(command.request.allowed_paths(), ::testing::ElementsAre("src/*", "lib/"));
  EXPECT_THAT(command.files, ::testing::ElementsAre("a.py", "b.py:pkg/b.py"));
  EXPECT_EQ(command.request.budget().max_iterations(), 5);
  EXPECT_EQ(command.request.model(), "qwen");
}

TEST(AgentArgsTest, SaysWhatAModeNeeds) {
  EXPECT_THAT(ParseCommandLine({"agent", "--mode", "debug", "x"}, {}).status().message(), HasSubstr("--code"));
  EXPECT_THAT(ParseCommandLine({"agent", "--mode", "repair", "x"}, {}).status().message(), HasSubstr("--verify"));
  EXPECT_THAT(ParseCommandLine({"agent", "--mode", "fast", "x"}, {}).status().message(), HasSubstr("solve, test"));
  EXPECT_THAT(ParseCommandLine({"agent"}, {}).status().message(), HasSubstr("TASK"));
  EXPECT_TRUE(ParseCommandLine({"agent", "--mode", "test", "--code", "s.py"}, {}).ok());
}

TEST(AgentArgsTest, RollbackAsksForForkedStepsInPythonOnly) {
  auto parsed = ParseCommandLine({"agent", "--rollback", "load the data"}, {});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(std::get<AgentCommand>(parsed->command).request.rollback_failed_steps());
  auto plain = ParseCommandLine({"agent", "load the data"}, {});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(std::get<AgentCommand>(plain->command).request.rollback_failed_steps());
  EXPECT_THAT(ParseCommandLine({"agent", "--rollback", "--language", "bash", "x"}, {}).status().message(),
              HasSubstr("--language python"));
}

}  // namespace
}  // namespace warden::cli
