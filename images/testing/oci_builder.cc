#include "images/testing/oci_builder.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "images/digest.h"
#include "images/fs_util.h"
#include "nlohmann/json.hpp"

namespace warden::images::testing {
namespace {

using Json = nlohmann::json;

la_ssize_t AppendToString(struct archive*, void* out, const void* data, size_t size) {
  static_cast<std::string*>(out)->append(static_cast<const char*>(data), size);
  return static_cast<la_ssize_t>(size);
}

absl::Status WriteBytes(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

struct Writer {
  struct archive* a = archive_write_new();
  ~Writer() { archive_write_free(a); }
};

absl::StatusOr<std::string> Tar(const std::vector<TarEntry>& entries, LayerSpec::Compression compression) {
  std::string out;
  Writer w;
  archive_write_set_format_pax_restricted(w.a);
  switch (compression) {
    case LayerSpec::Compression::kNone: archive_write_add_filter_none(w.a); break;
    case LayerSpec::Compression::kGzip: archive_write_add_filter_gzip(w.a); break;
    case LayerSpec::Compression::kZstd: archive_write_add_filter_zstd(w.a); break;
  }
  archive_write_set_bytes_in_last_block(w.a, 1);
  if (archive_write_open(w.a, &out, nullptr, &AppendToString, nullptr) != ARCHIVE_OK) {
    return absl::InternalError(archive_error_string(w.a));
  }
  for (const TarEntry& e : entries) {
    struct archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, e.path.c_str());
    archive_entry_set_uid(entry, e.uid);
    archive_entry_set_gid(entry, e.gid);
    archive_entry_set_mtime(entry, e.mtime, 0);
    archive_entry_set_perm(entry, e.mode);
    switch (e.type) {
      case TarEntry::Type::kFile:
        archive_entry_set_filetype(entry, AE_IFREG);
        archive_entry_set_size(entry, static_cast<la_int64_t>(e.content.size()));
        break;
      case TarEntry::Type::kDir: archive_entry_set_filetype(entry, AE_IFDIR); break;
      case TarEntry::Type::kSymlink:
        archive_entry_set_filetype(entry, AE_IFLNK);
        archive_entry_set_symlink(entry, e.link.c_str());
        break;
      case TarEntry::Type::kHardlink:
        archive_entry_set_filetype(entry, AE_IFREG);
        archive_entry_set_hardlink(entry, e.link.c_str());
        archive_entry_set_size(entry, 0);
        break;
      case TarEntry::Type::kCharDevice:
        archive_entry_set_filetype(entry, AE_IFCHR);
        archive_entry_set_rdevmajor(entry, 1);
        archive_entry_set_rdevminor(entry, 3);
        break;
      case TarEntry::Type::kBlockDevice:
        archive_entry_set_filetype(entry, AE_IFBLK);
        archive_entry_set_rdevmajor(entry, 8);
        archive_entry_set_rdevminor(entry, 0);
        break;
      case TarEntry::Type::kFifo: archive_entry_set_filetype(entry, AE_IFIFO); break;
    }
    if (archive_write_header(w.a, entry) != ARCHIVE_OK) {
      archive_entry_free(entry);
      return absl::InternalError(absl::StrCat("tar ", e.path, ": ", archive_error_string(w.a)));
    }
    if (e.type == TarEntry::Type::kFile && !e.content.empty()) {
      archive_write_data(w.a, e.content.data(), e.content.size());
    }
    archive_entry_free(entry);
  }
  if (archive_write_close(w.a) != ARCHIVE_OK) return absl::InternalError(archive_error_string(w.a));
  return out;
}

const char* MediaType(LayerSpec::Compression c) {
  switch (c) {
    case LayerSpec::Compression::kNone: return "application/vnd.oci.image.layer.v1.tar";
    case LayerSpec::Compression::kGzip: return "application/vnd.oci.image.layer.v1.tar+gzip";
    case LayerSpec::Compression::kZstd: return "application/vnd.oci.image.layer.v1.tar+zstd";
  }
  return "";
}

Json ConfigJson(const ImageSpec& image, const std::vector<std::string>& diff_ids) {
  Json config = Json::object();
  if (!image.config.env.empty()) config["Env"] = image.config.env;
  if (!image.config.cmd.empty()) config["Cmd"] = image.config.cmd;
  if (!image.config.entrypoint.empty()) config["Entrypoint"] = image.config.entrypoint;
  if (!image.config.working_dir.empty()) config["WorkingDir"] = image.config.working_dir;
  if (!image.config.user.empty()) config["User"] = image.config.user;
  if (!image.config.labels.empty()) config["Labels"] = image.config.labels;
  return {{"architecture", image.architecture},
          {"os", "linux"},
          {"config", config},
          {"rootfs", {{"type", "layers"}, {"diff_ids", diff_ids}}}};
}

}  // namespace

TarEntry File(std::string path, std::string content, mode_t mode, uid_t uid, gid_t gid) {
  TarEntry e;
  e.path = std::move(path);
  e.content = std::move(content);
  e.mode = mode;
  e.uid = uid;
  e.gid = gid;
  return e;
}

TarEntry Dir(std::string path, mode_t mode, uid_t uid, gid_t gid) {
  TarEntry e;
  e.type = TarEntry::Type::kDir;
  e.path = std::move(path);
  e.mode = mode;
  e.uid = uid;
  e.gid = gid;
  return e;
}

TarEntry Symlink(std::string path, std::string target) {
  TarEntry e;
  e.type = TarEntry::Type::kSymlink;
  e.path = std::move(path);
  e.link = std::move(target);
  e.mode = 0777;
  return e;
}

TarEntry Hardlink(std::string path, std::string target) {
  TarEntry e;
  e.type = TarEntry::Type::kHardlink;
  e.path = std::move(path);
  e.link = std::move(target);
  return e;
}

TarEntry Whiteout(const std::string& path) {
  const size_t slash = path.rfind('/');
  return File(slash == std::string::npos ? ".wh." + path
                                         : absl::StrCat(path.substr(0, slash + 1), ".wh.", path.substr(slash + 1)),
              "");
}

TarEntry OpaqueMarker(const std::string& dir) { return File(absl::StrCat(dir, "/.wh..wh..opq"), ""); }

absl::StatusOr<LayerBlob> MakeLayer(const LayerSpec& layer) {
  LayerBlob out;
  ASSIGN_OR_RETURN(out.tar, Tar(layer.entries, LayerSpec::Compression::kNone));
  if (layer.compression == LayerSpec::Compression::kNone) {
    out.blob = out.tar;
  } else {
    ASSIGN_OR_RETURN(out.blob, Tar(layer.entries, layer.compression));
  }
  return out;
}

absl::Status WriteOciLayout(const std::string& dir, const std::vector<ImageSpec>& images) {
  RETURN_IF_ERROR(MakeDirectories(dir + "/blobs/sha256"));
  auto put = [&](const std::string& data) -> absl::StatusOr<std::string> {
    const Digest d = Sha256::Of(data);
    RETURN_IF_ERROR(WriteBytes(absl::StrCat(dir, "/blobs/sha256/", d.hex()), data));
    return d.str();
  };
  Json manifests = Json::array();
  for (const ImageSpec& image : images) {
    Json layers = Json::array();
    std::vector<std::string> diff_ids;
    for (const LayerSpec& layer : image.layers) {
      ASSIGN_OR_RETURN(LayerBlob blob, MakeLayer(layer));
      ASSIGN_OR_RETURN(std::string digest, put(blob.blob));
      diff_ids.push_back(Sha256::Of(blob.tar).str());
      layers.push_back({{"mediaType", MediaType(layer.compression)},
                        {"digest", digest},
                        {"size", static_cast<int64_t>(blob.blob.size())}});
    }
    const std::string config = ConfigJson(image, diff_ids).dump();
    ASSIGN_OR_RETURN(std::string config_digest, put(config));
    Json manifest = {{"schemaVersion", 2},
                     {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                     {"config",
                      {{"mediaType", "application/vnd.oci.image.config.v1+json"},
                       {"digest", config_digest},
                       {"size", static_cast<int64_t>(config.size())}}},
                     {"layers", layers}};
    const std::string manifest_text = manifest.dump();
    ASSIGN_OR_RETURN(std::string manifest_digest, put(manifest_text));
    Json entry = {{"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                  {"digest", manifest_digest},
                  {"size", static_cast<int64_t>(manifest_text.size())}};
    if (!image.ref.empty()) entry["annotations"] = {{"org.opencontainers.image.ref.name", image.ref}};
    manifests.push_back(entry);
  }
  RETURN_IF_ERROR(WriteBytes(dir + "/oci-layout", R"({"imageLayoutVersion":"1.0.0"})"));
  return WriteBytes(dir + "/index.json", Json({{"schemaVersion", 2}, {"manifests", manifests}}).dump());
}

absl::Status WriteDockerSave(const std::string& dir, const ImageSpec& image) {
  RETURN_IF_ERROR(MakeDirectories(dir));
  std::vector<std::string> diff_ids, paths;
  for (const LayerSpec& layer : image.layers) {
    ASSIGN_OR_RETURN(LayerBlob blob, MakeLayer(layer));
    const Digest d = Sha256::Of(blob.tar);
    RETURN_IF_ERROR(MakeDirectories(absl::StrCat(dir, "/", d.hex())));
    RETURN_IF_ERROR(WriteBytes(absl::StrCat(dir, "/", d.hex(), "/layer.tar"), blob.tar));
    diff_ids.push_back(d.str());
    paths.push_back(absl::StrCat(d.hex(), "/layer.tar"));
  }
  const std::string config = ConfigJson(image, diff_ids).dump();
  const std::string config_name = Sha256::Of(config).hex() + ".json";
  RETURN_IF_ERROR(WriteBytes(absl::StrCat(dir, "/", config_name), config));
  Json manifest = Json::array();
  Json entry = {{"Config", config_name}, {"Layers", paths}};
  entry["RepoTags"] = image.ref.empty() ? Json::array() : Json::array({image.ref});
  manifest.push_back(entry);
  return WriteBytes(dir + "/manifest.json", manifest.dump());
}

namespace {

absl::Status AddTree(struct archive* a, const std::string& base, const std::string& rel) {
  const std::string path = rel.empty() ? base : absl::StrCat(base, "/", rel);
  DIR* d = opendir(path.c_str());
  if (d == nullptr) return absl::ErrnoToStatus(errno, "opendir " + path);
  std::vector<std::string> names;
  while (struct dirent* e = readdir(d)) {
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
  }
  closedir(d);
  for (const std::string& name : names) {
    const std::string child_rel = rel.empty() ? name : absl::StrCat(rel, "/", name);
    const std::string child = absl::StrCat(base, "/", child_rel);
    struct stat st;
    if (lstat(child.c_str(), &st) != 0) return absl::ErrnoToStatus(errno, "lstat " + child);
    struct archive_entry* entry = archive_entry_new();
    archive_entry_copy_stat(entry, &st);
    archive_entry_set_pathname(entry, child_rel.c_str());
    std::string data;
    if (S_ISREG(st.st_mode)) {
      ASSIGN_OR_RETURN(data, ReadFile(child, int64_t{1} << 34));
    }
    archive_write_header(a, entry);
    if (!data.empty()) archive_write_data(a, data.data(), data.size());
    archive_entry_free(entry);
    if (S_ISDIR(st.st_mode)) RETURN_IF_ERROR(AddTree(a, base, child_rel));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status TarDirectory(const std::string& dir, const std::string& archive, bool gzip) {
  Writer w;
  archive_write_set_format_pax_restricted(w.a);
  if (gzip) archive_write_add_filter_gzip(w.a);
  if (archive_write_open_filename(w.a, archive.c_str()) != ARCHIVE_OK) {
    return absl::InternalError(archive_error_string(w.a));
  }
  RETURN_IF_ERROR(AddTree(w.a, dir, ""));
  if (archive_write_close(w.a) != ARCHIVE_OK) return absl::InternalError(archive_error_string(w.a));
  return absl::OkStatus();
}

}  // namespace warden::images::testing
