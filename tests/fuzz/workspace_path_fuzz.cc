// Workspace paths from requests (files, uploads, E2B and MCP file tools).
// A path ValidateWorkspacePath accepts is relative, has no "..", and,
// opened with OpenBeneath in a workspace holding links that point out of
// it, never resolves outside the workspace.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "kernel/workspace.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

struct Workspace {
  std::string path;
  int fd = -1;
};

const Workspace& TheWorkspace() {
  static const Workspace* workspace = [] {
    auto* w = new Workspace;
    char dir[] = "/tmp/warden-fuzz-workspace-XXXXXX";
    FUZZ_CHECK(mkdtemp(dir) != nullptr);
    w->path = dir;
    const std::string p = w->path;
    FUZZ_CHECK(mkdir((p + "/a").c_str(), 0755) == 0);
    FUZZ_CHECK(close(open((p + "/a/f").c_str(), O_CREAT | O_WRONLY, 0644)) == 0);
    FUZZ_CHECK(symlink("/etc", (p + "/out").c_str()) == 0);
    FUZZ_CHECK(symlink("../..", (p + "/a/up").c_str()) == 0);
    w->fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    FUZZ_CHECK(w->fd >= 0);
    return w;
  }();
  return *workspace;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path(reinterpret_cast<const char*>(data), size);
  const bool allow_root = size > 0 && (data[0] & 1);
  if (!warden::ValidateWorkspacePath(path, allow_root).ok()) return 0;
  FUZZ_CHECK(path.empty() || path.front() != '/');
  FUZZ_CHECK(path.find('\0') == std::string::npos);
  const Workspace& w = TheWorkspace();
  auto fd = warden::OpenBeneath(w.fd, path, O_PATH | O_CLOEXEC);
  if (!fd.ok()) return 0;
  char target[4096];
  const std::string link = "/proc/self/fd/" + std::to_string(fd->get());
  const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
  FUZZ_CHECK(n > 0);
  const std::string resolved(target, n);
  FUZZ_CHECK(resolved == w.path || resolved.rfind(w.path + "/", 0) == 0);
  return 0;
}
