"""Warden's R kernel: a live R (Debian's r-base-core, embedded through
Debian's python3-rpy2) driven over the kernel protocol
(docs/kernel-protocol.md).

The channel, its frames and the stdio streams are the Python kernel's
(warden_kernel.py, beside this file); R runs in this process, its global
environment persisting across cells. A cell is parsed whole (a syntax error
runs nothing), then its top-level expressions are evaluated in order, as
Rscript would: a visible value is printed, and the last expression's visible
value is the cell's result instead (text/plain is what print() shows, e.g.
`[1] "abc"`, as in E2B's R kernel). R's console (print, cat, message,
warnings) goes to fds 1 and 2 a line at a time (LineStream); a warning is
printed when it happens. Plots
go to a PNG device; every page a cell draws is sent as display_data
(image/png) when the cell ends.

Errors: the first R error ends the cell, ename its condition class
(simpleError, ...), evalue its message, traceback the call it came from.
Interrupts (SIGINT to the process group) raise R's interrupt at its next
check (rpy2 passes R's event processing through Python, where the signal
is handled): ename "Interrupted", status interrupted; SIGINT between cells
is ignored.
"""

import base64
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import warden_kernel as base  # noqa: E402  (the channel and stdio)
del sys.path[0]

# The R side of a cell. .warden_cell returns list(result, error, plots):
# the last visible value as print() shows it (or NULL), the error as
# c(class, message, call) (or NULL), and the PNG files the cell drew.
R_SETUP = r"""
local({
  plots <- file.path(tempdir(), "warden-plot-%03d.png")
  options(device = function(...) grDevices::png(filename = plots, type = "cairo", ...),
          menu.graphics = FALSE)
})
.warden_cell <- function(code) {
  result <- NULL
  error <- NULL
  # The call a condition came from, "" for the cell's own top level.
  where <- function(cond) {
    call <- conditionCall(cond)
    if (is.null(call)) return("")
    text <- paste(deparse(call), collapse = "\n")
    if (startsWith(text, "eval(exprs[[i]]") || startsWith(text, "parse(text = code")) "" else text
  }
  tryCatch(withCallingHandlers({
    exprs <- parse(text = code, keep.source = FALSE)
    n <- length(exprs)
    for (i in seq_len(n)) {
      r <- withVisible(eval(exprs[[i]], envir = .GlobalEnv))
      if (r$visible) {
        if (i == n) {
          result <- paste(utils::capture.output(print(r$value)), collapse = "\n")
        } else {
          print(r$value)
        }
      }
    }
  }, warning = function(w) {
    call <- where(w)
    message(if (nzchar(call)) paste0("Warning in ", call, " : ") else "Warning: ", conditionMessage(w))
    invokeRestart("muffleWarning")
  }), error = function(e) {
    error <<- c(class(e)[1], conditionMessage(e), where(e))
  }, interrupt = function(e) {
    error <<- c("Interrupted", "the cell was interrupted", "")
  })
  plots <- character(0)
  while (grDevices::dev.cur() > 1) grDevices::dev.off()
  files <- list.files(tempdir(), pattern = "^warden-plot-[0-9]+[.]png$", full.names = TRUE)
  list(result, error, sort(files))
}
"""


class LineStream:
    """R's console text streamed as Jupyter's kernels stream it, a line at a
    time: each line goes out with its newline in one write, where R writes
    print()'s output in several pieces (`[1]`, the values, the newline), so
    a reader of the pipe would get a line in pieces. What follows the last
    newline waits for the next one, for flush() (the cell's end), for the
    other stream's next line (which keeps the two in order), or, while R
    runs on, for `PARTIAL_AFTER` to pass (checked at R's event processing)."""

    PARTIAL_AFTER = 0.1   # seconds a partial line (cat("...") and a long loop) waits at most
    MAX_PENDING = 64 << 10

    def __init__(self, stream):
        self.stream = stream
        self.pending = ""
        self.since = 0.0
        self.other = None

    def write(self, text):
        if not self.pending:
            self.since = time.monotonic()
        self.pending += text
        cut = self.pending.rfind("\n")
        if cut < 0:
            if len(self.pending) > self.MAX_PENDING:
                self.flush()
            return
        if self.other is not None:
            self.other.flush()
        line, self.pending = self.pending[:cut + 1], self.pending[cut + 1:]
        self.since = time.monotonic()
        self.stream.write(line)

    def flush(self):
        if self.pending:
            text, self.pending = self.pending, ""
            self.stream.write(text)

    def flush_if_stale(self):
        if self.pending and time.monotonic() - self.since >= self.PARTIAL_AFTER:
            self.flush()


