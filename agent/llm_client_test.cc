// LlmClient against the fake OpenAI-compatible server over real HTTP.
#include "agent/llm_client.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "agent/sse_parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/fake_llm_server.h"

namespace warden::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using warden::testing::FakeLlmServer;
using Json = nlohmann::json;

TEST(SseParserTest, AssemblesEventsSplitAnywhere) {
  const std::string wire =
      ": keep-alive\r\ndata: {\"a\":1}\r\n\r\nevent: x\ndata: line1\ndata: line2\n\ndata: [DONE]\n\n";
  for (size_t split = 0; split <= wire.size(); ++split) {
    SseParser parser;
    std::vector<std::string> events = parser.Feed(wire.substr(0, split));
    for (auto& e : parser.Feed(wire.substr(split))) events.push_back(e);
    ASSERT_EQ(events.size(), 3u) << "split at " << split;
    EXPECT_EQ(events[0], "{\"a\":1}");
    EXPECT_EQ(events[1], "line1\nline2");
    EXPECT_EQ(events[2], "[DONE]");
  }
}

TEST(SseParserTest, FlushReturnsAnUnterminatedEvent) {
  SseParser parser;
  EXPECT_TRUE(parser.Feed("data: tail").empty());
  EXPECT_EQ(parser.Flush(), "tail");
}

LlmOptions OptionsFor(const FakeLlmServer& server, bool stream) {
  LlmOptions o;
  o.base_url = server.base_url();
  o.model = "fake-model";
  o.stream = stream;
  o.initial_backoff_ms = 10;
  o.max_backoff_ms = 50;
  o.max_retries = 3;
  o.request_timeout_ms = 20'000;
  return o;
}

ChatRequest Hello() {
  ChatRequest r;
  r.messages.push_back({"user", "hello", {}, ""});
  r.tools.push_back({"execute_code", "run code", Json{{"type", "object"}}});
  return r;
}

// tool_choice: a string for auto and required, an object naming an offered
// tool, and "required" for a name this request does not offer.
TEST(LlmClientTest, ToolChoiceCanForceATool) {
  LlmOptions o;
  o.model = "m";
  o.tool_choice = "execute_code";
  ChatRequest r = Hello();
  Json forced = LlmClient(o).Body(r);
  EXPECT_EQ(forced["tool_choice"], (Json{{"type", "function"}, {"function", {{"name", "execute_code"}}}}));
  o.tool_choice = "required";
  EXPECT_EQ(LlmClient(o).Body(r)["tool_choice"], "required");
  o.tool_choice = "write_file";
  EXPECT_EQ(LlmClient(o).Body(r)["tool_choice"], "required");
  r.tools.clear();  // a request without tools (the final answer) chooses none
  EXPECT_FALSE(LlmClient(o).Body(r).contains("tool_choice"));
}

TEST(LlmClientTest, BodyCarriesToolCallsAndToolResults) {
  LlmOptions o;
  o.model = "m";
  LlmClient client(o);
  ChatRequest r;
  r.messages.push_back({"assistant", "", {{"call_1", "execute_code", "{\"code\":\"1\"}"}}, ""});
  r.messages.push_back({"tool", "out", {}, "call_1"});
  Json body = client.Body(r);
  EXPECT_EQ(body["model"], "m");
  EXPECT_EQ(body["messages"][0]["content"], "");  // not null: llama-cpp-python's server refuses null
  EXPECT_EQ(body["messages"][0]["tool_calls"][0]["function"]["arguments"], "{\"code\":\"1\"}");
  EXPECT_EQ(body["messages"][0]["tool_calls"][0]["type"], "function");
  EXPECT_EQ(body["messages"][1]["role"], "tool");
  EXPECT_EQ(body["messages"][1]["tool_call_id"], "call_1");
  EXPECT_TRUE(body["stream"].get<bool>());
  EXPECT_TRUE(body["stream_options"]["include_usage"].get<bool>());
}

class LlmClientWireTest : public ::testing::TestWithParam<bool> {};

