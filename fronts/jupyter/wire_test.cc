#include "fronts/jupyter/wire.h"

#include <gtest/gtest.h>

#include <regex>

#include "fronts/jupyter/kernel_ids.h"
#include "fronts/jupyter/kernel_specs.h"
#include "fronts/jupyter/messages.h"

namespace warden::jupyter {
namespace {

void AppendLe64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// A frame laid out the way @jupyterlab/services' serializeV1KernelWebsocketJupyterOrg does.
std::string ClientV1Frame(const std::vector<std::string>& parts) {
  const uint64_t n = parts.size() + 1;
  std::string out;
  AppendLe64(out, n);
  uint64_t offset = 8 * (1 + n);
  AppendLe64(out, offset);
  for (const auto& p : parts) AppendLe64(out, offset += p.size());
  for (const auto& p : parts) out += p;
  return out;
}

TEST(WireTest, DecodesAV1FrameAsJupyterLabSendsIt) {
  const std::string frame = ClientV1Frame(
      {"shell", R"({"msg_id":"m1","msg_type":"execute_request","session":"c","username":"u","version":"5.2"})",
       "{}", "{}", R"({"code":"1+1"})"});
  auto m = DecodeFrame(frame, WireFormat::kV1);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->channel, "shell");
  EXPECT_EQ(m->msg_type(), "execute_request");
  EXPECT_EQ(m->msg_id(), "m1");
  EXPECT_EQ(m->content["code"], "1+1");
  EXPECT_TRUE(m->buffers.empty());
}

TEST(WireTest, V1RoundTripKeepsEveryPartAndBuffers) {
  Message m = MakeMessage("iopub", "display_data", {{"data", {{"text/plain", "x"}}}}, {{"msg_id", "p"}}, "k");
  m.buffers = {std::string("\0\1\2", 3)};
  auto back = DecodeFrame(EncodeFrame(m, WireFormat::kV1), WireFormat::kV1);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->channel, "iopub");
  EXPECT_EQ(back->header, m.header);
  EXPECT_EQ(back->parent_header["msg_id"], "p");
  EXPECT_EQ(back->content, m.content);
  ASSERT_EQ(back->buffers.size(), 1u);
  EXPECT_EQ(back->buffers[0], std::string("\0\1\2", 3));
}

TEST(WireTest, JsonFramesCarryMsgTypeAndIdAtTheTopLevel) {
  Message m = MakeMessage("shell", "execute_reply", {{"status", "ok"}}, {{"msg_id", "req"}}, "k");
  nlohmann::json j = nlohmann::json::parse(EncodeFrame(m, WireFormat::kJson));
  EXPECT_EQ(j["msg_type"], "execute_reply");
  EXPECT_EQ(j["msg_id"], j["header"]["msg_id"]);
  EXPECT_EQ(j["channel"], "shell");
  EXPECT_EQ(j["parent_header"]["msg_id"], "req");
  EXPECT_EQ(j["header"]["session"], "k");
  for (const char* field : {"username", "version", "date"}) EXPECT_TRUE(j["header"].contains(field)) << field;
}

TEST(WireTest, JsonWithoutChannelGoesToShellOrControlByType) {
  auto exec = DecodeFrame(R"({"header":{"msg_id":"a","msg_type":"execute_request"},"content":{"code":"1"}})",
                          WireFormat::kJson);
  ASSERT_TRUE(exec.ok());
  EXPECT_EQ(exec->channel, "shell");
  auto interrupt = DecodeFrame(R"({"header":{"msg_id":"b","msg_type":"interrupt_request"}})", WireFormat::kJson);
  ASSERT_TRUE(interrupt.ok());
  EXPECT_EQ(interrupt->channel, "control");
}

TEST(WireTest, RefusesWhatIsNotAJupyterMessage) {
  EXPECT_FALSE(DecodeFrame("{not json", WireFormat::kJson).ok());
  EXPECT_FALSE(DecodeFrame("[1,2]", WireFormat::kJson).ok());
  EXPECT_FALSE(DecodeFrame(R"({"content":{}})", WireFormat::kJson).ok());
  EXPECT_FALSE(DecodeFrame(R"({"header":{"msg_id":"x"}})", WireFormat::kJson).ok());
  EXPECT_FALSE(DecodeFrame("short", WireFormat::kV1).ok());
  std::string huge_count;
  AppendLe64(huge_count, 1u << 30);
  EXPECT_FALSE(DecodeFrame(huge_count, WireFormat::kV1).ok());
  std::string frame = ClientV1Frame({"shell", R"({"msg_type":"x","msg_id":"y"})", "{}", "{}", "{}"});
  EXPECT_FALSE(DecodeFrame(frame.substr(0, frame.size() - 3), WireFormat::kV1).ok()) << "offsets past the end";
  std::string swapped = frame;
  swapped[16] = 0x7f;  // offsets[1] far past offsets[2]
  EXPECT_FALSE(DecodeFrame(swapped, WireFormat::kV1).ok());
  EXPECT_FALSE(DecodeFrame(ClientV1Frame({"shell", "{bad", "{}", "{}", "{}"}), WireFormat::kV1).ok());
}

