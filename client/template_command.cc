// `warden template import|list|show|rm`: the Templates service
// (docs/templates.md). Import streams the archive, then prints the server's
// progress on stderr as it comes and the template on stdout.
#include <cerrno>
#include <filesystem>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/cli_output.h"
#include "client/commands.h"
#include "client/exit_codes.h"

namespace warden::cli {
namespace {

// An image is bigger than a file: an hour to send and unpack it at most.
constexpr absl::Duration kImportDeadline = absl::Hours(1);
constexpr size_t kImportChunkBytes = 1 << 20;

std::string Lower(v1::Language language) { return absl::AsciiStrToLower(LanguageName(language)); }

nlohmann::json TemplateToJson(const v1::Template& t) {
  nlohmann::json languages = nlohmann::json::object();
  for (const v1::TemplateLanguage& l : t.languages()) {
    languages[Lower(l.language())] = {{"available", l.available()},
                                      {"interpreter", l.interpreter()},
                                      {"version", l.version()},
                                      {"note", l.note()}};
  }
  return {{"name", t.name()},
          {"public", t.public_()},
          {"digest", t.digest()},
          {"size_bytes", t.size_bytes()},
          {"created_unix_ms", t.created_unix_ms()},
          {"source_ref", t.source_ref()},
          {"languages", languages},
          {"env", t.env()},
          {"working_dir", t.working_dir()},
          {"user", t.user()},
          {"left_out", t.left_out()},
          {"layers", t.layers()}};
}

// "python 3.11.2, bash 5.2.15": what sessions in it can run.
std::string LanguagesText(const v1::Template& t) {
  std::vector<std::string> parts;
  for (const v1::TemplateLanguage& l : t.languages()) {
    if (l.available()) parts.push_back(absl::StrCat(Lower(l.language()), " ", l.version()));
  }
  return parts.empty() ? "none" : absl::StrJoin(parts, ", ");
}

// "sha256:0123456789ab": enough of a digest to tell images apart.
std::string ShortDigest(const std::string& digest) { return digest.substr(0, 19); }

std::string RenderTemplate(const v1::Template& t) {
  std::string out;
  absl::StrAppendFormat(&out, "%-12s %s\n", "name:", t.name());
  absl::StrAppendFormat(&out, "%-12s %s\n", "owner:", t.public_() ? "public" : "yours");
  absl::StrAppendFormat(&out, "%-12s %s\n", "digest:", t.digest());
  absl::StrAppendFormat(&out, "%-12s %s\n", "size:", FormatBytes(t.size_bytes()));
  absl::StrAppendFormat(&out, "%-12s %s\n", "created:",
                        absl::FormatTime(absl::RFC3339_sec, absl::FromUnixMillis(t.created_unix_ms()),
                                         absl::UTCTimeZone()));
  if (!t.source_ref().empty()) absl::StrAppendFormat(&out, "%-12s %s\n", "from:", t.source_ref());
  for (const v1::TemplateLanguage& l : t.languages()) {
    absl::StrAppendFormat(&out, "%-12s %s\n", Lower(l.language()) + ":",
                          l.available() ? absl::StrCat(l.version(), " (", l.interpreter(), ")") : l.note());
  }
  if (!t.working_dir().empty()) absl::StrAppendFormat(&out, "%-12s %s\n", "workdir:", t.working_dir());
  for (const std::string& e : t.env()) absl::StrAppendFormat(&out, "%-12s %s\n", "env:", e);
  for (const auto& [path, why] : t.left_out()) {
    absl::StrAppendFormat(&out, "%-12s %s (%s)\n", "left out:", path, why);
  }
  absl::StrAppendFormat(&out, "%-12s %d\n", "layers:", t.layers_size());
  return out;
}

}  // namespace

int CommandRunner::operator()(const TemplateImportCommand& command) {
  v1::ImportTemplateRequest header;
  *header.mutable_header() = command.header;
  std::ifstream file;
  std::istream* in = &io_.in;
  if (command.archive != "-") {
    file.open(command.archive, std::ios::binary);
    if (!file) return LocalFailed(absl::ErrnoToStatus(errno, "cannot open " + command.archive));
    std::error_code error;
    auto size = std::filesystem::file_size(command.archive, error);
    if (!error) header.mutable_header()->set_size(static_cast<int64_t>(size));  // refuse early
    in = &file;
  }

  auto context = NewCallContext(kImportDeadline);
  auto stream = templates_stub_->ImportTemplate(context.get());
  // The server reads the whole archive before it answers: send it all,
  // then read its progress.
  bool read_failed = false;
  if (stream->Write(header)) {
    std::string buffer(kImportChunkBytes, '\0');
    v1::ImportTemplateRequest message;
    for (;;) {
      in->read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
      if (in->bad()) {
        read_failed = true;
        context->TryCancel();
        break;
      }
      const size_t n = static_cast<size_t>(in->gcount());
      if (n > 0) {
        message.set_chunk(buffer.data(), n);
        if (!stream->Write(message)) break;  // refused: Finish says why
      }
      if (in->eof()) {
        stream->WritesDone();
        break;
      }
    }
  }
  v1::TemplateProgress progress;
  v1::Template imported;
  while (stream->Read(&progress)) {
    if (progress.has_template_()) imported = progress.template_();
    if (!progress.message().empty()) {
      io_.err << progress.message();
      if (progress.bytes_total() > 0) {
        io_.err << " (" << FormatBytes(progress.bytes_done()) << " of " << FormatBytes(progress.bytes_total())
                << ")";
      }
      io_.err << "\n";
    }
  }
  grpc::Status status = stream->Finish();
  if (read_failed) return LocalFailed(absl::DataLossError("cannot read " + command.archive));
  if (!status.ok()) return RpcFailed(status);
  if (command.json) {
    PrintJson(TemplateToJson(imported));
  } else {
    io_.out << imported.name() << "\n";
  }
  return kExitOk;
}

int CommandRunner::operator()(const TemplateListCommand& command) {
  v1::ListTemplatesResponse response;
  auto context = NewCallContext(kUnaryDeadline);
  grpc::Status status = templates_stub_->ListTemplates(context.get(), {}, &response);
  if (!status.ok()) return RpcFailed(status);
  if (command.json) {
    nlohmann::json templates = nlohmann::json::array();
    for (const v1::Template& t : response.templates()) templates.push_back(TemplateToJson(t));
    PrintJson({{"templates", templates},
               {"used_bytes", response.used_bytes()},
               {"quota_bytes", response.quota_bytes()},
               {"quota_count", response.quota_count()}});
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {{"NAME", "OWNER", "DIGEST", "SIZE", "LANGUAGES"}};
  for (const v1::Template& t : response.templates()) {
    rows.push_back({t.name(), t.public_() ? "public" : "yours", ShortDigest(t.digest()), FormatBytes(t.size_bytes()),
                    LanguagesText(t)});
  }
  std::vector<size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    io_.out << line << "\n";
  }
  return kExitOk;
}

int CommandRunner::operator()(const TemplateShowCommand& command) {
  v1::Template t;
  auto context = NewCallContext(kUnaryDeadline);
  grpc::Status status = templates_stub_->GetTemplate(context.get(), command.request, &t);
  if (!status.ok()) return RpcFailed(status);
  if (command.json) {
    PrintJson(TemplateToJson(t));
  } else {
    io_.out << RenderTemplate(t);
  }
  return kExitOk;
}

int CommandRunner::operator()(const TemplateRmCommand& command) {
  // What NAME means for the caller: its own, else the public one.
  v1::GetTemplateRequest get;
  get.set_name(command.name);
  v1::Template t;
  grpc::Status status = templates_stub_->GetTemplate(NewCallContext(kUnaryDeadline).get(), get, &t);
  if (!status.ok()) return RpcFailed(status);
  v1::DeleteTemplateRequest request;
  request.set_name(command.name);
  request.set_public_(t.public_());
  v1::DeleteTemplateResponse response;
  status = templates_stub_->DeleteTemplate(NewCallContext(kUnaryDeadline).get(), request, &response);
  return status.ok() ? kExitOk : RpcFailed(status);
}

}  // namespace warden::cli
