// KernelChannel and KernelGateway against a fake warden.v1 Executor served
// over real in-process gRPC: what Jupyter messages and REST answers a
// client sees for what the daemon says.
#include <gtest/gtest.h>

#include <functional>
#include <list>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "fronts/jupyter/kernel_channel.h"
#include "fronts/jupyter/kernel_gateway.h"
#include "fronts/jupyter/kernel_ids.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"

namespace warden::jupyter {
namespace {

constexpr char kSession[] = "s-0123456789abcdef01234567";

// Scripted: ExecuteStream replays `events` (for code "raise" an error, for
// "sleep" a wall timeout without an error of its own).
class FakeExecutor final : public v1::Executor::Service {
 public:
  grpc::Status ExecuteStream(grpc::ServerContext* ctx, const v1::ExecuteRequest* req,
                             grpc::ServerWriter<v1::ExecuteEvent>* writer) override {
    Record(ctx);
    if (req->session_id() != kSession) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no session");
    v1::ExecuteEvent e;
    v1::ExecuteResponse summary;
    summary.set_execution_count(7);
    if (req->code() == "raise") {
      release_raise.WaitForNotification();
      e.mutable_error()->set_name("ZeroDivisionError");
      e.mutable_error()->set_value("division by zero");
      e.mutable_error()->add_traceback("Traceback...");
      writer->Write(e);
      summary.set_outcome(v1::OUTCOME_ERROR);
    } else if (req->code() == "sleep") {
      summary.set_outcome(v1::OUTCOME_WALL_TIMEOUT);
      summary.set_message("the cell ran past its 1000 ms wall-clock limit");
    } else {
      e.set_stdout("hello\n");
      writer->Write(e);
      e.mutable_display()->mutable_data()->insert({"image/png", std::string("\x89PNG\r\n", 6)});
      writer->Write(e);
      e.mutable_result()->mutable_data()->insert({"text/plain", "2"});
      e.mutable_result()->set_is_result(true);
      writer->Write(e);
      summary.set_outcome(v1::OUTCOME_OK);
    }
    *e.mutable_summary() = summary;
    writer->Write(e);
    return grpc::Status::OK;
  }
  grpc::Status GetSession(grpc::ServerContext* ctx, const v1::GetSessionRequest* req, v1::Session* out) override {
    Record(ctx);
    if (req->session_id() != kSession) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no session 'x'");
    out->set_id(kSession);
    out->set_language(v1::LANGUAGE_PYTHON);
    out->set_execution_count(6);
    return grpc::Status::OK;
  }
  grpc::Status CreateSession(grpc::ServerContext* ctx, const v1::CreateSessionRequest* req,
                             v1::Session* out) override {
    Record(ctx);
    out->set_id(kSession);
    out->set_language(req->language());
    return grpc::Status::OK;
  }
  grpc::Status InterruptSession(grpc::ServerContext* ctx, const v1::InterruptSessionRequest* req,
                                v1::InterruptSessionResponse*) override {
    Record(ctx);
    absl::MutexLock lock(&mu);
    ++interrupts;
    return grpc::Status::OK;
  }

  void Record(grpc::ServerContext* ctx) {
    absl::MutexLock lock(&mu);
    auto it = ctx->client_metadata().find("authorization");
    last_authorization = it == ctx->client_metadata().end() ? "" : std::string(it->second.data(), it->second.size());
  }

