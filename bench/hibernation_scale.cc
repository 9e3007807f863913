// hibernation_scale: issue 12's "10,000 sessions with 1,000 live and the
// rest hibernated, each answering a cell when called" (docs/benchmarks.md).
//
// Starts wardend on a directory of its own with a short
// sessions.hibernate_after_seconds, then:
//   1. creates N - L "sleepers", each running `x = i`, and waits until all
//      of them have hibernated (creation pauses while more than
//      --max-awake of them are still awake, so the machine never holds
//      thousands of live sandboxes at once);
//   2. creates the L "live" ones the same way, touching them round robin
//      so that none hibernates;
//   3. records the sessions' states, wardend's RSS and the snapshots' disk
//      use;
//   4. calls `print(x)` in every live session, then in every sleeper (or a
//      random sample of --sample of them), and checks each answers its own
//      value: a sleeper's call includes its wake from hibernation.
// Prints the figures and, last, one JSON object; asserts nothing.
//
//   hibernation_scale [--sessions N] [--live L] [--hibernate-after S]
//                     [--threads T] [--sample K] [--max-awake A] [--max-live X]
//                     [--create-minutes M] [--call-minutes C] [--min-avail-mb F]
// --max-live X is wardend's sessions.max_live (default live + max-awake:
// woken sleepers then send the least recently used to disk instead of
// piling up to the descriptor limit; 0: no bound). --sample K calls a random K of the sleepers; --call-minutes C calls them in
// random order until C minutes have passed (the output says how many).
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "warden/v1/executor.grpc.pb.h"

namespace {

using warden::v1::Executor;

struct Flags {
  int sessions = 10'000;
  int live = 1'000;
  int hibernate_after_s = 5;
  int threads = 4;
  int sample = 0;  // 0: call every sleeper
  int max_awake = 1'500;
  int max_live = -1;  // wardend's sessions.max_live; -1: live + max_awake, 0: no bound
  double create_minutes = 15;
  double call_minutes = 0;  // 0: call every sleeper (or the sample)
  int64_t min_avail_mb = 6'144;
};

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A "Key:   123 kB" line of a /proc file, in KiB; -1 when absent.
int64_t ProcKib(const std::string& path, const std::string& key) {
  std::istringstream in(ReadText(path));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      std::istringstream fields(line.substr(key.size() + 1));
      int64_t kib = -1;
      fields >> kib;
      return kib;
    }
  }
  return -1;
}

int64_t DiskBytes(const std::string& dir) {
  int64_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) total += static_cast<int64_t>(it->file_size(ec));
  }
  return total;
}

// `s` as a JSON string literal.
std::string Quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    out += c;
  }
  return out + "\"";
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

std::chrono::system_clock::time_point In(absl::Duration d) {
  return std::chrono::system_clock::now() + absl::ToChronoMilliseconds(d);
}

struct StateCounts {
  int idle = 0, busy = 0, hibernated = 0, lost = 0, total = 0;
  bool ok = false;
};

StateCounts Count(Executor::Stub& stub) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(absl::Seconds(60)));
  warden::v1::ListSessionsResponse response;
  StateCounts c;
  if (!stub.ListSessions(&ctx, warden::v1::ListSessionsRequest(), &response).ok()) return c;
  c.ok = true;
  for (const auto& s : response.sessions()) {
    ++c.total;
    switch (s.state()) {
      case warden::v1::SESSION_STATE_IDLE: ++c.idle; break;
      case warden::v1::SESSION_STATE_BUSY: ++c.busy; break;
      case warden::v1::SESSION_STATE_HIBERNATED: ++c.hibernated; break;
      case warden::v1::SESSION_STATE_LOST: ++c.lost; break;
      default: break;
    }
  }
  return c;
}

// One cell; its round trip in ms, or a negative number when it failed or
// answered something else than `want` (when `want` is not empty).
double Cell(Executor::Stub& stub, const std::string& id, const std::string& code, const std::string& want,
            std::string* why = nullptr) {
  warden::v1::ExecuteRequest request;
  request.set_session_id(id);
  request.set_code(code);
  warden::v1::ExecuteResponse response;
  grpc::ClientContext ctx;
  ctx.set_deadline(In(absl::Seconds(120)));
  const absl::Time start = absl::Now();
  const grpc::Status status = stub.Execute(&ctx, request, &response);
  const bool ok = status.ok() && response.outcome() == warden::v1::OUTCOME_OK &&
                  (want.empty() || response.stdout() == want);
  const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  if (!ok && why) {
    *why = !status.ok() ? absl::StrCat("gRPC ", status.error_code(), ": ", status.error_message().substr(0, 200))
                        : absl::StrCat(warden::v1::Outcome_Name(response.outcome()), ": ",
                                       response.message().substr(0, 120), response.error().name(), " stdout=",
                                       response.stdout().substr(0, 40));
  }
  return ok ? ms : -1;
}

