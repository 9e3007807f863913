// The Connect codec of envd's services: envelopes, JSON and binary
// messages, Connect's error shape and status mapping, and bad input.
#include "envd/process.pb.h"
#include "fronts/e2b/connect.h"
#include "fronts/e2b/home_path.h"
#include "gtest/gtest.h"

namespace warden::e2b {
namespace {

using nlohmann::json;

http::Request RequestWith(const std::string& content_type, const std::string& timeout_ms = "") {
  http::Request request;
  request.raw.set("Content-Type", content_type);
  if (!timeout_ms.empty()) request.raw.set("Connect-Timeout-Ms", timeout_ms);
  return request;
}

TEST(ConnectCallTest, ReadsTheEncodingAndTheTimeout) {
  auto unary = ParseConnectCall(RequestWith("application/json; charset=utf-8"), /*streaming=*/false);
  ASSERT_TRUE(unary.ok()) << unary.status();
  EXPECT_EQ(unary->encoding, ConnectEncoding::kJson);
  EXPECT_EQ(unary->timeout, absl::InfiniteDuration());

  auto stream = ParseConnectCall(RequestWith("application/connect+proto", "60000"), /*streaming=*/true);
  ASSERT_TRUE(stream.ok()) << stream.status();
  EXPECT_EQ(stream->encoding, ConnectEncoding::kProto);
  EXPECT_EQ(stream->timeout, absl::Seconds(60));

  // A stream's content type on a unary method, and the other way round.
  EXPECT_TRUE(absl::IsInvalidArgument(
      ParseConnectCall(RequestWith("application/connect+json"), false).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseConnectCall(RequestWith("application/json"), true).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      ParseConnectCall(RequestWith("application/json", "-5"), false).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      ParseConnectCall(RequestWith("application/json", "99999999999999"), false).status()));
}

TEST(ConnectEnvelopeTest, RoundTripsAndRefusesTruncatedEnvelopes) {
  const std::string body = EncodeEnvelope(0, "abc") + EncodeEnvelope(kEnvelopeEndStream, "{}");
  ASSERT_EQ(body.size(), 5u + 3 + 5 + 2);
  EXPECT_EQ(body.substr(0, 5), std::string("\0\0\0\0\3", 5));
  auto envelopes = DecodeEnvelopes(body);
  ASSERT_TRUE(envelopes.ok()) << envelopes.status();
  ASSERT_EQ(envelopes->size(), 2u);
  EXPECT_EQ((*envelopes)[0].payload, "abc");
  EXPECT_EQ((*envelopes)[1].flags, kEnvelopeEndStream);

  EXPECT_TRUE(absl::IsInvalidArgument(DecodeEnvelopes(std::string("\0\0\0", 3)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeEnvelopes(std::string("\0\0\0\0\x09" "abc", 8)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeEnvelopes(std::string("\0\xff\xff\xff\xff", 5)).status()));
}

TEST(ConnectMessageTest, DecodesJsonAndBinaryRequests) {
  ConnectCall stream{.streaming = true, .encoding = ConnectEncoding::kJson};
  process::StartRequest start;
  const std::string json_body =
      R"({"process":{"cmd":"/bin/bash","args":["-l","-c","echo hi"],"envs":{"A":"1"}},"stdin":false,"newField":1})";
  ASSERT_TRUE(DecodeRequest(stream, EncodeEnvelope(0, json_body), &start).ok());
  EXPECT_EQ(start.process().cmd(), "/bin/bash");
  EXPECT_EQ(start.process().args(2), "echo hi");
  EXPECT_EQ(start.process().envs().at("A"), "1");
  EXPECT_TRUE(start.has_stdin());
  EXPECT_FALSE(start.process().has_cwd());

  ConnectCall binary{.streaming = true, .encoding = ConnectEncoding::kProto};
  process::StartRequest again;
  ASSERT_TRUE(DecodeRequest(binary, EncodeEnvelope(0, start.SerializeAsString()), &again).ok());
  EXPECT_EQ(again.process().args(2), "echo hi");

  // Two messages, none, a compressed one, broken JSON.
  process::StartRequest bad;
  EXPECT_TRUE(absl::IsInvalidArgument(
      DecodeRequest(stream, EncodeEnvelope(0, "{}") + EncodeEnvelope(0, "{}"), &bad)));
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeRequest(stream, "", &bad)));
  EXPECT_TRUE(absl::IsUnimplemented(DecodeRequest(stream, EncodeEnvelope(kEnvelopeCompressed, "{}"), &bad)));
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeRequest(stream, EncodeEnvelope(0, "{not json"), &bad)));
  ConnectCall unary{.streaming = false, .encoding = ConnectEncoding::kProto};
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeRequest(unary, "\xff\xff\xff", &bad)));
}

