// Warden's Java kernel: a live JShell driven over the kernel protocol
// (docs/kernel-protocol.md). Started inside the sandbox as
//   /bin/sh -c 'exec java ... WardenKernel.java 0<&3'
// so the channel (a stream socket) is also the JVM's inherited channel:
// Java cannot open a socket it is handed as a bare fd number, but it takes
// fd 0 as System.inheritedChannel(). System.in is then an empty stream.
//
// Responsible for: reading `execute <id> <nbytes>\n<code>` frames, running
// each cell in one persistent JShell (the "local" execution engine: snippets
// run in this JVM, so their System.out and System.err are fds 1 and 2), and
// answering `<nbytes>\n<json>` frames (ready, execute_result, error, done).
//
// A cell is split into snippets as jshell splits what is typed
// (SourceCodeAnalysis.analyzeCompletion); each is evaluated in order, and the
// first that fails ends the cell. Declarations (classes, methods, variables,
// imports) persist across cells, as in jshell, and show nothing. The value
// of the cell's last snippet, if it is an expression and not void, is the
// result: text/plain is jshell's rendering of it ("abc" for a String, 3 for
// an int).
//
// Errors: a snippet that does not compile gives ename "CompilationError"
// and jshell's diagnostics; an exception gives its simple class name
// (ArithmeticException), its message, and the stack trace without the
// kernel's frames. Interrupts (SIGINT to the process group) stop the
// running snippet (JShell.stop) -> ename "Interrupted", status interrupted;
// SIGINT between cells is ignored.
//
// Environment variables are also system properties (System.getProperty),
// as in E2B's Java kernel, unless a property of that name exists. A cell's
// own variables (an `env <id> <nbytes>` frame before its `execute`, entries
// `<length>:<KEY=value>`) are system properties while it runs, and the
// previous values come back after it (the JVM's environment cannot change).

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.channels.Channel;
import java.nio.channels.Channels;
import java.nio.channels.ReadableByteChannel;
import java.nio.channels.WritableByteChannel;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import jdk.jshell.Diag;
import jdk.jshell.EvalException;
import jdk.jshell.JShell;
import jdk.jshell.Snippet;
import jdk.jshell.SnippetEvent;
import jdk.jshell.SourceCodeAnalysis;
import jdk.jshell.UnresolvedReferenceException;
import jdk.jshell.VarSnippet;

public class WardenKernel {
  static final int MAX_HEADER = 128;
  static final int MAX_TEXT = 8 << 20;

  private final InputStream in;
  private final OutputStream out;
  private final JShell shell;
  private volatile boolean running = false;
  private volatile boolean interrupted = false;
  private int count = 0;
  private Map<String, String> cellEnv = null;  // the last env frame, for the execute of cellEnvId
  private long cellEnvId = -1;

  WardenKernel(InputStream in, OutputStream out) {
    this.in = in;
    this.out = out;
    this.shell = JShell.builder().executionEngine("local").build();
  }

  public static void main(String[] args) throws Exception {
    Channel inherited = System.inheritedChannel();
    if (!(inherited instanceof ReadableByteChannel) || !(inherited instanceof WritableByteChannel)) {
      System.err.println("warden java kernel: fd 0 is not the channel (start it with 0<&3)");
      System.exit(2);
    }
    System.setIn(new ByteArrayInputStream(new byte[0]));
    LineOutputStream stdout = new LineOutputStream(new FileOutputStream(FileDescriptor.out));
    LineOutputStream stderr = new LineOutputStream(new FileOutputStream(FileDescriptor.err));
    stdout.other = stderr;
    stderr.other = stdout;
    System.setOut(new PrintStream(stdout, false, StandardCharsets.UTF_8));
    System.setErr(new PrintStream(stderr, false, StandardCharsets.UTF_8));
    LineOutputStream.startFlusher();
    for (Map.Entry<String, String> e : System.getenv().entrySet()) {
      if (System.getProperty(e.getKey()) == null) System.setProperty(e.getKey(), e.getValue());
    }
    WardenKernel kernel = new WardenKernel(Channels.newInputStream((ReadableByteChannel) inherited),
                                           Channels.newOutputStream((WritableByteChannel) inherited));
    kernel.installInterruptHandler();
    kernel.warmUp();
    kernel.send("{\"type\":\"ready\",\"language\":\"java\",\"version\":" + quote(Runtime.version().toString()) + "}");
    System.exit(kernel.serve());
  }

