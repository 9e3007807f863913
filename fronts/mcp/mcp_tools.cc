#include "fronts/mcp/mcp_tools.h"

#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fronts/http/upstream.h"

namespace warden::mcp {
namespace {

using nlohmann::json;

constexpr char kLanguages[] = "python, javascript or bash";

// --- Schemas. Property descriptions are what the model reads: they say
// what persists and what does not.

json StringProp(const std::string& description) { return {{"type", "string"}, {"description", description}}; }

json LanguageProp() {
  return {{"type", "string"},
          {"enum", {"python", "javascript", "bash"}},
          {"default", "python"},
          {"description", "The interpreter. Ignored when session_id is given (a session has its own)."}};
}

json SessionIdProp() {
  return StringProp("A session from create_session. Variables, imports and files persist in it between calls.");
}

json ObjectSchema(json properties, std::vector<std::string> required) {
  json schema = {{"type", "object"}, {"properties", std::move(properties)}, {"additionalProperties", false}};
  if (!required.empty()) schema["required"] = required;
  return schema;
}

json ExecuteOutputSchema() {
  return {
      {"type", "object"},
      {"properties",
       {{"outcome",
         {{"type", "string"},
          {"description",
           "ok, error (the code raised), wall_timeout, cpu_timeout, memory_limit, output_limit, nonzero_exit, "
           "signaled, violation, interrupted, session_lost, setup_error or internal"}}},
        {"stdout", {{"type", "string"}}},
        {"stderr", {{"type", "string"}}},
        {"results",
         {{"type", "array"},
          {"description", "Rich outputs in order: display data, then the value of the last expression"},
          {"items",
           {{"type", "object"},
            {"properties",
             {{"data",
               {{"type", "object"},
                {"description", "MIME type -> content; binary types (image/png) in base64"},
                {"additionalProperties", {{"type", "string"}}}}},
              {"is_result", {{"type", "boolean"}}}}},
            {"required", {"data", "is_result"}}}}}},
        {"error",
         {{"type", "object"},
          {"properties",
           {{"name", {{"type", "string"}}},
            {"value", {{"type", "string"}}},
            {"traceback", {{"type", "array"}, {"items", {{"type", "string"}}}}}}},
          {"required", {"name", "value", "traceback"}}}},
        {"execution_count", {{"type", "integer"}}},
        {"session_id", {{"type", "string"}}},
        {"message", {{"type", "string"}, {"description", "Why, for limits and failures of the sandbox"}}},
        {"wall_ms", {{"type", "integer"}}}}},
      {"required", {"outcome", "stdout", "stderr", "results", "execution_count"}}};
}

json Annotations(bool read_only, bool destructive, bool idempotent) {
  return {{"readOnlyHint", read_only},
          {"destructiveHint", destructive},
          {"idempotentHint", idempotent},
          {"openWorldHint", false}};
}

json ToolList() {
  json tools = json::array();
  tools.push_back(
      {{"name", "execute_code"},
       {"title", "Run code in a sandbox"},
       {"description",
        "Runs code in an isolated sandbox (no network) and returns its stdout, stderr, rich results (plots come "
        "back as PNG images) and any error with its traceback. Without session_id the call is one-shot: a fresh "
        "sandbox that keeps nothing afterwards, no variables and no files. To build on earlier work, call "
        "create_session once and pass its session_id to every call: variables, imports and files then persist, "
        "as in a Jupyter notebook. The value of the last expression is returned like a notebook cell's."},
       {"inputSchema",
        ObjectSchema({{"code", StringProp("The source to run")},
                      {"language", LanguageProp()},
                      {"session_id", SessionIdProp()},
                      {"timeout_ms",
                       {{"type", "integer"},
                        {"minimum", 1},
                        {"description", "Wall-clock limit for this call; the server's default when absent"}}}},
                     {"code"})},
       {"outputSchema", ExecuteOutputSchema()},
       {"annotations", Annotations(false, false, false)}});
  tools.push_back(
      {{"name", "create_session"},
       {"title", "Start a persistent session"},
       {"description",
        "Starts an interpreter in its own sandbox that keeps variables, imports and files between execute_code "
        "calls that pass its session_id. Close it with close_session when done; idle sessions expire."},
       {"inputSchema", ObjectSchema({{"language", LanguageProp()}}, {})},
       {"outputSchema",
        {{"type", "object"},
         {"properties", {{"session_id", {{"type", "string"}}}, {"language", {{"type", "string"}}}}},
         {"required", {"session_id"}}}},
       {"annotations", Annotations(false, false, false)}});
  tools.push_back({{"name", "close_session"},
                   {"title", "Close a session"},
                   {"description", "Ends a session: its interpreter, variables and files are gone."},
                   {"inputSchema", ObjectSchema({{"session_id", SessionIdProp()}}, {"session_id"})},
                   {"annotations", Annotations(false, true, true)}});
  tools.push_back({{"name", "interrupt_session"},
                   {"title", "Interrupt a session"},
                   {"description",
                    "Interrupts the code running in a session (KeyboardInterrupt in Python); the session, its "
                    "variables and files survive."},
                   {"inputSchema", ObjectSchema({{"session_id", SessionIdProp()}}, {"session_id"})},
                   {"annotations", Annotations(false, false, true)}});
  tools.push_back(
      {{"name", "restart_session"},
       {"title", "Restart a session"},
       {"description",
        "Starts the session's interpreter afresh: variables and imports are lost, files are kept unless "
        "clear_workspace is true."},
       {"inputSchema", ObjectSchema({{"session_id", SessionIdProp()},
                                     {"clear_workspace",
                                      {{"type", "boolean"}, {"default", false}, {"description", "Also delete the files"}}}},
                                    {"session_id"})},
       {"annotations", Annotations(false, true, false)}});
  tools.push_back(
      {{"name", "upload_file"},
       {"title", "Write a file into a session"},
       {"description",
        "Writes a file into a session's workspace (the working directory of its code), replacing any file of that "
        "name."},
       {"inputSchema",
        ObjectSchema({{"session_id", SessionIdProp()},
                      {"path", StringProp("Relative to the workspace, e.g. data/input.csv")},
                      {"content_base64", StringProp("The file's bytes, base64-encoded")}},
                     {"session_id", "path", "content_base64"})},
       {"annotations", Annotations(false, false, true)}});
  tools.push_back(
      {{"name", "download_file"},
       {"title", "Read a file from a session"},
       {"description", "Returns a file from a session's workspace as an embedded resource (base64 blob)."},
       {"inputSchema",
        ObjectSchema({{"session_id", SessionIdProp()}, {"path", StringProp("Relative to the workspace")}},
                     {"session_id", "path"})},
       {"annotations", Annotations(true, false, true)}});
  tools.push_back(
      {{"name", "list_files"},
       {"title", "List a session's files"},
       {"description", "Lists the files in a session's workspace, or under one directory of it."},
       {"inputSchema", ObjectSchema({{"session_id", SessionIdProp()},
                                     {"path", StringProp("A directory relative to the workspace; all when absent")}},
                                    {"session_id"})},
       {"outputSchema",
        {{"type", "object"},
         {"properties",
          {{"files",
            {{"type", "array"},
             {"items",
              {{"type", "object"},
               {"properties",
                {{"path", {{"type", "string"}}}, {"size", {{"type", "integer"}}}, {"type", {{"type", "string"}}}}},
               {"required", {"path", "size", "type"}}}}}}}},
         {"required", {"files"}}}},
       {"annotations", Annotations(true, false, true)}});
  return tools;
}

// --- Arguments

absl::Status BadArgument(const std::string& tool, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(tool, ": ", why));
}

absl::StatusOr<std::string> RequiredString(const json& args, const std::string& tool, const char* name) {
  auto it = args.find(name);
  if (it == args.end()) return BadArgument(tool, absl::StrCat("the argument '", name, "' is required"));
  if (!it->is_string()) return BadArgument(tool, absl::StrCat("'", name, "' must be a string"));
  return it->get<std::string>();
}

absl::StatusOr<std::string> OptionalString(const json& args, const std::string& tool, const char* name) {
  auto it = args.find(name);
  if (it == args.end() || it->is_null()) return std::string();
  if (!it->is_string()) return BadArgument(tool, absl::StrCat("'", name, "' must be a string"));
  return it->get<std::string>();
}

absl::StatusOr<v1::Language> LanguageArgument(const json& args, const std::string& tool) {
  auto name = OptionalString(args, tool, "language");
  if (!name.ok()) return name.status();
  const std::string lower = absl::AsciiStrToLower(*name);
  if (lower.empty() || lower == "python" || lower == "python3") return v1::LANGUAGE_PYTHON;
  if (lower == "javascript" || lower == "js" || lower == "node") return v1::LANGUAGE_JAVASCRIPT;
  if (lower == "bash" || lower == "sh" || lower == "shell") return v1::LANGUAGE_BASH;
  return BadArgument(tool, absl::StrCat("unknown language '", *name, "': use ", kLanguages));
}

// Rejects arguments the schema does not have (a typo must not be ignored).
absl::Status OnlyKnown(const json& args, const std::string& tool, std::initializer_list<const char*> known) {
  for (const auto& [key, value] : args.items()) {
    bool found = false;
    for (const char* k : known) found = found || key == k;
    if (!found) {
      return BadArgument(tool, absl::StrCat("unknown argument '", key, "'; it takes ", absl::StrJoin(known, ", ")));
    }
  }
  return absl::OkStatus();
}

// --- Results

json Text(const std::string& text) { return {{"type", "text"}, {"text", text}}; }

// A failure of the call itself (no such session, a refused limit, the
// daemon unreachable), as a result the model can read and act on.
json CallFailed(const absl::Status& status) {
  std::string hint;
  if (status.code() == absl::StatusCode::kNotFound) hint = " (create one with create_session)";
  return {{"content", json::array({Text(absl::StrCat(absl::StatusCodeToString(status.code()), ": ",
                                                     status.message(), hint))})},
          {"isError", true}};
}

std::string OutcomeName(v1::Outcome outcome) {
  std::string name = v1::Outcome_Name(outcome);
  if (absl::StartsWith(name, "OUTCOME_")) name = name.substr(8);
  return absl::AsciiStrToLower(name);
}

bool IsBinaryMime(const std::string& mime) {
  return absl::StartsWith(mime, "image/") && mime != "image/svg+xml";
}

std::string Utf8(const std::string& bytes) {
  // nlohmann's dump replaces invalid sequences; keep the text as it came.
  return bytes;
}

json ExecuteResult(const v1::ExecuteResponse& r) {
  json results = json::array();
  json content = json::array();
  if (!r.stdout().empty()) content.push_back(Text(Utf8(r.stdout())));
  if (!r.stderr().empty()) content.push_back(Text(absl::StrCat("stderr:\n", r.stderr())));
  for (const v1::Result& result : r.results()) {
    json data = json::object();
    bool has_image = false;
    for (const auto& [mime, bytes] : result.data()) {
      if (IsBinaryMime(mime)) {
        data[mime] = absl::Base64Escape(bytes);
        if (mime == "image/png" || mime == "image/jpeg") {
          content.push_back({{"type", "image"}, {"data", absl::Base64Escape(bytes)}, {"mimeType", mime}});
          has_image = true;
        }
      } else {
        data[mime] = Utf8(bytes);
      }
    }
    auto plain = result.data().find("text/plain");
    if (plain != result.data().end() && (!has_image || result.is_result())) content.push_back(Text(plain->second));
    results.push_back({{"data", std::move(data)}, {"is_result", result.is_result()}});
  }
  json structured = {{"outcome", OutcomeName(r.outcome())},
                     {"stdout", Utf8(r.stdout())},
                     {"stderr", Utf8(r.stderr())},
                     {"results", std::move(results)},
                     {"execution_count", r.execution_count()},
                     {"wall_ms", r.wall_ms()}};
  if (!r.session_id().empty()) structured["session_id"] = r.session_id();
  if (!r.message().empty()) structured["message"] = r.message();
  const bool failed = r.outcome() != v1::OUTCOME_OK;
  if (r.has_error() && !r.error().name().empty()) {
    const v1::Error& e = r.error();
    structured["error"] = {{"name", e.name()},
                           {"value", e.value()},
                           {"traceback", std::vector<std::string>(e.traceback().begin(), e.traceback().end())}};
    std::string text = absl::StrCat(e.name(), ": ", e.value());
    if (!e.traceback().empty()) absl::StrAppend(&text, "\n", absl::StrJoin(e.traceback(), "\n"));
    content.push_back(Text(text));
  } else if (failed) {
    std::string text = OutcomeName(r.outcome());
    if (!r.message().empty()) absl::StrAppend(&text, ": ", r.message());
    if (r.outcome() == v1::OUTCOME_NONZERO_EXIT) absl::StrAppend(&text, " (exit code ", r.exit_code(), ")");
    if (r.outcome() == v1::OUTCOME_VIOLATION) absl::StrAppend(&text, " (", r.violation(), ")");
    content.push_back(Text(text));
  }
  if (content.empty()) content.push_back(Text("(no output)"));
  json out = {{"content", std::move(content)}, {"structuredContent", std::move(structured)}};
  if (failed) out["isError"] = true;
  return out;
}

std::string MimeForPath(const std::string& path) {
  static const std::pair<const char*, const char*> kTypes[] = {
      {".png", "image/png"},       {".jpg", "image/jpeg"},     {".jpeg", "image/jpeg"},
      {".gif", "image/gif"},       {".svg", "image/svg+xml"},  {".txt", "text/plain"},
      {".csv", "text/csv"},        {".json", "application/json"}, {".html", "text/html"},
      {".md", "text/markdown"},    {".py", "text/x-python"},   {".js", "text/javascript"},
      {".pdf", "application/pdf"}};
  const std::string lower = absl::AsciiStrToLower(path);
  for (const auto& [ext, type] : kTypes) {
    if (absl::EndsWith(lower, ext)) return type;
  }
  return "application/octet-stream";
}

}  // namespace

