// The E2B front's pure pieces: NDJSON lines as E2B's SDKs parse them,
// multipart uploads, bad ones included, and signed file URLs.
#include "gtest/gtest.h"
#include "fronts/e2b/execution_lines.h"
#include "fronts/e2b/file_signature.h"
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

TEST(ExecutionLinesTest, ChartsAndDataFramesAreE2bsChartAndData) {
  v1::ExecuteEvent event;
  auto& data = *event.mutable_display()->mutable_data();
  data["text/plain"] = "<Figure>";
  data["application/vnd.warden.chart+json"] = R"({"type": "bar", "elements": []})";
  data["application/vnd.warden.dataframe+json"] = R"({"a": [1, null]})";
  auto line = ExecutionLines(event, absl::Now())[0];
  EXPECT_EQ(line["chart"], json({{"type", "bar"}, {"elements", json::array()}}));
  EXPECT_EQ(line["data"], json({{"a", {1, nullptr}}}));
  EXPECT_FALSE(line.contains("extra")) << line;
}

TEST(ExecutionLinesTest, AQuotedTextComesWithoutItsQuotesAsFromE2bsServer) {
  for (const auto& [repr, text] : std::vector<std::pair<std::string, std::string>>{
           {"'abc'", "abc"}, {"\"it's\"", "it's"}, {"''", ""}, {"'", "'"}, {"'a\"", "'a\""}, {"42", "42"},
           {"[1, 'a']", "[1, 'a']"}}) {
    v1::ExecuteEvent event;
    (*event.mutable_result()->mutable_data())["text/plain"] = repr;
    EXPECT_EQ(ExecutionLines(event, absl::Now())[0]["text"], text) << repr;
  }
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

TEST(FileSignatureTest, SignsAsTheSdksDo) {
  // The vector of E2B's own SDK tests (static signing key comparison).
  EXPECT_EQ(FileSignature("hello.txt", "read", "user", "0tQG31xiMp0IOQfaz9dcwi72L1CPo8e0", std::nullopt),
            "v1_gUtH/s9YCJWgCizjfUxuWfhFE4QSydOWEIIvfLwDr6E");
  const std::string token = "0123456789abcdef";
  SignedUrl url{"a.txt", "write", "", FileSignature("a.txt", "write", "", token, 1700000000), 1700000000};
  EXPECT_TRUE(SignedWith(url, token));
  EXPECT_FALSE(SignedWith(url, "another token"));
  SignedUrl other_path = url;
  other_path.path = "b.txt";
  EXPECT_FALSE(SignedWith(other_path, token));
  SignedUrl read = url;
  read.operation = "read";
  EXPECT_FALSE(SignedWith(read, token));
  SignedUrl later = url;
  later.expiration = 1800000000;  // a signature is bound to its expiry
  EXPECT_FALSE(SignedWith(later, token));
}

TEST(FileSignatureTest, AnExpiredUrlSaysSo) {
  SignedUrl url{"a.txt", "read", "", "v1_x", 1000};
  EXPECT_TRUE(CheckExpiration(url, absl::FromUnixSeconds(1000)).ok());
  absl::Status expired = CheckExpiration(url, absl::FromUnixSeconds(1001));
  EXPECT_TRUE(absl::IsUnauthenticated(expired));
  EXPECT_EQ(expired.message(), "signature is already expired");
  url.expiration.reset();
  EXPECT_TRUE(CheckExpiration(url, absl::InfiniteFuture()).ok());
}

}  // namespace
}  // namespace warden::e2b
