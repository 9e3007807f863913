// The anchors Warden is measured against, timed from C++ the same way
// warden_bench times Warden, so that neither side pays for a slower client:
//
//   anchor_bench spawn --n N [--timeout-ms T] -- ARGV...
//       N sequential runs of ARGV (a plain `python3 -c`, or one under bwrap).
//   anchor_bench spawn-throughput --clients C --seconds S -- ARGV...
//       C concurrent loops of ARGV for S seconds: completed runs per second.
//   anchor_bench pipe-floor --n N --code CODE [--python PATH]
//       the floor for a warm cell: a persistent Python child that execs CODE
//       sent over a pipe, stdout captured and sent back.
//   anchor_bench suite --file PROGRAMS.jsonl [--clients C] [--timeout-ms T] -- ARGV...
//       one process per program (ARGV + [code]), judged like Warden's runs.
//
// Each prints one JSON object on stdout. Figures only; nothing is asserted.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"

extern char** environ;

namespace warden::bench {
namespace {

int Spawn(const Flags& flags) {
  const int n = flags.Int("n", 50);
  const int64_t timeout_ms = flags.Int("timeout-ms", 10000);
  std::vector<double> ms;
  int failures = 0;
  std::string last_failure;
  for (int i = 0; i < n; ++i) {
    RunOutput out;
    const auto start = Clock::now();
    bool started = SpawnAndWait(flags.rest(), timeout_ms, &out);
    ms.push_back(MsSince(start));
    if (!started || !out.finished_normally) {
      ++failures;
      last_failure = out.outcome + ": " + out.stderr_text.substr(0, 300);
    }
  }
  nlohmann::json j = Summarize(ms);
  j["failures"] = failures;
  if (failures) j["last_failure"] = last_failure;
  Emit(j);
  return 0;
}

int SpawnThroughput(const Flags& flags) {
  const int clients = flags.Int("clients", 4);
  const double seconds = flags.Double("seconds", 5);
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::mutex mu;
  std::vector<double> ms;
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      std::vector<double> mine;
      while (!stop.load()) {
        RunOutput out;
        const auto t = Clock::now();
        bool started = SpawnAndWait(flags.rest(), 10000, &out);
        mine.push_back(MsSince(t));
        (started && out.finished_normally ? ok : failed)++;
      }
      std::lock_guard<std::mutex> lock(mu);
      ms.insert(ms.end(), mine.begin(), mine.end());
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  const double elapsed = MsSince(start) / 1000;
  nlohmann::json j;
  j["clients"] = clients;
  j["seconds"] = elapsed;
  j["ok"] = ok.load();
  j["failures"] = failed.load();
  j["per_second"] = ok.load() / elapsed;
  j["latency"] = Summarize(ms);
  Emit(j);
  return 0;
}

// A persistent interpreter: "<len>\n<code>" in, "<len>\n<captured stdout>"
// out, state kept across cells, like a kernel without any protocol.
constexpr char kPipeChild[] = R"(import sys, io, contextlib
r = sys.stdin.buffer
w = sys.stdout.buffer
g = {"__name__": "__main__"}
while True:
    h = r.readline()
    if not h:
        break
    src = r.read(int(h))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(src, "<cell>", "exec"), g)
    out = buf.getvalue().encode()
    w.write(b"%d\n" % len(out) + out)
    w.flush()
)";

bool ReadExactly(int fd, char* buf, size_t n) {
  while (n > 0) {
    ssize_t got = read(fd, buf, n);
    if (got <= 0) return false;
    buf += got;
    n -= got;
  }
  return true;
}

int PipeFloor(const Flags& flags) {
  const int n = flags.Int("n", 2000);
  const std::string code = flags.Str("code", "x=1");
  const std::string python = flags.Str("python", "/usr/bin/python3");
  int to_child[2], from_child[2];
  if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0) return 1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, to_child[0], 0);
  posix_spawn_file_actions_adddup2(&actions, from_child[1], 1);
  std::vector<std::string> argv = {python, "-c", kPipeChild};
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid;
  if (posix_spawn(&pid, python.c_str(), &actions, nullptr, args.data(), environ) != 0) return 1;
  posix_spawn_file_actions_destroy(&actions);
  close(to_child[0]);
  close(from_child[1]);
  const std::string request = std::to_string(code.size()) + "\n" + code;
  int failures = 0;
  auto cell = [&] {
    if (write(to_child[1], request.data(), request.size()) != static_cast<ssize_t>(request.size())) return false;
    std::string header;
    char c;
    while (ReadExactly(from_child[0], &c, 1) && c != '\n') header += c;
    if (header.empty()) return false;
    std::string body(std::stoul(header), '\0');
    return ReadExactly(from_child[0], body.data(), body.size());
  };
  for (int i = 0; i < 200; ++i) cell();  // warm-up
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    const auto start = Clock::now();
    if (!cell()) ++failures;
    ms.push_back(MsSince(start));
  }
  close(to_child[1]);
  int status;
  waitpid(pid, &status, 0);
  nlohmann::json j = Summarize(ms);
  j["failures"] = failures;
  Emit(j);
  return 0;
}

int Suite(const Flags& flags) {
  const std::vector<Program> programs = LoadPrograms(flags.Str("file", ""));
  const int clients = flags.Int("clients", 1);
  const int64_t timeout_ms = flags.Int("timeout-ms", 10000);
  Emit(RunSuite(programs, clients, [&]() -> RunProgram {
    return [&](const Program& program, RunOutput* out) {
      std::vector<std::string> argv = flags.rest();
      argv.push_back(program.code);
      if (!SpawnAndWait(argv, timeout_ms, out)) out->outcome = "spawn failed";
    };
  }));
  return 0;
}

}  // namespace
}  // namespace warden::bench

int main(int argc, char** argv) {
  using namespace warden::bench;
  signal(SIGPIPE, SIG_IGN);
  if (argc < 2) {
    fprintf(stderr, "usage: anchor_bench spawn|spawn-throughput|pipe-floor|suite [--flag value]... [-- ARGV]\n");
    return 2;
  }
  const std::string command = argv[1];
  Flags flags(argc, argv, 2);
  if (command == "spawn") return Spawn(flags);
  if (command == "spawn-throughput") return SpawnThroughput(flags);
  if (command == "pipe-floor") return PipeFloor(flags);
  if (command == "suite") return Suite(flags);
  fprintf(stderr, "unknown command '%s'\n", command.c_str());
  return 2;
}
