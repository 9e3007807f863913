// The E2B front's pure pieces: NDJSON lines as E2B's SDKs parse them, and
// multipart uploads, bad ones included.
#include "gtest/gtest.h"
#include "fronts/e2b/execution_lines.h"
#include "fronts/e2b/multipart.h"

namespace warden::e2b {
namespace {

using nlohmann::json;

TEST(ExecutionLinesTest, ResultsCarryEveryMimeTypeUnderE2bsNames) {
  v1::ExecuteEvent event;
  auto& data = *event.mutable_result()->mutable_data();
  data["text/plain"] = "42";
  data["image/png"] = std::string("\x89PNG", 4);
  data["application/json"] = "{\"a\": 1}";
  data["application/x-custom"] = "c";
  auto lines = ExecutionLines(event, absl::FromUnixSeconds(0));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["type"], "result");
  EXPECT_EQ(lines[0]["is_main_result"], true);
  EXPECT_EQ(lines[0]["text"], "42");
  EXPECT_EQ(lines[0]["png"], "iVBORw==");
  EXPECT_EQ(lines[0]["json"]["a"], 1);
  EXPECT_EQ(lines[0]["extra"]["application/x-custom"], "c");

  v1::ExecuteEvent display;
  (*display.mutable_display()->mutable_data())["text/html"] = "<b>";
  EXPECT_EQ(ExecutionLines(display, absl::Now())[0]["is_main_result"], false);
}

TEST(ExecutionLinesTest, StreamsErrorsAndTheEnd) {
  v1::ExecuteEvent out;
  out.set_stdout("hi\n");
  auto lines = ExecutionLines(out, absl::FromUnixSeconds(1));
  EXPECT_EQ(lines[0], json({{"type", "stdout"}, {"text", "hi\n"}, {"timestamp", "1970-01-01T00:00:01.000000Z"}}));

  v1::ExecuteEvent error;
  error.mutable_error()->set_name("ZeroDivisionError");
  error.mutable_error()->set_value("division by zero");
  error.mutable_error()->add_traceback("a");
  error.mutable_error()->add_traceback("b");
  EXPECT_EQ(ExecutionLines(error, absl::Now())[0]["traceback"], "a\nb");

  v1::ExecuteEvent summary;
  summary.mutable_summary()->set_outcome(v1::OUTCOME_WALL_TIMEOUT);
  summary.mutable_summary()->set_message("the cell ran past 30000 ms");
  summary.mutable_summary()->set_execution_count(3);
  lines = ExecutionLines(summary, absl::Now());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["type"], "error");
  EXPECT_EQ(lines[0]["name"], "WALL_TIMEOUT");
  EXPECT_EQ(lines[1], json({{"type", "number_of_executions"}, {"execution_count", 3}}));
  EXPECT_EQ(lines[2], json({{"type", "end_of_execution"}}));
}

TEST(ExecutionLinesTest, InvalidUtf8IsReplacedNotThrown) {
  EXPECT_EQ(Line({{"text", std::string("a\xff")}}), "{\"text\":\"a\xEF\xBF\xBD\"}\n");
}

TEST(MultipartTest, SplitsFilesAndRefusesMalformedBodies) {
  auto boundary = MultipartBoundary("multipart/form-data; boundary=----b");
  ASSERT_TRUE(boundary.ok());
  EXPECT_EQ(*boundary, "----b");
  const std::string body =
      "------b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/home/user/a.txt\"\r\n"
      "Content-Type: application/octet-stream\r\n\r\nline1\r\nline2\r\n------b--\r\n";
  auto parts = ParseMultipart(body, *boundary);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 1u);
  EXPECT_EQ((*parts)[0].name, "file");
  EXPECT_EQ((*parts)[0].filename, "/home/user/a.txt");
  EXPECT_EQ((*parts)[0].content, "line1\r\nline2");

  EXPECT_FALSE(MultipartBoundary("application/json").ok());
  EXPECT_FALSE(ParseMultipart("no boundary here", "b").ok());
  EXPECT_FALSE(ParseMultipart("--b\r\nContent-Disposition: form-data\r\n\r\nunterminated", "b").ok());
  EXPECT_FALSE(ParseMultipart("--bX", "b").ok());
}

}  // namespace
}  // namespace warden::e2b
