// Warden's side of the benchmarks: a C++ gRPC client of a running wardend
// over its UNIX socket (a Python client would add more than the cell itself
// costs). bench/run_bench.py starts the daemon and runs these; each prints
// one JSON object on stdout (hold prints one per step).
//
//   warden_bench cells --addr A [--n N] [--warmup W] [--code C]
//       N trivial cells in one warm session.
//   warden_bench oneshot --addr A [--n N] [--gap-ms G] [--code C] [--expect OUT] [--template T]
//       N one-shot executions, each in a fresh sandbox, G ms apart (in the
//       template T: docs/templates.md).
//   warden_bench session-start --addr A [--n N] [--gap-ms G] [--template T]
//       CreateSession, then the first cell: how soon a new session answers.
//   warden_bench throughput --addr A --mode oneshot|cells [--clients C] [--seconds S]
//       [--language python|javascript|bash] [--code CODE]
//       C concurrent clients for S seconds (cells: one session per client).
//   warden_bench suite --addr A --file PROGRAMS.jsonl [--clients C]
//       each program one-shot in a fresh sandbox, judged (HumanEval).
//   warden_bench hold --addr A [--max N] [--seconds S] [--min-avail-mb M]
//       opens idle sessions until N, S, a failure or MemAvailable < M; then
//       reads commands on stdin: "probe" (a cell in every session),
//       "grow MAX SECONDS" (open more, the same way), "close".
//   warden_bench noisy --addr A [--quiet-s S] [--abused-s S] [--per-kind K]
//       [--kinds fork_bomb,memory_hog,cpu_burner]
//       a victim session's cells alone, then while K neighbours of each kind
//       run fork bombs, memory hogs and CPU burners at their limits (--kinds:
//       only those kinds, to see which one moves the victim's tail).
//   warden_bench commands --addr A [--n N] [--warmup W] [--command C | --exec P]
//       N commands (bash -l -c C, as E2B's commands.run sends them; or the
//       program P alone, no shell) in one session's machine, each RunCommand
//       to its end.
//   warden_bench first-result --addr A --since-ns T
//       waits for the daemon, runs print(1) once: ms since CLOCK_MONOTONIC T.
//   warden_bench queued --addr A [--n N]
//       against a wardend whose max_concurrent_per_tenant is 1: holds the
//       tenant's turn with a sleeping cell, says {"ready"}; on a line from
//       stdin sends N cells that wait for the turn, says {"sent"}; on the
//       next line interrupts the sleeper and says when all N had answered.
//   warden_bench burst --addr A [--n N] [--deadline-s S] [--code C] [--channels K]
//       N clients at once (over K connections), each CreateSession then its
//       first cell, each call with an S-second deadline and no retry: when
//       each session had answered, counted from the burst's start; which
//       were refused and why; then all are closed.
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "grpcpp/grpcpp.h"
#include "warden/v1/executor.grpc.pb.h"

namespace warden::bench {
namespace {

namespace pb = ::warden::v1;

constexpr int kRpcDeadlineS = 60;

// `eager`: retry a connection every 5-20 ms while the daemon is not yet
// listening, instead of gRPC's default reconnect backoff (1 s, growing),
// which measured the client's backoff rather than the daemon's start.
std::unique_ptr<pb::Executor::Stub> Connect(const std::string& addr, bool eager = false) {
  grpc::ChannelArguments args;
  // One connection per client thread, as separate clients would have.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(64 << 20);
  if (eager) {
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 5);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 20);
  }
  return pb::Executor::NewStub(grpc::CreateCustomChannel(addr, grpc::InsecureChannelCredentials(), args));
}

void SetDeadline(grpc::ClientContext* ctx, int seconds = kRpcDeadlineS) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
}

std::string OutcomeName(const grpc::Status& status, const pb::ExecuteResponse& r) {
  if (!status.ok()) return "grpc:" + std::to_string(status.error_code()) + " " + status.error_message();
  std::string name = pb::Outcome_Name(r.outcome());
  return name.rfind("OUTCOME_", 0) == 0 ? name.substr(8) : name;
}

