#include "images/template_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "images/fs_util.h"
#include "images/layer_unpacker.h"
#include "images/rootfs_merge.h"
#include "nlohmann/json.hpp"
#include "sandbox/unique_fd.h"

namespace warden::images {
namespace {

using Json = nlohmann::json;

constexpr int64_t kMaxAccountsBytes = 256 << 10;  // /etc/passwd, /etc/group
constexpr int64_t kMaxRecordBytes = 4 << 20;

// Names of the files in a directory (not "." and "..").
std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (struct dirent* e = readdir(d)) {
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
  }
  closedir(d);
  return names;
}

absl::Status CheckOwner(const std::string& owner) {
  if (owner.size() > 64) return absl::InvalidArgumentError("a tenant name is at most 64 characters");
  for (char c : owner) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') {
      return absl::InvalidArgumentError(absl::StrCat("tenant '", owner, "' has characters outside [A-Za-z0-9._-]"));
    }
  }
  if (owner == "." || owner == "..") return absl::InvalidArgumentError("tenant '.' or '..' is not a name");
  return absl::OkStatus();
}

Json ConfigToJson(const ImageConfig& c) {
  return {{"env", c.env},   {"entrypoint", c.entrypoint}, {"cmd", c.cmd},
          {"working_dir", c.working_dir}, {"user", c.user}, {"labels", c.labels}};
}

ImageConfig ConfigFromJson(const Json& j) {
  ImageConfig c;
  c.env = j.at("env").get<std::vector<std::string>>();
  c.entrypoint = j.at("entrypoint").get<std::vector<std::string>>();
  c.cmd = j.at("cmd").get<std::vector<std::string>>();
  c.working_dir = j.at("working_dir").get<std::string>();
  c.user = j.at("user").get<std::string>();
  c.labels = j.at("labels").get<std::map<std::string, std::string>>();
  return c;
}

}  // namespace

// ---- the store-wide lock and pins

