#include "kernel/kernel_channel.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace warden {
namespace {

std::string Frame(const std::string& json) { return absl::StrCat(json.size(), "\n", json); }

TEST(KernelChannelTest, ParsesEachMessageType) {
  KernelChannel channel;
  channel.Feed(Frame(R"({"type":"ready","language":"python","version":"3.11","warm":["numpy"],"warm_errors":{"x":"boom"}})").data(), 0);
  std::string all =
      Frame(R"({"type":"ready","language":"python","version":"3.11","warm":["numpy"],"warm_errors":{"x":"boom"}})") +
      Frame(R"({"type":"display_data","id":1,"data":{"image/png":"iVBO","text/plain":"<Figure>"}})") +
      Frame(R"({"type":"execute_result","id":1,"execution_count":1,"data":{"text/plain":"2","application/json":{"a":1}}})") +
      Frame(R"({"type":"error","id":1,"ename":"ValueError","evalue":"bad","traceback":["a","b"]})") +
      Frame(R"({"type":"done","id":1,"execution_count":1,"status":"error","exit_code":2})");
  channel.Feed(all.data(), all.size());

  auto ready = channel.Next();
  ASSERT_TRUE(ready.ok() && *ready);
  EXPECT_EQ((*ready)->type, KernelMessage::Type::kReady);
  EXPECT_EQ((*ready)->info.language, "python");
  EXPECT_EQ((*ready)->info.warm, std::vector<std::string>{"numpy"});
  EXPECT_EQ((*ready)->info.warm_errors.at("x"), "boom");

  auto display = channel.Next();
  ASSERT_TRUE(display.ok() && *display);
  EXPECT_EQ((*display)->data.at("image/png"), "iVBO");

  auto result = channel.Next();
  ASSERT_TRUE(result.ok() && *result);
  EXPECT_EQ((*result)->data.at("text/plain"), "2");
  EXPECT_EQ((*result)->data.at("application/json"), R"({"a":1})");

  auto error = channel.Next();
  ASSERT_TRUE(error.ok() && *error);
  EXPECT_EQ((*error)->ename, "ValueError");
  EXPECT_EQ((*error)->traceback, (std::vector<std::string>{"a", "b"}));

  auto done = channel.Next();
  ASSERT_TRUE(done.ok() && *done);
  EXPECT_EQ((*done)->status, "error");
  EXPECT_EQ((*done)->exit_code, 2);
  auto none = channel.Next();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(*none);
}

TEST(KernelChannelTest, WaitsForWholeFramesFedByteByByte) {
  KernelChannel channel;
  std::string frame = Frame(R"({"type":"done","id":3,"execution_count":3,"status":"ok"})");
  for (size_t i = 0; i + 1 < frame.size(); ++i) {
    channel.Feed(&frame[i], 1);
    auto m = channel.Next();
    ASSERT_TRUE(m.ok());
    EXPECT_FALSE(*m) << "complete after " << i + 1 << " bytes";
  }
  channel.Feed(&frame.back(), 1);
  auto m = channel.Next();
  ASSERT_TRUE(m.ok() && *m);
  EXPECT_EQ((*m)->id, 3);
}

TEST(KernelChannelTest, RejectsMalformedFrames) {
  for (const std::string& bad : {std::string("abc\n{}"), std::string("-1\n"),
                                 std::string("123456789012345678901234"),
                                 Frame("not json"), Frame("[1,2]"), Frame(R"({"type":"bogus"})"),
                                 Frame(R"({"type":"done","status":"weird"})")}) {
    KernelChannel channel;
    channel.Feed(bad.data(), bad.size());
    EXPECT_FALSE(channel.Next().ok()) << bad;
  }
}

TEST(KernelChannelTest, RejectsFramesOverTheCap) {
  KernelChannel channel(/*max_frame_bytes=*/100);
  std::string header = "101\n";
  channel.Feed(header.data(), header.size());
  EXPECT_FALSE(channel.Next().ok());
}

TEST(KernelChannelTest, EncodesExecuteWithAByteCount) {
  EXPECT_EQ(KernelChannel::EncodeExecute(7, "print('é')\n"), "execute 7 12\nprint('é')\n");
}

}  // namespace
}  // namespace warden
