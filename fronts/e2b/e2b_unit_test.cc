// The E2B front's pure pieces: NDJSON lines as E2B's SDKs parse them,
// multipart uploads, bad ones included, and signed file URLs.
#include <algorithm>

#include "gtest/gtest.h"
#include "fronts/e2b/execution_lines.h"
#include "fronts/e2b/file_signature.h"
#include "fronts/e2b/gzip.h"
#include "fronts/e2b/multipart.h"
#include "fronts/http/testing/gzip.h"

namespace warden::e2b {
namespace {

using http::testing::Gzip;
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


// A body read in pieces as they come (out of an inflater) splits exactly as
// the whole body does, however it is cut, and no piece of a part's content
// is held back longer than a delimiter's length.
TEST(MultipartTest, TheStreamingReaderSplitsAsTheWholeBodyDoesHoweverItIsCut) {
  const std::string body =
      "preamble\r\n--xyz\r\nContent-Disposition: form-data; name=\"meta\"\r\n\r\nm\r\n"
      "--xyz\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.bin\"\r\n\r\n" +
      std::string(5000, 'a') + "\r\n--xy not yet\r\n" + std::string(3000, 'b') + "\r\n--xyz--\r\nepilogue";
  auto whole = ParseMultipart(body, "xyz");
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(whole->size(), 2u);
  for (size_t cut : {1u, 2u, 7u, 64u, 4096u}) {
    std::vector<FormPart> parts;
    MultipartReader reader("xyz", {[&](const FormPart& head) {
                                     parts.push_back(head);
                                     return absl::OkStatus();
                                   },
                                   [&](absl::string_view piece) {
                                     parts.back().content.append(piece.data(), piece.size());
                                     return absl::OkStatus();
                                   },
                                   [] { return absl::OkStatus(); }});
    for (size_t i = 0; i < body.size(); i += cut) ASSERT_TRUE(reader.Feed(body.substr(i, cut)).ok()) << cut;
    ASSERT_TRUE(reader.Finish().ok()) << cut;
    ASSERT_EQ(parts.size(), 2u) << cut;
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(parts[i].name, (*whole)[i].name) << cut;
      EXPECT_EQ(parts[i].filename, (*whole)[i].filename) << cut;
      EXPECT_EQ(parts[i].content, (*whole)[i].content) << cut;
    }
  }
  // A sink's refusal stops the reader with it.
  MultipartReader refusing("xyz", {[](const FormPart&) { return absl::OkStatus(); },
                                   [](absl::string_view) { return absl::ResourceExhaustedError("too big"); },
                                   [] { return absl::OkStatus(); }});
  EXPECT_TRUE(absl::IsResourceExhausted(refusing.Feed(body)));
  EXPECT_TRUE(absl::IsResourceExhausted(refusing.Feed("more")));
}

// A gzip bomb inflates a piece at a time into its sink and stops at the
// bound: it never costs more than one piece, however far it would inflate.
TEST(GzipTest, InflatesPieceByPieceAndStopsABombAtTheBound) {
  const std::string zeros(16 << 20, '\0');
  const std::string bomb = Gzip(zeros);
  ASSERT_LT(bomb.size(), 200u << 10);
  size_t total = 0, largest = 0;
  absl::Status s = GunzipTo(bomb, 4 << 20, "the most one file may hold", [&](absl::string_view piece) {
    total += piece.size();
    largest = std::max(largest, piece.size());
    return absl::OkStatus();
  });
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("the most one file may hold"), absl::string_view::npos) << s;
  EXPECT_LE(total, size_t{4} << 20);
  EXPECT_LE(largest, kGunzipPiece);
  // Within the bound it all comes through, in order; two members too.
  const std::string text = "hello, " + std::string(300000, 'x') + " world";
  std::string back;
  ASSERT_TRUE(GunzipTo(Gzip(text) + Gzip("!"), 1 << 20, "", [&](absl::string_view piece) {
                back.append(piece.data(), piece.size());
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(back, text + "!");
  EXPECT_TRUE(absl::IsInvalidArgument(GunzipTo("not gzip", 100, "", [](absl::string_view) { return absl::OkStatus(); })));
  EXPECT_TRUE(absl::IsInvalidArgument(
      GunzipTo(Gzip(text).substr(0, 100), 1 << 20, "", [](absl::string_view) { return absl::OkStatus(); })));
}

}  // namespace
}  // namespace warden::e2b