class TemplateStore::Lock {
 public:
  explicit Lock(const std::string& dir) : fd_(open((dir + "/lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600)) {
    if (fd_) {
      while (flock(fd_.get(), LOCK_EX) != 0 && errno == EINTR) {
      }
    }
  }
  ~Lock() {
    if (fd_) flock(fd_.get(), LOCK_UN);
  }

 private:
  UniqueFd fd_;
};

class TemplateStore::Pin {
 public:
  static absl::StatusOr<std::shared_ptr<Pin>> Create(const std::string& dir) {
    auto pin = std::shared_ptr<Pin>(new Pin);
    pin->path_ = absl::StrCat(dir, "/pins/", RandomName("pin-"));
    pin->fd_.Reset(open(pin->path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!pin->fd_) return absl::ErrnoToStatus(errno, absl::StrCat("create ", pin->path_));
    if (flock(pin->fd_.get(), LOCK_EX) != 0) return absl::ErrnoToStatus(errno, "flock");
    return pin;
  }
  ~Pin() {
    unlink(path_.c_str());
  }
  // What the pin holds: paths relative to the store ("roots/sha256/...").
  void Add(const std::string& rel) {
    held_.push_back(rel);
    const std::string text = absl::StrJoin(held_, "\n") + "\n";
    if (pwrite(fd_.get(), text.data(), text.size(), 0) == static_cast<ssize_t>(text.size())) {
      ftruncate(fd_.get(), static_cast<off_t>(text.size()));
    }
  }

 private:
  Pin() = default;
  std::string path_;
  UniqueFd fd_;
  std::vector<std::string> held_;
};

// ---- records

std::string TemplateInfo::ToJson() const {
  Json layers_json = Json::array();
  for (const TemplateLayer& l : layers) {
    layers_json.push_back({{"digest", l.digest.str()}, {"diff_id", l.diff_id.str()},
                           {"media_type", l.media_type}, {"bytes", l.bytes}});
  }
  Json j = {{"version", 1},
            {"name", name},
            {"owner", owner},
            {"digest", digest.str()},
            {"manifest_digest", manifest_digest.str()},
            {"root", root.str()},
            {"layers", layers_json},
            {"size_bytes", size_bytes},
            {"created_unix_ms", created_unix_ms},
            {"source_ref", source_ref},
            {"config", ConfigToJson(config)},
            {"left_out", left_out},
            {"passwd", passwd},
            {"group", group},
            {"runtime", runtime}};
  return j.dump(1);
}

absl::StatusOr<TemplateInfo> TemplateInfo::FromJson(const std::string& text) {
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return absl::DataLossError("a template record is not valid JSON");
  TemplateInfo t;
  try {
    t.name = j.at("name").get<std::string>();
    t.owner = j.at("owner").get<std::string>();
    ASSIGN_OR_RETURN(t.digest, Digest::Parse(j.at("digest").get<std::string>()));
    ASSIGN_OR_RETURN(t.manifest_digest, Digest::Parse(j.at("manifest_digest").get<std::string>()));
    ASSIGN_OR_RETURN(t.root, Digest::Parse(j.at("root").get<std::string>()));
    for (const Json& l : j.at("layers")) {
      TemplateLayer layer;
      ASSIGN_OR_RETURN(layer.digest, Digest::Parse(l.at("digest").get<std::string>()));
      ASSIGN_OR_RETURN(layer.diff_id, Digest::Parse(l.at("diff_id").get<std::string>()));
      layer.media_type = l.at("media_type").get<std::string>();
      layer.bytes = l.at("bytes").get<int64_t>();
      t.layers.push_back(std::move(layer));
    }
    t.size_bytes = j.at("size_bytes").get<int64_t>();
    t.created_unix_ms = j.at("created_unix_ms").get<int64_t>();
    t.source_ref = j.at("source_ref").get<std::string>();
    t.config = ConfigFromJson(j.at("config"));
    t.left_out = j.at("left_out").get<std::map<std::string, std::string>>();
    t.passwd = j.at("passwd").get<std::string>();
    t.group = j.at("group").get<std::string>();
    t.runtime = j.at("runtime").get<std::string>();
  } catch (const Json::exception& e) {
    return absl::DataLossError(absl::StrCat("a template record is damaged: ", e.what()));
  }
  return t;
}

// ---- the store

absl::Status TemplateStore::CheckName(const std::string& name) {
  if (name.empty() || name.size() > 128) {
    return absl::InvalidArgumentError("a template's name is 1 to 128 characters: [A-Za-z0-9._-], first a letter or digit");
  }
  if (!absl::ascii_isalnum(name[0])) {
    return absl::InvalidArgumentError(absl::StrCat("template name '", name, "' must start with a letter or digit"));
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') {
      return absl::InvalidArgumentError(
          absl::StrCat("template name '", name, "' has characters outside [A-Za-z0-9._-]"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TemplateStore>> TemplateStore::Open(const Options& options) {
  if (options.dir.empty() || options.dir[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat("the template store's directory '", options.dir, "' is not absolute"));
  }
  RETURN_IF_ERROR(MakeDirectories(options.dir, 0700));
  chmod(options.dir.c_str(), 0700);
  for (const char* sub : {"layers", "layers/sha256", "roots", "roots/sha256", "blobs", "blobs/sha256", "templates",
                          "templates/public", "templates/tenants", "pins", "tmp"}) {
    const std::string path = absl::StrCat(options.dir, "/", sub);
    if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) return absl::ErrnoToStatus(errno, absl::StrCat("mkdir ", path));
  }
  auto store = std::unique_ptr<TemplateStore>(new TemplateStore(options));
  // Work left in tmp/ by a process that is gone (its lock file is free);
  // garbage Collect moved there is PurgeGarbage's.
  const std::string tmp = store->TmpDir();
  for (const std::string& name : Names(tmp)) {
    if (!absl::EndsWith(name, ".lock")) continue;
    UniqueFd fd(open(absl::StrCat(tmp, "/", name).c_str(), O_RDWR | O_CLOEXEC));
    if (fd && flock(fd.get(), LOCK_EX | LOCK_NB) == 0) {
      RemoveTree(absl::StrCat(tmp, "/", name.substr(0, name.size() - 5))).IgnoreError();
      unlink(absl::StrCat(tmp, "/", name).c_str());
    }
  }
  return store;
}

std::string TemplateStore::RecordPath(const std::string& owner, const std::string& name) const {
  if (owner.empty()) return absl::StrCat(options_.dir, "/templates/public/", name, ".json");
  return absl::StrCat(options_.dir, "/templates/tenants/", owner, "/", name, ".json");
}

std::string TemplateStore::LayerPath(const Digest& diff_id) const {
  return absl::StrCat(options_.dir, "/layers/sha256/", diff_id.hex());
}

std::string TemplateStore::RootPath(const Digest& root) const {
  return absl::StrCat(options_.dir, "/roots/sha256/", root.hex());
}

absl::StatusOr<TemplateInfo> TemplateStore::Get(const std::string& owner, const std::string& name) const {
  RETURN_IF_ERROR(CheckOwner(owner));
  RETURN_IF_ERROR(CheckName(name));
  auto text = ReadFile(RecordPath(owner, name), kMaxRecordBytes);
  if (!text.ok()) {
    if (absl::IsNotFound(text.status())) {
      return absl::NotFoundError(absl::StrCat("there is no template '", name, "'"));
    }
    return text.status();
  }
  ASSIGN_OR_RETURN(TemplateInfo info, TemplateInfo::FromJson(*text));
  info.root_path = RootPath(info.root);
  return info;
}

std::vector<TemplateInfo> TemplateStore::List(const std::string& owner) const {
  std::vector<TemplateInfo> out;
  if (!CheckOwner(owner).ok()) return out;
  const std::string dir = owner.empty() ? absl::StrCat(options_.dir, "/templates/public")
                                        : absl::StrCat(options_.dir, "/templates/tenants/", owner);
  std::vector<std::string> names = Names(dir);
  std::sort(names.begin(), names.end());
  for (const std::string& file : names) {
    if (!absl::EndsWith(file, ".json")) continue;
    auto info = Get(owner, file.substr(0, file.size() - 5));
    if (info.ok()) out.push_back(*std::move(info));
  }
  return out;
}

TemplateUsage TemplateStore::UsageOf(const std::string& owner) const {
  TemplateUsage usage;
  for (const TemplateInfo& t : List(owner)) {
    usage.bytes += t.size_bytes;
    usage.count += 1;
  }
  return usage;
}

absl::Status TemplateStore::Remove(const std::string& owner, const std::string& name) {
  RETURN_IF_ERROR(CheckOwner(owner));
  RETURN_IF_ERROR(CheckName(name));
  {
    Lock lock(options_.dir);
    if (unlink(RecordPath(owner, name).c_str()) != 0) {
      if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("there is no template '", name, "'"));
      return absl::ErrnoToStatus(errno, absl::StrCat("remove template ", name));
    }
  }
  return Collect();
}

absl::Status TemplateStore::SetRuntime(const std::string& owner, const std::string& name, const std::string& runtime) {
  Lock lock(options_.dir);
  ASSIGN_OR_RETURN(TemplateInfo info, Get(owner, name));
  info.runtime = runtime;
  return WriteFileAtomically(RecordPath(owner, name), info.ToJson(), 0600);
}

absl::StatusOr<std::shared_ptr<TemplateStore::Pin>> TemplateStore::PinRoot(const Digest& root) {
  Lock lock(options_.dir);
  struct stat st;
  if (stat(RootPath(root).c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("the root filesystem ", root.str(), " is no longer in the store"));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<Pin> pin, Pin::Create(options_.dir));
  pin->Add(absl::StrCat("roots/sha256/", root.hex()));
  return pin;
}

absl::StatusOr<LayerMeta> TemplateStore::EnsureLayer(int layout_fd, const LayerRef& layer, int64_t* budget,
                                                     const ImportRequest& request, int index, int count) {
  ImportProgress progress;
  progress.stage = ImportProgress::Stage::kLayer;
  progress.layer = index;
  progress.layers = count;
  progress.bytes_total = layer.size;
  auto report = [&](int64_t done) {
    if (!request.progress) return;
    progress.bytes_done = done;
    progress.message = absl::StrCat("layer ", index, "/", count, " ", layer.diff_id.hex().substr(0, 12), ": ",
                                    progress.reused ? "already here, checking " : "unpacking ", done >> 20, " of ",
                                    layer.size >> 20, " MiB");
    request.progress(progress);
  };
  ASSIGN_OR_RETURN(UniqueFd blob, images::Open(layout_fd, layer.blob_path, O_RDONLY, Resolve::kInRoot));
  const std::string path = LayerPath(layer.diff_id);
  const std::string meta_path = path + "/meta.json";

  auto existing = ReadFile(meta_path, kMaxRecordBytes);
  if (existing.ok()) {
    ASSIGN_OR_RETURN(LayerMeta meta, LayerMeta::FromJson(*existing));
    progress.reused = true;
    report(0);
    // Reused only for the bytes that made it: the blob is hashed, and a
    // blob the store has not seen (another compression) decompressed.
    ASSIGN_OR_RETURN(Digest got, Sha256::OfFd(blob.get()));
    if (got != layer.digest) {
      return absl::InvalidArgumentError(absl::StrCat("the layer blob ", layer.digest.str(),
                                                     " does not match its digest: the image is damaged or was altered"));
    }
    if (std::find(meta.blob_digests.begin(), meta.blob_digests.end(), got) == meta.blob_digests.end()) {
      lseek(blob.get(), 0, SEEK_SET);
      ASSIGN_OR_RETURN(Digest diff, DiffIdOf(blob.get(), layer.digest));
      if (diff != layer.diff_id) {
        return absl::InvalidArgumentError(absl::StrCat("the layer ", layer.diff_id.str(),
                                                       " does not match its DiffID: the image is damaged or was altered"));
      }
      Lock lock(options_.dir);
      meta.blob_digests.push_back(got);
      RETURN_IF_ERROR(WriteFileAtomically(meta_path, meta.ToJson(), 0600));
    }
    report(layer.size);
    *budget -= meta.bytes;
    return meta;
  }

  // Unpacked into tmp/, then renamed into place.
  const std::string work = absl::StrCat(TmpDir(), "/", RandomName("layer-"));
  UniqueFd work_lock(open((work + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!work_lock || flock(work_lock.get(), LOCK_EX) != 0) return absl::ErrnoToStatus(errno, "lock " + work);
  auto cleanup = [&] {
    RemoveTree(work).IgnoreError();
    unlink((work + ".lock").c_str());
  };
  if (mkdir(work.c_str(), 0700) != 0 || mkdir((work + "/tree").c_str(), 0755) != 0) {
    const int e = errno;
    cleanup();
    return absl::ErrnoToStatus(e, absl::StrCat("mkdir ", work));
  }
  UnpackOptions unpack;
  unpack.max_bytes = *budget;
  unpack.max_entries = options_.max_entries;
  unpack.set_owners = options_.set_owners;
  unpack.progress = report;
  UniqueFd tree(open((work + "/tree").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  auto meta = UnpackLayer(blob.get(), tree.get(), layer.digest, layer.diff_id, unpack);
  if (!meta.ok()) {
    cleanup();
    if (absl::IsResourceExhausted(meta.status())) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the image is larger than the room left in the quota (", *budget >> 20,
          " MiB): remove templates you no longer need, or ask the operator for more"));
    }
    return meta.status();
  }
  absl::Status written = WriteFileAtomically(work + "/meta.json", meta->ToJson(), 0600);
  if (!written.ok()) {
    cleanup();
    return written;
  }
  {
    Lock lock(options_.dir);
    if (rename(work.c_str(), path.c_str()) != 0) {
      // Another import made it meanwhile: theirs stands.
      if (errno != EEXIST && errno != ENOTEMPTY) {
        const int e = errno;
        cleanup();
        return absl::ErrnoToStatus(e, absl::StrCat("rename into ", path));
      }
    }
  }
  cleanup();
  *budget -= meta->bytes;
  return meta;
}

absl::Status TemplateStore::EnsureRoot(const Digest& chain, const std::vector<Digest>& diff_ids,
                                       std::map<std::string, std::string>* left_out, bool* reused) {
  const std::string path = RootPath(chain);
  const std::string meta_path = path + ".json";
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    *reused = true;
    auto text = ReadFile(meta_path, kMaxRecordBytes);
    if (text.ok()) {
      Json j = Json::parse(*text, nullptr, false);
      if (j.is_object() && j.contains("left_out") && j["left_out"].is_object()) {
        for (auto it = j["left_out"].begin(); it != j["left_out"].end(); ++it) {
          if (it.value().is_string()) (*left_out)[it.key()] = it.value().get<std::string>();
        }
      }
    }
    return absl::OkStatus();
  }
  *reused = false;
  std::vector<UnpackedLayer> layers;
  for (const Digest& d : diff_ids) {
    UnpackedLayer layer;
    layer.tree = LayerPath(d) + "/tree";
    ASSIGN_OR_RETURN(std::string text, ReadFile(LayerPath(d) + "/meta.json", kMaxRecordBytes));
    ASSIGN_OR_RETURN(layer.meta, LayerMeta::FromJson(text));
    layers.push_back(std::move(layer));
  }
  const std::string work = absl::StrCat(TmpDir(), "/", RandomName("root-"));
  UniqueFd work_lock(open((work + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!work_lock || flock(work_lock.get(), LOCK_EX) != 0) return absl::ErrnoToStatus(errno, "lock " + work);
  auto cleanup = [&] {
    RemoveTree(work).IgnoreError();
    unlink((work + ".lock").c_str());
  };
  if (mkdir(work.c_str(), 0755) != 0) {
    const int e = errno;
    cleanup();
    return absl::ErrnoToStatus(e, absl::StrCat("mkdir ", work));
  }
  UniqueFd root(open(work.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  std::map<std::string, std::string> merged_left_out;
  absl::Status status = MergeLayers(layers, root.get(), options_.set_owners, &merged_left_out);
  if (status.ok()) status = AddMountPoints(root.get(), options_.mount_point_dirs, options_.mount_point_files);
  if (status.ok()) {
    fchmod(root.get(), 0755);
    if (options_.set_owners) fchown(root.get(), 0, 0);
    Json j = {{"chain_id", chain.str()}, {"left_out", merged_left_out}};
    status = WriteFileAtomically(meta_path, j.dump(), 0600);
  }
  if (status.ok()) {
    Lock lock(options_.dir);
    if (rename(work.c_str(), path.c_str()) != 0 && errno != EEXIST && errno != ENOTEMPTY) {
      status = absl::ErrnoToStatus(errno, absl::StrCat("rename into ", path));
    }
  }
  cleanup();
  for (auto& [k, v] : merged_left_out) (*left_out)[k] = v;
  return status;
}

absl::StatusOr<TemplateInfo> TemplateStore::Import(const ImportRequest& request) {
  RETURN_IF_ERROR(CheckName(request.name));
  RETURN_IF_ERROR(CheckOwner(request.owner));
  ImportProgress progress;
  if (request.progress) {
    progress.message = "reading the image";
    request.progress(progress);
  }
  ASSIGN_OR_RETURN(ImageSource source, ReadImageSource(request.layout_dir, request.ref));
  UniqueFd layout(open(request.layout_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!layout) return absl::ErrnoToStatus(errno, absl::StrCat("open ", request.layout_dir));

  // The owner's quota, this template's old self not counted.
  TemplateUsage usage = UsageOf(request.owner);
  auto old = Get(request.owner, request.name);
  if (old.ok()) {
    usage.bytes -= old->size_bytes;
    usage.count -= 1;
  }
  if (request.max_count > 0 && usage.count >= request.max_count) {
    return absl::ResourceExhaustedError(absl::StrCat("the tenant has ", usage.count, " templates, its quota: remove one first"));
  }
  int64_t budget = options_.max_image_bytes;
  if (request.max_bytes > 0) budget = std::min(budget, request.max_bytes - usage.bytes);
  if (budget <= 0) {
    return absl::ResourceExhaustedError("the tenant's templates fill its quota: remove templates it no longer needs");
  }

  ASSIGN_OR_RETURN(std::shared_ptr<Pin> pin, Pin::Create(options_.dir));
  TemplateInfo info;
  info.name = request.name;
  info.owner = request.owner;
  info.digest = source.config_digest;
  info.manifest_digest = source.manifest_digest;
  info.source_ref = source.ref;
  info.config = source.config;
  std::vector<Digest> diff_ids;
  const int count = static_cast<int>(source.layers.size());
  for (int i = 0; i < count; ++i) {
    const LayerRef& ref = source.layers[i];
    // Pinned before it is looked at, so a Collect cannot take it meanwhile.
    {
      Lock lock(options_.dir);
      pin->Add(absl::StrCat("layers/sha256/", ref.diff_id.hex()));
    }
    ASSIGN_OR_RETURN(LayerMeta meta, EnsureLayer(layout.get(), ref, &budget, request, i + 1, count));
    for (const auto& [path, why] : meta.left_out) info.left_out[path] = why;
    info.layers.push_back({ref.digest, ref.diff_id, ref.media_type, meta.bytes});
    info.size_bytes += meta.bytes;
    diff_ids.push_back(ref.diff_id);
  }
  if (request.max_bytes > 0 && usage.bytes + info.size_bytes > request.max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the template would take ", info.size_bytes >> 20, " MiB, more than is left of the tenant's quota (",
        (request.max_bytes - usage.bytes) >> 20, " MiB): remove templates it no longer needs"));
  }
  info.root = diff_ids.empty() ? Sha256::Of("") : ChainId(diff_ids.data(), diff_ids.size());
  {
    Lock lock(options_.dir);
    pin->Add(absl::StrCat("roots/sha256/", info.root.hex()));
  }
  bool reused = false;
  if (request.progress) {
    progress.stage = ImportProgress::Stage::kMerging;
    progress.layers = count;
    progress.message = "assembling the root filesystem";
    request.progress(progress);
  }
  RETURN_IF_ERROR(EnsureRoot(info.root, diff_ids, &info.left_out, &reused));
  info.root_path = RootPath(info.root);
  {
    UniqueFd root(open(info.root_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (root) {
      info.passwd = ReadFileAt(root.get(), "etc/passwd", kMaxAccountsBytes).value_or("");
      info.group = ReadFileAt(root.get(), "etc/group", kMaxAccountsBytes).value_or("");
    }
  }
  info.created_unix_ms = absl::ToUnixMillis(absl::Now());
  for (const auto& [digest, text] : {std::make_pair(source.config_digest, source.config_json),
                                     std::make_pair(source.manifest_digest, source.manifest_json)}) {
    const std::string path = absl::StrCat(options_.dir, "/blobs/sha256/", digest.hex());
    struct stat st;
    if (stat(path.c_str(), &st) != 0) RETURN_IF_ERROR(WriteFileAtomically(path, text, 0600));
  }
  {
    Lock lock(options_.dir);
    if (!request.owner.empty()) {
      const std::string dir = absl::StrCat(options_.dir, "/templates/tenants/", request.owner);
      if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return absl::ErrnoToStatus(errno, "mkdir " + dir);
    }
    RETURN_IF_ERROR(WriteFileAtomically(RecordPath(request.owner, request.name), info.ToJson(), 0600));
  }
  pin.reset();
  if (old.ok() && old->root != info.root) Collect().IgnoreError();
  if (request.progress) {
    progress.stage = ImportProgress::Stage::kDone;
    progress.message = absl::StrCat("imported ", info.name, " (", info.digest.str().substr(0, 19), ", ",
                                    info.size_bytes >> 20, " MiB)");
    request.progress(progress);
  }
  return info;
}

absl::Status TemplateStore::Collect() {
  Lock lock(options_.dir);
  std::set<std::string> keep;  // "roots/sha256/<hex>", "layers/sha256/<hex>"
  auto records = [&](const std::string& dir) {
    for (const std::string& file : Names(dir)) {
      auto text = ReadFile(absl::StrCat(dir, "/", file), kMaxRecordBytes);
      if (!text.ok()) continue;
      auto info = TemplateInfo::FromJson(*text);
      if (!info.ok()) continue;
      keep.insert(absl::StrCat("roots/sha256/", info->root.hex()));
      for (const TemplateLayer& l : info->layers) keep.insert(absl::StrCat("layers/sha256/", l.diff_id.hex()));
    }
  };
  records(options_.dir + "/templates/public");
  for (const std::string& tenant : Names(options_.dir + "/templates/tenants")) {
    records(absl::StrCat(options_.dir, "/templates/tenants/", tenant));
  }
  const std::string pins = options_.dir + "/pins";
  for (const std::string& name : Names(pins)) {
    const std::string path = absl::StrCat(pins, "/", name);
    UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) continue;
    if (flock(fd.get(), LOCK_SH | LOCK_NB) == 0) {
      unlink(path.c_str());  // its process is gone
      continue;
    }
    auto text = ReadFile(path, kMaxRecordBytes);
    if (!text.ok()) continue;
    for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) keep.insert(std::string(line));
  }
  absl::Status status;
  for (const char* kind : {"roots", "layers"}) {
    const std::string dir = absl::StrCat(options_.dir, "/", kind, "/sha256");
    for (const std::string& name : Names(dir)) {
      const std::string hex = absl::EndsWith(name, ".json") ? name.substr(0, name.size() - 5) : name;
      if (keep.count(absl::StrCat(kind, "/sha256/", hex))) continue;
      const std::string garbage = absl::StrCat(TmpDir(), "/", RandomName("garbage-"));
      if (rename(absl::StrCat(dir, "/", name).c_str(), garbage.c_str()) != 0) {
        status.Update(absl::ErrnoToStatus(errno, absl::StrCat("move ", name, " out of the store")));
      }
    }
  }
  return status;
}

void TemplateStore::PurgeGarbage() {
  for (const std::string& name : Names(TmpDir())) {
    if (absl::StartsWith(name, "garbage-")) RemoveTree(absl::StrCat(TmpDir(), "/", name)).IgnoreError();
  }
}

}  // namespace warden::images