TEST(ConnectMessageTest, EncodesEventsAsProtoJson) {
  process::StartResponse out;
  out.mutable_event()->mutable_data()->set_stdout("hi\n");
  ConnectCall stream{.streaming = true, .encoding = ConnectEncoding::kJson};
  auto envelopes = DecodeEnvelopes(EncodeMessage(stream, out));
  ASSERT_TRUE(envelopes.ok());
  ASSERT_EQ(envelopes->size(), 1u);
  EXPECT_EQ(json::parse((*envelopes)[0].payload), json::parse(R"({"event":{"data":{"stdout":"aGkK"}}})"));

  process::StartResponse end;
  end.mutable_event()->mutable_end()->set_exit_code(-1);
  end.mutable_event()->mutable_end()->set_status("signal: killed");
  ConnectCall unary{.streaming = false, .encoding = ConnectEncoding::kJson};
  EXPECT_EQ(json::parse(EncodeMessage(unary, end)),
            json::parse(R"({"event":{"end":{"exitCode":-1,"status":"signal: killed"}}})"));
}

TEST(ConnectErrorTest, MapsCodesAndShapesErrorsForUnaryAndStreams) {
  EXPECT_STREQ(ConnectCodeName(absl::StatusCode::kNotFound), "not_found");
  EXPECT_STREQ(ConnectCodeName(absl::StatusCode::kCancelled), "canceled");
  EXPECT_EQ(ConnectHttpStatus(absl::StatusCode::kNotFound), 404u);
  EXPECT_EQ(ConnectHttpStatus(absl::StatusCode::kFailedPrecondition), 400u);
  EXPECT_EQ(ConnectHttpStatus(absl::StatusCode::kUnimplemented), 501u);
  EXPECT_EQ(ConnectHttpStatus(absl::StatusCode::kResourceExhausted), 429u);

  const absl::Status missing = absl::NotFoundError("no process 7");
  http::Response unary = ConnectErrorResponse(missing, RequestWith("application/json"));
  EXPECT_EQ(unary.status, 404u);
  EXPECT_EQ(json::parse(unary.body), json::parse(R"({"code":"not_found","message":"no process 7"})"));

  http::Response stream = ConnectErrorResponse(missing, RequestWith("application/connect+json"));
  EXPECT_EQ(stream.status, 200u);
  EXPECT_EQ(stream.content_type, "application/connect+json");
  auto envelopes = DecodeEnvelopes(stream.body);
  ASSERT_TRUE(envelopes.ok());
  ASSERT_EQ(envelopes->size(), 1u);
  EXPECT_EQ((*envelopes)[0].flags, kEnvelopeEndStream);
  EXPECT_EQ(json::parse((*envelopes)[0].payload)["error"]["code"], "not_found");

  auto ok_end = DecodeEnvelopes(EndOfStream(absl::OkStatus()));
  ASSERT_TRUE(ok_end.ok());
  EXPECT_EQ((*ok_end)[0].payload, "{}");
}

TEST(HomePathTest, MapsHomeToTheWorkspaceAndKeepsOtherAbsolutePaths) {
  EXPECT_EQ(*WorkspacePath("/home/user/a/b.txt", ""), "a/b.txt");
  EXPECT_EQ(*WorkspacePath("/home/user", ""), "");
  EXPECT_EQ(*WorkspacePath("/home/user/", ""), "");
  EXPECT_EQ(*WorkspacePath("a.txt", ""), "a.txt");
  EXPECT_EQ(*WorkspacePath("/tmp/repo/", ""), "/tmp/repo");
  EXPECT_TRUE(absl::IsInvalidArgument(WorkspacePath("", "give a path").status()));
  EXPECT_EQ(HomePath(""), "/home/user");
  EXPECT_EQ(HomePath("a/b"), "/home/user/a/b");
  EXPECT_EQ(HomePath("/tmp/x"), "/tmp/x");
}

TEST(HomePathTest, ResolvesRelativeAndTildePathsFromTheHomeAsEnvdDoes) {
  EXPECT_EQ(*ResolveHome("dir/sub"), "/home/user/dir/sub");
  EXPECT_EQ(*ResolveHome("./dir/"), "/home/user/dir");
  EXPECT_EQ(*ResolveHome("../other"), "/home/other");
  EXPECT_EQ(*ResolveHome("../../../.."), "/");
  EXPECT_EQ(*ResolveHome("~"), "/home/user");
  EXPECT_EQ(*ResolveHome("~/a.txt"), "/home/user/a.txt");
  EXPECT_EQ(*ResolveHome("/tmp/../x"), "/tmp/../x");  // absolute: as it is, as envd leaves it
  EXPECT_EQ(*ResolveHome(""), "");
  EXPECT_TRUE(absl::IsInvalidArgument(ResolveHome("~root/x").status()));
  EXPECT_EQ(*WorkspacePath("~/a.txt", ""), "a.txt");
  EXPECT_EQ(*WorkspacePath("a/../b.txt", ""), "b.txt");
  EXPECT_EQ(*WorkspacePath("../user/c.txt", ""), "c.txt");
  EXPECT_EQ(*WorkspacePath("../x", ""), "/home/x");
}

}  // namespace
}  // namespace warden::e2b