TEST(WireTest, BytesThatAreNotUtf8AreRepairedNotRefused) {
  Message m = MakeMessage("iopub", "stream", {{"name", "stdout"}, {"text", std::string("a\xff\xfe b")}}, {}, "k");
  const std::string frame = EncodeFrame(m, WireFormat::kJson);
  nlohmann::json j = nlohmann::json::parse(frame);
  EXPECT_EQ(j["content"]["name"], "stdout");
}

TEST(WireTest, PrefersTheV1SubprotocolWhenOffered) {
  EXPECT_EQ(ChooseWireFormat("v1.kernel.websocket.jupyter.org"), WireFormat::kV1);
  EXPECT_EQ(ChooseWireFormat("foo, v1.kernel.websocket.jupyter.org"), WireFormat::kV1);
  EXPECT_EQ(ChooseWireFormat(""), WireFormat::kJson);
  EXPECT_EQ(ChooseWireFormat("v2.something"), WireFormat::kJson);
}

TEST(KernelIdsTest, SessionIdsRoundTripThroughUuidShapedKernelIds) {
  const std::string session = "s-0123456789abcdef01234567";
  const std::string kernel = KernelIdFromSessionId(session);
  EXPECT_EQ(kernel, "01234567-89ab-cdef-0123-456700000000");
  EXPECT_EQ(SessionIdFromKernelId(kernel), session);
  EXPECT_EQ(SessionIdFromKernelId(session), session) << "a raw session id names the session too";
  EXPECT_EQ(SessionIdFromKernelId("01234567-89ab-cdef-0123-456789abcdef"), "01234567-89ab-cdef-0123-456789abcdef");
  EXPECT_EQ(KernelIdFromSessionId("other"), "other");
}

TEST(KernelIdsTest, AFleetsSessionIdsKeepTheirNodeInFiveWordGroups) {
  const std::string session = "s-0123456789abcdef01234567-node-2a";
  const std::string kernel = KernelIdFromSessionId(session);
  EXPECT_EQ(kernel, "01234567-89ab-cdef-0123-456700000000_node_2a");
  EXPECT_TRUE(std::regex_match(kernel, std::regex(R"(\w+-\w+-\w+-\w+-\w+)"))) << "Jupyter Server's route";
  EXPECT_EQ(SessionIdFromKernelId(kernel), session);
  EXPECT_EQ(SessionIdFromKernelId(session), session);
  EXPECT_EQ(SessionIdFromKernelId("01234567-89ab-cdef-0123-456789abcdef_n"),
            "01234567-89ab-cdef-0123-456789abcdef_n") << "not one of ours: used as it is";
}

TEST(MessagesTest, MimeBundlesFollowJupyter) {
  v1::Result r;
  (*r.mutable_data())["image/png"] = std::string("\x89PNG\r\n", 6);
  (*r.mutable_data())["text/plain"] = "<Figure>";
  (*r.mutable_data())["application/json"] = R"({"a": 1})";
  nlohmann::json data = MimeBundle(r);
  EXPECT_EQ(data["image/png"], "iVBORw0K");
  EXPECT_EQ(data["text/plain"], "<Figure>");
  EXPECT_EQ(data["application/json"]["a"], 1);
}

TEST(KernelSpecsTest, OffersPythonJavaScriptAndBash) {
  nlohmann::json specs = KernelSpecsJson();
  EXPECT_EQ(specs["default"], "python3");
  for (const char* name : {"python3", "javascript", "bash"}) {
    ASSERT_TRUE(specs["kernelspecs"].contains(name)) << name;
    EXPECT_EQ(specs["kernelspecs"][name]["name"], name);
    EXPECT_TRUE(specs["kernelspecs"][name]["spec"]["argv"].is_array());
    EXPECT_TRUE(specs["kernelspecs"][name]["resources"].is_object());
  }
  EXPECT_EQ(FindKernelSpec("python")->language, v1::LANGUAGE_PYTHON);
  EXPECT_EQ(FindKernelSpec("node")->language, v1::LANGUAGE_JAVASCRIPT);
  EXPECT_EQ(FindKernelSpec("cobol"), nullptr);
}

}  // namespace
}  // namespace warden::jupyter
