#include "images/image_source.h"

#include <fcntl.h>
#include <sys/stat.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "images/fs_util.h"
#include "nlohmann/json.hpp"

namespace warden::images {
namespace {

using Json = nlohmann::json;

constexpr char kOciManifest[] = "application/vnd.oci.image.manifest.v1+json";
constexpr char kOciIndex[] = "application/vnd.oci.image.index.v1+json";
constexpr char kDockerManifest[] = "application/vnd.docker.distribution.manifest.v2+json";
constexpr char kDockerList[] = "application/vnd.docker.distribution.manifest.list.v2+json";
constexpr char kOciConfig[] = "application/vnd.oci.image.config.v1+json";
constexpr char kOciLayerTar[] = "application/vnd.oci.image.layer.v1.tar";
constexpr char kRefName[] = "org.opencontainers.image.ref.name";

absl::StatusOr<Json> ParseJson(const std::string& text, const std::string& what) {
  Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(what, " is not valid JSON"));
  return json;
}

std::string StringAt(const Json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

absl::StatusOr<std::vector<std::string>> Strings(const Json& object, const char* key, const std::string& what) {
  std::vector<std::string> out;
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return out;
  if (!it->is_array()) return absl::InvalidArgumentError(absl::StrCat(what, ": ", key, " is not a list of strings"));
  for (const Json& v : *it) {
    if (!v.is_string()) return absl::InvalidArgumentError(absl::StrCat(what, ": ", key, " is not a list of strings"));
    out.push_back(v.get<std::string>());
  }
  return out;
}

// A blob of the layout, read whole (JSON documents only) and checked
// against its digest.
absl::StatusOr<std::string> ReadBlob(int dir, const Digest& digest, const std::string& what) {
  auto data = ReadFileAt(dir, absl::StrCat("blobs/sha256/", digest.hex()), kMaxJsonBytes);
  if (!data.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the image's ", what, " (", digest.str(),
                                                   ") cannot be read from its layout: ", data.status().message()));
  }
  if (Sha256::Of(*data) != digest) {
    return absl::InvalidArgumentError(
        absl::StrCat("the image's ", what, " does not match its digest ", digest.str(), ": the layout is damaged"));
  }
  return data;
}

absl::StatusOr<Digest> DigestAt(const Json& descriptor, const std::string& what) {
  auto digest = Digest::Parse(StringAt(descriptor, "digest"));
  if (!digest.ok()) return absl::InvalidArgumentError(absl::StrCat(what, ": ", digest.status().message()));
  return digest;
}

bool IsLinuxAmd64(const Json& descriptor) {
  auto it = descriptor.find("platform");
  if (it == descriptor.end() || !it->is_object()) return false;
  return StringAt(*it, "os") == "linux" && StringAt(*it, "architecture") == "amd64";
}

// Follows an index (OCI or Docker's list) down to one image manifest.
absl::StatusOr<Digest> ResolveManifest(int dir, const Json& descriptor, int depth) {
  ASSIGN_OR_RETURN(Digest digest, DigestAt(descriptor, "a manifest in index.json"));
  const std::string media = StringAt(descriptor, "mediaType");
  if (media != kOciIndex && media != kDockerList) return digest;
  if (depth > 4) return absl::InvalidArgumentError("the layout's indexes nest deeper than 4 levels");
  ASSIGN_OR_RETURN(std::string text, ReadBlob(dir, digest, "index"));
  ASSIGN_OR_RETURN(Json index, ParseJson(text, "an index of the layout"));
  if (!index.contains("manifests") || !index["manifests"].is_array()) {
    return absl::InvalidArgumentError("an index of the layout lists no manifests");
  }
  for (const Json& m : index["manifests"]) {
    if (IsLinuxAmd64(m)) return ResolveManifest(dir, m, depth + 1);
  }
  return absl::InvalidArgumentError(
      "the image has no linux/amd64 variant: Warden runs linux/amd64 images only");
}