pb::Language LanguageOf(const std::string& name) {
  if (name == "javascript" || name == "js") return pb::LANGUAGE_JAVASCRIPT;
  if (name == "bash") return pb::LANGUAGE_BASH;
  return pb::LANGUAGE_PYTHON;
}

grpc::Status Execute(pb::Executor::Stub& stub, const pb::ExecuteRequest& request, pb::ExecuteResponse* response) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  return stub.Execute(&ctx, request, response);
}


// A session id, or the error text.
bool NewSession(pb::Executor::Stub& stub, const pb::CreateSessionRequest& request, std::string* id,
                std::string* error) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  pb::Session session;
  grpc::Status status = stub.CreateSession(&ctx, request, &session);
  if (!status.ok()) {
    *error = "grpc:" + std::to_string(status.error_code()) + " " + status.error_message();
    return false;
  }
  *id = session.id();
  return true;
}

void CloseSession(pb::Executor::Stub& stub, const std::string& id) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  pb::CloseSessionRequest request;
  request.set_session_id(id);
  pb::CloseSessionResponse response;
  stub.CloseSession(&ctx, request, &response);
}

// Runs `run` --warmup times, then --n times, timing each; `run` returns
// what went wrong ("" when nothing did). The figures, with the failures of
// the timed runs and the last one's text.
nlohmann::json TimeRuns(const Flags& flags, int warmup, int n, const std::function<std::string()>& run) {
  for (int i = flags.Int("warmup", warmup); i > 0; --i) run();
  int failures = 0;
  std::string last_failure;
  std::vector<double> ms;
  for (int i = flags.Int("n", n); i > 0; --i) {
    const auto start = Clock::now();
    const std::string failed = run();
    ms.push_back(MsSince(start));
    if (!failed.empty()) {
      ++failures;
      last_failure = failed;
    }
  }
  nlohmann::json j = Summarize(ms);
  j["failures"] = failures;
  if (failures) j["last_failure"] = last_failure;
  return j;
}

int Cells(const Flags& flags) {
  auto stub = Connect(flags.Str("addr", ""));
  std::string id, error;
  if (!NewSession(*stub, pb::CreateSessionRequest(), &id, &error)) {
    Emit({{"error", error}});
    return 1;
  }
  pb::ExecuteRequest cell;
  cell.set_session_id(id);
  cell.set_code(flags.Str("code", "x=1"));
  nlohmann::json j = TimeRuns(flags, 200, 2000, [&]() -> std::string {
    pb::ExecuteResponse r;
    grpc::Status status = Execute(*stub, cell, &r);
    return status.ok() && r.outcome() == pb::OUTCOME_OK ? "" : OutcomeName(status, r);
  });
  CloseSession(*stub, id);
  Emit(j);
  return 0;
}

int Commands(const Flags& flags) {
  auto stub = Connect(flags.Str("addr", ""));
  pb::CreateSessionRequest create;
  create.set_shared_workspace(true);
  create.set_workspace_path("/home/user");
  std::string id, error;
  if (!NewSession(*stub, create, &id, &error)) {
    Emit({{"error", error}});
    return 1;
  }
  pb::RunCommandRequest command;
  command.set_session_id(id);
  if (flags.Has("exec")) {
    command.add_argv(flags.Str("exec", ""));
  } else {
    for (const char* arg : {"/bin/bash", "-l", "-c"}) command.add_argv(arg);
    command.add_argv(flags.Str("command", "true"));
  }
  nlohmann::json j = TimeRuns(flags, 20, 200, [&]() -> std::string {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    auto reader = stub->RunCommand(&ctx, command);
    pb::CommandEvent event;
    bool ok = false;
    while (reader->Read(&event)) {
      if (event.has_end()) ok = event.end().outcome() == pb::OUTCOME_OK;
    }
    grpc::Status status = reader->Finish();
    if (!status.ok()) return status.error_message();
    return ok ? "" : "not OK";
  });
  CloseSession(*stub, id);
  Emit(j);
  return 0;
}

