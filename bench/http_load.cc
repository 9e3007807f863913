// http_load: the HTTP front's load generator for `make bench` (bench/run_bench.py
// section "http"), the same client against wardend and against nginx:
//
//   http_load idle --port P --connections N [--path /api] [--probe-path /healthz]
//                  [--server-pid PID ...] [--probes 500]
//       opens N keep-alive connections, each answered once (`path`) and then
//       left idle; reports how many the server holds, its RSS before and
//       after (the memory per idle connection), and the latency of a real
//       client beside them: `probes` requests (`probe-path`), each on a
//       fresh connection.
//   http_load rate --port P --path /healthz [--method POST --body B --header K:V ...]
//                  [--clients 8] [--seconds 10] [--each-client-header K:V1,V2,...]
//       requests per second over keep-alive connections, C clients at once,
//       with their latencies. --each-client-header gives client i the i-th
//       value (e.g. E2B's sandbox id and token for /execute).
//   http_load kernels --port P --kernels N [--code "x = 1"] [--server-pid PID]
//       starts N Kernel Gateway kernels, opens one channel WebSocket per
//       kernel, all at once, runs one cell on each and reports the replies'
//       latency and the server's threads and RSS with every socket open.
// Prints one JSON object. Never fails on a figure; exit 1 only on bad usage
// or when nothing could connect.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "boost/asio/connect.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "boost/beast/websocket.hpp"
#include "nlohmann/json.hpp"

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace websocket = boost::beast::websocket;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Args {
  std::string mode;
  int port = 0;
  int connections = 10'000;
  int probes = 500;
  int clients = 8;
  double seconds = 10;
  int kernels = 1000;
  std::vector<long> server_pids;  // summed: nginx's master and workers
  std::string path = "/healthz";
  std::string probe_path;  // idle: what the real client asks; default: path
  std::string method = "GET";
  std::string body;
  std::string code = "x = 1";
  std::vector<std::pair<std::string, std::string>> headers;
  std::vector<std::pair<std::string, std::vector<std::string>>> each_client;
};

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr, "http_load: %s\nusage: http_load idle|rate|kernels --port P [options] (see the source)\n", why);
  std::exit(1);
}

Args Parse(int argc, char** argv) {
  if (argc < 2) Usage("no mode");
  Args a;
  a.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) Usage("a flag without its value");
    const std::string v = argv[++i];
    if (flag == "--port") a.port = std::stoi(v);
    else if (flag == "--connections") a.connections = std::stoi(v);
    else if (flag == "--probes") a.probes = std::stoi(v);
    else if (flag == "--clients") a.clients = std::stoi(v);
    else if (flag == "--seconds") a.seconds = std::stod(v);
    else if (flag == "--kernels") a.kernels = std::stoi(v);
    else if (flag == "--server-pid") a.server_pids.push_back(std::stol(v));
    else if (flag == "--path") a.path = v;
    else if (flag == "--probe-path") a.probe_path = v;
    else if (flag == "--method") a.method = v;
    else if (flag == "--body") a.body = v;
    else if (flag == "--code") a.code = v;
    else if (flag == "--header" || flag == "--each-client-header") {
      const size_t colon = v.find(':');
      if (colon == std::string::npos) Usage("a header without ':'");
      const std::string name = v.substr(0, colon), value = v.substr(colon + 1);
      if (flag == "--header") {
        a.headers.emplace_back(name, value);
      } else {
        std::vector<std::string> values;
        for (size_t start = 0;;) {
          const size_t comma = value.find(',', start);
          values.push_back(value.substr(start, comma - start));
          if (comma == std::string::npos) break;
          start = comma + 1;
        }
        a.each_client.emplace_back(name, values);
      }
    } else {
      Usage(("unknown flag " + flag).c_str());
    }
  }
  if (a.port <= 0) Usage("no --port");
  return a;
}

// The server's resident memory (KiB) and threads, from /proc, summed over
// its processes.
std::pair<long, long> RssAndThreads(const std::vector<long>& pids) {
  long rss = 0, threads = 0;
  for (long pid : pids) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("VmRSS:", 0) == 0) rss += std::stol(line.substr(6));
      if (line.rfind("Threads:", 0) == 0) threads += std::stol(line.substr(8));
    }
  }
  return {rss, threads};
}

