#include "agent/llm_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "agent/sse_parser.h"

namespace warden::agent {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxDetail = 300;  // of a server's error body, in messages

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string Shorten(absl::string_view text) {
  std::string s(absl::StripAsciiWhitespace(text));
  if (s.size() > kMaxDetail) s = absl::StrCat(s.substr(0, kMaxDetail), "...");
  return s;
}

// The server's own words from an error body: {"error": {"message": ...}},
// {"error": "..."}, {"detail": ...} (FastAPI), or the text itself.
std::string ServerMessage(const std::string& body) {
  Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object()) {
    if (j.contains("error")) {
      const Json& e = j["error"];
      if (e.is_object() && e.contains("message") && e["message"].is_string()) {
        return Shorten(e["message"].get<std::string>());
      }
      if (e.is_string()) return Shorten(e.get<std::string>());
    }
    if (j.contains("detail")) return Shorten(j["detail"].dump());
    if (j.contains("message") && j["message"].is_string()) return Shorten(j["message"].get<std::string>());
  }
  return Shorten(body);
}

std::string StringOr(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

void ReadUsage(const Json& usage, TokenCount* out) {
  if (!usage.is_object()) return;
  if (usage.contains("prompt_tokens") && usage["prompt_tokens"].is_number()) {
    out->prompt = usage["prompt_tokens"].get<int64_t>();
  }
  if (usage.contains("completion_tokens") && usage["completion_tokens"].is_number()) {
    out->completion = usage["completion_tokens"].get<int64_t>();
  }
  out->estimated = false;
}

// Assembles a streamed reply from its chat.completion.chunk events.
struct StreamState {
  std::string content;
  std::map<int, ToolCall> tool_calls;  // by the delta's index
  std::string finish_reason;
  TokenCount usage{0, 0, true};
  std::string error;  // an error object sent inside the stream
  bool done = false;  // saw [DONE]
  bool any = false;   // saw at least one chunk

  void Take(const std::string& data, const LlmClient::DeltaCallback& on_delta) {
    if (data == "[DONE]") {
      done = true;
      return;
    }
    Json j = Json::parse(data, nullptr, false);
    if (!j.is_object()) return;
    any = true;
    if (j.contains("error")) error = ServerMessage(data);
    if (j.contains("usage")) ReadUsage(j["usage"], &usage);
    if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) return;
    const Json& choice = j["choices"][0];
    if (std::string reason = StringOr(choice, "finish_reason"); !reason.empty()) finish_reason = reason;
    if (!choice.contains("delta") || !choice["delta"].is_object()) return;
    const Json& delta = choice["delta"];
    if (std::string text = StringOr(delta, "content"); !text.empty()) {
      content += text;
      if (on_delta) on_delta(text);
    }
    if (delta.contains("tool_calls") && delta["tool_calls"].is_array()) {
      int position = 0;
      for (const Json& call : delta["tool_calls"]) {
        const int index = call.contains("index") && call["index"].is_number_integer()
                              ? call["index"].get<int>()
                              : position;
        ++position;
        ToolCall& out = tool_calls[index];
        if (std::string id = StringOr(call, "id"); !id.empty()) out.id = id;
        if (call.contains("function") && call["function"].is_object()) {
          const Json& f = call["function"];
          // OpenAI sends the name once; llama-cpp-python's server repeats the
          // whole name in every chunk, which must not be appended again.
          if (std::string name = StringOr(f, "name"); name != out.name) out.name += name;
          // Most servers send the arguments in pieces; some send an object.
          if (f.contains("arguments")) {
            out.arguments += f["arguments"].is_string() ? f["arguments"].get<std::string>()
                                                        : f["arguments"].dump();
          }
        }
      }
    }
  }
};

size_t CountChars(const ChatRequest& request) {
  size_t n = 0;
  for (const ChatMessage& m : request.messages) {
    n += m.content.size();
    for (const ToolCall& c : m.tool_calls) n += c.arguments.size() + c.name.size();
  }
  return n;
}

// Retry-After: delta-seconds or an HTTP-date (RFC 9110 10.2.3).
std::optional<absl::Duration> ParseRetryAfter(absl::string_view value) {
  value = absl::StripAsciiWhitespace(value);
  double seconds;
  if (absl::SimpleAtod(value, &seconds) && seconds >= 0) return absl::Seconds(seconds);
  const std::string text(value);
  const time_t when = curl_getdate(text.c_str(), nullptr);
  if (when < 0) return std::nullopt;
  return std::max(absl::ZeroDuration(), absl::FromTimeT(when) - absl::Now());
}