json McpTools::List() const { return {{"tools", ToolList()}}; }

absl::StatusOr<json> McpTools::Call(const json& params, const std::string& token, const json& progress_token,
                                    const Notify& notify) {
  if (!params.is_object() || !params.contains("name") || !params["name"].is_string()) {
    return absl::InvalidArgumentError("tools/call needs params {\"name\": TOOL, \"arguments\": {...}}");
  }
  const std::string name = params["name"].get<std::string>();
  json args = params.value("arguments", json::object());
  if (args.is_null()) args = json::object();
  if (!args.is_object()) return BadArgument(name, "arguments must be an object");
  if (name == "execute_code") return ExecuteCode(args, token, progress_token, notify);
  if (name == "create_session") return CreateSession(args, token);
  if (name == "close_session") return CloseSession(args, token);
  if (name == "interrupt_session") return InterruptSession(args, token);
  if (name == "restart_session") return RestartSession(args, token);
  if (name == "upload_file") return UploadFile(args, token);
  if (name == "download_file") return DownloadFile(args, token);
  if (name == "list_files") return ListFiles(args, token);
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown tool '", name,
      "': the tools are execute_code, create_session, close_session, interrupt_session, restart_session, "
      "upload_file, download_file and list_files"));
}

absl::StatusOr<json> McpTools::ExecuteCode(const json& args, const std::string& token, const json& progress_token,
                                           const Notify& notify) {
  const std::string tool = "execute_code";
  if (auto s = OnlyKnown(args, tool, {"code", "language", "session_id", "timeout_ms"}); !s.ok()) return s;
  auto code = RequiredString(args, tool, "code");
  if (!code.ok()) return code.status();
  auto language = LanguageArgument(args, tool);
  if (!language.ok()) return language.status();
  auto session_id = OptionalString(args, tool, "session_id");
  if (!session_id.ok()) return session_id.status();
  v1::ExecuteRequest request;
  request.set_code(*code);
  request.set_session_id(*session_id);
  if (session_id->empty()) request.set_language(*language);
  if (auto it = args.find("timeout_ms"); it != args.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1) {
      return BadArgument(tool, "'timeout_ms' must be a positive integer (milliseconds)");
    }
    request.mutable_limits()->set_wall_ms(it->get<int64_t>());
  }

  if (progress_token.is_null() || !notify) {
    v1::ExecuteResponse response;
    auto context = http::UpstreamContext(token);
    grpc::Status status = stub_->Execute(context.get(), request, &response);
    if (!status.ok()) return CallFailed(http::FromGrpc(status));
    return ExecuteResult(response);
  }

  // Streamed: each chunk of output goes out as progress while the code runs.
  auto context = http::UpstreamContext(token);
  std::unique_ptr<grpc::ClientReaderInterface<v1::ExecuteEvent>> reader = stub_->ExecuteStream(context.get(), request);
  v1::ExecuteEvent event;
  v1::ExecuteResponse summary;
  bool have_summary = false;
  int progress = 0;
  while (reader->Read(&event)) {
    std::string message;
    if (event.has_stdout()) message = event.stdout();
    if (event.has_stderr()) message = event.stderr();
    if (event.has_summary()) {
      summary = event.summary();
      have_summary = true;
      continue;
    }
    if (message.empty()) continue;
    notify({{"jsonrpc", "2.0"},
            {"method", "notifications/progress"},
            {"params", {{"progressToken", progress_token}, {"progress", ++progress}, {"message", message}}}});
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return CallFailed(http::FromGrpc(status));
  if (!have_summary) return CallFailed(absl::InternalError("the execution ended without a summary"));
  return ExecuteResult(summary);
}

