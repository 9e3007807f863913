// warden-watch: watches a directory with inotify, from inside a machine
// (sandbox/machine.h), for WatchPath (server/path_watch.h). It runs as the
// sandbox's user, under its seccomp policy, and sees exactly what that user
// can see.
//
//   warden-watch [--recursive] DIR
//
// prints "READY\n" once its watches are in place, then one record per
// change: "<TYPE> <length>\n<name>", where TYPE is CREATE, WRITE, REMOVE,
// RENAME (moved away; the new name is a CREATE) or CHMOD, and <name> (raw
// bytes, <length> of them) is the path relative to DIR. With --recursive,
// directories below DIR are watched too, new ones as they appear (watched
// before their CREATE is printed, so what is made in them next is seen, and
// what was made in them before their watch was in place is printed as
// CREATE from their listing).
// It exits 2 for bad usage, 1 when DIR cannot be watched (the reason on
// stderr), and 0 when DIR itself goes.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>

namespace {

constexpr uint32_t kMask = IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB |
                           IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK;

int inotify_fd = -1;
bool recursive = false;
std::map<int, std::string> dirs;  // watch -> its path relative to DIR ("" for DIR)
std::string root;

bool WriteAll(const std::string& out) {
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = write(1, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

void Emit(const char* type, const std::string& name) {
  if (!WriteAll(std::string(type) + " " + std::to_string(name.size()) + "\n" + name)) _exit(0);
}

std::string Join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "/" + b; }

// Names printed as CREATE from a directory's listing (Scan): a CREATE that
// inotify reports for one of them as well is the same creation, not printed
// twice. A name leaves when it is removed or moved away.
std::set<std::string> announced;

// Watches `rel` alone. Returns false if it could not be watched.
bool AddWatch(const std::string& rel) {
  const std::string path = rel.empty() ? root : root + "/" + rel;
  int wd = inotify_add_watch(inotify_fd, path.c_str(), kMask | IN_DONT_FOLLOW);
  if (wd < 0) return false;
  dirs[wd] = rel;
  return true;
}

// Watches the directories below `rel`, which is watched. With `announce`,
// `rel` has just appeared: what it holds already was made after its CREATE
// was queued and before its watch was in place, where no watch saw it, so
// each entry is printed as CREATE (a directory after its watch is in place,
// before what it holds).
void Scan(const std::string& rel, bool announce) {
  DIR* d = opendir(rel.empty() ? root.c_str() : (root + "/" + rel).c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string child = Join(rel, name);
    bool is_dir = e->d_type == DT_DIR;
    if (e->d_type == DT_UNKNOWN) {
      struct stat st;
      is_dir = lstat((root + "/" + child).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    }
    const bool watched = is_dir && AddWatch(child);
    if (announce) {
      Emit("CREATE", child);
      announced.insert(child);
    }
    if (watched) Scan(child, announce);
  }
  closedir(d);
}

}  // namespace

int main(int argc, char** argv) {
  int i = 1;
  if (i < argc && strcmp(argv[i], "--recursive") == 0) {
    recursive = true;
    ++i;
  }
  if (i + 1 != argc) {
    fprintf(stderr, "usage: warden-watch [--recursive] DIR\n");
    return 2;
  }
  root = argv[i];
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  inotify_fd = inotify_init1(IN_CLOEXEC);
  if (inotify_fd < 0) {
    fprintf(stderr, "warden-watch: inotify_init1: %s\n", strerror(errno));
    return 1;
  }
  if (!AddWatch("")) {
    fprintf(stderr, "warden-watch: %s: %s\n", root.c_str(), strerror(errno));
    return 1;
  }
  if (recursive) Scan("", /*announce=*/false);
  if (!WriteAll("READY\n")) return 0;
  alignas(struct inotify_event) char buf[65536];
  for (;;) {
    ssize_t n = read(inotify_fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 1;
    for (char* p = buf; p < buf + n;) {
      auto* ev = reinterpret_cast<struct inotify_event*>(p);
      p += sizeof(struct inotify_event) + ev->len;
      auto dir = dirs.find(ev->wd);
      if (dir == dirs.end()) continue;
      if (ev->mask & IN_IGNORED) {
        const bool top = dir->second.empty();
        dirs.erase(dir);
        if (top) return 0;  // DIR itself went
        continue;
      }
      if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) {
        if (dir->second.empty()) return 0;
        continue;  // its parent reports it
      }
      const std::string name = Join(dir->second, ev->len > 0 ? std::string(ev->name) : std::string());
      if ((ev->mask & (IN_CREATE | IN_MOVED_TO)) && announced.erase(name) == 0) {
        const bool watched = recursive && (ev->mask & IN_ISDIR) && AddWatch(name);
        Emit("CREATE", name);
        if (watched) Scan(name, /*announce=*/true);
      }
      if (ev->mask & IN_MODIFY) Emit("WRITE", name);
      if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) announced.erase(name);
      if (ev->mask & IN_DELETE) Emit("REMOVE", name);
      if (ev->mask & IN_MOVED_FROM) Emit("RENAME", name);
      if (ev->mask & IN_ATTRIB) Emit("CHMOD", name);
      if (ev->mask & IN_Q_OVERFLOW) fprintf(stderr, "warden-watch: events were lost (the queue overflowed)\n");
    }
  }
}