TEST_P(LlmClientWireTest, ReadsTextToolCallsAndUsage) {
  auto server = FakeLlmServer::Start(
      {{{"content", "Let me compute that."},
        {"tool_calls", {{{"name", "execute_code"}, {"arguments", "{\"code\": \"print(6*7)\"}"}}}},
        {"usage", {{"prompt_tokens", 11}, {"completion_tokens", 7}}}}});
  ASSERT_TRUE(server.ok()) << server.status();
  LlmClient client(OptionsFor(**server, GetParam()));
  std::string streamed;
  int deltas = 0;
  auto reply = client.Complete(Hello(), [&](absl::string_view t) { streamed.append(t.data(), t.size()), ++deltas; }, nullptr);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->content, "Let me compute that.");
  ASSERT_EQ(reply->tool_calls.size(), 1u);
  EXPECT_EQ(reply->tool_calls[0].name, "execute_code");
  EXPECT_EQ(reply->tool_calls[0].arguments, "{\"code\": \"print(6*7)\"}");
  EXPECT_FALSE(reply->tool_calls[0].id.empty());
  EXPECT_EQ(reply->usage.prompt, 11);
  EXPECT_EQ(reply->usage.completion, 7);
  EXPECT_FALSE(reply->usage.estimated);
  if (GetParam()) {
    EXPECT_EQ(streamed, "Let me compute that.");
    EXPECT_GT(deltas, 1);  // chunks of 8 characters arrive one by one
  } else {
    EXPECT_EQ(deltas, 0);
  }
  Json requests = (*server)->Requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0]["path"], "/v1/chat/completions");
  EXPECT_EQ(requests[0]["body"]["tools"][0]["function"]["name"], "execute_code");
  EXPECT_EQ(requests[0]["body"]["tool_choice"], "auto");
}

INSTANTIATE_TEST_SUITE_P(StreamedAndNot, LlmClientWireTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Streamed" : "Whole"; });

TEST(LlmClientTest, InvalidToolArgumentsArriveVerbatim) {
  auto server = FakeLlmServer::Start(
      {{{"tool_calls", {{{"name", "execute_code"}, {"arguments", "{\"code\": \"print(1)"}}}}}});
  ASSERT_TRUE(server.ok());
  LlmClient client(OptionsFor(**server, true));
  auto reply = client.Complete(Hello(), nullptr, nullptr);
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_EQ(reply->tool_calls.size(), 1u);
  EXPECT_EQ(reply->tool_calls[0].arguments, "{\"code\": \"print(1)");
}

// llama-cpp-python's server repeats the function's name in every streamed
// chunk of a tool call; the name is still the name.
TEST(LlmClientTest, ANameRepeatedInEveryStreamedChunkIsTakenOnce) {
  auto server = FakeLlmServer::Start(
      {{{"repeat_name", true}, {"chunk_chars", 4},
        {"tool_calls", {{{"name", "execute_code"}, {"arguments", "{\"code\": \"print(1)\"}"}}}}}});
  ASSERT_TRUE(server.ok());
  LlmClient client(OptionsFor(**server, /*stream=*/true));
  auto reply = client.Complete(Hello(), nullptr, nullptr);
  ASSERT_TRUE(reply.ok()) << reply.status();
  ASSERT_EQ(reply->tool_calls.size(), 1u);
  EXPECT_EQ(reply->tool_calls[0].name, "execute_code");
  EXPECT_EQ(reply->tool_calls[0].arguments, "{\"code\": \"print(1)\"}");
}

TEST(LlmClientTest, EstimatesTokensWhenTheServerReportsNone) {
  auto server = FakeLlmServer::Start({{{"content", std::string(400, 'x')}, {"no_usage", true}}});
  ASSERT_TRUE(server.ok());
  LlmClient client(OptionsFor(**server, true));
  auto reply = client.Complete(Hello(), nullptr, nullptr);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->usage.estimated);
  EXPECT_EQ(reply->usage.completion, 100);
}

TEST(LlmClientTest, RetriesA429HonouringRetryAfter) {
  auto server = FakeLlmServer::Start(
      {{{"status", 429}, {"headers", {{"Retry-After", "1"}}}, {"body", {{"error", {{"message", "slow down"}}}}}},
       {{"content", "ok"}}});
  ASSERT_TRUE(server.ok());
  LlmClient client(OptionsFor(**server, true));
  std::vector<std::string> retries;
  auto reply = client.Complete(Hello(), nullptr, nullptr, [&](const std::string& w) { retries.push_back(w); });
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->content, "ok");
  EXPECT_EQ(reply->attempts, 2);
  ASSERT_EQ(retries.size(), 1u);
  EXPECT_THAT(retries[0], HasSubstr("429"));
  EXPECT_THAT(retries[0], HasSubstr("slow down"));
  EXPECT_THAT(retries[0], HasSubstr("retrying in 1s"));  // Retry-After, not the 10 ms backoff
}