absl::StatusOr<json> McpTools::CreateSession(const json& args, const std::string& token) {
  if (auto s = OnlyKnown(args, "create_session", {"language"}); !s.ok()) return s;
  auto language = LanguageArgument(args, "create_session");
  if (!language.ok()) return language.status();
  v1::CreateSessionRequest request;
  request.set_language(*language);
  request.mutable_labels()->insert({"created-by", "mcp"});
  v1::Session session;
  auto context = http::UpstreamContext(token);
  grpc::Status status = stub_->CreateSession(context.get(), request, &session);
  if (!status.ok()) return CallFailed(http::FromGrpc(status));
  std::string language_name = absl::AsciiStrToLower(v1::Language_Name(session.language()).substr(9));
  return json{{"content", json::array({Text(absl::StrCat("session_id: ", session.id(), " (", language_name,
                                                          "); pass it to execute_code to keep state"))})},
              {"structuredContent", {{"session_id", session.id()}, {"language", language_name}}}};
}

absl::StatusOr<json> McpTools::CloseSession(const json& args, const std::string& token) {
  if (auto s = OnlyKnown(args, "close_session", {"session_id"}); !s.ok()) return s;
  auto id = RequiredString(args, "close_session", "session_id");
  if (!id.ok()) return id.status();
  v1::CloseSessionRequest request;
  request.set_session_id(*id);
  v1::CloseSessionResponse response;
  auto context = http::UpstreamContext(token);
  grpc::Status status = stub_->CloseSession(context.get(), request, &response);
  if (!status.ok()) return CallFailed(http::FromGrpc(status));
  return json{{"content", json::array({Text(absl::StrCat("closed session ", *id))})}};
}

