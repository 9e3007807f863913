// LlmClient: one OpenAI-compatible chat-completions endpoint
// (POST {base_url}/chat/completions), the API that vLLM, llama.cpp's server,
// Ollama, LM Studio, OpenRouter and OpenAI all serve. Over libcurl, with
// tool calling, SSE streaming, retries with backoff on 429/5xx/timeouts
// (honouring Retry-After), and errors that say what to fix on 401/404.
//
// The API key is sent as a bearer token and appears in no message or log.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/run_control.h"
#include "nlohmann/json.hpp"

namespace warden::agent {

struct LlmOptions {
  std::string base_url;  // e.g. "http://127.0.0.1:8000/v1" (no trailing /chat/completions)
  std::string model;
  std::string api_key;   // empty: no Authorization header (local servers)
  int64_t request_timeout_ms = 120'000;  // one request, first byte to last
  int64_t connect_timeout_ms = 10'000;
  int max_tokens = 2048;      // per reply; 0: not sent
  double temperature = 0.2;   // < 0: not sent (the server's default)
  bool stream = true;         // SSE, so text can be forwarded as it arrives
  int max_retries = 4;        // after the first attempt
  int64_t initial_backoff_ms = 500;  // doubled per retry, up to max_backoff_ms
  int64_t max_backoff_ms = 20'000;
  // tool_choice when tools are offered: "auto", "required", or the name of
  // one of the offered tools ({"type": "function", ...}); a name not offered
  // in a request (modes differ) is sent as "required".
  std::string tool_choice = "auto";
};

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text, exactly as the model wrote it
};

struct ChatMessage {
  std::string role;  // system | user | assistant | tool
  std::string content;
  std::vector<ToolCall> tool_calls;  // assistant
  std::string tool_call_id;          // tool
};

struct ToolSpec {
  std::string name;
  std::string description;
  nlohmann::json parameters;  // JSON Schema of the arguments object
};

struct ChatRequest {
  std::vector<ChatMessage> messages;
  std::vector<ToolSpec> tools;  // empty: none offered
  std::string model;            // empty: LlmOptions::model
  int max_tokens = 0;           // 0: LlmOptions::max_tokens
};

struct TokenCount {
  int64_t prompt = 0;
  int64_t completion = 0;
  bool estimated = false;  // the server reported none: ~4 characters a token
};

struct ChatResponse {
  std::string content;
  std::vector<ToolCall> tool_calls;
  std::string finish_reason;
  TokenCount usage;
  int attempts = 1;
};

class LlmClient {
 public:
  // Called with each piece of text as it streams in.
  using DeltaCallback = std::function<void(absl::string_view text)>;
  // Called before each retry with what went wrong (no secrets in it).
  using RetryCallback = std::function<void(const std::string& what)>;

  explicit LlmClient(LlmOptions options);

  // One reply. Errors: UNAUTHENTICATED/PERMISSION_DENIED (the key), NOT_FOUND
  // (URL or model), INVALID_ARGUMENT (the server refused the request),
  // DEADLINE_EXCEEDED / UNAVAILABLE / RESOURCE_EXHAUSTED once retries are
  // spent, CANCELLED when `control` was cancelled. `control` may be null.
  // An UNAVAILABLE says what the server did: refused the connection, closed
  // it without answering or mid-reply (a server that crashed), or answered
  // 5xx (with its own message).
  absl::StatusOr<ChatResponse> Complete(const ChatRequest& request, const DeltaCallback& on_delta,
                                        RunControl* control, const RetryCallback& on_retry = nullptr);

  const LlmOptions& options() const { return options_; }

  // The request's JSON body (exposed for tests).
  nlohmann::json Body(const ChatRequest& request) const;

 private:
  struct Attempt;
  absl::StatusOr<ChatResponse> Once(const std::string& body, const DeltaCallback& on_delta,
                                    RunControl* control, Attempt* attempt);

  LlmOptions options_;
  std::string url_;
};

// Parses a non-streamed chat.completion object.
absl::StatusOr<ChatResponse> ParseCompletion(const nlohmann::json& body);

}  // namespace warden::agent