// Creates sessions [from, to) with `x = i` in each, from `threads` threads;
// pauses while `awake()` says too many are awake. Stops early at the
// deadline, below the memory floor, or when the daemon refuses; `why` says.
// `made` counts the sessions created; `published`, when given, gets each id.
std::vector<std::string> Create(Executor::Stub& stub, int from, int to, int threads, absl::Time deadline,
                                int64_t min_avail_mb, const std::function<bool()>& may_create,
                                std::atomic<int>* made, std::string* why, std::vector<std::string>* published,
                                std::mutex* mu) {
  std::vector<std::string> ids(to - from);
  std::atomic<int> next{from};
  std::atomic<bool> stop{false};
  std::mutex why_mu;
  auto stop_with = [&](const std::string& reason) {
    std::lock_guard<std::mutex> lock(why_mu);
    if (why->empty()) *why = reason;
    stop = true;
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      while (!stop) {
        while (!stop && !may_create()) {
          if (absl::Now() > deadline) stop_with("the time limit");
          absl::SleepFor(absl::Milliseconds(50));  // waiting for hibernation to catch up
        }
        const int i = next++;
        if (i >= to || stop) return;
        if (absl::Now() > deadline) return stop_with("the time limit");
        if (ProcKib("/proc/meminfo", "MemAvailable") / 1024 < min_avail_mb) {
          return stop_with(absl::StrCat("MemAvailable below ", min_avail_mb, " MiB"));
        }
        warden::v1::CreateSessionRequest request;
        request.set_language(warden::v1::LANGUAGE_PYTHON);
        warden::v1::Session session;
        grpc::ClientContext ctx;
        ctx.set_deadline(In(absl::Seconds(120)));
        grpc::Status status = stub.CreateSession(&ctx, request, &session);
        if (!status.ok()) return stop_with(absl::StrCat("CreateSession failed: ", status.error_message()));
        if (Cell(stub, session.id(), absl::StrCat("x = ", i), "") < 0) {
          return stop_with(absl::StrCat("the first cell failed in session ", i));
        }
        ids[i - from] = session.id();
        ++*made;
        if (published) {
          std::lock_guard<std::mutex> lock(*mu);
          published->push_back(session.id());
        }
      }
    });
  }
  for (std::thread& t : pool) t.join();
  return ids;  // empty strings where creation stopped
}

struct CallFigures {
  int called = 0, answered = 0, failed = 0;
  double seconds = 0;
  std::vector<double> ms;
  std::map<std::string, int> errors;  // why calls failed, how often
};

// `print(x)` in each (index, id), from `threads` threads, in order, until
// `deadline` (no new call starts after it).
CallFigures CallAll(Executor::Stub& stub, const std::vector<std::pair<int, std::string>>& targets, int threads,
                    absl::Time deadline = absl::InfiniteFuture()) {
  CallFigures f;
  std::mutex mu;
  std::atomic<size_t> next{0};
  const absl::Time start = absl::Now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (size_t k = next++; k < targets.size() && absl::Now() < deadline; k = next++) {
        const auto& [i, id] = targets[k];
        std::string why;
        const double ms = Cell(stub, id, "print(x)", absl::StrCat(i, "\n"), &why);
        std::lock_guard<std::mutex> lock(mu);
        ++f.called;
        if (ms >= 0) {
          ++f.answered;
          f.ms.push_back(ms);
        } else {
          ++f.failed;
          ++f.errors[why];
        }
      }
    });
  }
  for (std::thread& t : pool) t.join();
  f.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return f;
}

std::string FiguresJson(const CallFigures& f) {
  return absl::StrCat("{\"called\": ", f.called, ", \"answered\": ", f.answered, ", \"failed\": ", f.failed,
                      ", \"seconds\": ", f.seconds, ", \"per_second\": ", f.seconds > 0 ? f.answered / f.seconds : 0,
                      ", \"p50_ms\": ", Percentile(f.ms, 0.5), ", \"p99_ms\": ", Percentile(f.ms, 0.99),
                      ", \"max_ms\": ", Percentile(f.ms, 1.0), ", \"errors\": {",
                      absl::StrJoin(f.errors, ", ",
                                    [](std::string* out, const auto& e) {
                                      absl::StrAppend(out, Quoted(e.first), ": ", e.second);
                                    }),
                      "}}");
}