class RKernel:
    def __init__(self, channel, ri):
        self.channel = channel
        self.ri = ri
        self.count = 0
        self.running = False
        self.interrupt_pending = False
        self.rlib = None
        self.stdout = LineStream(base.open_stdio(1))
        self.stderr = LineStream(base.open_stdio(2))
        self.stdout.other, self.stderr.other = self.stderr, self.stdout

    def on_sigint(self, signum, frame):
        # Python runs this handler when R next calls back into Python: at
        # its event processing (R_ProcessEvents, from R_CheckUserInterrupt),
        # which then raises R's own interrupt (process_events).
        if self.running:
            self.interrupt_pending = True

    def process_events(self):
        self.stdout.flush_if_stale()
        self.stderr.flush_if_stale()
        if self.interrupt_pending:
            self.interrupt_pending = False
            self.rlib.R_interrupts_pending = 1

    def run_cell(self, cell_id, code):
        self.count += 1
        status, error, result, plots = "ok", None, None, []
        self.running = True
        self.interrupt_pending = False
        try:
            answer = self.ri.globalenv.find(".warden_cell")(self.ri.StrSexpVector([code]))
            result = None if answer[0] is self.ri.NULL else answer[0][0]
            if answer[1] is not self.ri.NULL:
                error = list(answer[1])
            plots = list(answer[2]) if answer[2] is not self.ri.NULL else []
        except KeyboardInterrupt:
            error = ["Interrupted", "the cell was interrupted", ""]
        except Exception as exc:          # rpy2 itself failed
            error = [type(exc).__name__, str(exc), ""]
        finally:
            self.running = False
        self.stdout.flush()
        self.stderr.flush()
        for path in plots:
            try:
                with open(path, "rb") as f:
                    png = f.read()
                os.unlink(path)
            except OSError:
                continue
            self.channel.send({"type": "display_data", "id": cell_id,
                               "data": {"text/plain": "<R plot>", "image/png": base64.b64encode(png).decode()}})
        if error is not None:
            status = "interrupted" if error[0] == "Interrupted" else "error"
            name, message, call = error
            traceback = ["Error in %s : %s" % (call, message) if call else "Error: %s" % message]
            self.channel.send({"type": "error", "id": cell_id, "ename": name,
                               "evalue": base.cap_text(message), "traceback": traceback})
        elif result is not None:
            self.channel.send({"type": "execute_result", "id": cell_id, "execution_count": self.count,
                               "data": {"text/plain": base.cap_text(result)}})
        self.channel.send({"type": "done", "id": cell_id, "execution_count": self.count, "status": status})


def main():
    fd = int(os.environ.get("WARDEN_CHANNEL_FD", "3"))
    os.set_inheritable(fd, False)
    channel = base.Channel(fd)
    # Where Debian's R lives: rpy2 would otherwise ask `R RHOME`, a process.
    if "R_HOME" not in os.environ and os.path.isdir("/usr/lib/R"):
        os.environ["R_HOME"] = "/usr/lib/R"
    import rpy2.rinterface as ri
    from rpy2.rinterface_lib import callbacks, openrlib

    kernel = RKernel(channel, ri)
    kernel.rlib = openrlib.rlib
    callbacks.processevents = kernel.process_events
    # R's console is the cell's stdout and stderr; R never reads a console.
    callbacks.consolewrite_print = kernel.stdout.write
    callbacks.consolewrite_warnerror = kernel.stderr.write
    callbacks.showmessage = lambda text: kernel.stderr.write(text + "\n")
    callbacks.consoleread = lambda prompt: ""
    ri.initr_simple()
    ri.rternalize  # noqa: B018  (rpy2 loads lazily; fail here, not in a cell)
    signal.signal(signal.SIGINT, kernel.on_sigint)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    for expr in ri.parse(R_SETUP):
        ri.baseenv["eval"](expr, ri.globalenv)
    version = ri.baseenv["R.version.string"][0]
    channel.send({"type": "ready", "language": "r", "version": version.split(" ")[2] if " " in version else version})
    cell_env = base.CellEnvironment()  # R's Sys.getenv reads the C environment
    while True:
        try:
            request = channel.read_request()
        except base.ProtocolError as exc:
            kernel.stderr.write("warden R kernel: %s\n" % exc)
            return 2
        if request is None:
            return 0
        verb, request_id, body = request
        if cell_env.take(verb, request_id, body):
            continue
        if verb == b"execute":
            with cell_env.around(request_id):
                kernel.run_cell(request_id, body.decode("utf-8", "replace"))
        else:
            kind = "snapshot" if verb == b"snapshot" else "restored"
            channel.send({"type": kind, "id": request_id, "execution_count": kernel.count,
                          "error": "the R kernel cannot snapshot its state"})


if __name__ == "__main__":
    sys.exit(main())