  // stdout and stderr streamed as Jupyter's kernels stream them, a line at
  // a time: each line goes out with its newline in one write(2), so a
  // reader of the pipe never gets a line in two pieces (System.out, a
  // PrintStream, writes println's text and its newline apart, and JShell
  // flushes it after every snippet). What follows the last newline waits
  // for the next one, the other stream's next line (which keeps the two in
  // the order they were written), the cell's end (FlushAll), or
  // PARTIAL_AFTER_MS (a progress line without a newline, a long snippet).
  static final class LineOutputStream extends OutputStream {
    static final Object LOCK = new Object();  // both streams'
    static final int MAX_PENDING = 64 << 10;  // a line longer than this goes out in pieces
    static final long PARTIAL_AFTER_MS = 100;
    static final List<LineOutputStream> ALL = new ArrayList<>();

    private final FileOutputStream fd;
    private final ByteArrayOutputStream pending = new ByteArrayOutputStream();
    private long pendingSince = 0;  // System.nanoTime() of the oldest byte pending
    LineOutputStream other;

    LineOutputStream(FileOutputStream fd) {
      this.fd = fd;
      synchronized (LOCK) {
        ALL.add(this);
      }
    }

    @Override
    public void write(int b) throws IOException {
      write(new byte[] {(byte) b}, 0, 1);
    }

    @Override
    public void write(byte[] b, int off, int len) throws IOException {
      synchronized (LOCK) {
        if (pending.size() == 0) pendingSince = System.nanoTime();
        int last = off + len - 1;
        while (last >= off && b[last] != '\n') last--;
        if (last < off) {
          pending.write(b, off, len);
          if (pending.size() > MAX_PENDING) flushLocked();
          return;
        }
        if (other != null) other.flushLocked();
        pending.write(b, off, last + 1 - off);
        flushLocked();
        pending.write(b, last + 1, off + len - last - 1);
        pendingSince = System.nanoTime();
      }
    }

    // A partial line stays: JShell flushes after every snippet.
    @Override
    public void flush() {}

    void flushLocked() throws IOException {
      if (pending.size() == 0) return;
      pending.writeTo(fd);  // one write(2): FileOutputStream writes the whole array
      pending.reset();
    }

    // Everything pending (the cell's end).
    static void flushAll() throws IOException {
      synchronized (LOCK) {
        for (LineOutputStream s : ALL) s.flushLocked();
      }
    }

    // Partial lines that have waited PARTIAL_AFTER_MS, checked in the background.
    static void startFlusher() {
      Thread flusher = new Thread(() -> {
        for (;;) {
          try {
            Thread.sleep(PARTIAL_AFTER_MS / 2);
            synchronized (LOCK) {
              final long now = System.nanoTime();
              for (LineOutputStream s : ALL) {
                if (s.pending.size() > 0 && now - s.pendingSince >= PARTIAL_AFTER_MS * 1_000_000L) s.flushLocked();
              }
            }
          } catch (InterruptedException | IOException e) {
            return;
          }
        }
      }, "warden-output-flusher");
      flusher.setDaemon(true);
      flusher.start();
    }
  }

  @SuppressWarnings("removal")
  void installInterruptHandler() {
    sun.misc.Signal.handle(new sun.misc.Signal("INT"), signal -> {
      if (running) {
        interrupted = true;
        shell.stop();
      }
    });
  }

  // The first evaluation loads and starts the compiler (about a second):
  // done before ready, not in the user's first cell.
  void warmUp() {
    shell.eval("int $warden_warm = 1;");
    shell.snippets().filter(s -> s.source().contains("$warden_warm")).collect(Collectors.toList())
        .forEach(shell::drop);
  }

  int serve() throws IOException {
    for (;;) {
      String header = readLine();
      if (header == null) return 0;
      String[] parts = header.split(" ");
      if (parts.length != 3 || !parts[1].matches("\\d+") || !parts[2].matches("\\d+")) {
        System.err.println("warden java kernel: bad header: " + header);
        return 2;
      }
      long id = Long.parseLong(parts[1]);
      byte[] body = in.readNBytes(Integer.parseInt(parts[2]));
      if (body.length != Integer.parseInt(parts[2])) {
        System.err.println("warden java kernel: channel closed inside a frame");
        return 2;
      }
      if (parts[0].equals("env")) {
        cellEnvId = id;
        cellEnv = parseEnv(body);
      } else if (parts[0].equals("execute")) {
        Map<String, String> env = cellEnv != null && cellEnvId == id ? cellEnv : Map.of();
        cellEnv = null;
        Map<String, String> saved = new HashMap<>();
        for (Map.Entry<String, String> e : env.entrySet()) {
          saved.put(e.getKey(), System.getProperty(e.getKey()));
          System.setProperty(e.getKey(), e.getValue());
        }
        try {
          runCell(id, new String(body, StandardCharsets.UTF_8));
        } finally {
          for (Map.Entry<String, String> e : saved.entrySet()) {
            if (e.getValue() == null) {
              System.clearProperty(e.getKey());
            } else {
              System.setProperty(e.getKey(), e.getValue());
            }
          }
        }
      } else {
        String kind = parts[0].equals("snapshot") ? "snapshot" : "restored";
        send("{\"type\":\"" + kind + "\",\"id\":" + id + ",\"execution_count\":" + count
             + ",\"error\":\"the Java kernel cannot snapshot its state\"}");
      }
    }
  }

