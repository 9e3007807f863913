#include "server/json_log.h"

#include <sstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"

namespace warden {
namespace {

TEST(JsonLogTest, EveryLineIsOneObjectWithTheMessageIntact) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::logger logger("test", sink);
  logger.set_formatter(JsonLogFormatter());
  const std::string hostile = "quote \" backslash \\ newline \n tab \t bell \a done";
  logger.warn("{}", hostile);
  logger.info("plain");

  std::istringstream lines(out.str());
  std::string line;
  std::vector<nlohmann::json> parsed;
  while (std::getline(lines, line)) {
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(j.is_discarded()) << line;
    parsed.push_back(j);
  }
  ASSERT_EQ(parsed.size(), 2u) << out.str();
  EXPECT_EQ(parsed[0]["msg"], hostile);
  EXPECT_EQ(parsed[0]["level"], "warning");
  EXPECT_TRUE(parsed[0].contains("time"));
  EXPECT_EQ(parsed[1]["msg"], "plain");
}

}  // namespace
}  // namespace warden
