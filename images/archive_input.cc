#include "images/archive_input.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "images/fs_util.h"
#include "images/layer_unpacker.h"
#include "sandbox/unique_fd.h"

namespace warden::images {
namespace {

struct Reader {
  int fd;
  char buffer[1 << 17];
  int64_t read_bytes = 0;
  int64_t reported = 0;
  const std::function<void(int64_t)>* progress;
  static la_ssize_t Read(struct archive* a, void* self, const void** out) {
    auto* r = static_cast<Reader*>(self);
    for (;;) {
      ssize_t n = read(r->fd, r->buffer, sizeof(r->buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        archive_set_error(a, errno, "reading the archive");
        return -1;
      }
      r->read_bytes += n;
      if (*r->progress && r->read_bytes - r->reported >= (16 << 20)) {
        r->reported = r->read_bytes;
        (*r->progress)(r->read_bytes);
      }
      *out = r->buffer;
      return n;
    }
  }
};

// Makes the parents of `path` beneath `root` (plain directories only).
absl::StatusOr<UniqueFd> ParentDir(int root, const std::string& path, std::string* name) {
  std::vector<std::string> parts = absl::StrSplit(path, '/');
  *name = parts.back();
  parts.pop_back();
  UniqueFd dir(fcntl(root, F_DUPFD_CLOEXEC, 3));
  for (const std::string& part : parts) {
    if (mkdirat(dir.get(), part.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::ErrnoToStatus(errno, absl::StrCat("mkdir ", part));
    }
    UniqueFd next(openat(dir.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) return absl::InvalidArgumentError(absl::StrCat("the archive's ", path, " lies beneath a non-directory"));
    dir = std::move(next);
  }
  return dir;
}

}  // namespace

absl::Status ExtractImageArchive(int archive_fd, const std::string& dest, int64_t max_bytes,
                                 const std::function<void(int64_t)>& progress) {
  UniqueFd root(open(dest.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root) return absl::ErrnoToStatus(errno, absl::StrCat("open ", dest));
  struct archive* a = archive_read_new();
  std::unique_ptr<struct archive, int (*)(struct archive*)> owner(a, archive_read_free);
  archive_read_support_filter_gzip(a);
  archive_read_support_filter_zstd(a);
  archive_read_support_filter_xz(a);
  archive_read_support_format_tar(a);
  Reader reader{archive_fd, {}, 0, 0, &progress};
  if (archive_read_open(a, &reader, nullptr, &Reader::Read, nullptr) != ARCHIVE_OK) {
    return absl::InvalidArgumentError(absl::StrCat("the image archive cannot be read: ", archive_error_string(a)));
  }
  int64_t total = 0;
  int64_t entries = 0;
  struct archive_entry* entry = nullptr;
  for (;;) {
    int rc = archive_read_next_header(a, &entry);
    if (rc == ARCHIVE_EOF) break;
    if (rc < ARCHIVE_WARN) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the image archive is not a tar (an OCI layout or `docker save` output, optionally gzip'd): ",
          archive_error_string(a) ? archive_error_string(a) : "?"));
    }
    if (++entries > 1'000'000) return absl::InvalidArgumentError("the image archive holds more than a million entries");
    ASSIGN_OR_RETURN(std::string path, NormalizeEntryPath(archive_entry_pathname(entry)));
    if (path.empty()) continue;
    std::string name;
    ASSIGN_OR_RETURN(UniqueFd dir, ParentDir(root.get(), path, &name));
    const mode_t type = archive_entry_filetype(entry);
    if (type == AE_IFDIR) {
      if (mkdirat(dir.get(), name.c_str(), 0755) != 0 && errno != EEXIST) {
        return absl::ErrnoToStatus(errno, absl::StrCat("mkdir ", path));
      }
    } else if (type == AE_IFLNK) {
      const char* target = archive_entry_symlink(entry);
      if (target == nullptr || target[0] == '/') {
        return absl::InvalidArgumentError(absl::StrCat("the archive's symlink ", path, " is not relative"));
      }
      if (symlinkat(target, dir.get(), name.c_str()) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("symlink ", path));
    } else if (type == AE_IFREG && archive_entry_hardlink(entry) == nullptr) {
      total += archive_entry_size(entry);
      if (total > max_bytes) {
        return absl::ResourceExhaustedError(absl::StrCat("the image archive holds more than ", max_bytes >> 20, " MiB"));
      }
      UniqueFd fd(openat(dir.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (!fd) return absl::ErrnoToStatus(errno, absl::StrCat("create ", path));
      const void* block;
      size_t size;
      la_int64_t offset;
      for (;;) {
        rc = archive_read_data_block(a, &block, &size, &offset);
        if (rc == ARCHIVE_EOF) break;
        if (rc < ARCHIVE_WARN) return absl::InvalidArgumentError(absl::StrCat("the archive's ", path, " is damaged"));
        const char* data = static_cast<const char*>(block);
        while (size > 0) {
          ssize_t n = pwrite(fd.get(), data, size, offset);
          if (n < 0 && errno == EINTR) continue;
          if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("write ", path));
          data += n;
          size -= static_cast<size_t>(n);
          offset += n;
        }
      }
      if (ftruncate(fd.get(), archive_entry_size(entry)) != 0) return absl::ErrnoToStatus(errno, "truncate");
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "the image archive's ", path, " is neither a file nor a directory: not an image archive"));
    }
  }
  if (progress) progress(reader.read_bytes);
  return absl::OkStatus();
}

}  // namespace warden::images