// What a failed transfer (curl's code and its own words, the reply's bytes so
// far) says of the server: unreachable, gone before answering, or broken off
// mid-reply.
std::string TransferError(const std::string& url, CURLcode curl, const char* detail, size_t received) {
  const std::string what = detail[0] != '\0' ? std::string(detail) : std::string(curl_easy_strerror(curl));
  switch (curl) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
      return absl::StrCat("cannot reach the LLM server at ", url, ": ", what,
                          " (is it running, and is llm.base_url right?)");
    case CURLE_GOT_NOTHING:
      return absl::StrCat("the LLM server at ", url, " closed the connection without answering (", what,
                          "; has it crashed? its log says why)");
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
      if (received > 0) {
        return absl::StrCat("the LLM server at ", url, " broke off its reply after ", received, " bytes (", what,
                            "; has it crashed? its log says why)");
      }
      return absl::StrCat("the LLM server at ", url, " dropped the connection before answering (", what,
                          "; has it crashed? its log says why)");
    default:
      return absl::StrCat("the request to the LLM server at ", url, " failed: ", what);
  }
}

}  // namespace

struct LlmClient::Attempt {
  bool retryable = false;
  std::optional<absl::Duration> retry_after;
};

LlmClient::LlmClient(LlmOptions options) : options_(std::move(options)) {
  GlobalInit();
  std::string base(absl::StripSuffix(options_.base_url, "/"));
  url_ = absl::StrCat(base, "/chat/completions");
}