bool ParseFlags(int argc, char** argv, Flags* f) {
  std::map<std::string, int*> ints = {{"--sessions", &f->sessions},   {"--live", &f->live},
                                      {"--hibernate-after", &f->hibernate_after_s},
                                      {"--threads", &f->threads},     {"--sample", &f->sample},
                                      {"--max-awake", &f->max_awake}, {"--max-live", &f->max_live}};
  for (int i = 1; i < argc; ++i) {
    const std::string name = argv[i];
    if (i + 1 >= argc) return false;
    const std::string value = argv[++i];
    if (ints.count(name)) {
      if (!absl::SimpleAtoi(value, ints[name])) return false;
    } else if (name == "--create-minutes") {
      if (!absl::SimpleAtod(value, &f->create_minutes)) return false;
    } else if (name == "--call-minutes") {
      if (!absl::SimpleAtod(value, &f->call_minutes)) return false;
    } else if (name == "--min-avail-mb") {
      if (!absl::SimpleAtoi(value, &f->min_avail_mb)) return false;
    } else {
      return false;
    }
  }
  return f->sessions > 0 && f->live >= 0 && f->live <= f->sessions && f->threads > 0 && f->hibernate_after_s > 0;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);  // figures appear as they come, even into a file
  Flags flags;
  if (!ParseFlags(argc, argv, &flags)) {
    std::cerr << "usage: hibernation_scale [--sessions N] [--live L] [--hibernate-after S] [--threads T]\n"
                 "                         [--sample K] [--max-awake A] [--max-live X] [--create-minutes M] [--call-minutes C]\n"
                 "                         [--min-avail-mb F]\n";
    return 2;
  }
  char tmpl[] = "/tmp/warden-hibernation-bench.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const std::string dir = tmpl;
  const std::string snapshots = dir + "/snapshots";
  const std::string bin = std::filesystem::canonical("/proc/self/exe").parent_path();
  const int cap = flags.sessions + 50;
  std::ofstream(dir + "/wardend.json") << absl::StrCat(
      R"({"pools": [{"language": "python", "size": 4, "warm": []}],)",
      R"( "sessions": {"max_total": )", cap, R"(, "max_per_tenant": )", cap,
      R"(, "default_ttl_seconds": 86400, "default_idle_timeout_seconds": 86400, "hibernate_after_seconds": )",
      flags.hibernate_after_s, R"(, "max_live": )",
      flags.max_live >= 0 ? flags.max_live : flags.live + flags.max_awake, R"(},)", R"( "snapshots": {"dir": ")", snapshots,
      R"(", "max_bytes_per_tenant": 68719476736},)", R"( "executor": {"host_id_base": )",
      2000000 + (getpid() % 1000) * 70000, R"(, "host_id_count": 65536}})");
  const std::string socket = dir + "/w.sock";
  const pid_t daemon = fork();
  if (daemon == 0) {
    const int fd = open((dir + "/wardend.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    dup2(fd, 1);
    dup2(fd, 2);
    // What deploy/wardend.service gives it (LimitNOFILE=65536): a live
    // session holds about 8 descriptors, a hibernated one about 2.
    const struct rlimit files = {65536, 65536};
    setrlimit(RLIMIT_NOFILE, &files);  // as root; otherwise the inherited limit stays
    execl((bin + "/wardend").c_str(), "wardend", "--config", (dir + "/wardend.json").c_str(), "--listen",
          ("unix:" + socket).c_str(), nullptr);
    _exit(127);
  }
  auto finish = [&](int code) {
    kill(daemon, SIGTERM);
    waitpid(daemon, nullptr, 0);
    std::filesystem::remove_all(dir);
    return code;
  };
  auto channel = grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(In(absl::Seconds(120)))) {
    std::cerr << "wardend did not start: " << ReadText(dir + "/wardend.log") << "\n";
    return finish(1);
  }
  auto stub = Executor::NewStub(channel);
  const std::string rss_path = absl::StrCat("/proc/", daemon, "/status");
  std::printf("hibernation_scale: %d sessions, %d to stay live, hibernate_after_seconds %d, %d threads\n",
              flags.sessions, flags.live, flags.hibernate_after_s, flags.threads);
  std::fflush(stdout);

  // A monitor keeps the latest state counts for the creators' throttle.
  std::atomic<int> hibernated{0};
  std::atomic<bool> monitoring{true};
  std::thread monitor([&] {
    while (monitoring) {
      StateCounts c = Count(*stub);
      if (c.ok) hibernated = c.hibernated;
      absl::SleepFor(absl::Seconds(1));
    }
  });
  const absl::Time begin = absl::Now();
  const absl::Time deadline = begin + absl::Seconds(flags.create_minutes * 60);
  const int sleepers_wanted = flags.sessions - flags.live;
  std::atomic<int> created{0};
  std::string stopped;

  // 1. The sleepers.
  std::vector<std::string> sleepers = Create(
      *stub, 0, sleepers_wanted, flags.threads, deadline, flags.min_avail_mb,
      [&] { return created.load() - hibernated.load() < flags.max_awake; }, &created, &stopped, nullptr, nullptr);
  const int sleepers_made = created.load();
  const double create_sleepers_s = absl::ToDoubleSeconds(absl::Now() - begin);
  std::printf("  created %d sleepers in %.1f s (%.1f per second)%s%s\n", sleepers_made, create_sleepers_s,
              sleepers_made / std::max(create_sleepers_s, 1e-9), stopped.empty() ? "" : "; stopped: ",
              stopped.c_str());
  std::fflush(stdout);
  const absl::Time settle_start = absl::Now();
  const absl::Time settle_deadline = settle_start + absl::Minutes(10);
  while (hibernated.load() < sleepers_made && absl::Now() < settle_deadline) absl::SleepFor(absl::Milliseconds(200));
  const double settle_s = absl::ToDoubleSeconds(absl::Now() - settle_start);
  std::printf("  %d of them hibernated %.1f s after the last was created\n", hibernated.load(), settle_s);
  std::fflush(stdout);

  // 2. The live ones, touched round robin until the calls begin.
  std::vector<std::string> touched;
  std::mutex touched_mu;
  std::atomic<bool> touching{true};
  std::thread toucher([&] {
    size_t k = 0;
    while (touching) {
      std::string id;
      {
        std::lock_guard<std::mutex> lock(touched_mu);
        if (!touched.empty()) id = touched[k++ % touched.size()];
      }
      if (id.empty()) {
        absl::SleepFor(absl::Milliseconds(50));
        continue;
      }
      (void)Cell(*stub, id, "0", "");
    }
  });
  const absl::Time live_start = absl::Now();
  std::string live_stopped;
  std::vector<std::string> live = Create(*stub, sleepers_wanted, flags.sessions, flags.threads,
                                         std::max(deadline, absl::Now() + absl::Minutes(5)), flags.min_avail_mb,
                                         [] { return true; }, &created, &live_stopped, &touched, &touched_mu);
  const int live_made = created.load() - sleepers_made;
  const double create_live_s = absl::ToDoubleSeconds(absl::Now() - live_start);
  std::printf("  created %d live sessions in %.1f s%s%s\n", live_made, create_live_s,
              live_stopped.empty() ? "" : "; stopped: ", live_stopped.c_str());

  // 3. The picture before the calls (the toucher stops first: from here on
  // the live sessions have until hibernate_after_seconds to be called).
  touching = false;
  toucher.join();
  monitoring = false;
  monitor.join();
  const StateCounts before = Count(*stub);
  const int64_t rss_kib = ProcKib(rss_path, "VmRSS");
  const int64_t disk_bytes = DiskBytes(snapshots);
  const int64_t avail_mb = ProcKib("/proc/meminfo", "MemAvailable") / 1024;
  std::printf("  before the calls: %d sessions: %d idle, %d busy, %d hibernated, %d lost; wardend RSS %.1f MiB; "
              "snapshots on disk %.1f MiB (%.1f KiB per hibernated session); MemAvailable %lld MiB\n",
              before.total, before.idle, before.busy, before.hibernated, before.lost, rss_kib / 1024.0,
              disk_bytes / 1048576.0, before.hibernated ? disk_bytes / 1024.0 / before.hibernated : 0.0,
              static_cast<long long>(avail_mb));
  std::fflush(stdout);

  // 4. The calls: the live ones first (they would hibernate while the
  // sleepers are called), then the sleepers.
  std::vector<std::pair<int, std::string>> live_targets, sleeper_targets;
  for (int k = 0; k < static_cast<int>(live.size()); ++k) {
    if (!live[k].empty()) live_targets.push_back({sleepers_wanted + k, live[k]});
  }
  for (int k = 0; k < static_cast<int>(sleepers.size()); ++k) {
    if (!sleepers[k].empty()) sleeper_targets.push_back({k, sleepers[k]});
  }
  std::mt19937 random(12);
  std::shuffle(sleeper_targets.begin(), sleeper_targets.end(), random);
  if (flags.sample > 0 && flags.sample < static_cast<int>(sleeper_targets.size())) {
    sleeper_targets.resize(flags.sample);
  }
  const CallFigures live_calls = CallAll(*stub, live_targets, flags.threads);
  std::printf("  live: %d of %d answered their own x (%d failed) in %.1f s; p50 %.2f ms, p99 %.2f ms\n",
              live_calls.answered, live_calls.called, live_calls.failed, live_calls.seconds,
              Percentile(live_calls.ms, 0.5), Percentile(live_calls.ms, 0.99));
  std::fflush(stdout);
  const CallFigures wake_calls =
      CallAll(*stub, sleeper_targets, flags.threads,
              flags.call_minutes > 0 ? absl::Now() + absl::Seconds(flags.call_minutes * 60) : absl::InfiniteFuture());
  std::printf("  hibernated%s: %d of %d answered their own x (%d failed) in %.1f s (%.1f wakes per second); "
              "cell with its wake p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
              flags.sample > 0 || wake_calls.called < static_cast<int>(sleeper_targets.size())
                  ? " (a random sample: those called in random order within the time limit)"
                  : "",
              wake_calls.answered, wake_calls.called,
              wake_calls.failed, wake_calls.seconds, wake_calls.answered / std::max(wake_calls.seconds, 1e-9),
              Percentile(wake_calls.ms, 0.5), Percentile(wake_calls.ms, 0.99), Percentile(wake_calls.ms, 1.0));
  for (const CallFigures* f : {&live_calls, &wake_calls}) {
    for (const auto& [why, n] : f->errors) std::printf("    failed %d times: %s\n", n, why.c_str());
  }
  if (live_calls.failed + wake_calls.failed > 0) {
    std::error_code ec;
    std::filesystem::copy_file(dir + "/wardend.log", dir + ".wardend.log",
                               std::filesystem::copy_options::overwrite_existing, ec);
    std::printf("    wardend's log is kept in %s.wardend.log\n", dir.c_str());
  }
  const int64_t rss_after_kib = ProcKib(rss_path, "VmRSS");
  const int64_t hwm_kib = ProcKib(rss_path, "VmHWM");
  const StateCounts after = Count(*stub);
  std::printf("  after the calls: wardend RSS %.1f MiB (peak %.1f MiB); %d hibernated, %d idle\n",
              rss_after_kib / 1024.0, hwm_kib / 1024.0, after.hibernated, after.idle);
  std::printf("  total %.1f s\n", absl::ToDoubleSeconds(absl::Now() - begin));

  std::printf(
      "%s\n",
      absl::StrCat("{\"sessions_asked\": ", flags.sessions, ", \"live_asked\": ", flags.live,
                   ", \"hibernate_after_s\": ", flags.hibernate_after_s, ", \"threads\": ", flags.threads,
                   ", \"sample\": ", flags.sample, ", \"call_minutes\": ", flags.call_minutes,
                   ", \"sleepers_to_call\": ", static_cast<int>(sleeper_targets.size()), ", \"sleepers_created\": ", sleepers_made,
                   ", \"live_created\": ", live_made, ", \"create_sleepers_s\": ", create_sleepers_s,
                   ", \"create_per_second\": ", sleepers_made / std::max(create_sleepers_s, 1e-9),
                   ", \"create_stopped\": ", Quoted(stopped.empty() ? live_stopped : stopped),
                   ", \"settle_s\": ", settle_s, ", \"create_live_s\": ", create_live_s,
                   ", \"before\": {\"total\": ", before.total, ", \"idle\": ", before.idle, ", \"busy\": ", before.busy,
                   ", \"hibernated\": ", before.hibernated, ", \"lost\": ", before.lost, "}",
                   ", \"wardend_rss_mib\": ", rss_kib / 1024.0, ", \"wardend_rss_after_mib\": ", rss_after_kib / 1024.0,
                   ", \"wardend_rss_peak_mib\": ", hwm_kib / 1024.0, ", \"snapshot_disk_mib\": ",
                   disk_bytes / 1048576.0, ", \"mem_available_mb\": ", avail_mb, ", \"live_calls\": ",
                   FiguresJson(live_calls), ", \"wake_calls\": ", FiguresJson(wake_calls),
                   ", \"total_s\": ", absl::ToDoubleSeconds(absl::Now() - begin), "}")
          .c_str());
  return finish(0);
}