json Percentiles(std::vector<double> ms) {
  if (ms.empty()) return {{"n", 0}};
  std::sort(ms.begin(), ms.end());
  auto at = [&ms](double q) { return ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))]; };
  return {{"n", ms.size()}, {"p50_ms", at(0.50)}, {"p99_ms", at(0.99)}, {"max_ms", ms.back()}};
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

net::ip::tcp::endpoint Endpoint(int port) {
  return {net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)};
}

bhttp::request<bhttp::string_body> MakeRequest(const Args& a, const std::string& method, const std::string& target,
                                               const std::string& body, int client) {
  bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), target, 11};
  req.set(bhttp::field::host, "127.0.0.1:" + std::to_string(a.port));
  for (const auto& [name, value] : a.headers) req.set(name, value);
  for (const auto& [name, values] : a.each_client) req.set(name, values[client % values.size()]);
  req.body() = body;
  req.keep_alive(true);
  req.prepare_payload();
  return req;
}

// One request on a fresh connection: its latency, or a negative number.
double FreshRequest(const Args& a, const std::string& target) {
  const Clock::time_point start = Clock::now();
  try {
    net::io_context io;
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(30));
    stream.connect(Endpoint(a.port));
    auto req = MakeRequest(a, "GET", target, "", 0);
    req.keep_alive(false);
    bhttp::write(stream, req);
    beast::flat_buffer buffer;
    bhttp::response<bhttp::string_body> res;
    bhttp::read(stream, buffer, res);
    if (res.result_int() != 200) return -1;
  } catch (const std::exception&) {
    return -1;
  }
  return Ms(Clock::now() - start);
}

// ---- idle

// A connection answered once, then held open; `closed` counts the ones the
// server has closed since.
struct IdleConnection : std::enable_shared_from_this<IdleConnection> {
  IdleConnection(net::io_context& io) : stream(io) {}
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
  bhttp::request<bhttp::string_body> req;
  bhttp::response<bhttp::string_body> res;
  char byte;
};

json Idle(const Args& a) {
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  const auto [rss_before, threads_before] = RssAndThreads(a.server_pids);
  net::io_context io;
  std::atomic<int> answered{0}, failed{0}, closed{0};
  std::vector<std::shared_ptr<IdleConnection>> all;
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < a.connections; ++i) {
    auto c = std::make_shared<IdleConnection>(io);
    all.push_back(c);
    c->req = MakeRequest(a, "GET", a.path, "", i);
    c->stream.async_connect(Endpoint(a.port), [c, &answered, &failed, &closed](beast::error_code ec) {
      if (ec) return (void)++failed;
      bhttp::async_write(c->stream, c->req, [c, &answered, &failed, &closed](beast::error_code ec, size_t) {
        if (ec) return (void)++failed;
        bhttp::async_read(c->stream, c->buffer, c->res, [c, &answered, &failed, &closed](beast::error_code ec, size_t) {
          if (ec || c->res.result_int() != 200) return (void)++failed;
          ++answered;
          // Idle from here; a read completes only when the server closes.
          c->stream.socket().async_read_some(net::buffer(&c->byte, 1),
                                             [c, &closed](beast::error_code, size_t) { ++closed; });
        });
      });
    });
    if (i % 200 == 199) io.poll();  // keep the kernel's accept queue from overflowing
  }
  std::thread runner([&io] { io.run(); });
  while (answered + failed < a.connections && Clock::now() - start < std::chrono::seconds(300)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const double open_s = Ms(Clock::now() - start) / 1000;
  std::this_thread::sleep_for(std::chrono::seconds(1));  // the server settles
  const auto [rss_after, threads_after] = RssAndThreads(a.server_pids);
  // The real client, beside them.
  std::vector<double> probe;
  int probe_failed = 0;
  for (int i = 0; i < a.probes; ++i) {
    const double ms = FreshRequest(a, a.probe_path.empty() ? a.path : a.probe_path);
    if (ms < 0) ++probe_failed;
    else probe.push_back(ms);
  }
  const int held = answered - closed;
  json out = {{"connections", a.connections},
              {"answered", answered.load()},
              {"failed", failed.load()},
              {"held_after_probes", held},
              {"open_seconds", open_s},
              {"server_rss_kib_before", rss_before},
              {"server_rss_kib_after", rss_after},
              {"server_threads_before", threads_before},
              {"server_threads_after", threads_after},
              {"probe", Percentiles(probe)},
              {"probe_failed", probe_failed}};
  if (answered > 0 && rss_before > 0 && rss_after > 0) {
    out["rss_bytes_per_connection"] = (rss_after - rss_before) * 1024.0 / answered;
  }
  for (auto& c : all) {
    beast::error_code ignored;
    c->stream.socket().close(ignored);
  }
  io.stop();
  runner.join();
  return out;
}