absl::StatusOr<json> McpTools::InterruptSession(const json& args, const std::string& token) {
  if (auto s = OnlyKnown(args, "interrupt_session", {"session_id"}); !s.ok()) return s;
  auto id = RequiredString(args, "interrupt_session", "session_id");
  if (!id.ok()) return id.status();
  v1::InterruptSessionRequest request;
  request.set_session_id(*id);
  v1::InterruptSessionResponse response;
  auto context = http::UpstreamContext(token);
  grpc::Status status = stub_->InterruptSession(context.get(), request, &response);
  if (!status.ok()) return CallFailed(http::FromGrpc(status));
  return json{{"content", json::array({Text(response.was_busy() ? "interrupted the running code"
                                                                : "nothing was running")})}};
}

absl::StatusOr<json> McpTools::RestartSession(const json& args, const std::string& token) {
  if (auto s = OnlyKnown(args, "restart_session", {"session_id", "clear_workspace"}); !s.ok()) return s;
  auto id = RequiredString(args, "restart_session", "session_id");
  if (!id.ok()) return id.status();
  v1::RestartSessionRequest request;
  request.set_session_id(*id);
  if (auto it = args.find("clear_workspace"); it != args.end() && !it->is_null()) {
    if (!it->is_boolean()) return BadArgument("restart_session", "'clear_workspace' must be true or false");
    request.set_clear_workspace(it->get<bool>());
  }
  v1::Session session;
  auto context = http::UpstreamContext(token);
  grpc::Status status = stub_->RestartSession(context.get(), request, &session);
  if (!status.ok()) return CallFailed(http::FromGrpc(status));
  return json{{"content", json::array({Text(absl::StrCat("restarted session ", *id,
                                                          request.clear_workspace() ? "; files deleted"
                                                                                    : "; files kept"))})}};
}

