#include "sandbox/program.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "sandbox/seccomp_policy.h"

namespace warden {

pid_t PidOfPidfd(int pidfd) {
  std::ifstream in(absl::StrCat("/proc/self/fdinfo/", pidfd));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Pid:", 0) == 0) return static_cast<pid_t>(atoi(line.c_str() + 4));
  }
  return -1;
}

bool Program::ProgramGone() const {
  struct pollfd p = {program_pidfd_.get(), POLLIN, 0};
  return poll(&p, 1, 0) == 1;  // a pidfd turns readable when the process exits
}

int Program::PollUntil(struct pollfd* fds, int n, absl::Time deadline) {
  for (;;) {
    // A deadline in the past still polls once; at most a minute at a time.
    const absl::Duration left = deadline - absl::Now();
    const int timeout_ms =
        left <= absl::ZeroDuration()
            ? 0
            : static_cast<int>(std::clamp<int64_t>(
                  absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))), 1, 60'000));
    const int rc = poll(fds, n, timeout_ms);
    if (rc > 0) return rc;
    if (rc < 0 && errno != EINTR) {
      setup_error_ = absl::StrCat("poll: ", strerror(errno));
      return -1;
    }
    if (rc == 0 && absl::Now() >= deadline) return 0;
  }
}

absl::Status Program::Signal(int sig) {
  if (ended() || program_pid_ <= 0) {
    return absl::FailedPreconditionError("the sandboxed program is not running");
  }
  // The program called setsid(), so its pid is its process group's id; the
  // pidfd pins the pid, so the group cannot be a recycled one while the
  // leader lives.
  if (ProgramGone()) return absl::FailedPreconditionError("the program has exited");
  if (kill(-program_pid_, sig) != 0) return absl::ErrnoToStatus(errno, "kill program group");
  return absl::OkStatus();
}

void Program::HandleViolation() {
  struct seccomp_notif_sizes sizes = {};
  if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) != 0) return;
  std::string buf(std::max<size_t>(sizes.seccomp_notif, sizeof(seccomp_notif)), '\0');
  auto* notif = reinterpret_cast<struct seccomp_notif*>(buf.data());
  if (ioctl(listener_.get(), SECCOMP_IOCTL_NOTIF_RECV, notif) != 0) return;
  // The offending thread stays blocked until the sandbox is killed.
  if (!violation_) violation_ = SyscallName(notif->data.nr, notif->data.arch);
}

}  // namespace warden