TEST(LlmClientTest, Retries5xxWithBackoffThenGivesUp) {
  Json fail = {{"status", 503}, {"body", {{"error", {{"message", "overloaded"}}}}}};
  auto server = FakeLlmServer::Start({fail, fail, fail, fail});
  ASSERT_TRUE(server.ok());
  LlmOptions o = OptionsFor(**server, false);
  o.max_retries = 2;
  LlmClient client(o);
  std::vector<std::string> retries;
  auto reply = client.Complete(Hello(), nullptr, nullptr, [&](const std::string& w) { retries.push_back(w); });
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(reply.status().message(), HasSubstr("overloaded"));
  EXPECT_THAT(reply.status().message(), HasSubstr("after 3 attempts"));
  EXPECT_EQ(retries.size(), 2u);
  EXPECT_THAT(retries[0], HasSubstr("retrying in 10ms"));
  EXPECT_THAT(retries[1], HasSubstr("retrying in 20ms"));  // doubled
  EXPECT_EQ((*server)->Requests().size(), 3u);
}

TEST(LlmClientTest, A500ThenSuccessSucceeds) {
  auto server = FakeLlmServer::Start({{{"status", 500}}, {{"content", "fine"}}});
  ASSERT_TRUE(server.ok());
  LlmClient client(OptionsFor(**server, true));
  auto reply = client.Complete(Hello(), nullptr, nullptr);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->content, "fine");
  EXPECT_EQ(reply->attempts, 2);
}

TEST(LlmClientTest, A401SaysToFixTheKeyAndNeverShowsIt) {
  auto server = FakeLlmServer::Start({{{"content", "never"}}}, {"--api-key", "right-key"});
  ASSERT_TRUE(server.ok());
  LlmOptions o = OptionsFor(**server, true);
  o.api_key = "sk-wrong-secret-123";
  LlmClient client(o);
  auto reply = client.Complete(Hello(), nullptr, nullptr);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(reply.status().message(), HasSubstr("api_key_env"));
  EXPECT_THAT(reply.status().message(), Not(HasSubstr("sk-wrong-secret-123")));
  Json requests = (*server)->Requests();
  ASSERT_EQ(requests.size(), 1u);  // not retried
  EXPECT_EQ(requests[0]["authorization"], "Bearer sk-wrong-secret-123");
}

TEST(LlmClientTest, TheRightKeyIsAccepted) {
  auto server = FakeLlmServer::Start({{{"content", "hi"}}}, {"--api-key", "right-key"});
  ASSERT_TRUE(server.ok());
  LlmOptions o = OptionsFor(**server, true);
  o.api_key = "right-key";
  LlmClient client(o);
  auto reply = client.Complete(Hello(), nullptr, nullptr);
  ASSERT_TRUE(reply.ok()) << reply.status();
}

TEST(LlmClientTest, A404NamesTheBaseUrlAndModel) {
  auto server = FakeLlmServer::Start({{{"content", "never"}}}, {"--models", "llama3"});
  ASSERT_TRUE(server.ok());
  LlmClient client(OptionsFor(**server, true));  // asks for fake-model
  auto reply = client.Complete(Hello(), nullptr, nullptr);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(reply.status().message(), HasSubstr("llm.base_url"));
  EXPECT_THAT(reply.status().message(), HasSubstr("fake-model` does not exist"));
  EXPECT_EQ((*server)->Requests().size(), 1u);
}

TEST(LlmClientTest, AWrongPathIsA404) {
  auto server = FakeLlmServer::Start({{{"content", "never"}}});
  ASSERT_TRUE(server.ok());
  LlmOptions o = OptionsFor(**server, false);
  o.base_url = absl::StrCat("http://127.0.0.1:", (*server)->port(), "/v1/chat/completions");
  LlmClient client(o);
  auto reply = client.Complete(Hello(), nullptr, nullptr);
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kNotFound);
}

TEST(LlmClientTest, ASlowReplyTimesOutPerRequest) {
  auto server = FakeLlmServer::Start({{{"content", "late"}, {"delay_ms", 5000}}, {{"content", "on time"}}});
  ASSERT_TRUE(server.ok());
  LlmOptions o = OptionsFor(**server, true);
  o.request_timeout_ms = 300;
  o.max_retries = 0;
  LlmClient client(o);
  auto reply = client.Complete(Hello(), nullptr, nullptr);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(reply.status().message(), HasSubstr("request_timeout_ms"));
  // With a retry, the next step answers.
  o.max_retries = 1;
  LlmClient again(o);
  // (the first step is spent; the server is now on "on time")
  auto second = again.Complete(Hello(), nullptr, nullptr);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->content, "on time");
}