Json LlmClient::Body(const ChatRequest& request) const {
  Json body;
  body["model"] = request.model.empty() ? options_.model : request.model;
  Json messages = Json::array();
  for (const ChatMessage& m : request.messages) {
    Json msg{{"role", m.role}};
    if (m.role == "assistant" && !m.tool_calls.empty()) {
      // "" rather than null: both are OpenAI's, but llama-cpp-python's
      // server validates content as a string and refuses null.
      msg["content"] = m.content;
      Json calls = Json::array();
      for (const ToolCall& c : m.tool_calls) {
        calls.push_back({{"id", c.id},
                         {"type", "function"},
                         {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
      }
      msg["tool_calls"] = std::move(calls);
    } else {
      msg["content"] = m.content;
    }
    if (m.role == "tool") msg["tool_call_id"] = m.tool_call_id;
    messages.push_back(std::move(msg));
  }
  body["messages"] = std::move(messages);
  if (!request.tools.empty()) {
    Json tools = Json::array();
    for (const ToolSpec& t : request.tools) {
      tools.push_back({{"type", "function"},
                       {"function",
                        {{"name", t.name}, {"description", t.description}, {"parameters", t.parameters}}}});
    }
    body["tools"] = std::move(tools);
    const std::string& choice = options_.tool_choice;
    if (choice == "auto" || choice == "required") {
      body["tool_choice"] = choice;
    } else if (std::any_of(request.tools.begin(), request.tools.end(),
                           [&](const ToolSpec& t) { return t.name == choice; })) {
      body["tool_choice"] = {{"type", "function"}, {"function", {{"name", choice}}}};
    } else {
      body["tool_choice"] = "required";
    }
  }
  const int max_tokens = request.max_tokens > 0 ? request.max_tokens : options_.max_tokens;
  if (max_tokens > 0) body["max_tokens"] = max_tokens;
  if (options_.temperature >= 0) body["temperature"] = options_.temperature;
  if (options_.stream) {
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
  }
  return body;
}

absl::StatusOr<ChatResponse> LlmClient::Complete(const ChatRequest& request, const DeltaCallback& on_delta,
                                                 RunControl* control, const RetryCallback& on_retry) {
  const std::string body = Body(request).dump(-1, ' ', false, Json::error_handler_t::replace);
  absl::Duration backoff = absl::Milliseconds(options_.initial_backoff_ms);
  for (int attempt_number = 1;; ++attempt_number) {
    Attempt attempt;
    absl::StatusOr<ChatResponse> response = Once(body, on_delta, control, &attempt);
    if (response.ok()) {
      response->attempts = attempt_number;
      if (response->usage.estimated) {
        response->usage.prompt = static_cast<int64_t>(CountChars(request) / 4);
        size_t out = response->content.size();
        for (const ToolCall& c : response->tool_calls) out += c.arguments.size();
        response->usage.completion = static_cast<int64_t>(out / 4);
      }
      return response;
    }
    if (!attempt.retryable || attempt_number > options_.max_retries) {
      if (attempt.retryable && options_.max_retries > 0) {
        return absl::Status(response.status().code(),
                            absl::StrCat(response.status().message(), " (gave up after ",
                                         attempt_number, " attempts)"));
      }
      return response.status();
    }
    absl::Duration wait = attempt.retry_after.value_or(backoff);
    wait = std::min(wait, absl::Seconds(120));
    if (on_retry) {
      on_retry(absl::StrCat(response.status().message(), "; retrying in ",
                            absl::FormatDuration(absl::Trunc(wait, absl::Milliseconds(1))), " (attempt ",
                            attempt_number + 1, " of ", options_.max_retries + 1, ")"));
    }
    if (control ? !control->SleepFor(wait) : (absl::SleepFor(wait), false)) {
      return absl::CancelledError("the run was cancelled");
    }
    backoff = std::min(backoff * 2, absl::Milliseconds(options_.max_backoff_ms));
  }
}

absl::StatusOr<ChatResponse> LlmClient::Once(const std::string& body, const DeltaCallback& on_delta,
                                             RunControl* control, Attempt* attempt) {
  struct Sink {
    CURL* easy;
    std::string raw;  // the whole body (errors, non-streamed replies)
    bool checked = false, streaming = false;
    SseParser sse;
    StreamState stream;
    const DeltaCallback* on_delta;
    std::string retry_after, content_type;
    size_t received = 0;  // bytes of the reply's body so far
  } sink;
  sink.on_delta = &on_delta;
  char curl_error[CURL_ERROR_SIZE] = "";

  CURL* easy = curl_easy_init();
  if (!easy) return absl::InternalError("curl_easy_init failed");
  sink.easy = easy;
  struct curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Content-Type: application/json");
  headers = curl_slist_append(headers, options_.stream ? "Accept: text/event-stream" : "Accept: application/json");
  std::string authorization;
  if (!options_.api_key.empty()) {
    authorization = absl::StrCat("Authorization: Bearer ", options_.api_key);
    headers = curl_slist_append(headers, authorization.c_str());
  }
  curl_easy_setopt(easy, CURLOPT_URL, url_.c_str());
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.request_timeout_ms));
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.connect_timeout_ms));
  curl_easy_setopt(easy, CURLOPT_USERAGENT, "wardend-agent/0.1");
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, curl_error);
  curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "");
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, &sink);
  curl_easy_setopt(
      easy, CURLOPT_HEADERFUNCTION, +[](char* data, size_t size, size_t n, void* user) -> size_t {
        auto* s = static_cast<Sink*>(user);
        absl::string_view line(data, size * n);
        const size_t colon = line.find(':');
        if (colon != absl::string_view::npos) {
          const std::string name = absl::AsciiStrToLower(line.substr(0, colon));
          const std::string value(absl::StripAsciiWhitespace(line.substr(colon + 1)));
          if (name == "retry-after") s->retry_after = value;
          if (name == "content-type") s->content_type = absl::AsciiStrToLower(value);
        }
        return size * n;
      });
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(
      easy, CURLOPT_WRITEFUNCTION, +[](char* data, size_t size, size_t n, void* user) -> size_t {
        auto* s = static_cast<Sink*>(user);
        absl::string_view bytes(data, size * n);
        s->received += bytes.size();
        if (!s->checked) {
          s->checked = true;
          long code = 0;
          curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &code);
          s->streaming = code == 200 && absl::StrContains(s->content_type, "text/event-stream");
        }
        if (s->streaming) {
          for (const std::string& event : s->sse.Feed(bytes)) s->stream.Take(event, *s->on_delta);
        } else {
          s->raw.append(bytes.data(), bytes.size());
        }
        return size * n;
      });

  CURLM* multi = curl_multi_init();
  curl_multi_add_handle(multi, easy);
  ScopedCancelHook wake(control, [multi] { curl_multi_wakeup(multi); });
  bool cancelled = false;
  int running = 1;
  while (running) {
    if (curl_multi_perform(multi, &running) != CURLM_OK) break;
    if (!running) break;
    if (control && control->cancelled()) {
      cancelled = true;
      break;
    }
    curl_multi_poll(multi, nullptr, 0, 200, nullptr);
    if (control && control->cancelled()) {
      cancelled = true;
      break;
    }
  }
  CURLcode code = CURLE_OK;
  int left = 0;
  while (CURLMsg* msg = curl_multi_info_read(multi, &left)) {
    if (msg->msg == CURLMSG_DONE) code = msg->data.result;
  }
  long http = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &http);
  curl_multi_remove_handle(multi, easy);
  curl_multi_cleanup(multi);
  curl_easy_cleanup(easy);
  curl_slist_free_all(headers);

  if (cancelled) return absl::CancelledError("the run was cancelled");
  if (!sink.retry_after.empty()) attempt->retry_after = ParseRetryAfter(sink.retry_after);
  if (code == CURLE_OPERATION_TIMEDOUT) {
    attempt->retryable = true;
    return absl::DeadlineExceededError(absl::StrCat("no complete reply from ", url_, " within ",
                                                    options_.request_timeout_ms,
                                                    " ms (llm.request_timeout_ms)"));
  }
  if (code != CURLE_OK) {
    attempt->retryable = true;
    return absl::UnavailableError(TransferError(url_, code, curl_error, sink.received));
  }
  if (http == 429) {
    attempt->retryable = true;
    return absl::ResourceExhaustedError(
        absl::StrCat("the LLM server is rate-limiting (HTTP 429): ", ServerMessage(sink.raw)));
  }
  if (http >= 500) {
    attempt->retryable = true;
    return absl::UnavailableError(absl::StrCat("the LLM server failed (HTTP ", http, "): ", ServerMessage(sink.raw)));
  }
  if (http == 401 || http == 403) {
    return absl::Status(http == 401 ? absl::StatusCode::kUnauthenticated : absl::StatusCode::kPermissionDenied,
                        absl::StrCat("the LLM server at ", url_, " refused the API key (HTTP ", http,
                                     "): set llm.api_key_env or llm.api_key_file to a valid key. The server said: ",
                                     ServerMessage(sink.raw)));
  }
  if (http == 404) {
    return absl::NotFoundError(absl::StrCat(
        "HTTP 404 from ", url_, ": check llm.base_url (OpenAI-compatible servers serve "
        "/v1/chat/completions, so it usually ends in /v1) and that the server has the model. "
        "The server said: ", ServerMessage(sink.raw)));
  }
  if (http != 200) {
    return absl::InvalidArgumentError(
        absl::StrCat("the LLM server refused the request (HTTP ", http, "): ", ServerMessage(sink.raw)));
  }

  if (sink.streaming) {
    if (std::string last = sink.sse.Flush(); !last.empty()) sink.stream.Take(last, on_delta);
    if (!sink.stream.error.empty()) {
      attempt->retryable = true;
      return absl::UnavailableError(absl::StrCat("the LLM server failed mid-stream: ", sink.stream.error));
    }
    if (!sink.stream.done && sink.stream.finish_reason.empty()) {
      attempt->retryable = true;
      return absl::UnavailableError(absl::StrCat(
          "the LLM server at ", url_, " ended its stream after ", sink.received,
          " bytes, before the reply's end ([DONE] or a finish_reason): it closed the connection mid-reply (has "
          "it crashed? its log says why)"));
    }
    ChatResponse response;
    response.content = std::move(sink.stream.content);
    for (auto& [index, call] : sink.stream.tool_calls) response.tool_calls.push_back(std::move(call));
    response.finish_reason = sink.stream.finish_reason;
    response.usage = sink.stream.usage;
    return response;
  }
  Json parsed = Json::parse(sink.raw, nullptr, false);
  if (parsed.is_discarded()) {
    attempt->retryable = true;
    return absl::UnavailableError(absl::StrCat("the LLM server's reply is not JSON: ", Shorten(sink.raw)));
  }
  return ParseCompletion(parsed);
}