  // An env frame's body: `<length>:<KEY=value>` entries, lengths in bytes.
  static Map<String, String> parseEnv(byte[] body) throws IOException {
    Map<String, String> env = new HashMap<>();
    int i = 0;
    while (i < body.length) {
      int colon = i;
      while (colon < body.length && body[colon] != ':') colon++;
      int n;
      try {
        n = Integer.parseInt(new String(body, i, colon - i, StandardCharsets.US_ASCII));
      } catch (NumberFormatException e) {
        throw new IOException("bad env frame");
      }
      if (colon >= body.length || n < 0 || colon + 1 + n > body.length) throw new IOException("bad env frame");
      String entry = new String(body, colon + 1, n, StandardCharsets.UTF_8);
      int eq = entry.indexOf('=');
      if (eq > 0) env.put(entry.substring(0, eq), entry.substring(eq + 1));
      i = colon + 1 + n;
    }
    return env;
  }

  String readLine() throws IOException {
    ByteArrayOutputStream line = new ByteArrayOutputStream();
    for (;;) {
      int b = in.read();
      if (b < 0) return line.size() == 0 ? null : line.toString(StandardCharsets.US_ASCII);
      if (b == '\n') return line.toString(StandardCharsets.US_ASCII);
      if (line.size() >= MAX_HEADER) throw new IOException("header too long");
      line.write(b);
    }
  }

  void runCell(long id, String code) throws IOException {
    int cell = ++count;
    String status = "ok";
    String result = null;
    String error = null;
    SourceCodeAnalysis analysis = shell.sourceCodeAnalysis();
    String remaining = code;
    interrupted = false;
    running = true;
    try {
      while (error == null && !remaining.isBlank()) {
        SourceCodeAnalysis.CompletionInfo info = analysis.analyzeCompletion(remaining);
        String source;
        if (info.completeness() == SourceCodeAnalysis.Completeness.EMPTY) break;
        if (info.completeness().isComplete()) {
          source = info.source();
          remaining = info.remaining();
        } else {
          source = remaining;  // incomplete: let the compiler say what is wrong
          remaining = "";
        }
        result = null;
        for (SnippetEvent event : shell.eval(source)) {
          if (event.causeSnippet() != null) continue;  // an update of an earlier snippet
          if (interrupted) {
            error = errorFrame(id, "Interrupted", "the cell was interrupted", List.of("Interrupted"));
            status = "interrupted";
            break;
          }
          if (event.status() == Snippet.Status.REJECTED) {
            error = compileError(id, event.snippet());
            status = "error";
            break;
          }
          if (event.exception() != null) {
            error = exceptionError(id, event.exception());
            status = "error";
            break;
          }
          result = valueOf(event);
        }
      }
    } catch (RuntimeException e) {
      error = errorFrame(id, e.getClass().getSimpleName(), String.valueOf(e.getMessage()), List.of(e.toString()));
      status = "error";
    } finally {
      running = false;
    }
    System.out.flush();
    System.err.flush();
    LineOutputStream.flushAll();
    if (error != null) {
      send(error);
    } else if (result != null) {
      send("{\"type\":\"execute_result\",\"id\":" + id + ",\"execution_count\":" + cell
           + ",\"data\":{\"text/plain\":" + quote(cap(result)) + "}}");
    }
    send("{\"type\":\"done\",\"id\":" + id + ",\"execution_count\":" + cell + ",\"status\":\"" + status + "\"}");
  }

