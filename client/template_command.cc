// `warden template import|build|list|show|rm`: the Templates service
// (docs/templates.md). Import streams the archive (build: the Dockerfile,
// then its context as a tar), then prints the server's progress on stderr
// as it comes and the template on stdout.
#include <archive.h>
#include <archive_entry.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

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

// Prints the server's progress lines on stderr; keeps the template.
void PrintProgress(v1::TemplateProgress& progress, std::ostream& err, v1::Template* done) {
  if (progress.has_template_()) *done = progress.template_();
  if (progress.message().empty()) return;
  err << progress.message();
  if (progress.bytes_total() > 0) {
    err << " (" << FormatBytes(progress.bytes_done()) << " of " << FormatBytes(progress.bytes_total()) << ")";
  }
  err << "\n";
}

// Writes a build context (a directory) as a tar into the call, chunk by
// chunk, as libarchive makes it: paths relative to the directory, owners
// and modes as they are, symlinks as symlinks (never followed).
class ContextSender {
 public:
  explicit ContextSender(grpc::ClientReaderWriterInterface<v1::BuildTemplateRequest, v1::TemplateProgress>* stream)
      : stream_(stream) {}

  absl::Status Send(const std::string& dir) {
    struct archive* disk = archive_read_disk_new();
    struct archive* out = archive_write_new();
    absl::Status status = Walk(disk, out, dir);
    archive_read_free(disk);
    archive_write_free(out);
    return status;
  }
  bool refused() const { return refused_; }

 private:
  absl::Status Walk(struct archive* disk, struct archive* out, const std::string& dir) {
    archive_read_disk_set_symlink_physical(disk);
    archive_read_disk_set_standard_lookup(disk);
    archive_write_set_format_pax_restricted(out);
    archive_write_set_bytes_in_last_block(out, 1);
    if (archive_write_open(out, this, nullptr, &ContextSender::Write, nullptr) != ARCHIVE_OK) {
      return absl::InternalError(archive_error_string(out));
    }
    if (archive_read_disk_open(disk, dir.c_str()) != ARCHIVE_OK) {
      return absl::NotFoundError(absl::StrCat("cannot read the build context ", dir, ": ", archive_error_string(disk)));
    }
    std::string buffer(1 << 16, '\0');
    for (;;) {
      struct archive_entry* entry = archive_entry_new();
      const int r = archive_read_next_header2(disk, entry);
      if (r == ARCHIVE_EOF) {
        archive_entry_free(entry);
        break;
      }
      if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
        archive_entry_free(entry);
        return absl::DataLossError(absl::StrCat("reading the build context: ", archive_error_string(disk)));
      }
      archive_read_disk_descend(disk);
      // Relative to the context: "dir/a/b" -> "a/b"; the top is ".".
      std::string path = archive_entry_pathname(entry);
      path = path.size() > dir.size() ? path.substr(dir.size()) : "";
      while (!path.empty() && path.front() == '/') path.erase(0, 1);
      archive_entry_set_pathname(entry, path.empty() ? "." : path.c_str());
      if (archive_write_header(out, entry) != ARCHIVE_OK) {
        archive_entry_free(entry);
        if (refused_) return absl::OkStatus();
        return absl::InternalError(archive_error_string(out));
      }
      if (archive_entry_filetype(entry) == AE_IFREG && archive_entry_size(entry) > 0) {
        std::ifstream file(archive_entry_sourcepath(entry), std::ios::binary);
        while (file.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || file.gcount() > 0) {
          if (archive_write_data(out, buffer.data(), static_cast<size_t>(file.gcount())) < 0) {
            archive_entry_free(entry);
            if (refused_) return absl::OkStatus();
            return absl::InternalError(archive_error_string(out));
          }
        }
      }
      archive_entry_free(entry);
    }
    if (archive_write_close(out) != ARCHIVE_OK && !refused_) return absl::InternalError(archive_error_string(out));
    return absl::OkStatus();
  }
  static la_ssize_t Write(struct archive* a, void* self_ptr, const void* data, size_t size) {
    auto* self = static_cast<ContextSender*>(self_ptr);
    v1::BuildTemplateRequest message;
    message.set_chunk(data, size);
    if (!self->stream_->Write(message)) {
      self->refused_ = true;  // Finish says why
      archive_set_error(a, EPIPE, "the server stopped reading");
      return -1;
    }
    return static_cast<la_ssize_t>(size);
  }

  grpc::ClientReaderWriterInterface<v1::BuildTemplateRequest, v1::TemplateProgress>* stream_;
  bool refused_ = false;
};

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
  while (stream->Read(&progress)) PrintProgress(progress, io_.err, &imported);
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

int CommandRunner::operator()(const TemplateBuildCommand& command) {
  v1::BuildTemplateRequest header;
  *header.mutable_header() = command.header;
  {
    std::ifstream file(command.dockerfile, std::ios::binary);
    if (!file) return LocalFailed(absl::ErrnoToStatus(errno, "cannot open the Dockerfile " + command.dockerfile));
    std::ostringstream text;
    text << file.rdbuf();
    header.mutable_header()->set_dockerfile(text.str());
  }
  std::error_code error;
  if (!std::filesystem::is_directory(command.context, error)) {
    return LocalFailed(absl::NotFoundError("the build context " + command.context + " is not a directory"));
  }
  auto context = NewCallContext(kImportDeadline);
  auto stream = templates_stub_->BuildTemplate(context.get());
  absl::Status sent;
  if (stream->Write(header)) {
    ContextSender sender(stream.get());
    sent = sender.Send(command.context);
    if (!sent.ok()) {
      context->TryCancel();
    } else if (!sender.refused()) {
      stream->WritesDone();
    }
  }
  v1::TemplateProgress progress;
  v1::Template built;
  while (stream->Read(&progress)) PrintProgress(progress, io_.err, &built);
  grpc::Status status = stream->Finish();
  if (!sent.ok()) return LocalFailed(sent);
  if (!status.ok()) return RpcFailed(status);
  if (command.json) {
    PrintJson(TemplateToJson(built));
  } else {
    io_.out << built.name() << "\n";
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