int Oneshot(const Flags& flags) {
  auto stub = Connect(flags.Str("addr", ""));
  pb::ExecuteRequest request;
  request.set_code(flags.Str("code", "print(1)"));
  request.set_language(LanguageOf(flags.Str("language", "python")));
  request.set_template_(flags.Str("template", ""));
  const bool check_output = flags.Has("expect");
  const std::string expect = flags.Str("expect", "");
  const int gap_ms = flags.Int("gap-ms", 0);
  int failures = 0;
  std::string last_failure;
  std::vector<double> ms;
  for (int i = flags.Int("n", 100); i > 0; --i) {
    pb::ExecuteResponse r;
    const auto start = Clock::now();
    grpc::Status status = Execute(*stub, request, &r);
    ms.push_back(MsSince(start));
    if (!status.ok() || r.outcome() != pb::OUTCOME_OK || (check_output && r.stdout() != expect)) {
      ++failures;
      last_failure = OutcomeName(status, r) + " stdout=" + r.stdout().substr(0, 100) +
                     " stderr=" + r.stderr().substr(0, 300) + " " + r.message();
    }
    if (gap_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
  }
  nlohmann::json j = Summarize(ms);
  j["failures"] = failures;
  j["gap_ms"] = gap_ms;
  if (failures) j["last_failure"] = last_failure;
  Emit(j);
  return 0;
}

int SessionStart(const Flags& flags) {
  auto stub = Connect(flags.Str("addr", ""));
  const int gap_ms = flags.Int("gap-ms", 0);
  pb::CreateSessionRequest create;
  create.set_template_(flags.Str("template", ""));
  std::vector<double> create_ms, ready_ms;
  int failures = 0;
  std::string last_failure;
  for (int i = flags.Int("n", 20); i > 0; --i) {
    std::string id, error;
    const auto start = Clock::now();
    if (!NewSession(*stub, create, &id, &error)) {
      ++failures;
      last_failure = error;
      continue;
    }
    create_ms.push_back(MsSince(start));
    pb::ExecuteRequest cell;
    cell.set_session_id(id);
    cell.set_code("x=1");
    pb::ExecuteResponse r;
    grpc::Status status = Execute(*stub, cell, &r);
    ready_ms.push_back(MsSince(start));
    if (!status.ok() || r.outcome() != pb::OUTCOME_OK) {
      ++failures;
      last_failure = OutcomeName(status, r);
    }
    CloseSession(*stub, id);
    if (gap_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
  }
  Emit({{"create", Summarize(create_ms)},
        {"first_cell", Summarize(ready_ms)},
        {"failures", failures},
        {"gap_ms", gap_ms},
        {"last_failure", last_failure}});
  return 0;
}

int Throughput(const Flags& flags) {
  const std::string addr = flags.Str("addr", "");
  const bool cells = flags.Str("mode", "oneshot") == "cells";
  const int clients = flags.Int("clients", 8);
  const double seconds = flags.Double("seconds", 5);
  const std::string code = flags.Str("code", cells ? "x=1" : "print(1)");
  std::atomic<bool> go{false}, stop{false};
  std::atomic<int> ok{0}, failed{0}, ready{0};
  std::mutex mu;
  std::vector<double> ms;
  std::string last_failure;
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      auto stub = Connect(addr);
      pb::ExecuteRequest request;
      request.set_code(code);
      request.set_language(LanguageOf(flags.Str("language", "python")));
      std::string id, error;
      if (cells && !NewSession(*stub, pb::CreateSessionRequest(), &id, &error)) {
        std::lock_guard<std::mutex> lock(mu);
        last_failure = error;
      }
      request.set_session_id(id);
      ++ready;
      while (!go.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::vector<double> mine;
      while (!stop.load()) {
        pb::ExecuteResponse r;
        const auto start = Clock::now();
        grpc::Status status = Execute(*stub, request, &r);
        if (stop.load()) break;  // finished after the window closed: not counted
        mine.push_back(MsSince(start));
        if (status.ok() && r.outcome() == pb::OUTCOME_OK) {
          ++ok;
        } else {
          ++failed;
          std::lock_guard<std::mutex> lock(mu);
          last_failure = OutcomeName(status, r);
        }
      }
      if (!id.empty()) CloseSession(*stub, id);
      std::lock_guard<std::mutex> lock(mu);
      ms.insert(ms.end(), mine.begin(), mine.end());
    });
  }
  while (ready.load() < clients) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto start = Clock::now();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  const double elapsed = MsSince(start) / 1000;
  for (auto& t : threads) t.join();
  Emit({{"clients", clients},
        {"seconds", elapsed},
        {"ok", ok.load()},
        {"failures", failed.load()},
        {"per_second", ok.load() / elapsed},
        {"latency", Summarize(ms)},
        {"last_failure", last_failure}});
  return 0;
}

