#include "server/path_watch.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "sandbox/machine.h"
#include "server/convert.h"
#include "server/engine.h"

#ifndef WARDEN_WATCH_PROGRAM
#define WARDEN_WATCH_PROGRAM ""
#endif

namespace warden {
namespace {

v1::WatchEvent::Type TypeOf(const std::string& word) {
  if (word == "CREATE") return v1::WatchEvent::TYPE_CREATE;
  if (word == "WRITE") return v1::WatchEvent::TYPE_WRITE;
  if (word == "REMOVE") return v1::WatchEvent::TYPE_REMOVE;
  if (word == "RENAME") return v1::WatchEvent::TYPE_RENAME;
  if (word == "CHMOD") return v1::WatchEvent::TYPE_CHMOD;
  return v1::WatchEvent::TYPE_UNSPECIFIED;
}

// Reads what is there without blocking; false at EOF or an error.
bool ReadAvailable(int fd, std::string* into) {
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      into->append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && errno == EAGAIN;
  }
}

}  // namespace

std::string HostWatchProgram() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir.resize(dir.rfind('/'));
    std::string beside = dir + "/warden-watch";
    if (access(beside.c_str(), X_OK) == 0) return beside;
  }
  const std::string built = WARDEN_WATCH_PROGRAM;
  return !built.empty() && access(built.c_str(), X_OK) == 0 ? built : std::string();
}

absl::Status WatchSessionPath(Engine& engine, const std::string& tenant, const v1::WatchPathRequest& request,
                              Cancellation& cancellation, const std::function<void(v1::WatchEvent)>& emit,
                              bool with_entries) {
  ASSIGN_OR_RETURN(Engine::WatchTarget target, engine.WatchTargetOf(tenant, request.session_id(), request.path()));
  ProcessSpec spec;
  spec.argv = {kWatchProgramInSandbox};
  if (request.recursive()) spec.argv.push_back("--recursive");
  spec.argv.push_back(target.dir);
  spec.env = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8"};
  ASSIGN_OR_RETURN(std::unique_ptr<MachineProcess> watcher, target.machine->Spawn(spec));
  watcher->CloseStdin();
  UniqueFd wake(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake) return absl::ErrnoToStatus(errno, "eventfd");
  cancellation.Attach([fd = wake.get()] {
    uint64_t one = 1;
    (void)!write(fd, &one, sizeof(one));
  });
  struct Detach {
    Cancellation& c;
    ~Detach() { c.Detach(); }
  } detach{cancellation};

  std::string out, err;
  bool ready = false;
  const absl::Time ready_by = absl::Now() + absl::Seconds(30);
  for (;;) {
    if (cancellation.cancelled()) return absl::OkStatus();
    const unsigned got = watcher->Wait(ready ? absl::InfiniteFuture() : ready_by, false, wake.get());
    if (got & Program::kStdout) ReadAvailable(watcher->stdout_fd(), &out);
    if (got & Program::kStderr) {
      std::string more;
      ReadAvailable(watcher->stderr_fd(), &more);
      if (err.size() < 4096) err += more.substr(0, 4096 - err.size());
    }
    // Whole records only: "READY\n", then "<TYPE> <length>\n<name>".
    for (;;) {
      if (!ready) {
        if (out.rfind("READY\n", 0) != 0) break;
        out.erase(0, 6);
        ready = true;
        v1::WatchEvent started;
        started.set_started(true);
        emit(std::move(started));
        continue;
      }
      const size_t newline = out.find('\n');
      if (newline == std::string::npos) break;
      const std::string head = out.substr(0, newline);
      const size_t space = head.find(' ');
      size_t length = 0;
      if (space == std::string::npos || !absl::SimpleAtoi(head.substr(space + 1), &length)) {
        return absl::InternalError(absl::StrCat("the directory watcher said something unexpected: ", head));
      }
      if (out.size() < newline + 1 + length) break;
      v1::WatchEvent event;
      event.set_type(TypeOf(head.substr(0, space)));
      event.set_name(out.substr(newline + 1, length));
      out.erase(0, newline + 1 + length);
      // The entry as it is now, named the way the caller names the directory.
      if (with_entries) {
        const std::string path =
            request.path().empty() ? event.name() : absl::StrCat(request.path(), "/", event.name());
        if (auto entry = engine.StatPath(tenant, request.session_id(), path); entry.ok()) {
          FillFileInfo(*entry, event.mutable_entry());
        }
      }
      emit(std::move(event));
    }
    if (got & Program::kExtra) return absl::OkStatus();  // the client went away
    if (got & (Program::kEnded | Program::kViolation)) {
      if (!ready) {
        return absl::FailedPreconditionError(absl::StrCat(
            "'", request.path(), "' cannot be watched: ",
            watcher->setup_error().value_or(err.empty() ? std::string("the watcher ended") : err)));
      }
      return absl::OkStatus();  // the directory went
    }
    if ((got & Program::kTimedOut) && !ready) {
      return absl::DeadlineExceededError("the directory watcher did not start within 30 s");
    }
  }
}

}  // namespace warden