absl::StatusOr<ImageSource> ReadManifest(int dir, const Digest& manifest_digest, ImageSource source) {
  ASSIGN_OR_RETURN(source.manifest_json, ReadBlob(dir, manifest_digest, "manifest"));
  source.manifest_digest = manifest_digest;
  ASSIGN_OR_RETURN(Json manifest, ParseJson(source.manifest_json, "the image's manifest"));
  const std::string media = StringAt(manifest, "mediaType");
  if (!media.empty() && media != kOciManifest && media != kDockerManifest) {
    return absl::InvalidArgumentError(absl::StrCat("the image's manifest is a ", media, ", not an image manifest"));
  }
  if (!manifest.contains("config") || !manifest.contains("layers") || !manifest["layers"].is_array()) {
    return absl::InvalidArgumentError("the image's manifest names no config or no layers");
  }
  ASSIGN_OR_RETURN(source.config_digest, DigestAt(manifest["config"], "the manifest's config"));
  ASSIGN_OR_RETURN(source.config_json, ReadBlob(dir, source.config_digest, "config"));
  std::vector<Digest> diff_ids;
  RETURN_IF_ERROR(ParseImageConfig(source.config_json, &source.config, &diff_ids, &source.os, &source.architecture));
  const Json& layers = manifest["layers"];
  if (layers.size() != diff_ids.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the manifest lists ", layers.size(), " layers but the config ",
                                                   diff_ids.size(), " diff_ids"));
  }
  if (layers.size() > kMaxLayers) {
    return absl::InvalidArgumentError(absl::StrCat("the image has ", layers.size(), " layers; at most ", kMaxLayers));
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    LayerRef layer;
    ASSIGN_OR_RETURN(layer.digest, DigestAt(layers[i], absl::StrCat("layer ", i + 1)));
    layer.media_type = StringAt(layers[i], "mediaType");
    if (layers[i].contains("size") && layers[i]["size"].is_number_integer()) {
      layer.size = layers[i]["size"].get<int64_t>();
    }
    if (absl::StrContains(layer.media_type, "nondistributable") || layers[i].contains("urls")) {
      // Foreign layers live elsewhere; a layout that was saved offline has them only if copied.
    }
    layer.blob_path = absl::StrCat("blobs/sha256/", layer.digest.hex());
    layer.diff_id = diff_ids[i];
    source.layers.push_back(std::move(layer));
  }
  return source;
}

absl::StatusOr<ImageSource> ReadOciLayout(int dir, const std::string& ref) {
  ASSIGN_OR_RETURN(std::string text, ReadFileAt(dir, "index.json", kMaxJsonBytes));
  ASSIGN_OR_RETURN(Json index, ParseJson(text, "index.json"));
  if (!index.contains("manifests") || !index["manifests"].is_array() || index["manifests"].empty()) {
    return absl::InvalidArgumentError("index.json lists no images");
  }
  const Json* chosen = nullptr;
  std::vector<std::string> names;
  for (const Json& m : index["manifests"]) {
    std::string name;
    if (m.contains("annotations") && m["annotations"].is_object()) name = StringAt(m["annotations"], kRefName);
    if (!name.empty()) names.push_back(name);
    if (!ref.empty() && name == ref) chosen = &m;
  }
  if (!ref.empty() && chosen == nullptr) {
    return absl::NotFoundError(absl::StrCat("the layout has no image named '", ref, "'",
                                            names.empty() ? "" : "; it has: ", absl::StrJoin(names, ", ")));
  }
  if (chosen == nullptr) {
    if (index["manifests"].size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat("the layout holds ", index["manifests"].size(),
                                                     " images; name the one to import (",
                                                     absl::StrJoin(names, ", "), ")"));
    }
    chosen = &index["manifests"][0];
  }
  ImageSource source;
  source.format = ImageSource::Format::kOciLayout;
  if (chosen->contains("annotations") && (*chosen)["annotations"].is_object()) {
    source.ref = StringAt((*chosen)["annotations"], kRefName);
  }
  ASSIGN_OR_RETURN(Digest manifest, ResolveManifest(dir, *chosen, 0));
  return ReadManifest(dir, manifest, std::move(source));
}

