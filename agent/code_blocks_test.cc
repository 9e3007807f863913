#include "agent/code_blocks.h"

#include "gtest/gtest.h"

namespace warden::agent {
namespace {

TEST(CodeBlocksTest, FindsFencedBlocksAndTagsInOrder) {
  auto blocks = ExtractCodeBlocks(
      "First:\n```python\nx = 1\nprint(x)\n```\nthen\n<execute_python>\nprint(2)\n</execute_python>\n"
      "and\n```\nplain()\n```\n");
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_EQ(blocks[0].language, "python");
  EXPECT_EQ(blocks[0].text, "x = 1\nprint(x)");
  EXPECT_EQ(blocks[1].text, "print(2)");
  EXPECT_EQ(blocks[2].language, "");
  EXPECT_EQ(blocks[2].text, "plain()");
}

TEST(CodeBlocksTest, SkipsOutputAndProseBlocks) {
  auto blocks = ExtractCodeBlocks("```text\n42\n```\n```json\n{}\n```\n```py\nok()\n```");
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0].text, "ok()");
}

TEST(CodeBlocksTest, FileHeaderMakesAFileAndDiffAPatch) {
  auto blocks = ExtractCodeBlocks("```python\n# file: pkg/mod.py\ndef f():\n    return 1\n```\n```diff\n--- a/x\n+++ b/x\n```");
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0].kind, CodeBlock::Kind::kFile);
  EXPECT_EQ(blocks[0].path, "pkg/mod.py");
  EXPECT_EQ(blocks[0].text, "def f():\n    return 1");
  EXPECT_EQ(blocks[1].kind, CodeBlock::Kind::kPatch);
}

TEST(CodeBlocksTest, AnUnclosedBlockRunsToTheEnd) {
  auto blocks = ExtractCodeBlocks("```python\nprint('cut off')");
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0].text, "print('cut off')");
}

}  // namespace
}  // namespace warden::agent