absl::StatusOr<json> McpTools::UploadFile(const json& args, const std::string& token) {
  const std::string tool = "upload_file";
  if (auto s = OnlyKnown(args, tool, {"session_id", "path", "content_base64"}); !s.ok()) return s;
  auto id = RequiredString(args, tool, "session_id");
  if (!id.ok()) return id.status();
  auto path = RequiredString(args, tool, "path");
  if (!path.ok()) return path.status();
  auto encoded = RequiredString(args, tool, "content_base64");
  if (!encoded.ok()) return encoded.status();
  std::string content;
  if (!absl::Base64Unescape(*encoded, &content)) {
    return BadArgument(tool, "'content_base64' is not valid base64");
  }
  v1::FileInfo info;
  auto context = http::UpstreamContext(token);
  auto writer = stub_->UploadFile(context.get(), &info);
  v1::UploadFileRequest header;
  header.mutable_header()->set_session_id(*id);
  header.mutable_header()->set_path(*path);
  header.mutable_header()->set_size(static_cast<int64_t>(content.size()));
  bool sent = writer->Write(header);
  constexpr size_t kChunk = 1 << 20;
  for (size_t offset = 0; sent && offset < content.size(); offset += kChunk) {
    v1::UploadFileRequest chunk;
    chunk.set_chunk(content.substr(offset, kChunk));
    sent = writer->Write(chunk);
  }
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok()) return CallFailed(http::FromGrpc(status));
  return json{{"content", json::array({Text(absl::StrCat("wrote ", info.path(), " (", info.size(), " bytes)"))})}};
}