  absl::Notification release_raise;  // "raise" waits for it
  absl::Mutex mu;
  int interrupts ABSL_GUARDED_BY(mu) = 0;
  std::string last_authorization ABSL_GUARDED_BY(mu);
};

// What the channel sent, decoded.
class Collector {
 public:
  ChannelSink Sink(WireFormat format) {
    return ChannelSink{[this, format](std::string frame, bool binary) {
                         auto m = DecodeFrame(frame, format);
                         ASSERT_TRUE(m.ok()) << m.status();
                         EXPECT_EQ(binary, format == WireFormat::kV1);
                         {
                           absl::MutexLock lock(&mu_);
                           messages_.push_back(*m);
                         }
                         if (then) then(*m);
                       },
                       [] {}};
  }
  // Called with each message as it is sent, on the channel's sending thread
  // (a client answering at once). Set before the channel sends anything.
  std::function<void(const Message&)> then;
  // Waits (up to a deadline) until a shell/control reply of `type` to `parent` and the
  // status idle after it arrived; returns everything sent for `parent`.
  std::vector<Message> UntilIdle(const std::string& parent) {
    absl::MutexLock lock(&mu_);
    auto idle = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const Message& m : messages_) {
        if (m.parent_header.value("msg_id", "") == parent && m.msg_type() == "status" &&
            m.content["execution_state"] == "idle") {
          return true;
        }
      }
      return false;
    };
    mu_.AwaitWithTimeout(absl::Condition(&idle), absl::Seconds(20));
    std::vector<Message> out;
    for (const Message& m : messages_) {
      if (m.parent_header.value("msg_id", "") == parent) out.push_back(m);
    }
    return out;
  }
  std::vector<Message> UntilType(const std::string& type) {
    absl::MutexLock lock(&mu_);
    auto seen = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const Message& m : messages_) {
        if (m.msg_type() == type) return true;
      }
      return false;
    };
    mu_.AwaitWithTimeout(absl::Condition(&seen), absl::Seconds(20));
    return messages_;
  }

 private:
  absl::Mutex mu_;
  std::vector<Message> messages_ ABSL_GUARDED_BY(mu_);
};

std::vector<std::string> Types(const std::vector<Message>& ms) {
  std::vector<std::string> out;
  for (const Message& m : ms) {
    out.push_back(m.msg_type() == "status" ? "status:" + m.content["execution_state"].get<std::string>()
                                           : m.msg_type());
  }
  return out;
}

std::string Request(const std::string& id, const std::string& type, nlohmann::json content,
                    const std::string& channel = "shell") {
  return nlohmann::json{{"header", {{"msg_id", id}, {"msg_type", type}, {"session", "client"}, {"username", "u"},
                                    {"version", "5.3"}}},
                        {"parent_header", nlohmann::json::object()},
                        {"metadata", nlohmann::json::object()},
                        {"content", content},
                        {"channel", channel}}
      .dump();
}

class KernelGatewayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.RegisterService(&fake_);
    server_ = builder.BuildAndStart();
    stub_ = v1::Executor::NewStub(server_->InProcessChannel(grpc::ChannelArguments()));
    gateway_ = std::make_unique<KernelGateway>(stub_);
  }
  void TearDown() override {
    // A channel may still send (a last status) after the test's body has
    // seen what it waited for: closed first, it sends nothing more, and
    // the collectors (destroyed after this) are not called late.
    for (const std::shared_ptr<KernelChannel>& channel : channels_) channel->Close();
    if (!fake_.release_raise.HasBeenNotified()) fake_.release_raise.Notify();
    gateway_.reset();
    server_->Shutdown();
  }

  // A channel to the fake's session whose output `got` collects.
  std::shared_ptr<KernelChannel> Open(Collector& got, WireFormat format = WireFormat::kJson) {
    Reply error;
    auto channel = gateway_->Connect(caller_, KernelIdFromSessionId(kSession), format, got.Sink(format), &error);
    EXPECT_NE(channel, nullptr) << error.body.dump();
    if (channel != nullptr) channels_.push_back(channel);
    return channel;
  }
  // A collector that lives until the channels sending to it are closed.
  Collector& NewCollector() { return collectors_.emplace_back(); }

  std::list<Collector> collectors_;  // first, so destroyed last
  std::vector<std::shared_ptr<KernelChannel>> channels_;

  FakeExecutor fake_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<v1::Executor::StubInterface> stub_;
  std::unique_ptr<KernelGateway> gateway_;
  Caller caller_{"Bearer tenant-token-0123456789"};
};