TEST(LlmClientTest, CancellationStopsTheRequestInFlight) {
  auto server = FakeLlmServer::Start({{{"content", "never"}, {"delay_ms", 60'000}}});
  ASSERT_TRUE(server.ok());
  LlmClient client(OptionsFor(**server, true));
  RunControl control;
  std::thread canceller([&] {
    ASSERT_TRUE((*server)->WaitFor([](const Json& r) { return r.size() == 1; }));
    control.Cancel();
  });
  auto reply = client.Complete(Hello(), nullptr, &control);
  canceller.join();
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kCancelled);
  // The server saw the client hang up.
  EXPECT_TRUE((*server)->WaitFor([](const Json& r) { return r.size() == 1 && r[0]["aborted"].get<bool>(); }));
}

// A model server that crashes (the fake kills itself with SIGSEGV, as
// llama.cpp's server did on an instruction its VM refused) is an error that
// says what the server did, never an empty or a garbled reply.
TEST(LlmClientTest, AServerThatDiesBeforeAnsweringSaysSoThenIsUnreachable) {
  auto server = FakeLlmServer::Start({{{"content", "never"}, {"die", "SIGSEGV"}}});
  ASSERT_TRUE(server.ok()) << server.status();
  LlmOptions o = OptionsFor(**server, true);
  o.max_retries = 1;
  LlmClient client(o);
  std::vector<std::string> retries;
  auto reply = client.Complete(Hello(), nullptr, nullptr, [&](const std::string& w) { retries.push_back(w); });
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnavailable);
  // The first attempt met the crash, the retry an empty port.
  ASSERT_EQ(retries.size(), 1u);
  EXPECT_THAT(retries[0], HasSubstr(absl::StrCat("the LLM server at ", o.base_url, "/chat/completions")));
  EXPECT_THAT(retries[0], HasSubstr("has it crashed?"));
  EXPECT_THAT(reply.status().message(), HasSubstr("cannot reach the LLM server"));
  EXPECT_THAT(reply.status().message(), HasSubstr("after 2 attempts"));
  EXPECT_THAT((*server)->Death(absl::Seconds(10)), HasSubstr("was killed by signal 11 (SIGSEGV)"));
}

// Dying in the middle of a streamed reply: with chunked transfer encoding
// (uvicorn's, so llama-cpp-python's and vLLM's) curl sees the body cut
// inside a chunk; with a body that ends at the connection's close, the
// stream ends without [DONE]. Either way the text streamed before the
// crash reached the caller, and the error says the reply broke off.
class LlmClientDyingServerTest : public ::testing::TestWithParam<bool> {};

TEST_P(LlmClientDyingServerTest, AServerThatDiesMidStreamSaysItBrokeOff) {
  auto server = FakeLlmServer::Start({{{"content", "The answer is forty-two, as computed."},
                                       {"die", "SIGSEGV"},
                                       {"die_after_chunks", 3},
                                       {"chunked", GetParam()}}});
  ASSERT_TRUE(server.ok()) << server.status();
  LlmOptions o = OptionsFor(**server, true);
  o.max_retries = 0;
  LlmClient client(o);
  std::string streamed;
  auto reply = client.Complete(Hello(), [&](absl::string_view t) { streamed.append(t.data(), t.size()); }, nullptr);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(streamed, "The answer is fo");  // two chunks of 8 after the role chunk
  EXPECT_THAT(reply.status().message(), HasSubstr("has it crashed?"));
  if (GetParam()) {
    EXPECT_THAT(reply.status().message(), HasSubstr("broke off its reply after"));
    EXPECT_THAT(reply.status().message(), HasSubstr("transfer closed with outstanding read data remaining"));
  } else {
    EXPECT_THAT(reply.status().message(), HasSubstr("ended its stream after"));
    EXPECT_THAT(reply.status().message(), HasSubstr("before the reply's end ([DONE] or a finish_reason)"));
  }
  std::string death = (*server)->Death(absl::Seconds(10));
  EXPECT_THAT(death, HasSubstr("was killed by signal 11 (SIGSEGV)"));
  EXPECT_THAT(death, HasSubstr("dying (SIGSEGV) after 3 events of its stream"));
}

INSTANTIATE_TEST_SUITE_P(ChunkedAndNot, LlmClientDyingServerTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Chunked" : "UntilClose"; });

TEST(LlmClientTest, AnUnreachableServerIsUnavailable) {
  LlmOptions o;
  o.base_url = "http://127.0.0.1:1/v1";
  o.model = "m";
  o.max_retries = 1;
  o.initial_backoff_ms = 1;
  LlmClient client(o);
  auto reply = client.Complete(Hello(), nullptr, nullptr);
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(reply.status().message(), HasSubstr("cannot reach"));
}

}  // namespace
}  // namespace warden::agent
