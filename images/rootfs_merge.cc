#include "images/rootfs_merge.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "images/fs_util.h"
#include "sandbox/unique_fd.h"

namespace warden::images {
namespace {

struct DirTimes {
  std::string path;
  struct timespec times[2];
};

class Merger {
 public:
  Merger(int dest, bool set_owners, std::map<std::string, std::string>* left_out)
      : dest_(dest), set_owners_(set_owners), left_out_(left_out) {}

  absl::Status Layer(const UnpackedLayer& layer) {
    implicit_ = std::unordered_set<std::string>(layer.meta.implicit_dirs.begin(), layer.meta.implicit_dirs.end());
    for (const std::string& path : layer.meta.whiteouts) Remove(path, /*contents_only=*/false);
    for (const std::string& path : layer.meta.opaque_dirs) Remove(path, /*contents_only=*/true);
    UniqueFd tree(open(layer.tree.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!tree) return absl::ErrnoToStatus(errno, absl::StrCat("open ", layer.tree));
    UniqueFd dest(fcntl(dest_, F_DUPFD_CLOEXEC, 3));
    RETURN_IF_ERROR(Walk(tree.get(), dest.get(), "", 0));
    for (const auto& [name, target] : layer.meta.links) Link(name, target);
    return absl::OkStatus();
  }

  void Finish() {
    for (auto it = dir_times_.rbegin(); it != dir_times_.rend(); ++it) {
      UniqueFd fd(it->path.empty() ? fcntl(dest_, F_DUPFD_CLOEXEC, 3)
                                   : OpenAt2(dest_, it->path.c_str(), O_PATH | O_DIRECTORY, 0, Resolve::kBeneath));
      if (fd) utimensat(fd.get(), "", it->times, AT_EMPTY_PATH);
    }
  }

 private:
  // The parent of `path` in the root, never through a symlink; -1 if none.
  UniqueFd ParentIn(const std::string& path, std::string* name) {
    const size_t slash = path.rfind('/');
    *name = slash == std::string::npos ? path : path.substr(slash + 1);
    if (slash == std::string::npos) return UniqueFd(fcntl(dest_, F_DUPFD_CLOEXEC, 3));
    return UniqueFd(OpenAt2(dest_, path.substr(0, slash).c_str(), O_PATH | O_DIRECTORY, 0, Resolve::kBeneath));
  }

  void Remove(const std::string& path, bool contents_only) {
    if (path.empty()) {
      if (contents_only) EmptyDirectory(dest_);
      return;
    }
    std::string name;
    UniqueFd parent = ParentIn(path, &name);
    if (!parent) return;  // nothing below to hide there
    if (!contents_only) {
      UniqueFd dir(openat(parent.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (dir) RemoveTreeAt(dir.get(), name.c_str()).IgnoreError();
      return;
    }
    UniqueFd dir(OpenAt2(dest_, path.c_str(), O_RDONLY | O_DIRECTORY, 0, Resolve::kBeneath));
    if (dir) EmptyDirectory(dir.get());
  }

  static void EmptyDirectory(int dir) {
    UniqueFd scan(openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    DIR* d = fdopendir(scan.Release());
    if (d == nullptr) return;
    std::vector<std::string> names;
    while (struct dirent* e = readdir(d)) {
      if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
    }
    closedir(d);
    for (const std::string& n : names) RemoveTreeAt(dir, n.c_str()).IgnoreError();
  }

  void Link(const std::string& name_path, const std::string& target) {
    std::string target_name, name;
    UniqueFd tdir = ParentIn(target, &target_name);
    UniqueFd dir = ParentIn(name_path, &name);
    struct stat st;
    if (!tdir || !dir || fstatat(tdir.get(), target_name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || S_ISDIR(st.st_mode)) {
      (*left_out_)[name_path] = absl::StrCat("a hard link to ", target, ", which no layer below holds");
      return;
    }
    UniqueFd writable(openat(dir.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!writable) return;
    RemoveTreeAt(writable.get(), name.c_str()).IgnoreError();
    if (linkat(tdir.get(), target_name.c_str(), writable.get(), name.c_str(), 0) != 0) {
      (*left_out_)[name_path] = absl::StrCat("a hard link to ", target, " that could not be made: ", strerror(errno));
    }
  }

  absl::Status Walk(int from, int to, const std::string& rel, int depth) {
    if (depth > 1024) return absl::InvalidArgumentError("the image's tree is deeper than 1024 levels");
    UniqueFd scan(openat(from, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    DIR* d = fdopendir(scan.Release());
    if (d == nullptr) return absl::ErrnoToStatus(errno, absl::StrCat("read /", rel));
    std::vector<std::pair<std::string, unsigned char>> entries;
    while (struct dirent* e = readdir(d)) {
      if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) entries.emplace_back(e->d_name, e->d_type);
    }
    closedir(d);
    for (const auto& [name, type] : entries) {
      const std::string path = rel.empty() ? name : absl::StrCat(rel, "/", name);
      struct stat st;
      if (fstatat(from, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        return absl::ErrnoToStatus(errno, absl::StrCat("stat /", path));
      }
      if (S_ISDIR(st.st_mode)) {
        RETURN_IF_ERROR(Directory(from, to, name, path, st, depth));
        continue;
      }
      if (linkat(from, name.c_str(), to, name.c_str(), 0) != 0) {
        if (errno != EEXIST) return absl::ErrnoToStatus(errno, absl::StrCat("link /", path));
        RETURN_IF_ERROR(RemoveTreeAt(to, name.c_str()));
        if (linkat(from, name.c_str(), to, name.c_str(), 0) != 0) {
          return absl::ErrnoToStatus(errno, absl::StrCat("link /", path));
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status Directory(int from, int to, const std::string& name, const std::string& path, const struct stat& st,
                         int depth) {
    const bool implicit = implicit_.count(path) > 0;
    if (mkdirat(to, name.c_str(), 0755) != 0) {
      if (errno != EEXIST) return absl::ErrnoToStatus(errno, absl::StrCat("mkdir /", path));
      struct stat existing;
      if (fstatat(to, name.c_str(), &existing, AT_SYMLINK_NOFOLLOW) != 0) {
        return absl::ErrnoToStatus(errno, absl::StrCat("stat /", path));
      }
      if (!S_ISDIR(existing.st_mode)) {
        // A directory over a file or symlink of a layer below replaces it.
        RETURN_IF_ERROR(RemoveTreeAt(to, name.c_str()));
        if (mkdirat(to, name.c_str(), 0755) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("mkdir /", path));
      }
    }
    UniqueFd sub_to(openat(to, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    UniqueFd sub_from(openat(from, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!sub_to || !sub_from) return absl::ErrnoToStatus(errno, absl::StrCat("open /", path));
    if (!implicit) {
      if (set_owners_) fchown(sub_to.get(), st.st_uid, st.st_gid);
      fchmod(sub_to.get(), st.st_mode & 07777);
      DirTimes t;
      t.path = path;
      t.times[0] = st.st_atim;
      t.times[1] = st.st_mtim;
      dir_times_.push_back(std::move(t));
    }
    return Walk(sub_from.get(), sub_to.get(), path, depth + 1);
  }

  int dest_;
  bool set_owners_;
  std::map<std::string, std::string>* left_out_;
  std::unordered_set<std::string> implicit_;
  std::vector<DirTimes> dir_times_;
};

}  // namespace

absl::Status MergeLayers(const std::vector<UnpackedLayer>& layers, int dest_fd, bool set_owners,
                         std::map<std::string, std::string>* left_out) {
  Merger merger(dest_fd, set_owners, left_out);
  for (const UnpackedLayer& layer : layers) RETURN_IF_ERROR(merger.Layer(layer));
  merger.Finish();
  return absl::OkStatus();
}

absl::Status AddMountPoints(int root_fd, const std::vector<std::string>& dirs, const std::vector<std::string>& files) {
  auto parent_of = [root_fd](const std::string& path, std::string* name) {
    const size_t slash = path.rfind('/');
    *name = slash == std::string::npos ? path : path.substr(slash + 1);
    if (slash == std::string::npos) return UniqueFd(fcntl(root_fd, F_DUPFD_CLOEXEC, 3));
    return UniqueFd(OpenAt2(root_fd, path.substr(0, slash).c_str(), O_RDONLY | O_DIRECTORY, 0, Resolve::kBeneath));
  };
  for (const std::string& dir : dirs) {
    // Component by component: each missing one is made.
    size_t pos = 0;
    while (pos <= dir.size()) {
      size_t next = dir.find('/', pos);
      if (next == std::string::npos) next = dir.size();
      std::string name;
      UniqueFd parent = parent_of(dir.substr(0, next), &name);
      if (!parent) break;
      struct stat st;
      if (fstatat(parent.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (mkdirat(parent.get(), name.c_str(), 0755) != 0) break;
      } else if (!S_ISDIR(st.st_mode)) {
        break;
      }
      pos = next + 1;
    }
  }
  for (const std::string& file : files) {
    std::string name;
    UniqueFd parent = parent_of(file, &name);
    if (!parent) continue;
    struct stat st;
    if (fstatat(parent.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) continue;
    RemoveTreeAt(parent.get(), name.c_str()).IgnoreError();
    UniqueFd fd(openat(parent.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!fd) return absl::ErrnoToStatus(errno, absl::StrCat("create /", file));
  }
  return absl::OkStatus();
}

}  // namespace warden::images