// A name from manifest.json: relative, normalised, no "..".
absl::Status CheckRelative(const std::string& path) {
  if (path.empty() || path[0] == '/' || path.size() > 1024 || absl::StrContains(path, "..") ||
      absl::StrContains(path, "//")) {
    return absl::InvalidArgumentError(absl::StrCat("manifest.json names '", path.substr(0, 80),
                                                   "', which is not a file of the archive"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ImageSource> ReadDockerSave(int dir, const std::string& ref) {
  ASSIGN_OR_RETURN(std::string text, ReadFileAt(dir, "manifest.json", kMaxJsonBytes));
  ASSIGN_OR_RETURN(Json manifest, ParseJson(text, "manifest.json"));
  if (!manifest.is_array() || manifest.empty()) return absl::InvalidArgumentError("manifest.json lists no images");
  const Json* chosen = nullptr;
  std::vector<std::string> names;
  for (const Json& m : manifest) {
    auto tags = Strings(m, "RepoTags", "manifest.json");
    if (!tags.ok()) return tags.status();
    for (const std::string& tag : *tags) {
      names.push_back(tag);
      if (!ref.empty() && (tag == ref || tag == ref + ":latest")) chosen = &m;
    }
  }
  if (!ref.empty() && chosen == nullptr) {
    return absl::NotFoundError(absl::StrCat("the archive has no image tagged '", ref, "'",
                                            names.empty() ? "" : "; it has: ", absl::StrJoin(names, ", ")));
  }
  if (chosen == nullptr) {
    if (manifest.size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat("the archive holds ", manifest.size(),
                                                     " images; name the one to import (", absl::StrJoin(names, ", "), ")"));
    }
    chosen = &manifest[0];
  }
  ImageSource source;
  source.format = ImageSource::Format::kDockerSave;
  ASSIGN_OR_RETURN(std::vector<std::string> tags, Strings(*chosen, "RepoTags", "manifest.json"));
  source.ref = tags.empty() ? "" : tags.front();
  const std::string config_path = StringAt(*chosen, "Config");
  RETURN_IF_ERROR(CheckRelative(config_path));
  ASSIGN_OR_RETURN(source.config_json, ReadFileAt(dir, config_path, kMaxJsonBytes));
  source.config_digest = Sha256::Of(source.config_json);
  std::vector<Digest> diff_ids;
  RETURN_IF_ERROR(ParseImageConfig(source.config_json, &source.config, &diff_ids, &source.os, &source.architecture));
  ASSIGN_OR_RETURN(std::vector<std::string> layers, Strings(*chosen, "Layers", "manifest.json"));
  if (layers.size() != diff_ids.size()) {
    return absl::InvalidArgumentError(absl::StrCat("manifest.json lists ", layers.size(), " layers but the config ",
                                                   diff_ids.size(), " diff_ids"));
  }
  if (layers.size() > kMaxLayers) {
    return absl::InvalidArgumentError(absl::StrCat("the image has ", layers.size(), " layers; at most ", kMaxLayers));
  }
  Json oci_layers = Json::array();
  for (size_t i = 0; i < layers.size(); ++i) {
    RETURN_IF_ERROR(CheckRelative(layers[i]));
    // Older Docker links a layer listed twice to its first copy (../<id>/layer.tar).
    ASSIGN_OR_RETURN(UniqueFd fd, Open(dir, layers[i], O_RDONLY, Resolve::kInRoot));
    struct stat st;
    if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat("layer ", layers[i], " is not a file"));
    }
    LayerRef layer;
    layer.blob_path = layers[i];
    // docker save writes each layer uncompressed: its digest is its DiffID
    // (checked as it is unpacked).
    layer.media_type = kOciLayerTar;
    layer.digest = diff_ids[i];
    layer.diff_id = diff_ids[i];
    layer.size = st.st_size;
    oci_layers.push_back({{"mediaType", layer.media_type}, {"digest", layer.digest.str()}, {"size", layer.size}});
    source.layers.push_back(std::move(layer));
  }
  // The OCI manifest this image would have: what the store keeps.
  Json oci = {{"schemaVersion", 2},
              {"mediaType", kOciManifest},
              {"config",
               {{"mediaType", kOciConfig},
                {"digest", source.config_digest.str()},
                {"size", static_cast<int64_t>(source.config_json.size())}}},
              {"layers", oci_layers}};
  source.manifest_json = oci.dump();
  source.manifest_digest = Sha256::Of(source.manifest_json);
  return source;
}

}  // namespace

