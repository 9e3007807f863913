// `warden session shell ID [-- CMD ARGS...]`: an interactive terminal in a
// session's machine, as `docker exec -it` gives one. RunCommand with a
// terminal of the local window's size; the local terminal in raw mode while
// it runs, every byte typed sent as it comes (SendCommandInput), the
// window's new size sent on SIGWINCH (ResizeTerminal), the remote output
// written out as it comes. The exit status is the remote program's.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "client/commands.h"
#include "client/exit_codes.h"

namespace warden::cli {
namespace {

// The write end of the pipe SIGWINCH is reported on (async-signal-safe).
std::atomic<int> resize_pipe{-1};

void OnWindowChange(int) {
  const int saved = errno;
  const int fd = resize_pipe.load();
  if (fd >= 0) (void)!write(fd, "w", 1);
  errno = saved;
}

// The local terminal in raw mode while it lives (nothing when stdin is not
// a terminal).
class RawTerminal {
 public:
  RawTerminal() {
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    struct termios raw = saved_;
    cfmakeraw(&raw);
    active_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (active_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }

 private:
  struct termios saved_ = {};
  bool active_ = false;
};

// The local window's size, or 80x24 without a terminal.
v1::TerminalSize WindowSize() {
  struct winsize ws = {};
  v1::TerminalSize size;
  size.set_cols(80);
  size.set_rows(24);
  for (int fd : {STDOUT_FILENO, STDIN_FILENO}) {
    if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
      size.set_cols(ws.ws_col);
      size.set_rows(ws.ws_row);
      break;
    }
  }
  return size;
}

bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

int CommandRunner::operator()(const SessionShellCommand& command) {
  v1::RunCommandRequest request = command.request;
  *request.mutable_terminal() = WindowSize();
  request.set_stdin(true);
  auto context = NewCallContext(absl::Hours(24 * 7));  // as long as a terminal is open
  auto reader = stub_->RunCommand(context.get(), request);
  v1::CommandEvent event;
  if (!reader->Read(&event) || !event.has_started()) return RpcFailed(reader->Finish());
  const int32_t id = event.started();

  int wake[2], resize[2];
  if (pipe2(wake, O_CLOEXEC) != 0 || pipe2(resize, O_CLOEXEC | O_NONBLOCK) != 0) {
    return LocalFailed(absl::ErrnoToStatus(errno, "pipe"));
  }
  resize_pipe = resize[1];
  struct sigaction on_resize = {}, before = {};
  on_resize.sa_handler = OnWindowChange;
  on_resize.sa_flags = SA_RESTART;
  sigaction(SIGWINCH, &on_resize, &before);

  int exit_code = kExitOk;
  {
    RawTerminal raw;
    // Input and resizes go up on a thread of their own; output comes down here.
    std::thread input([&] {
      char buf[4096];
      bool local_open = true;
      for (;;) {
        struct pollfd fds[3] = {{wake[0], POLLIN, 0}, {resize[0], POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}};
        if (poll(fds, local_open ? 3 : 2, -1) < 0 && errno != EINTR) return;
        if (fds[0].revents) return;
        if (fds[1].revents & POLLIN) {
          while (read(resize[0], buf, sizeof(buf)) > 0) {
          }
          v1::ResizeTerminalRequest resized;
          resized.set_session_id(request.session_id());
          resized.set_command_id(id);
          *resized.mutable_size() = WindowSize();
          v1::ResizeTerminalResponse ignored;
          (void)Call(&v1::Executor::StubInterface::ResizeTerminal, resized, &ignored);
        }
        if (local_open && (fds[2].revents & (POLLIN | POLLHUP | POLLERR))) {
          const ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) {
            local_open = false;  // the remote program ends on its own (or by what was sent)
            continue;
          }
          v1::SendCommandInputRequest typed;
          typed.set_session_id(request.session_id());
          typed.set_command_id(id);
          typed.set_data(std::string(buf, static_cast<size_t>(n)));
          v1::SendCommandInputResponse sent;
          if (!Call(&v1::Executor::StubInterface::SendCommandInput, typed, &sent).ok()) return;
        }
      }
    });
    bool ended = false;
    while (reader->Read(&event)) {
      if (event.has_stdout() && !WriteAll(STDOUT_FILENO, event.stdout())) break;
      if (event.has_stderr() && !WriteAll(STDERR_FILENO, event.stderr())) break;
      if (event.has_end()) {
        ended = true;
        const v1::CommandEnd& end = event.end();
        exit_code = end.exit_code() >= 0 ? end.exit_code() : kExitSignalBase + end.signal();
      }
    }
    (void)!write(wake[1], "x", 1);
    input.join();
    grpc::Status status = reader->Finish();
    if (!ended) exit_code = status.ok() ? kExitWardenFailure : RpcFailed(status);
  }
  sigaction(SIGWINCH, &before, nullptr);
  resize_pipe = -1;
  for (int fd : {wake[0], wake[1], resize[0], resize[1]}) close(fd);
  return exit_code;
}

}  // namespace warden::cli