TEST_F(KernelGatewayTest, ExecuteRequestBecomesJupyterIopubMessagesInOrder) {
  Collector& got = NewCollector();
  auto channel = Open(got);
  ASSERT_NE(channel, nullptr);
  channel->OnFrame(Request("e1", "execute_request", {{"code", "1+1"}, {"silent", false}}));
  std::vector<Message> ms = got.UntilIdle("e1");
  EXPECT_EQ(Types(ms), (std::vector<std::string>{"status:busy", "execute_input", "stream", "display_data",
                                                 "execute_result", "execute_reply", "status:idle"}));
  EXPECT_EQ(ms[1].content["execution_count"], 7);
  EXPECT_EQ(ms[2].content["text"], "hello\n");
  EXPECT_EQ(ms[3].content["data"]["image/png"], "iVBORw0K");
  EXPECT_EQ(ms[4].content["data"]["text/plain"], "2");
  EXPECT_EQ(ms[4].content["execution_count"], 7);
  EXPECT_EQ(ms[5].channel, "shell");
  EXPECT_EQ(ms[5].content["status"], "ok");
  for (const Message& m : ms) EXPECT_EQ(m.header["session"], ms[0].header["session"]);
  absl::MutexLock lock(&fake_.mu);
  EXPECT_EQ(fake_.last_authorization, "Bearer tenant-token-0123456789");
}

TEST_F(KernelGatewayTest, AnErrorRepliesErrorAndAbortsTheQueuedCells) {
  Collector& got = NewCollector();
  auto channel = Open(got, WireFormat::kV1);
  ASSERT_NE(channel, nullptr);
  auto v1_frame = [](const std::string& json) {
    auto m = DecodeFrame(json, WireFormat::kJson);
    return EncodeFrame(*m, WireFormat::kV1);
  };
  channel->OnFrame(v1_frame(Request("bad", "execute_request", {{"code", "raise"}})));
  channel->OnFrame(v1_frame(Request("queued", "execute_request", {{"code", "1+1"}})));
  fake_.release_raise.Notify();  // "queued" is behind "bad" by now
  std::vector<Message> ms = got.UntilIdle("bad");
  ASSERT_EQ(Types(ms), (std::vector<std::string>{"status:busy", "execute_input", "error", "execute_reply",
                                                 "status:idle"}));
  EXPECT_EQ(ms[2].content["ename"], "ZeroDivisionError");
  EXPECT_EQ(ms[3].content["status"], "error");
  EXPECT_EQ(ms[3].content["evalue"], "division by zero");
  std::vector<Message> aborted = got.UntilIdle("queued");
  ASSERT_EQ(Types(aborted), (std::vector<std::string>{"status:busy", "execute_reply", "status:idle"}));
  EXPECT_EQ(aborted[1].content["status"], "aborted");
}

// ipykernel aborts the cells queued when an error's reply goes out, not a
// cell the client sends on seeing that reply (as @jupyterlab/services does
// once a cell's future is done): here the client answers from the very
// callback that sends the reply, before the channel goes on.
TEST_F(KernelGatewayTest, ACellSentOnSeeingAnErrorsReplyRunsAndIsNotAborted) {
  Collector& got = NewCollector();
  auto channel = Open(got);
  ASSERT_NE(channel, nullptr);
  got.then = [weak = std::weak_ptr<KernelChannel>(channel)](const Message& m) {
    if (m.msg_type() != "execute_reply" || m.parent_header.value("msg_id", "") != "bad") return;
    if (std::shared_ptr<KernelChannel> channel = weak.lock()) {
      channel->OnFrame(Request("next", "execute_request", {{"code", "1+1"}}));
    }
  };
  fake_.release_raise.Notify();
  channel->OnFrame(Request("bad", "execute_request", {{"code", "raise"}}));
  std::vector<Message> ms = got.UntilIdle("next");
  ASSERT_EQ(Types(ms), (std::vector<std::string>{"status:busy", "execute_input", "stream", "display_data",
                                                 "execute_result", "execute_reply", "status:idle"}));
  EXPECT_EQ(ms[5].content["status"], "ok");
}

TEST_F(KernelGatewayTest, ALimitWithoutAnExceptionIsStillAnError) {
  Collector& got = NewCollector();
  auto channel = Open(got);
  ASSERT_NE(channel, nullptr);
  channel->OnFrame(Request("t", "execute_request", {{"code", "sleep"}}));
  std::vector<Message> ms = got.UntilIdle("t");
  ASSERT_EQ(Types(ms), (std::vector<std::string>{"status:busy", "execute_input", "error", "execute_reply",
                                                 "status:idle"}));
  EXPECT_EQ(ms[2].content["ename"], "TimeoutError");
  EXPECT_NE(ms[2].content["evalue"].get<std::string>().find("wall-clock"), std::string::npos);
}

