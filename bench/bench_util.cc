#include "bench/bench_util.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace warden::bench {

nlohmann::json Summarize(std::vector<double> ms) {
  nlohmann::json j;
  j["n"] = ms.size();
  if (ms.empty()) return j;
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double p) {
    // Nearest rank: the smallest sample with at least p of them at or below it.
    size_t rank = static_cast<size_t>(p * ms.size() + 0.999999);
    return ms[std::min(ms.size() - 1, rank == 0 ? 0 : rank - 1)];
  };
  j["p50_ms"] = pct(0.50);
  j["p90_ms"] = pct(0.90);
  j["p99_ms"] = pct(0.99);
  j["mean_ms"] = std::accumulate(ms.begin(), ms.end(), 0.0) / ms.size();
  j["min_ms"] = ms.front();
  j["max_ms"] = ms.back();
  return j;
}

Flags::Flags(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      rest_.assign(argv + i + 1, argv + argc);
      return;
    }
    if (arg.rfind("--", 0) != 0 || i + 1 >= argc) {
      fprintf(stderr, "bad argument '%s': flags are --name value, then -- ARGV\n", arg.c_str());
      exit(2);
    }
    values_[arg.substr(2)] = argv[++i];
  }
}

std::string Flags::Str(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

int64_t Flags::Int(const std::string& name, int64_t fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : std::stoll(it->second);
}

double Flags::Double(const std::string& name, double fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : std::stod(it->second);
}

std::vector<Program> LoadPrograms(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<Program> programs;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    Program p;
    p.id = j.at("id").get<std::string>();
    p.language = j.value("language", "python");
    p.code = j.at("code").get<std::string>();
    p.expect_pass = j.value("expect", "pass") == "pass";
    p.judge_quiet = j.value("judge", "ok") == "quiet";
    programs.push_back(std::move(p));
  }
  return programs;
}

nlohmann::json RunSuite(const std::vector<Program>& programs, int clients,
                        const std::function<RunProgram()>& make_client) {
  std::atomic<size_t> next{0};
  std::vector<RunOutput> outputs(programs.size());
  std::vector<double> ms(programs.size());
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      const RunProgram run = make_client();
      for (size_t i; (i = next++) < programs.size();) {
        const auto t = Clock::now();
        run(programs[i], &outputs[i]);
        ms[i] = MsSince(t);
      }
    });
  }
  for (auto& t : threads) t.join();
  const double total_s = MsSince(start) / 1000;

  int passed = 0, as_expected = 0;
  nlohmann::json unexpected = nlohmann::json::array();
  for (size_t i = 0; i < programs.size(); ++i) {
    const bool pass = Passed(programs[i], outputs[i]);
    passed += pass;
    if (pass == programs[i].expect_pass) {
      ++as_expected;
    } else {
      unexpected.push_back({{"id", programs[i].id},
                            {"outcome", outputs[i].outcome},
                            {"stderr", outputs[i].stderr_text.substr(0, 200)}});
    }
  }
  return {{"programs", programs.size()}, {"clients", clients},     {"total_s", total_s},
          {"passed", passed},           {"as_expected", as_expected}, {"unexpected", unexpected},
          {"latency", Summarize(ms)}};
}

bool Passed(const Program& program, const RunOutput& out) {
  if (program.judge_quiet) return !out.timed_out && out.stdout_text.empty() && out.stderr_text.empty();
  return out.finished_normally;
}

bool SpawnAndWait(const std::vector<std::string>& argv, int64_t timeout_ms, RunOutput* out) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return false;
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return false;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    return false;
  }
  const auto start = Clock::now();
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&out->stdout_text, &out->stderr_text};
  int open_fds = 2;
  bool killed = false;
  char buf[65536];
  while (open_fds > 0) {
    int wait = killed ? -1 : std::max<int64_t>(0, timeout_ms - static_cast<int64_t>(MsSince(start)));
    int n = poll(fds, 2, wait);
    if (n == 0 && !killed) {
      kill(pid, SIGKILL);
      killed = true;
      continue;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        sinks[i]->append(buf, got);
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  out->finished_normally = !killed && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  out->timed_out = killed;
  if (killed) {
    out->outcome = "TIMEOUT";
  } else if (WIFEXITED(status)) {
    out->outcome = WEXITSTATUS(status) == 0 ? "OK" : "exit " + std::to_string(WEXITSTATUS(status));
  } else {
    out->outcome = "signal " + std::to_string(WTERMSIG(status));
  }
  return true;
}

void Emit(const nlohmann::json& j) {
  std::string text = j.dump();
  fprintf(stdout, "%s\n", text.c_str());
  fflush(stdout);
}

}  // namespace warden::bench