int Suite(const Flags& flags) {
  const std::string addr = flags.Str("addr", "");
  const std::vector<Program> programs = LoadPrograms(flags.Str("file", ""));
  const int clients = flags.Int("clients", 4);
  const int64_t timeout_ms = flags.Int("timeout-ms", 10000);
  Emit(RunSuite(programs, clients, [&]() -> RunProgram {
    std::shared_ptr<pb::Executor::Stub> stub = Connect(addr);
    return [&, stub](const Program& program, RunOutput* out) {
      pb::ExecuteRequest request;
      request.set_code(program.code);
      request.set_language(LanguageOf(program.language));
      request.mutable_limits()->set_wall_ms(timeout_ms);
      pb::ExecuteResponse r;
      grpc::Status status = Execute(*stub, request, &r);
      out->finished_normally = status.ok() && r.outcome() == pb::OUTCOME_OK;
      out->timed_out = !status.ok() || r.outcome() == pb::OUTCOME_WALL_TIMEOUT ||
                       r.outcome() == pb::OUTCOME_CPU_TIMEOUT;
      out->stdout_text = r.stdout();
      out->stderr_text = r.stderr();
      out->outcome = OutcomeName(status, r);
      if (r.has_error()) out->stderr_text += r.error().name() + ": " + r.error().value();
    };
  }));
  return 0;
}

int64_t MemAvailableMb() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb;
  std::string unit;
  while (in >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb / 1024;
  }
  return -1;
}