  // What the cell shows for one evaluated snippet: an expression's value
  // (not void), or nothing.
  static String valueOf(SnippetEvent event) {
    Snippet snippet = event.snippet();
    if (event.value() == null) return null;
    switch (snippet.subKind()) {
      case TEMP_VAR_EXPRESSION_SUBKIND:
      case VAR_VALUE_SUBKIND:
      case ASSIGNMENT_SUBKIND:
      case OTHER_EXPRESSION_SUBKIND:
        return event.value();
      default:
        return null;
    }
  }

  String compileError(long id, Snippet snippet) {
    List<String> lines = new ArrayList<>();
    String first = null;
    for (Diag diag : shell.diagnostics(snippet).collect(Collectors.toList())) {
      if (!diag.isError()) continue;
      String message = diag.getMessage(null);
      if (first == null) first = message;
      lines.add("|  Error:");
      for (String m : message.split("\n")) lines.add("|  " + m);
      String[] source = snippet.source().split("\n", -1);
      long line = lineOf(snippet.source(), diag.getStartPosition());
      if (line < source.length) lines.add("|  " + source[(int) line]);
    }
    if (first == null) first = "the snippet was rejected: " + snippet.source().strip();
    return errorFrame(id, "CompilationError", first, lines);
  }

  static long lineOf(String source, long position) {
    long line = 0;
    for (int i = 0; i < Math.min(position, source.length()); i++) {
      if (source.charAt(i) == '\n') line++;
    }
    return line;
  }

  String exceptionError(long id, Exception e) {
    String name;
    String message;
    if (e instanceof EvalException) {
      String cls = ((EvalException) e).getExceptionClassName();
      name = cls.substring(cls.lastIndexOf('.') + 1);
      message = e.getMessage() == null ? "" : e.getMessage();
    } else if (e instanceof UnresolvedReferenceException) {
      name = "UnresolvedReferenceException";
      message = "unresolved reference in " + ((UnresolvedReferenceException) e).getSnippet().source().strip();
    } else {
      name = e.getClass().getSimpleName();
      message = String.valueOf(e.getMessage());
    }
    List<String> lines = new ArrayList<>();
    String head = e instanceof EvalException ? ((EvalException) e).getExceptionClassName() : e.getClass().getName();
    lines.add(message.isEmpty() ? head : head + ": " + message);
    for (StackTraceElement frame : e.getStackTrace()) {
      if (frame.getClassName().startsWith("jdk.jshell.") || frame.getClassName().startsWith("jdk.internal.")
          || frame.getClassName().startsWith("java.lang.reflect.") || frame.getClassName().equals("WardenKernel")) {
        continue;
      }
      lines.add("\tat " + frame);
    }
    return errorFrame(id, name, message, lines);
  }

  static String errorFrame(long id, String name, String value, List<String> traceback) {
    StringBuilder sb = new StringBuilder("{\"type\":\"error\",\"id\":").append(id)
        .append(",\"ename\":").append(quote(name)).append(",\"evalue\":").append(quote(cap(value)))
        .append(",\"traceback\":[");
    for (int i = 0; i < traceback.size(); i++) {
      if (i > 0) sb.append(',');
      sb.append(quote(cap(traceback.get(i))));
    }
    return sb.append("]}").toString();
  }

  static String cap(String text) {
    if (text.length() <= MAX_TEXT) return text;
    return text.substring(0, MAX_TEXT) + "\n[... " + (text.length() - MAX_TEXT) + " characters cut by Warden]";
  }

  synchronized void send(String json) throws IOException {
    byte[] body = json.getBytes(StandardCharsets.UTF_8);
    out.write((body.length + "\n").getBytes(StandardCharsets.US_ASCII));
    out.write(body);
    out.flush();
  }

  static String quote(String s) {
    StringBuilder sb = new StringBuilder(s.length() + 2).append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"': sb.append("\\\""); break;
        case '\\': sb.append("\\\\"); break;
        case '\n': sb.append("\\n"); break;
        case '\r': sb.append("\\r"); break;
        case '\t': sb.append("\\t"); break;
        default:
          if (c < 0x20 || Character.isSurrogate(c) && !validSurrogate(s, i)) {
            sb.append(String.format("\\u%04x", c < 0x20 ? (int) c : 0xfffd));
          } else {
            sb.append(c);
          }
      }
    }
    return sb.append('"').toString();
  }

  // A lone surrogate has no UTF-8 form: it is sent as U+FFFD.
  static boolean validSurrogate(String s, int i) {
    char c = s.charAt(i);
    if (Character.isHighSurrogate(c)) return i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1));
    return i > 0 && Character.isHighSurrogate(s.charAt(i - 1));
  }
}