TEST_F(KernelGatewayTest, MalformedFramesAreDroppedAndTheChannelKeepsServing) {
  Collector& got = NewCollector();
  auto channel = Open(got);
  ASSERT_NE(channel, nullptr);
  channel->OnFrame("{not json");
  channel->OnFrame(R"({"header": {}})");
  EXPECT_EQ(channel->dropped_frames(), 2);
  channel->OnFrame(Request("k", "kernel_info_request", nlohmann::json::object()));
  std::vector<Message> ms = got.UntilIdle("k");
  ASSERT_EQ(Types(ms), (std::vector<std::string>{"status:busy", "kernel_info_reply", "status:idle"}));
  EXPECT_EQ(ms[1].content["language_info"]["name"], "python");
  EXPECT_EQ(ms[1].content["status"], "ok");
}

TEST_F(KernelGatewayTest, InterruptRequestOnControlInterruptsTheSession) {
  Collector& got = NewCollector();
  auto channel = Open(got);
  ASSERT_NE(channel, nullptr);
  channel->OnFrame(Request("i", "interrupt_request", nlohmann::json::object(), "control"));
  std::vector<Message> ms = got.UntilType("interrupt_reply");
  ASSERT_FALSE(ms.empty());
  EXPECT_EQ(ms.back().channel, "control");
  EXPECT_EQ(ms.back().content["status"], "ok");
  absl::MutexLock lock(&fake_.mu);
  EXPECT_EQ(fake_.interrupts, 1);
}

TEST_F(KernelGatewayTest, RestApiAnswersInKernelGatewayShapes) {
  Reply started = gateway_->StartKernel(caller_, R"({"name": "python3"})");
  EXPECT_EQ(started.status, 201);
  EXPECT_EQ(started.body["id"], KernelIdFromSessionId(kSession));
  EXPECT_EQ(started.body["name"], "python3");
  EXPECT_EQ(started.body["execution_state"], "idle");
  EXPECT_EQ(gateway_->StartKernel(caller_, "").status, 201) << "no body: the default kernel";

  Reply unknown_spec = gateway_->StartKernel(caller_, R"({"name": "cobol"})");
  EXPECT_EQ(unknown_spec.status, 404);
  EXPECT_EQ(unknown_spec.body["reason"], "Not Found");
  EXPECT_NE(unknown_spec.body["message"].get<std::string>().find("python3"), std::string::npos);

  Reply malformed = gateway_->StartKernel(caller_, "{\"name\": ");
  EXPECT_EQ(malformed.status, 400);
  EXPECT_TRUE(malformed.body["message"].is_string());

  EXPECT_EQ(gateway_->StartKernel(caller_, std::string(KernelGateway::kMaxBodyBytes + 1, ' ')).status, 413);

  Reply missing = gateway_->GetKernel(caller_, "ffffffff-ffff-ffff-ffff-ffff00000000");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body["reason"], "Not Found");

  Reply connect_error;
  EXPECT_EQ(gateway_->Connect(caller_, "nope", WireFormat::kJson, ChannelSink{}, &connect_error), nullptr);
  EXPECT_EQ(connect_error.status, 404);

  Reply got = gateway_->GetKernel(caller_, KernelIdFromSessionId(kSession));
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.body["connections"], 0);
  {
    Collector& sink = NewCollector();
    auto one = gateway_->Connect(caller_, kSession, WireFormat::kJson, sink.Sink(WireFormat::kJson), &connect_error);
    auto two = gateway_->Connect(caller_, kSession, WireFormat::kJson, sink.Sink(WireFormat::kJson), &connect_error);
    for (int i = 0; i < 3; ++i) {  // counting does not forget live channels
      EXPECT_EQ(gateway_->GetKernel(caller_, kSession).body["connections"], 2);
    }
    two.reset();
    EXPECT_EQ(gateway_->GetKernel(caller_, kSession).body["connections"], 1);
  }
  EXPECT_EQ(gateway_->GetKernel(caller_, kSession).body["connections"], 0);
  EXPECT_EQ(gateway_->InterruptKernel(caller_, kSession).status, 204);
}

}  // namespace
}  // namespace warden::jupyter