int Hold(const Flags& flags) {
  auto stub = Connect(flags.Str("addr", ""));
  const int64_t min_avail_mb = flags.Int("min-avail-mb", 4096);
  std::vector<std::string> ids;
  // Opens sessions until `max` are open, `seconds` pass, one fails or memory
  // runs low; reports how far it got and why it stopped.
  auto grow = [&](int max, double seconds) {
    std::vector<double> create_ms;
    std::string stop_reason = "reached " + std::to_string(max);
    const auto start = Clock::now();
    const size_t before = ids.size();
    while (static_cast<int>(ids.size()) < max) {
      if (MsSince(start) > seconds * 1000) {
        stop_reason = "time budget (" + std::to_string(static_cast<int>(seconds)) + " s) used up";
        break;
      }
      if (int64_t avail = MemAvailableMb(); avail >= 0 && avail < min_avail_mb) {
        stop_reason = "MemAvailable fell below " + std::to_string(min_avail_mb) + " MiB";
        break;
      }
      std::string id, error;
      const auto t = Clock::now();
      if (!NewSession(*stub, pb::CreateSessionRequest(), &id, &error)) {
        stop_reason = "CreateSession failed: " + error;
        break;
      }
      create_ms.push_back(MsSince(t));
      ids.push_back(id);
      if (ids.size() % 50 == 0) fprintf(stderr, "  %zu sessions open\n", ids.size());
    }
    const double elapsed = MsSince(start) / 1000;
    Emit({{"held", ids.size()},
          {"opened", ids.size() - before},
          {"stop_reason", stop_reason},
          {"seconds", elapsed},
          {"per_second", (ids.size() - before) / elapsed},
          {"mem_available_mb", MemAvailableMb()},
          {"create", Summarize(create_ms)}});
  };
  grow(flags.Int("max", 100), flags.Double("seconds", 60));
  std::string command;
  while (std::getline(std::cin, command)) {
    if (command == "probe") {
      std::vector<double> ms;
      int failures = 0;
      std::string last_failure;
      for (const std::string& id : ids) {
        pb::ExecuteRequest cell;
        cell.set_session_id(id);
        cell.set_code("x=1");
        pb::ExecuteResponse r;
        const auto t = Clock::now();
        grpc::Status status = Execute(*stub, cell, &r);
        ms.push_back(MsSince(t));
        if (!status.ok() || r.outcome() != pb::OUTCOME_OK) {
          ++failures;
          last_failure = OutcomeName(status, r);
        }
      }
      nlohmann::json j = Summarize(ms);
      j["failures"] = failures;
      j["last_failure"] = last_failure;
      Emit(j);
    } else if (command.rfind("grow ", 0) == 0) {
      int max = 0;
      double seconds = 0;
      sscanf(command.c_str(), "grow %d %lf", &max, &seconds);
      grow(max, seconds);
    } else if (command == "close") {
      const auto t = Clock::now();
      for (const std::string& id : ids) CloseSession(*stub, id);
      Emit({{"closed", ids.size()}, {"seconds", MsSince(t) / 1000}});
      return 0;
    }
  }
  for (const std::string& id : ids) CloseSession(*stub, id);
  return 0;
}

// Neighbours at their limits: each kind loops in its own session and starts
// a new one whenever the old one is lost.
struct Abuse {
  const char* kind;
  const char* code;
};
constexpr Abuse kAbuses[] = {
    {"fork_bomb", "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"},
    {"memory_hog", "x = []\nwhile True:\n    x.append(bytearray(8 << 20))\n"},
    {"cpu_burner", "while True:\n    pass\n"},
};

