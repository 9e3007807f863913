// `warden volume create|ls|rm|put|get`: the Volumes service
// (docs/templates.md, "Volumes"). A volume is filled and read without a
// sandbox: put streams a local file (or stdin) into it, get streams one out
// (into a file replaced only once complete, or stdout).
#include <cerrno>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/cli_output.h"
#include "client/commands.h"
#include "client/exit_codes.h"

namespace warden::cli {
namespace {

nlohmann::json VolumeToJson(const v1::Volume& v) {
  return {{"name", v.name()},
          {"max_bytes", v.max_bytes()},
          {"max_files", v.max_files()},
          {"used_bytes", v.used_bytes()},
          {"used_files", v.used_files()},
          {"created_unix_ms", v.created_unix_ms()},
          {"mounts", v.mounts()}};
}

nlohmann::json EntryToJson(const v1::VolumeEntry& e) {
  nlohmann::json json = {{"path", e.path()},         {"name", e.name()},
                         {"type", e.type()},         {"size", e.size()},
                         {"mode", e.mode()},         {"uid", e.uid()},
                         {"gid", e.gid()},           {"modified_unix_ms", e.modified_unix_ms()}};
  if (!e.symlink_target().empty()) json["symlink_target"] = e.symlink_target();
  return json;
}

// As `files ls` shows a workspace: TYPE, SIZE (bytes), PATH.
std::string RenderEntryTable(const google::protobuf::RepeatedPtrField<v1::VolumeEntry>& entries) {
  std::vector<std::vector<std::string>> rows = {{"TYPE", "SIZE", "PATH"}};
  for (const v1::VolumeEntry& e : entries) {
    std::string path = e.path();
    if (e.type() == "directory") path += "/";
    if (e.type() == "symlink") absl::StrAppend(&path, " -> ", e.symlink_target());
    rows.push_back({e.type(), e.type() == "file" ? absl::StrCat(e.size()) : "-", path});
  }
  return RenderTable(rows);
}

std::string RenderVolumeTable(const google::protobuf::RepeatedPtrField<v1::Volume>& volumes) {
  std::vector<std::vector<std::string>> rows = {{"NAME", "USED", "QUOTA", "FILES", "MOUNTS", "CREATED"}};
  for (const v1::Volume& v : volumes) {
    rows.push_back({v.name(), FormatBytes(v.used_bytes()), FormatBytes(v.max_bytes()),
                    absl::StrCat(v.used_files(), "/", v.max_files()), absl::StrCat(v.mounts()),
                    absl::FormatTime(absl::RFC3339_sec, absl::FromUnixMillis(v.created_unix_ms()),
                                     absl::UTCTimeZone())});
  }
  return RenderTable(rows);
}

}  // namespace

int CommandRunner::operator()(const VolumeCreateCommand& command) {
  v1::Volume volume;
  grpc::Status status = volumes_stub_->CreateVolume(NewCallContext(kUnaryDeadline).get(), command.request, &volume);
  if (!status.ok()) return RpcFailed(status);
  if (command.json) {
    PrintJson(VolumeToJson(volume));
  } else {
    io_.out << volume.name() << "\n";
  }
  return kExitOk;
}

int CommandRunner::operator()(const VolumeLsCommand& command) {
  if (command.files.volume().empty()) {
    v1::ListVolumesResponse response;
    grpc::Status status = volumes_stub_->ListVolumes(NewCallContext(kUnaryDeadline).get(), {}, &response);
    if (!status.ok()) return RpcFailed(status);
    if (command.json) {
      nlohmann::json volumes = nlohmann::json::array();
      for (const v1::Volume& v : response.volumes()) volumes.push_back(VolumeToJson(v));
      PrintJson({{"volumes", volumes},
                 {"quota_bytes", response.quota_bytes()},
                 {"quota_count", response.quota_count()}});
    } else {
      io_.out << RenderVolumeTable(response.volumes());
    }
    return kExitOk;
  }
  v1::ListVolumeFilesResponse response;
  grpc::Status status =
      volumes_stub_->ListVolumeFiles(NewCallContext(kUnaryDeadline).get(), command.files, &response);
  if (!status.ok()) return RpcFailed(status);
  if (command.json) {
    nlohmann::json entries = nlohmann::json::array();
    for (const v1::VolumeEntry& e : response.entries()) entries.push_back(EntryToJson(e));
    PrintJson({{"entries", entries}});
  } else {
    io_.out << RenderEntryTable(response.entries());
  }
  return kExitOk;
}

int CommandRunner::operator()(const VolumeRmCommand& command) {
  v1::DeleteVolumeResponse response;
  grpc::Status status =
      volumes_stub_->DeleteVolume(NewCallContext(kUnaryDeadline).get(), command.request, &response);
  return status.ok() ? kExitOk : RpcFailed(status);
}

int CommandRunner::operator()(const VolumePutCommand& command) {
  v1::WriteVolumeFileRequest header;
  *header.mutable_header() = command.header;
  std::ifstream file;
  std::istream* in = &io_.in;
  if (command.local != "-") {
    std::error_code error;
    if (std::filesystem::is_directory(command.local, error)) {
      return LocalFailed(absl::InvalidArgumentError(
          absl::StrCat(command.local, " is a directory: warden volume put copies one file (tar it, or put each)")));
    }
    file.open(command.local, std::ios::binary);
    if (!file) return LocalFailed(absl::ErrnoToStatus(errno, "cannot open " + command.local));
    auto size = std::filesystem::file_size(command.local, error);
    if (!error) header.mutable_header()->set_size(static_cast<int64_t>(size));  // refused early when too big
    in = &file;
  }

  auto context = NewCallContext(kTransferDeadline);
  v1::VolumeEntry entry;
  auto stream = volumes_stub_->WriteVolumeFile(context.get(), &entry);
  UploadEnd end =
      stream->Write(header) ? SendChunks<v1::WriteVolumeFileRequest>(*in, *stream) : UploadEnd::kStreamBroken;
  if (end == UploadEnd::kReadFailed) context->TryCancel();
  if (end == UploadEnd::kSent) stream->WritesDone();
  grpc::Status status = stream->Finish();  // after a broken stream: why it broke

  if (end == UploadEnd::kReadFailed) return LocalFailed(absl::DataLossError("cannot read " + command.local));
  if (!status.ok()) return RpcFailed(status);
  if (command.json) PrintJson(EntryToJson(entry));
  return kExitOk;
}

int CommandRunner::operator()(const VolumeGetCommand& command) {
  // Into a directory, as cp(1) does: the file keeps its name there.
  std::string local = command.local;
  std::error_code error;
  if (local != "-" && std::filesystem::is_directory(local, error)) {
    local = std::filesystem::path(local) / std::filesystem::path(command.request.path()).filename();
  }
  return Download(local, [&](grpc::ClientContext* context) {
    return volumes_stub_->ReadVolumeFile(context, command.request);
  });
}

}  // namespace warden::cli
