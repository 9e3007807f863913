#include "agent/tool_arguments.h"

#include "gtest/gtest.h"

namespace warden::agent {
namespace {

TEST(ToolArgumentsTest, StrictJsonIsTakenAsIs) {
  EXPECT_EQ(ParseToolArguments(R"({"code": "print(1)\n"})")["code"], "print(1)\n");
}

TEST(ToolArgumentsTest, RawControlCharactersInsideStringsAreAccepted) {
  // As llama-cpp-python's grammar lets a model write them.
  nlohmann::json args = ParseToolArguments("{ \"code\": \"for i in range(2):\n\tprint(i)\r\x01\" }");
  ASSERT_TRUE(args.is_object());
  EXPECT_EQ(args["code"], "for i in range(2):\n\tprint(i)\r\x01");
}

TEST(ToolArgumentsTest, EscapesOnlyInsideStringsAndKeepsEscapedQuotes) {
  EXPECT_EQ(EscapeControlCharactersInStrings("{\n\"a\": \"x\\\"\ny\"\n}"), "{\n\"a\": \"x\\\"\\ny\"\n}");
}

TEST(ToolArgumentsTest, WhatIsNotJsonStaysInvalid) {
  EXPECT_TRUE(ParseToolArguments("{\"code\": \"print(1)").is_discarded());
  EXPECT_TRUE(ParseToolArguments("not json").is_discarded());
}

}  // namespace
}  // namespace warden::agent