absl::StatusOr<json> McpTools::DownloadFile(const json& args, const std::string& token) {
  const std::string tool = "download_file";
  if (auto s = OnlyKnown(args, tool, {"session_id", "path"}); !s.ok()) return s;
  auto id = RequiredString(args, tool, "session_id");
  if (!id.ok()) return id.status();
  auto path = RequiredString(args, tool, "path");
  if (!path.ok()) return path.status();
  v1::DownloadFileRequest request;
  request.set_session_id(*id);
  request.set_path(*path);
  auto context = http::UpstreamContext(token);
  auto reader = stub_->DownloadFile(context.get(), request);
  std::string content;
  v1::FileChunk chunk;
  bool too_large = false;
  while (reader->Read(&chunk)) {
    if (static_cast<int64_t>(content.size() + chunk.data().size()) > options_.max_download_bytes) {
      too_large = true;
      context->TryCancel();
      break;
    }
    content += chunk.data();
  }
  grpc::Status status = reader->Finish();
  if (too_large) {
    return CallFailed(absl::ResourceExhaustedError(
        absl::StrCat(*path, " is larger than ", options_.max_download_bytes,
                     " bytes, more than download_file returns; read it in parts with execute_code")));
  }
  if (!status.ok()) return CallFailed(http::FromGrpc(status));
  json resource = {{"uri", absl::StrCat("warden://sessions/", *id, "/files/", *path)},
                   {"mimeType", MimeForPath(*path)},
                   {"blob", absl::Base64Escape(content)}};
  return json{{"content", json::array({{{"type", "resource"}, {"resource", std::move(resource)}}})}};
}

absl::StatusOr<json> McpTools::ListFiles(const json& args, const std::string& token) {
  const std::string tool = "list_files";
  if (auto s = OnlyKnown(args, tool, {"session_id", "path"}); !s.ok()) return s;
  auto id = RequiredString(args, tool, "session_id");
  if (!id.ok()) return id.status();
  auto path = OptionalString(args, tool, "path");
  if (!path.ok()) return path.status();
  v1::ListFilesRequest request;
  request.set_session_id(*id);
  request.set_path(*path);
  v1::ListFilesResponse response;
  auto context = http::UpstreamContext(token);
  grpc::Status status = stub_->ListFiles(context.get(), request, &response);
  if (!status.ok()) return CallFailed(http::FromGrpc(status));
  json files = json::array();
  std::string text;
  for (const v1::FileInfo& f : response.files()) {
    files.push_back({{"path", f.path()}, {"size", f.size()}, {"type", f.type()}});
    absl::StrAppend(&text, f.path(), f.type() == "directory" ? "/" : "", "\t", f.size(), "\n");
  }
  if (text.empty()) text = "(no files)";
  return json{{"content", json::array({Text(text)})}, {"structuredContent", {{"files", std::move(files)}}}};
}

}  // namespace warden::mcp