absl::Status ParseImageConfig(const std::string& json, ImageConfig* config, std::vector<Digest>* diff_ids,
                              std::string* os, std::string* architecture) {
  ASSIGN_OR_RETURN(Json root, ParseJson(json, "the image's config"));
  if (!root.is_object()) return absl::InvalidArgumentError("the image's config is not a JSON object");
  *os = StringAt(root, "os");
  *architecture = StringAt(root, "architecture");
  if (!os->empty() && *os != "linux") {
    return absl::InvalidArgumentError(absl::StrCat("the image is for ", *os, "; Warden runs linux images only"));
  }
  if (!architecture->empty() && *architecture != "amd64") {
    return absl::InvalidArgumentError(
        absl::StrCat("the image is for ", *architecture, "; Warden runs amd64 images only"));
  }
  if (root.contains("config") && root["config"].is_object()) {
    const Json& c = root["config"];
    const std::string what = "the image's config";
    ASSIGN_OR_RETURN(config->env, Strings(c, "Env", what));
    ASSIGN_OR_RETURN(config->entrypoint, Strings(c, "Entrypoint", what));
    ASSIGN_OR_RETURN(config->cmd, Strings(c, "Cmd", what));
    config->working_dir = StringAt(c, "WorkingDir");
    config->user = StringAt(c, "User");
    if (c.contains("Labels") && c["Labels"].is_object()) {
      for (auto it = c["Labels"].begin(); it != c["Labels"].end(); ++it) {
        if (it.value().is_string()) config->labels[it.key()] = it.value().get<std::string>();
      }
    }
    for (const std::string& e : config->env) {
      if (e.find('=') == std::string::npos || e.find('\0') != std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat("the image's config has an environment entry '",
                                                       e.substr(0, 80), "' without '='"));
      }
    }
  }
  diff_ids->clear();
  if (!root.contains("rootfs") || !root["rootfs"].is_object() || !root["rootfs"].contains("diff_ids") ||
      !root["rootfs"]["diff_ids"].is_array()) {
    return absl::InvalidArgumentError("the image's config has no rootfs.diff_ids");
  }
  for (const Json& d : root["rootfs"]["diff_ids"]) {
    if (!d.is_string()) return absl::InvalidArgumentError("rootfs.diff_ids holds a non-string");
    ASSIGN_OR_RETURN(Digest digest, Digest::Parse(d.get<std::string>()));
    diff_ids->push_back(std::move(digest));
  }
  return absl::OkStatus();
}

absl::StatusOr<ImageSource> ReadImageSource(const std::string& dir, const std::string& ref) {
  UniqueFd fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return absl::ErrnoToStatus(errno, absl::StrCat("open ", dir));
  struct stat st;
  if (fstatat(fd.get(), "index.json", &st, AT_SYMLINK_NOFOLLOW) == 0) return ReadOciLayout(fd.get(), ref);
  if (fstatat(fd.get(), "manifest.json", &st, AT_SYMLINK_NOFOLLOW) == 0) return ReadDockerSave(fd.get(), ref);
  return absl::InvalidArgumentError(
      "this is neither an OCI image layout (no index.json) nor a `docker save` archive (no manifest.json)");
}

}  // namespace warden::images
