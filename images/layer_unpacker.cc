#include "images/layer_unpacker.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "images/fs_util.h"
#include "nlohmann/json.hpp"
#include "sandbox/unique_fd.h"

namespace warden::images {
namespace {

using Json = nlohmann::json;

constexpr char kWhiteoutPrefix[] = ".wh.";
constexpr char kOpaqueMarker[] = ".wh..wh..opq";
constexpr char kAufsMetaPrefix[] = ".wh..wh.";
constexpr size_t kMaxPathBytes = 4096;

// The compressed side: reads the blob from its fd, hashing what it reads.
struct BlobReader {
  int fd = -1;
  Sha256 hash;
  int64_t read_bytes = 0;
  char buffer[1 << 17];
  const std::function<void(int64_t)>* progress = nullptr;
  int64_t last_progress = 0;

  static la_ssize_t Read(struct archive* a, void* self, const void** out) {
    auto* r = static_cast<BlobReader*>(self);
    for (;;) {
      ssize_t n = read(r->fd, r->buffer, sizeof(r->buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        archive_set_error(a, errno, "reading the layer blob");
        return -1;
      }
      r->hash.Update(r->buffer, static_cast<size_t>(n));
      r->read_bytes += n;
      if (r->progress != nullptr && *r->progress && r->read_bytes - r->last_progress >= (8 << 20)) {
        r->last_progress = r->read_bytes;
        (*r->progress)(r->read_bytes);
      }
      *out = r->buffer;
      return n;
    }
  }
  // Whatever the decompressor left unread (trailing bytes) counts too.
  absl::Status Drain() {
    for (;;) {
      ssize_t n = read(fd, buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return absl::ErrnoToStatus(errno, "reading the layer blob");
      if (n == 0) return absl::OkStatus();
      hash.Update(buffer, static_cast<size_t>(n));
      read_bytes += n;
    }
  }
};

// The uncompressed side: the decompressed stream (libarchive's "raw"
// format over every filter it knows), hashed for the DiffID and handed on
// to the tar reader.
struct StreamReader {
  struct archive* raw = nullptr;
  Sha256 hash;
  bool eof = false;
  std::string error;

  static la_ssize_t Read(struct archive* a, void* self, const void** out) {
    auto* r = static_cast<StreamReader*>(self);
    if (r->eof) return 0;
    const void* block = nullptr;
    size_t size = 0;
    la_int64_t offset = 0;
    int rc = archive_read_data_block(r->raw, &block, &size, &offset);
    if (rc == ARCHIVE_EOF) {
      r->eof = true;
      return 0;
    }
    if (rc < ARCHIVE_WARN) {
      r->error = archive_error_string(r->raw) ? archive_error_string(r->raw) : "the layer cannot be decompressed";
      archive_set_error(a, EIO, "%s", r->error.c_str());
      return -1;
    }
    r->hash.Update(block, size);
    *out = block;
    return static_cast<la_ssize_t>(size);
  }
  absl::Status Drain() {
    const void* out = nullptr;
    while (!eof) {
      if (Read(raw, this, &out) < 0) return absl::InvalidArgumentError(error);
    }
    return absl::OkStatus();
  }
};

struct ArchiveDeleter {
  void operator()(struct archive* a) const { archive_read_free(a); }
};
using ArchivePtr = std::unique_ptr<struct archive, ArchiveDeleter>;

absl::StatusOr<ArchivePtr> OpenRaw(BlobReader* blob) {
  ArchivePtr raw(archive_read_new());
  archive_read_support_filter_all(raw.get());
  archive_read_support_format_raw(raw.get());
  if (archive_read_open(raw.get(), blob, nullptr, &BlobReader::Read, nullptr) != ARCHIVE_OK) {
    return absl::InvalidArgumentError(absl::StrCat("the layer cannot be read: ", archive_error_string(raw.get())));
  }
  struct archive_entry* entry = nullptr;
  int rc = archive_read_next_header(raw.get(), &entry);
  if (rc == ARCHIVE_EOF) return absl::InvalidArgumentError("the layer blob is empty");
  if (rc < ARCHIVE_WARN) {
    return absl::InvalidArgumentError(absl::StrCat("the layer cannot be decompressed: ", archive_error_string(raw.get())));
  }
  return raw;
}

absl::Status CheckDigests(BlobReader& blob, StreamReader& stream, const Digest& blob_digest, const Digest& diff_id,
                          Digest* got_blob, Digest* got_diff) {
  RETURN_IF_ERROR(stream.Drain());
  RETURN_IF_ERROR(blob.Drain());
  *got_blob = blob.hash.Finish();
  *got_diff = stream.hash.Finish();
  if (!blob_digest.empty() && *got_blob != blob_digest) {
    return absl::InvalidArgumentError(absl::StrCat("the layer blob ", blob_digest.str(), " does not match its digest (",
                                                   got_blob->str(), "): the image is damaged or was altered"));
  }
  if (!diff_id.empty() && *got_diff != diff_id) {
    return absl::InvalidArgumentError(absl::StrCat("the layer ", diff_id.str(), " does not match its DiffID (",
                                                   got_diff->str(), "): the image is damaged or was altered"));
  }
  return absl::OkStatus();
}

// Where entries go: a directory fd per parent path, resolved within the
// tree, with missing parents made (and remembered as implicit).
class Tree {
 public:
  Tree(int root, LayerMeta* meta) : root_(root), meta_(meta) {}

  // The parent directory of `path` ("" is the tree itself) and the last
  // component; -1 with errno on failure.
  int Parent(const std::string& path, std::string* name) {
    const size_t slash = path.rfind('/');
    const std::string parent = slash == std::string::npos ? "" : path.substr(0, slash);
    *name = slash == std::string::npos ? path : path.substr(slash + 1);
    if (cached_ && parent == cached_path_) return cached_.get();
    UniqueFd fd = OpenDir(parent);
    if (!fd) return -1;
    cached_ = std::move(fd);
    cached_path_ = parent;
    return cached_.get();
  }
  // Anything but a plain new file may have changed what a parent path
  // resolves to.
  void Forget() {
    cached_.Reset();
    cached_path_.clear();
  }

 private:
  UniqueFd OpenDir(const std::string& path) {
    if (path.empty()) return UniqueFd(fcntl(root_, F_DUPFD_CLOEXEC, 3));
    UniqueFd fd(OpenAt2(root_, path.c_str(), O_PATH | O_DIRECTORY, 0, Resolve::kInRoot));
    if (fd || errno != ENOENT) return fd;
    std::string name;
    const size_t slash = path.rfind('/');
    UniqueFd parent = OpenDir(slash == std::string::npos ? "" : path.substr(0, slash));
    if (!parent) return parent;
    name = slash == std::string::npos ? path : path.substr(slash + 1);
    if (mkdirat(parent.get(), name.c_str(), 0755) != 0 && errno != EEXIST) return UniqueFd();
    meta_->implicit_dirs.push_back(path);
    return UniqueFd(OpenAt2(root_, path.c_str(), O_PATH | O_DIRECTORY, 0, Resolve::kInRoot));
  }

  int root_;
  LayerMeta* meta_;
  UniqueFd cached_;
  std::string cached_path_;
};

struct EntryTimes {
  std::string path;
  struct timespec times[2];
};

class Unpacker {
 public:
  Unpacker(int tree, LayerMeta* meta, const UnpackOptions& options) : tree_(tree, meta), root_(tree), meta_(meta), options_(options) {}

  absl::Status Run(struct archive* tar) {
    struct archive_entry* entry = nullptr;
    for (;;) {
      int rc = archive_read_next_header(tar, &entry);
      if (rc == ARCHIVE_EOF) break;
      if (rc < ARCHIVE_WARN) {
        return absl::InvalidArgumentError(
            absl::StrCat("the layer is not a valid tar: ", archive_error_string(tar) ? archive_error_string(tar) : "?"));
      }
      if (++meta_->entries > options_.max_entries) {
        return absl::ResourceExhaustedError(
            absl::StrCat("the layer holds more than ", options_.max_entries, " entries"));
      }
      absl::Status status = Entry(tar, entry);
      if (forget_) {
        tree_.Forget();
        forget_ = false;
      }
      RETURN_IF_ERROR(status);
    }
    // Directory times last: adding entries changed them.
    for (auto it = dir_times_.rbegin(); it != dir_times_.rend(); ++it) {
      UniqueFd fd(it->path.empty() ? fcntl(root_, F_DUPFD_CLOEXEC, 3)
                                   : OpenAt2(root_, it->path.c_str(), O_PATH | O_DIRECTORY, 0, Resolve::kInRoot));
      if (fd) utimensat(fd.get(), "", it->times, AT_EMPTY_PATH);
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Entry(struct archive* tar, struct archive_entry* entry) {
    const char* raw_name = archive_entry_pathname(entry);
    if (raw_name == nullptr) return absl::InvalidArgumentError("a layer entry has no name");
    auto normalized = NormalizeEntryPath(raw_name);
    if (!normalized.ok()) return normalized.status();
    const std::string path = *std::move(normalized);
    const std::string base = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
    const std::string parent_path = path.size() > base.size() ? path.substr(0, path.size() - base.size() - 1) : "";

    // Whiteouts name what goes from below; they are never files here.
    if (absl::StartsWith(base, kWhiteoutPrefix)) {
      if (base == kOpaqueMarker) {
        meta_->opaque_dirs.push_back(parent_path);
      } else if (absl::StartsWith(base, kAufsMetaPrefix)) {
        // AUFS's own bookkeeping (.wh..wh.plnk, .wh..wh.aufs): nothing to do.
      } else {
        const std::string hidden = base.substr(strlen(kWhiteoutPrefix));
        if (hidden.empty() || hidden == "." || hidden == "..") {
          return absl::InvalidArgumentError(absl::StrCat("the layer holds a malformed whiteout '", path, "'"));
        }
        meta_->whiteouts.push_back(parent_path.empty() ? hidden : absl::StrCat(parent_path, "/", hidden));
      }
      return absl::OkStatus();
    }

    const mode_t type = archive_entry_filetype(entry);
    const char* hardlink = archive_entry_hardlink(entry);
    if (path.empty()) {
      // The root itself: its metadata only.
      if (type == AE_IFDIR) {
        SetOwner(root_, "", entry, AT_EMPTY_PATH);
        fchmod(root_, archive_entry_perm(entry));
        RememberDirTimes("", entry);
      }
      return absl::OkStatus();
    }
    if (hardlink != nullptr) return HardLink(path, hardlink);
    switch (type) {
      case AE_IFREG: return RegularFile(tar, path, entry);
      case AE_IFDIR: return Directory(path, entry);
      case AE_IFLNK: return Symlink(path, entry);
      case AE_IFIFO: return Fifo(path, entry);
      case AE_IFCHR:
        meta_->left_out[path] = "a character device: sandboxes get Warden's own /dev";
        return absl::OkStatus();
      case AE_IFBLK:
        meta_->left_out[path] = "a block device: sandboxes get Warden's own /dev";
        return absl::OkStatus();
      case AE_IFSOCK:
        meta_->left_out[path] = "a socket";
        return absl::OkStatus();
      default:
        meta_->left_out[path] = "an entry of an unknown type";
        return absl::OkStatus();
    }
  }

  // Makes room for a new entry `name` in `dir`: whatever is there goes,
  // unless both are directories (then it stays, and true comes back). A
  // directory removed may have been a cached parent: forgotten after the
  // entry.
  absl::StatusOr<bool> Clear(int dir, const std::string& name, bool new_is_dir) {
    struct stat st;
    if (fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) return false;
      return absl::ErrnoToStatus(errno, absl::StrCat("stat ", name));
    }
    if (new_is_dir && S_ISDIR(st.st_mode)) return true;
    if (S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode)) forget_ = true;
    RETURN_IF_ERROR(RemoveTreeAt(dir, name.c_str()));
    return false;
  }

  absl::StatusOr<int> ParentOf(const std::string& path, std::string* name) {
    int dir = tree_.Parent(path, name);
    if (dir < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the layer's entry ", path, " has a parent that is not a directory: ", strerror(errno)));
    }
    return dir;
  }

  void SetOwner(int dir, const std::string& name, struct archive_entry* entry, int flags) {
    if (!options_.set_owners) return;
    fchownat(dir, name.c_str(), static_cast<uid_t>(archive_entry_uid(entry)),
             static_cast<gid_t>(archive_entry_gid(entry)), flags | AT_SYMLINK_NOFOLLOW);
  }

  static void TimesOf(struct archive_entry* entry, struct timespec times[2]) {
    times[0].tv_sec = archive_entry_atime_is_set(entry) ? archive_entry_atime(entry) : archive_entry_mtime(entry);
    times[0].tv_nsec = archive_entry_atime_is_set(entry) ? archive_entry_atime_nsec(entry) : archive_entry_mtime_nsec(entry);
    times[1].tv_sec = archive_entry_mtime(entry);
    times[1].tv_nsec = archive_entry_mtime_nsec(entry);
  }

  void RememberDirTimes(const std::string& path, struct archive_entry* entry) {
    EntryTimes t;
    t.path = path;
    TimesOf(entry, t.times);
    dir_times_.push_back(std::move(t));
  }

  void Xattrs(int fd, const std::string& path, struct archive_entry* entry) {
    if (archive_entry_xattr_reset(entry) == 0) return;
    const char* name = nullptr;
    const void* value = nullptr;
    size_t size = 0;
    while (archive_entry_xattr_next(entry, &name, &value, &size) == ARCHIVE_OK) {
      if (absl::StartsWith(name, "user.")) {
        fsetxattr(fd, name, value, size, 0);
      } else {
        meta_->left_out[absl::StrCat(path, " (", name, ")")] =
            "an extended attribute other than user.*: file capabilities and security labels are not kept";
      }
    }
  }

  absl::Status RegularFile(struct archive* tar, const std::string& path, struct archive_entry* entry) {
    std::string name;
    ASSIGN_OR_RETURN(int dir, ParentOf(path, &name));
    ASSIGN_OR_RETURN(bool kept, Clear(dir, name, false));
    (void)kept;
    UniqueFd fd(openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd) return absl::ErrnoToStatus(errno, absl::StrCat("create ", path));
    const int64_t size = archive_entry_size(entry);
    if (size > 0) {
      const void* block = nullptr;
      size_t n = 0;
      la_int64_t offset = 0;
      for (;;) {
        int rc = archive_read_data_block(tar, &block, &n, &offset);
        if (rc == ARCHIVE_EOF) break;
        if (rc < ARCHIVE_WARN) {
          return absl::InvalidArgumentError(absl::StrCat("the layer's ", path, " cannot be read: ",
                                                         archive_error_string(tar) ? archive_error_string(tar) : "?"));
        }
        meta_->bytes += static_cast<int64_t>(n);
        if (meta_->bytes > options_.max_bytes) {
          return absl::ResourceExhaustedError(
              absl::StrCat("the image unpacks to more than ", options_.max_bytes, " bytes"));
        }
        const char* data = static_cast<const char*>(block);
        while (n > 0) {
          ssize_t w = pwrite(fd.get(), data, n, offset);
          if (w < 0 && errno == EINTR) continue;
          if (w < 0) return absl::ErrnoToStatus(errno, absl::StrCat("write ", path));
          data += w;
          n -= static_cast<size_t>(w);
          offset += w;
        }
      }
      // Sparse files end in a hole as often as not.
      if (ftruncate(fd.get(), size) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("truncate ", path));
    }
    if (options_.set_owners) {
      fchown(fd.get(), static_cast<uid_t>(archive_entry_uid(entry)), static_cast<gid_t>(archive_entry_gid(entry)));
    }
    fchmod(fd.get(), archive_entry_perm(entry));  // after chown, which clears setuid
    Xattrs(fd.get(), path, entry);
    struct timespec times[2];
    TimesOf(entry, times);
    futimens(fd.get(), times);
    return absl::OkStatus();
  }

  absl::Status Directory(const std::string& path, struct archive_entry* entry) {
    std::string name;
    ASSIGN_OR_RETURN(int dir, ParentOf(path, &name));
    ASSIGN_OR_RETURN(bool kept, Clear(dir, name, true));
    if (!kept) {
      if (mkdirat(dir, name.c_str(), 0700) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("mkdir ", path));
    }
    // Listed now: no longer only implicit.
    auto& implicit = meta_->implicit_dirs;
    implicit.erase(std::remove(implicit.begin(), implicit.end(), path), implicit.end());
    UniqueFd fd(openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
    if (options_.set_owners) {
      fchown(fd.get(), static_cast<uid_t>(archive_entry_uid(entry)), static_cast<gid_t>(archive_entry_gid(entry)));
    }
    fchmod(fd.get(), archive_entry_perm(entry));
    Xattrs(fd.get(), path, entry);
    RememberDirTimes(path, entry);
    return absl::OkStatus();
  }

  absl::Status Symlink(const std::string& path, struct archive_entry* entry) {
    const char* target = archive_entry_symlink(entry);
    if (target == nullptr || *target == '\0' || strlen(target) >= kMaxPathBytes) {
      return absl::InvalidArgumentError(absl::StrCat("the layer's symlink ", path, " has no valid target"));
    }
    std::string name;
    ASSIGN_OR_RETURN(int dir, ParentOf(path, &name));
    ASSIGN_OR_RETURN(bool kept, Clear(dir, name, false));
    (void)kept;
    if (symlinkat(target, dir, name.c_str()) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("symlink ", path));
    SetOwner(dir, name, entry, 0);
    struct timespec times[2];
    TimesOf(entry, times);
    utimensat(dir, name.c_str(), times, AT_SYMLINK_NOFOLLOW);
    forget_ = true;  // a later parent path may now resolve through it
    return absl::OkStatus();
  }

  absl::Status Fifo(const std::string& path, struct archive_entry* entry) {
    std::string name;
    ASSIGN_OR_RETURN(int dir, ParentOf(path, &name));
    ASSIGN_OR_RETURN(bool kept, Clear(dir, name, false));
    (void)kept;
    if (mkfifoat(dir, name.c_str(), 0600) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("mkfifo ", path));
    SetOwner(dir, name, entry, 0);
    fchmodat(dir, name.c_str(), archive_entry_perm(entry), 0);
    struct timespec times[2];
    TimesOf(entry, times);
    utimensat(dir, name.c_str(), times, AT_SYMLINK_NOFOLLOW);
    return absl::OkStatus();
  }

  absl::Status HardLink(const std::string& path, const char* raw_target) {
    ASSIGN_OR_RETURN(std::string target, NormalizeEntryPath(raw_target));
    if (target.empty()) return absl::InvalidArgumentError(absl::StrCat("the layer's hard link ", path, " names the root"));
    if (target == path) return absl::OkStatus();
    std::string name;
    ASSIGN_OR_RETURN(int dir, ParentOf(path, &name));
    std::string target_name;
    const size_t slash = target.rfind('/');
    const std::string target_parent = slash == std::string::npos ? "" : target.substr(0, slash);
    target_name = slash == std::string::npos ? target : target.substr(slash + 1);
    UniqueFd tdir(target_parent.empty()
                      ? fcntl(root_, F_DUPFD_CLOEXEC, 3)
                      : OpenAt2(root_, target_parent.c_str(), O_PATH | O_DIRECTORY, 0, Resolve::kInRoot));
    struct stat st;
    const bool here = tdir && fstatat(tdir.get(), target_name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                      !S_ISDIR(st.st_mode);
    if (!here) {
      // A file of a layer below: linked when the layers are merged.
      meta_->links.emplace_back(path, target);
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(bool kept, Clear(dir, name, false));
    (void)kept;
    if (linkat(tdir.get(), target_name.c_str(), dir, name.c_str(), 0) != 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat("link ", path, " to ", target));
    }
    return absl::OkStatus();
  }

  Tree tree_;
  int root_;
  LayerMeta* meta_;
  const UnpackOptions& options_;
  std::vector<EntryTimes> dir_times_;
  bool forget_ = false;
};

}  // namespace

absl::StatusOr<std::string> NormalizeEntryPath(const std::string& name) {
  if (name.size() >= kMaxPathBytes) {
    return absl::InvalidArgumentError(absl::StrCat("a layer entry's name is ", name.size(), " bytes long"));
  }
  if (name.find('\0') != std::string::npos) return absl::InvalidArgumentError("a layer entry's name holds a NUL");
  std::vector<std::string> parts;
  for (absl::string_view part : absl::StrSplit(name, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      return absl::InvalidArgumentError(absl::StrCat("the layer's entry '", name.substr(0, 200),
                                                     "' points outside the image's root: refused"));
    }
    parts.emplace_back(part);
  }
  return absl::StrJoin(parts, "/");
}

absl::StatusOr<LayerMeta> UnpackLayer(int blob_fd, int tree_fd, const Digest& blob_digest, const Digest& diff_id,
                                      const UnpackOptions& options) {
  LayerMeta meta;
  BlobReader blob;
  blob.fd = blob_fd;
  blob.progress = &options.progress;
  ASSIGN_OR_RETURN(ArchivePtr raw, OpenRaw(&blob));
  StreamReader stream;
  stream.raw = raw.get();
  ArchivePtr tar(archive_read_new());
  archive_read_support_format_tar(tar.get());
  archive_read_set_options(tar.get(), "tar:read_concatenated_archives");
  if (archive_read_open(tar.get(), &stream, nullptr, &StreamReader::Read, nullptr) != ARCHIVE_OK) {
    if (!stream.error.empty()) return absl::InvalidArgumentError(absl::StrCat("the layer cannot be decompressed: ", stream.error));
    return absl::InvalidArgumentError(absl::StrCat("the layer is not a tar: ", archive_error_string(tar.get())));
  }
  Unpacker unpacker(tree_fd, &meta, options);
  absl::Status status = unpacker.Run(tar.get());
  if (!status.ok()) {
    if (!stream.error.empty()) return absl::InvalidArgumentError(absl::StrCat("the layer cannot be decompressed: ", stream.error));
    return status;
  }
  Digest got_blob, got_diff;
  RETURN_IF_ERROR(CheckDigests(blob, stream, blob_digest, diff_id, &got_blob, &got_diff));
  meta.diff_id = got_diff;
  meta.blob_digests.push_back(got_blob);
  if (options.progress) options.progress(blob.read_bytes);
  return meta;
}

absl::StatusOr<Digest> DiffIdOf(int blob_fd, const Digest& blob_digest) {
  BlobReader blob;
  blob.fd = blob_fd;
  ASSIGN_OR_RETURN(ArchivePtr raw, OpenRaw(&blob));
  StreamReader stream;
  stream.raw = raw.get();
  Digest got_blob, got_diff;
  RETURN_IF_ERROR(CheckDigests(blob, stream, blob_digest, Digest(), &got_blob, &got_diff));
  return got_diff;
}

std::string LayerMeta::ToJson() const {
  Json j;
  j["diff_id"] = diff_id.str();
  j["blob_digests"] = Json::array();
  for (const Digest& d : blob_digests) j["blob_digests"].push_back(d.str());
  j["whiteouts"] = whiteouts;
  j["opaque_dirs"] = opaque_dirs;
  j["links"] = Json::array();
  for (const auto& [name, target] : links) j["links"].push_back({name, target});
  j["implicit_dirs"] = implicit_dirs;
  j["left_out"] = left_out;
  j["bytes"] = bytes;
  j["entries"] = entries;
  return j.dump();
}

absl::StatusOr<LayerMeta> LayerMeta::FromJson(const std::string& text) {
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return absl::DataLossError("a layer's meta.json is damaged");
  LayerMeta meta;
  try {
    ASSIGN_OR_RETURN(meta.diff_id, Digest::Parse(j.at("diff_id").get<std::string>()));
    for (const auto& d : j.at("blob_digests")) {
      ASSIGN_OR_RETURN(Digest digest, Digest::Parse(d.get<std::string>()));
      meta.blob_digests.push_back(std::move(digest));
    }
    meta.whiteouts = j.at("whiteouts").get<std::vector<std::string>>();
    meta.opaque_dirs = j.at("opaque_dirs").get<std::vector<std::string>>();
    for (const auto& l : j.at("links")) meta.links.emplace_back(l.at(0).get<std::string>(), l.at(1).get<std::string>());
    meta.implicit_dirs = j.at("implicit_dirs").get<std::vector<std::string>>();
    meta.left_out = j.at("left_out").get<std::map<std::string, std::string>>();
    meta.bytes = j.at("bytes").get<int64_t>();
    meta.entries = j.at("entries").get<int64_t>();
  } catch (const Json::exception& e) {
    return absl::DataLossError(absl::StrCat("a layer's meta.json is damaged: ", e.what()));
  }
  return meta;
}

}  // namespace warden::images