// ---- rate

json Rate(const Args& a) {
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<double> latencies;
  std::atomic<long> ok{0}, bad{0};
  std::vector<std::thread> clients;
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < a.clients; ++i) {
    clients.emplace_back([&, i] {
      std::vector<double> mine;
      while (!stop) {
        try {
          net::io_context io;
          beast::tcp_stream stream(io);
          stream.connect(Endpoint(a.port));
          beast::flat_buffer buffer;
          while (!stop) {
            auto req = MakeRequest(a, a.method, a.path, a.body, i);
            const Clock::time_point t = Clock::now();
            stream.expires_after(std::chrono::seconds(60));
            bhttp::write(stream, req);
            bhttp::response<bhttp::string_body> res;
            bhttp::read(stream, buffer, res);
            mine.push_back(Ms(Clock::now() - t));
            (res.result_int() / 100 == 2 ? ok : bad)++;
            if (!res.keep_alive()) break;  // a server that closes: reconnect
          }
        } catch (const std::exception&) {
          ++bad;
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(a.seconds));
  stop = true;
  for (std::thread& t : clients) t.join();
  const double elapsed = Ms(Clock::now() - start) / 1000;
  return {{"clients", a.clients},
          {"seconds", elapsed},
          {"ok", ok.load()},
          {"failed", bad.load()},
          {"per_second", ok / elapsed},
          {"latency", Percentiles(latencies)}};
}

// ---- kernels

json Call(const Args& a, const std::string& method, const std::string& target, const std::string& body) {
  net::io_context io;
  beast::tcp_stream stream(io);
  stream.expires_after(std::chrono::seconds(120));
  stream.connect(Endpoint(a.port));
  auto req = MakeRequest(a, method, target, body, 0);
  req.set(bhttp::field::content_type, "application/json");
  bhttp::write(stream, req);
  beast::flat_buffer buffer;
  bhttp::response<bhttp::string_body> res;
  bhttp::read(stream, buffer, res);
  json out = json::parse(res.body(), nullptr, false);
  if (res.result_int() / 100 != 2) throw std::runtime_error(method + " " + target + ": " + res.body());
  return out;
}

struct Channel : std::enable_shared_from_this<Channel> {
  Channel(net::io_context& io) : ws(io) {}
  websocket::stream<beast::tcp_stream> ws;
  beast::flat_buffer buffer;
  std::string kernel, msg_id, frame;
  Clock::time_point sent;
  double reply_ms = -1;
  bool replied = false;
};

json Kernels(const Args& a) {
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  // Start the kernels, eight at a time.
  std::vector<std::string> ids(a.kernels);
  std::atomic<int> next{0}, start_failed{0};
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> starters;
  for (int t = 0; t < 8; ++t) {
    starters.emplace_back([&] {
      for (int i; (i = next++) < a.kernels;) {
        try {
          ids[i] = Call(a, "POST", "/api/kernels", R"({"name": "python3"})").value("id", "");
        } catch (const std::exception& e) {
          if (start_failed++ == 0) std::fprintf(stderr, "http_load: %s\n", e.what());
        }
      }
    });
  }
  for (std::thread& t : starters) t.join();
  const double start_s = Ms(Clock::now() - start) / 1000;

  // Every channel open at once, then one cell on each.
  net::io_context io;
  std::vector<std::shared_ptr<Channel>> channels;
  std::atomic<int> opened{0}, open_failed{0}, replies{0}, reply_failed{0};
  const Clock::time_point open_start = Clock::now();
  for (const std::string& id : ids) {
    if (id.empty()) continue;
    auto c = std::make_shared<Channel>(io);
    c->kernel = id;
    c->msg_id = "bench-" + id;
    channels.push_back(c);
    beast::get_lowest_layer(c->ws).async_connect(Endpoint(a.port), [c, &a, &opened, &open_failed](beast::error_code ec) {
      if (ec) return (void)++open_failed;
      c->ws.set_option(websocket::stream_base::decorator([&a](websocket::request_type& req) {
        for (const auto& [name, value] : a.headers) req.set(name, value);
      }));
      c->ws.async_handshake("127.0.0.1:" + std::to_string(a.port), "/api/kernels/" + c->kernel + "/channels",
                            [c, &opened, &open_failed](beast::error_code ec) { (ec ? open_failed : opened)++; });
    });
  }
  std::thread runner([&io] {
    auto guard = net::make_work_guard(io);
    io.run();
  });
  while (opened + open_failed < static_cast<int>(channels.size()) &&
         Clock::now() - open_start < std::chrono::seconds(300)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double open_s = Ms(Clock::now() - open_start) / 1000;
  const auto [rss_open, threads_open] = RssAndThreads(a.server_pids);

  const Clock::time_point cells_start = Clock::now();
  for (auto& c : channels) {
    net::post(io, [c, &a, &replies, &reply_failed] {
      if (!c->ws.is_open()) return (void)++reply_failed;
      c->frame = json({{"header", {{"msg_id", c->msg_id}, {"msg_type", "execute_request"}, {"session", "bench"},
                                   {"username", "bench"}, {"version", "5.3"}}},
                       {"parent_header", json::object()},
                       {"metadata", json::object()},
                       {"content", {{"code", a.code}, {"silent", false}}},
                       {"channel", "shell"}})
                     .dump();
      c->sent = Clock::now();
      c->ws.async_write(net::buffer(c->frame), [c, &replies, &reply_failed](beast::error_code ec, size_t) {
        if (ec) return (void)++reply_failed;
        // Read until the execute_reply to this cell.
        auto read = std::make_shared<std::function<void()>>();
        *read = [c, read, &replies, &reply_failed] {
          c->ws.async_read(c->buffer, [c, read, &replies, &reply_failed](beast::error_code ec, size_t) {
            if (ec) {
              ++reply_failed;
              *read = nullptr;
              return;
            }
            json m = json::parse(beast::buffers_to_string(c->buffer.data()), nullptr, false);
            c->buffer.consume(c->buffer.size());
            if (m.is_object() && m["header"]["msg_type"] == "execute_reply" &&
                m["parent_header"]["msg_id"] == c->msg_id) {
              c->reply_ms = Ms(Clock::now() - c->sent);
              c->replied = m["content"]["status"] == "ok";
              (c->replied ? replies : reply_failed)++;
              *read = nullptr;
              return;
            }
            (*read)();
          });
        };
        (*read)();
      });
    });
  }
  while (replies + reply_failed < static_cast<int>(channels.size()) &&
         Clock::now() - cells_start < std::chrono::seconds(600)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double cells_s = Ms(Clock::now() - cells_start) / 1000;
  const auto [rss_after, threads_after] = RssAndThreads(a.server_pids);
  std::vector<double> latencies;
  for (auto& c : channels) {
    if (c->replied) latencies.push_back(c->reply_ms);
  }
  for (auto& c : channels) {
    net::post(io, [c] {
      beast::error_code ignored;
      beast::get_lowest_layer(c->ws).socket().close(ignored);
    });
  }
  io.stop();
  runner.join();
  // Shut the kernels down, eight at a time.
  next = 0;
  std::vector<std::thread> stoppers;
  for (int t = 0; t < 8; ++t) {
    stoppers.emplace_back([&] {
      for (int i; (i = next++) < a.kernels;) {
        if (ids[i].empty()) continue;
        try {
          Call(a, "DELETE", "/api/kernels/" + ids[i], "");
        } catch (const std::exception&) {
        }
      }
    });
  }
  for (std::thread& t : stoppers) t.join();
  return {{"kernels", a.kernels},
          {"started", a.kernels - start_failed.load()},
          {"start_seconds", start_s},
          {"channels_open", opened.load()},
          {"open_failed", open_failed.load()},
          {"open_seconds", open_s},
          {"server_rss_kib_open", rss_open},
          {"server_threads_open", threads_open},
          {"cells_answered", replies.load()},
          {"cells_failed", reply_failed.load()},
          {"cells_seconds", cells_s},
          {"reply", Percentiles(latencies)},
          {"server_rss_kib_after_cells", rss_after},
          {"server_threads_after_cells", threads_after}};
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = Parse(argc, argv);
  json out;
  if (a.mode == "idle") {
    out = Idle(a);
  } else if (a.mode == "rate") {
    out = Rate(a);
  } else if (a.mode == "kernels") {
    out = Kernels(a);
  } else {
    Usage("the mode is idle, rate or kernels");
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