absl::StatusOr<ChatResponse> ParseCompletion(const Json& body) {
  if (!body.is_object() || !body.contains("choices") || !body["choices"].is_array() || body["choices"].empty()) {
    return absl::UnavailableError(absl::StrCat("the LLM server's reply has no choices: ", Shorten(body.dump())));
  }
  const Json& choice = body["choices"][0];
  ChatResponse response;
  response.finish_reason = StringOr(choice, "finish_reason");
  response.usage.estimated = true;
  if (body.contains("usage")) ReadUsage(body["usage"], &response.usage);
  if (!choice.contains("message") || !choice["message"].is_object()) return response;
  const Json& message = choice["message"];
  response.content = StringOr(message, "content");
  if (message.contains("tool_calls") && message["tool_calls"].is_array()) {
    for (const Json& call : message["tool_calls"]) {
      ToolCall out;
      out.id = StringOr(call, "id");
      if (call.contains("function") && call["function"].is_object()) {
        const Json& f = call["function"];
        out.name = StringOr(f, "name");
        if (f.contains("arguments")) {
          out.arguments = f["arguments"].is_string() ? f["arguments"].get<std::string>() : f["arguments"].dump();
        }
      }
      response.tool_calls.push_back(std::move(out));
    }
  }
  return response;
}

}  // namespace warden::agent