int Noisy(const Flags& flags) {
  const std::string addr = flags.Str("addr", "");
  const int per_kind = flags.Int("per-kind", 1);
  const int abuse_memory_mb = flags.Int("abuser-memory-mb", 128);
  const int abuse_ms = flags.Int("abuser-limit-ms", 1000);
  auto stub = Connect(addr);
  std::string victim, error;
  if (!NewSession(*stub, pb::CreateSessionRequest(), &victim, &error)) {
    Emit({{"error", error}});
    return 1;
  }
  pb::ExecuteRequest cell;
  cell.set_session_id(victim);
  cell.set_code("x=1");
  // Cells for `seconds` (at least 50), paced like an interactive user so
  // that the victim itself does not hog a core.
  auto measure = [&](double seconds, int* failures) {
    std::vector<double> ms;
    const auto begin = Clock::now();
    while (MsSince(begin) < seconds * 1000 || ms.size() < 50) {
      pb::ExecuteResponse r;
      const auto start = Clock::now();
      grpc::Status status = Execute(*stub, cell, &r);
      ms.push_back(MsSince(start));
      if (!status.ok() || r.outcome() != pb::OUTCOME_OK) ++*failures;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return ms;
  };
  int quiet_failures = 0, abused_failures = 0;
  measure(0.5, &quiet_failures);
  quiet_failures = 0;
  std::vector<double> quiet = measure(flags.Double("quiet-s", 5), &quiet_failures);

  std::atomic<bool> stop{false};
  std::mutex mu;
  std::map<std::string, std::map<std::string, int>> outcomes;
  std::vector<std::thread> abusers;
  std::vector<std::shared_ptr<grpc::ClientContext>> in_flight;
  const std::string kinds = flags.Str("kinds", "fork_bomb,memory_hog,cpu_burner");
  for (const Abuse& abuse : kAbuses) {
    if (("," + kinds + ",").find(std::string(",") + abuse.kind + ",") == std::string::npos) continue;
    for (int k = 0; k < per_kind; ++k) {
      abusers.emplace_back([&, abuse] {
        auto own = Connect(addr);
        pb::CreateSessionRequest create;
        create.mutable_limits()->set_memory_mb(abuse_memory_mb);
        std::string id;
        while (!stop.load()) {
          std::string err;
          if (id.empty() && !NewSession(*own, create, &id, &err)) {
            std::lock_guard<std::mutex> lock(mu);
            ++outcomes[abuse.kind]["create failed"];
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            continue;
          }
          pb::ExecuteRequest request;
          request.set_session_id(id);
          request.set_code(abuse.code);
          request.mutable_limits()->set_wall_ms(abuse_ms);
          request.mutable_limits()->set_cpu_ms(abuse_ms);
          auto ctx = std::make_shared<grpc::ClientContext>();
          SetDeadline(ctx.get());
          {
            std::lock_guard<std::mutex> lock(mu);
            if (stop.load()) break;
            in_flight.push_back(ctx);
          }
          pb::ExecuteResponse r;
          grpc::Status status = own->Execute(ctx.get(), request, &r);
          std::string name = OutcomeName(status, r);
          {
            std::lock_guard<std::mutex> lock(mu);
            ++outcomes[abuse.kind][name.substr(0, 40)];
          }
          // Anything but a surviving session: close it and start another.
          if (!status.ok() || r.outcome() == pb::OUTCOME_SESSION_LOST || r.outcome() == pb::OUTCOME_MEMORY_LIMIT) {
            CloseSession(*own, id);
            id.clear();
          }
        }
        if (!id.empty()) CloseSession(*own, id);
      });
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(flags.Int("settle-ms", 1500)));
  std::vector<double> abused = measure(flags.Double("abused-s", 10), &abused_failures);
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
    for (auto& ctx : in_flight) ctx->TryCancel();
  }
  for (auto& t : abusers) t.join();
  CloseSession(*stub, victim);
  nlohmann::json q = Summarize(quiet), a = Summarize(abused);
  q["failures"] = quiet_failures;
  a["failures"] = abused_failures;
  Emit({{"quiet", q}, {"abused", a}, {"per_kind", per_kind}, {"kinds", kinds}, {"neighbour_outcomes", outcomes}});
  return 0;
}

int FirstResult(const Flags& flags) {
  const int64_t since_ns = flags.Int("since-ns", 0);
  auto now_ns = [] {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  };
  auto stub = Connect(flags.Str("addr", ""), /*eager=*/true);
  pb::ExecuteRequest request;
  request.set_code("print(1)");
  const int64_t give_up = now_ns() + flags.Int("timeout-s", 60) * 1000000000LL;
  double connected_ms = -1;
  while (now_ns() < give_up) {
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);  // until the socket exists and accepts
    SetDeadline(&ctx, 30);
    pb::ExecuteResponse r;
    grpc::Status status = stub->Execute(&ctx, request, &r);
    if (connected_ms < 0 && status.error_code() != grpc::StatusCode::UNAVAILABLE) {
      connected_ms = (now_ns() - since_ns) / 1e6;
    }
    if (status.ok() && r.outcome() == pb::OUTCOME_OK) {
      Emit({{"first_result_ms", (now_ns() - since_ns) / 1e6}});
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  Emit({{"error", "no result within the timeout"}});
  return 1;
}

// Steps on stdin, figures on stdout (one JSON line each), so that the
// caller can read wardend's memory at each step.
int Queued(const Flags& flags) {
  const int n = static_cast<int>(flags.Int("n", 2000));
  auto stub = Connect(flags.Str("addr", ""));
  std::string busy, idle, error;
  if (!NewSession(*stub, pb::CreateSessionRequest(), &busy, &error) ||
      !NewSession(*stub, pb::CreateSessionRequest(), &idle, &error)) {
    Emit({{"error", error}});
    return 1;
  }
  // The tenant's one turn (max_concurrent_per_tenant 1), held until interrupted.
  grpc::ClientContext sleeper_ctx;
  pb::ExecuteRequest sleep;
  sleep.set_session_id(busy);
  sleep.set_code("import time\ntime.sleep(600)");
  pb::ExecuteResponse slept;
  std::mutex mu;
  std::condition_variable cv;
  int answered = 0, failed = 0;
  bool sleeper_done = false;
  stub->async()->Execute(&sleeper_ctx, &sleep, &slept, [&](grpc::Status) {
    std::lock_guard<std::mutex> lock(mu);
    sleeper_done = true;
    cv.notify_all();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  Emit({{"ready", true}});
  std::string step;
  if (!std::getline(std::cin, step)) return 1;
  struct Cell {
    grpc::ClientContext ctx;
    pb::ExecuteResponse response;
  };
  std::vector<std::unique_ptr<Cell>> cells;
  pb::ExecuteRequest cell;
  cell.set_session_id(idle);
  cell.set_code("x = 1");
  for (int i = 0; i < n; ++i) {
    cells.push_back(std::make_unique<Cell>());
    Cell& c = *cells.back();
    SetDeadline(&c.ctx, 600);
    stub->async()->Execute(&c.ctx, &cell, &c.response, [&, &c = c](grpc::Status s) {
      std::lock_guard<std::mutex> lock(mu);
      ++(s.ok() && c.response.outcome() == pb::OUTCOME_OK ? answered : failed);
      cv.notify_all();
    });
  }
  Emit({{"sent", n}});
  if (!std::getline(std::cin, step)) return 1;
  const auto start = Clock::now();
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    pb::InterruptSessionRequest interrupt;
    interrupt.set_session_id(busy);
    pb::InterruptSessionResponse interrupted;
    stub->InterruptSession(&ctx, interrupt, &interrupted);
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return sleeper_done && answered + failed == n; });
  }
  const double ms = MsSince(start);
  CloseSession(*stub, busy);
  CloseSession(*stub, idle);
  Emit({{"answered", answered}, {"failed", failed}, {"all_answered_ms", ms}});
  return 0;
}

int Burst(const Flags& flags) {
  const int n = static_cast<int>(flags.Int("n", 1000));
  const int deadline_s = static_cast<int>(flags.Int("deadline-s", 300));
  const std::string code = flags.Str("code", "x=1");
  std::vector<std::unique_ptr<pb::Executor::Stub>> stubs;
  for (int i = 0, k = static_cast<int>(flags.Int("channels", 16)); i < std::max(1, k); ++i) {
    stubs.push_back(Connect(flags.Str("addr", "")));
  }
  struct Client {
    grpc::ClientContext create_ctx, cell_ctx;
    pb::CreateSessionRequest create;
    pb::Session session;
    pb::ExecuteRequest cell;
    pb::ExecuteResponse response;
    double created_ms = -1, answered_ms = -1;
    std::string error;
  };
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < n; ++i) clients.push_back(std::make_unique<Client>());
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  const auto start = Clock::now();
  auto finish = [&](Client& c, std::string error) {
    std::lock_guard<std::mutex> lock(mu);
    c.error = std::move(error);
    if (c.error.empty()) c.answered_ms = MsSince(start);
    ++finished;
    cv.notify_all();
  };
  for (int i = 0; i < n; ++i) {
    Client& c = *clients[i];
    pb::Executor::Stub& stub = *stubs[i % stubs.size()];
    SetDeadline(&c.create_ctx, deadline_s);
    stub.async()->CreateSession(&c.create_ctx, &c.create, &c.session, [&, &c = c, &stub = stub](grpc::Status s) {
      if (!s.ok()) return finish(c, "grpc:" + std::to_string(s.error_code()) + " " + s.error_message());
      c.created_ms = MsSince(start);
      SetDeadline(&c.cell_ctx, deadline_s);
      c.cell.set_session_id(c.session.id());
      c.cell.set_code(code);
      stub.async()->Execute(&c.cell_ctx, &c.cell, &c.response, [&, &c = c](grpc::Status s) {
        if (!s.ok() || c.response.outcome() != pb::OUTCOME_OK) return finish(c, OutcomeName(s, c.response));
        finish(c, "");
      });
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return finished == n; });
  }
  const double wall_ms = MsSince(start);
  std::vector<double> answered, created;
  std::map<std::string, int> refused;  // by gRPC code, creations only
  int failed = 0;
  std::string refusal_sample, failure_sample;
  for (const auto& c : clients) {
    if (c->error.empty()) {
      answered.push_back(c->answered_ms);
      created.push_back(c->created_ms);
    } else if (c->created_ms < 0) {
      ++refused[c->error.substr(0, c->error.find(' '))];
      refusal_sample = c->error;
    } else {
      ++failed;
      failure_sample = c->error;
    }
  }
  std::sort(answered.begin(), answered.end());
  nlohmann::json j = {{"sessions", n}, {"answered", answered.size()}, {"failed", failed},
                      {"deadline_s", deadline_s}, {"channels", stubs.size()}};
  j["per_session"] = Summarize(answered);  // burst start to the first cell's answer
  j["created"] = Summarize(created);
  // The first 100 to answer, as a burst of 100 would have been served.
  j["first_100"] = Summarize(std::vector<double>(answered.begin(), answered.begin() + std::min<size_t>(100, answered.size())));
  j["all_answered_ms"] = answered.size() == static_cast<size_t>(n) ? nlohmann::json(wall_ms) : nlohmann::json();
  int refused_total = 0;
  for (const auto& [code, count] : refused) refused_total += count;
  j["refused"] = refused_total;
  j["refused_by_code"] = refused;
  if (!refusal_sample.empty()) j["refusal_sample"] = refusal_sample;
  if (!failure_sample.empty()) j["failure_sample"] = failure_sample;
  // Closed after the figures: the burst's sessions held what a burst holds.
  std::vector<std::thread> closers;
  for (size_t t = 0; t < stubs.size(); ++t) {
    closers.emplace_back([&, t] {
      for (size_t i = t; i < clients.size(); i += stubs.size()) {
        if (!clients[i]->session.id().empty()) CloseSession(*stubs[t], clients[i]->session.id());
      }
    });
  }
  for (std::thread& closer : closers) closer.join();
  Emit(j);
  return 0;
}

}  // namespace
}  // namespace warden::bench

int main(int argc, char** argv) {
  using namespace warden::bench;
  signal(SIGPIPE, SIG_IGN);
  if (argc < 2) {
    fprintf(stderr,
            "usage: warden_bench cells|oneshot|session-start|throughput|suite|hold|noisy|first-result|burst|queued "
            "--addr unix:PATH [--flag value]...\n");
    return 2;
  }
  const std::string command = argv[1];
  Flags flags(argc, argv, 2);
  if (command == "cells") return Cells(flags);
  if (command == "oneshot") return Oneshot(flags);
  if (command == "commands") return Commands(flags);
  if (command == "session-start") return SessionStart(flags);
  if (command == "throughput") return Throughput(flags);
  if (command == "suite") return Suite(flags);
  if (command == "hold") return Hold(flags);
  if (command == "noisy") return Noisy(flags);
  if (command == "first-result") return FirstResult(flags);
  if (command == "burst") return Burst(flags);
  if (command == "queued") return Queued(flags);
  fprintf(stderr, "unknown command '%s'\n", command.c_str());
  return 2;
}
