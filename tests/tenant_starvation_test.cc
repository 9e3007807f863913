// The adversarial suite of issue 29: two tenants on one wardend (a
// subprocess, so that its memory is its own to measure), and for each
// resource they share one of them - alice - drives it to its limit while
// the other - bob - and root on the host keep working:
//   - kernel per-user counts (inotify instances and watches, pending
//     signals, locked shared memory): each sandbox's user namespace is
//     owned by a host id of its own, so its counts are its own;
//   - wardend's memory: file metadata read for listings, gzip'ed uploads
//     inflated together;
//   - HTTP streams and the handler threads;
//   - the snapshot store: a damaged record, a snapshot at the memory limit,
//     a hibernated session whose snapshot is damaged, the tenant's quota;
//   - the E2B front's own memory of sandboxes, and its signed URLs.
// wardend's resident memory is measured at the start, around each attack,
// and at the end, which must stay within twice the start. Runs as one ctest
// test (one daemon for all), label "daemon".
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "fronts/e2b/file_signature.h"
#include "fronts/http/testing/gzip.h"
#include "fronts/http/testing/raw_socket.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "warden/v1/executor.grpc.pb.h"

namespace warden {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using nlohmann::json;
using Headers = std::vector<std::pair<std::string, std::string>>;
using http::testing::Gzip;
using http::testing::RawSocket;

constexpr char kAlice[] = "alice-starve-4Hq8Ws2Ed6Rf1Tg";
constexpr char kBob[] = "bob-starve-9Yh3Uj7Ik5Ol0Pz2";
constexpr int kHandlerThreads = 64;  // streams hold at most 32 of them
constexpr int64_t kMaxFileBytes = 8 << 20;
// Under AddressSanitizer (make test-sanitize) wardend's allocator keeps
// what is freed in its quarantine (256 MiB) and its resident memory says
// nothing of what wardend holds: its figures are printed, and bounded in
// the plain build only (make test).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kMemoryMeans = false;
#else
constexpr bool kMemoryMeans = true;
#endif

struct Reply {
  unsigned status = 0;
  std::string body;
  json Json() const { return json::parse(body, nullptr, false); }
};

int64_t ProcStatusKb(pid_t pid, const std::string& key) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(status, line);) {
    if (absl::StartsWith(line, key + ":")) {
      int64_t kb = 0;
      std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (parts.size() >= 2 && absl::SimpleAtoi(parts[1], &kb)) return kb;
    }
  }
  return -1;
}

int64_t ReadSysctl(const std::string& path) {
  std::ifstream f(path);
  int64_t v = -1;
  f >> v;
  return v;
}

// What arrives on `socket` while `more` says so of it, until the server
// closes or `timeout` passes.
std::string ReadFor(const http::testing::RawSocket& socket, absl::Duration timeout,
                    const std::function<bool(const std::string&)>& more) {
  std::string out;
  char buffer[4096];
  const absl::Time deadline = absl::Now() + timeout;
  while (more(out) && absl::Now() < deadline) {
    pollfd p{socket.fd(), POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    const ssize_t n = ::recv(socket.fd(), buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  return out;
}

// One Connect envelope: flags, length, JSON.
std::string Envelope(const json& message) {
  const std::string body = message.dump();
  std::string out(5, '\0');
  const uint32_t n = static_cast<uint32_t>(body.size());
  out[1] = static_cast<char>(n >> 24);
  out[2] = static_cast<char>(n >> 16);
  out[3] = static_cast<char>(n >> 8);
  out[4] = static_cast<char>(n);
  return out + body;
}

struct Sandbox {
  std::string id;
  std::string token;
  std::string key;  // the owner's API key
};

class TenantStarvationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char dir[] = "/tmp/warden-starve-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = new std::string(dir);
    const std::string tokens = *dir_ + "/tokens.json";
    std::ofstream(tokens) << json({{"tokens",
                                    {{{"token", kAlice}, {"tenant", "alice"}}, {{"token", kBob}, {"tenant", "bob"}}}}})
                                 .dump();
    ASSERT_EQ(chmod(tokens.c_str(), 0600), 0);
    const json config = {
        {"auth", {{"tokens_file", tokens}}},
        {"executor", {{"host_id_base", 6'000'000 + (getpid() % 4096) * 1024}, {"host_id_count", 1024}}},
        {"limits",
         {{"defaults", {{"memory_mb", 256}}}, {"max_file_bytes", kMaxFileBytes}, {"tmpfs_mb", 384}}},
        {"http", {{"handler_threads", kHandlerThreads}}},
        {"sessions", {{"hibernate_after_seconds", 2}}},
        {"snapshots", {{"dir", *dir_ + "/snapshots"}, {"max_bytes_per_tenant", 16 << 20}}},
        {"pools", {{{"language", "python"}, {"size", 1}}}},
    };
    std::ofstream(*dir_ + "/wardend.json") << config.dump();
    // The HTTP front's port, picked here: bound, then freed for wardend.
    {
      net::io_context io;
      net::ip::tcp::acceptor probe(io, net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
      port_ = probe.local_endpoint().port();
    }
    const std::string log = *dir_ + "/wardend.log";
    std::vector<std::string> args = {std::string(WARDEN_BIN_DIR) + "/wardend", "--config", *dir_ + "/wardend.json",
                                     "--listen", "unix:" + *dir_ + "/w.sock", "--http-listen",
                                     absl::StrCat("127.0.0.1:", port_)};
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline && Send("GET", "/health").status == 0) absl::SleepFor(absl::Milliseconds(50));
    ASSERT_NE(Send("GET", "/health").status, 0u) << "wardend did not start; its log: " << log;
    auto channel = grpc::CreateChannel("unix:" + *dir_ + "/w.sock", grpc::InsecureChannelCredentials());
    stub_ = v1::Executor::NewStub(channel).release();
    alice_ = new Sandbox(CreateSandbox(kAlice));
    bob_ = new Sandbox(CreateSandbox(kBob));
    // Both tenants at work: what the daemon holds at the start.
    ASSERT_EQ(Execute(*alice_, "print(1 + 1)"), "2\n");
    ASSERT_EQ(Execute(*bob_, "print(2 + 2)"), "4\n");
    start_rss_kb_ = ProcStatusKb(pid_, "VmRSS");
    printf("wardend's resident memory at the start: %ld KiB\n", static_cast<long>(start_rss_kb_));
  }

  static void TearDownTestSuite() {
    delete stub_;
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
      struct pollfd p = {fd, POLLIN, 0};
      poll(&p, 1, 20'000);
      close(fd);
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::error_code ignored;
    std::filesystem::remove_all(*dir_, ignored);
    delete dir_;
    delete alice_;
    delete bob_;
  }

  // One request on a fresh connection; status 0 when there was no answer.
  static Reply Send(const std::string& method, const std::string& target, const Headers& headers = {},
                    const std::string& body = "", absl::Duration timeout = absl::Seconds(120)) {
    net::io_context io;
    beast::tcp_stream stream(io);
    beast::error_code ec;
    stream.expires_after(absl::ToChronoNanoseconds(timeout));
    stream.connect(net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), port_), ec);
    if (ec) return {};
    bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), target, 11};
    req.set(bhttp::field::host, absl::StrCat("127.0.0.1:", port_));
    for (const auto& [name, value] : headers) req.set(name, value);
    req.body() = body;
    req.prepare_payload();
    bhttp::write(stream, req, ec);
    if (ec) return {};
    beast::flat_buffer buffer;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(256 << 20);
    bhttp::read(stream, buffer, parser, ec);
    if (ec) return {};
    return {parser.get().result_int(), parser.get().body()};
  }

  static Headers Key(const std::string& key) { return {{"Content-Type", "application/json"}, {"X-API-KEY", key}}; }
  static Headers Plane(const Sandbox& s, const std::string& type = "application/json") {
    return {{"Content-Type", type}, {"E2b-Sandbox-Id", s.id}, {"X-Access-Token", s.token}};
  }

  static Sandbox CreateSandbox(const std::string& key, int64_t timeout = 600) {
    Reply r = Send("POST", "/sandboxes", Key(key), json({{"timeout", timeout}}).dump());
    EXPECT_EQ(r.status, 201u) << r.body;
    json body = r.Json();
    return {body.value("sandboxID", ""), body.value("envdAccessToken", ""), key};
  }

  // Runs a cell; its standard output, or "ERROR: ..." with what went wrong.
  static std::string Execute(const Sandbox& s, const std::string& code) {
    Reply r = Send("POST", "/execute", Plane(s), json({{"code", code}}).dump());
    if (r.status != 200) return absl::StrCat("ERROR: HTTP ", r.status, " ", r.body);
    std::string out;
    for (absl::string_view line : absl::StrSplit(r.body, '\n', absl::SkipEmpty())) {
      json j = json::parse(line, nullptr, false);
      if (j.value("type", "") == "stdout") out += j.value("text", "");
      if (j.value("type", "") == "error") {
        return absl::StrCat("ERROR: ", j.value("name", ""), ": ", j.value("value", ""), "\n", out);
      }
    }
    return out;
  }

  static std::unique_ptr<grpc::ClientContext> Call(const std::string& token) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->AddMetadata("authorization", absl::StrCat("Bearer ", token));
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    return ctx;
  }

  int64_t RssKb() const { return ProcStatusKb(pid_, "VmRSS"); }
  // Forgets wardend's peak so far: VmHWM then counts from now.
  void ResetPeak() const { std::ofstream(absl::StrCat("/proc/", pid_, "/clear_refs")) << "5"; }
  int64_t PeakKb() const { return ProcStatusKb(pid_, "VmHWM"); }

  static std::string* dir_;
  static unsigned short port_;
  static pid_t pid_;
  static v1::Executor::Stub* stub_;
  static Sandbox* alice_;
  static Sandbox* bob_;
  static int64_t start_rss_kb_;
};

std::string* TenantStarvationTest::dir_ = nullptr;
unsigned short TenantStarvationTest::port_ = 0;
pid_t TenantStarvationTest::pid_ = -1;
v1::Executor::Stub* TenantStarvationTest::stub_ = nullptr;
Sandbox* TenantStarvationTest::alice_ = nullptr;
Sandbox* TenantStarvationTest::bob_ = nullptr;
int64_t TenantStarvationTest::start_rss_kb_ = 0;

constexpr char kLibc[] = R"(
import ctypes, os, signal, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
)";

// ---- Kernel per-user counts

// Root on the host can still make an inotify instance and a watch.
::testing::AssertionResult RootCanWatch(const std::string& dir) {
  const int fd = inotify_init1(IN_CLOEXEC);
  if (fd < 0) return ::testing::AssertionFailure() << "root's inotify_init1: " << strerror(errno);
  const int wd = inotify_add_watch(fd, dir.c_str(), IN_CREATE);
  const int err = errno;
  close(fd);
  if (wd < 0) return ::testing::AssertionFailure() << "root's inotify_add_watch: " << strerror(err);
  return ::testing::AssertionSuccess();
}

TEST_F(TenantStarvationTest, InotifyInstancesAndWatchesOfOneSandboxAreItsOwn) {
  // Alice takes every inotify instance her sandbox may have...
  const std::string held = Execute(*alice_, absl::StrCat(kLibc, R"(
held = []
while True:
    fd = libc.inotify_init1(0)
    if fd < 0:
        err = ctypes.get_errno()
        break
    held.append(fd)
print(len(held), err)
)"));
  const int64_t max_instances = ReadSysctl("/proc/sys/fs/inotify/max_user_instances");
  EXPECT_EQ(held, absl::StrCat(max_instances, " ", EMFILE, "\n")) << "alice did not reach her limit";
  // ...while root on the host and bob's sandbox still get theirs.
  EXPECT_TRUE(RootCanWatch(*dir_));
  EXPECT_EQ(Execute(*bob_, absl::StrCat(kLibc, "print(libc.inotify_init1(0) >= 0)")), "True\n");

  // Then every watch her instances may hold (the host's per-user bound,
  // spread over her instances, a few files each)...
  const int64_t max_watches = ReadSysctl("/proc/sys/fs/inotify/max_user_watches");
  const std::string watched = Execute(*alice_, absl::StrCat(R"(
files = )", max_watches / max_instances + 2, R"(
os.makedirs('/tmp/watched', exist_ok=True)
paths = []
for i in range(files):
    p = '/tmp/watched/%d' % i
    open(p, 'w').close()
    paths.append(p.encode())
count, err = 0, 0
for fd in held:
    for p in paths:
        if libc.inotify_add_watch(fd, p, 2) < 0:
            err = ctypes.get_errno()
            break
        count += 1
    if err:
        break
print(count, err)
)"));
  EXPECT_EQ(watched, absl::StrCat(max_watches, " ", ENOSPC, "\n")) << "alice did not reach her limit";
  EXPECT_TRUE(RootCanWatch(*dir_));
  EXPECT_EQ(Execute(*bob_, absl::StrCat(kLibc, R"(
fd = libc.inotify_init1(0)
print(fd >= 0 and libc.inotify_add_watch(fd, b'/tmp', 2) >= 0)
)")),
            "True\n");
  EXPECT_EQ(Execute(*alice_, "for fd in held: os.close(fd)\nheld = []\nprint('closed')"), "closed\n");
}

TEST_F(TenantStarvationTest, PendingSignalsOfOneSandboxAreItsOwn) {
  // A process of alice's queues real-time signals to itself until the
  // kernel refuses, and holds them.
  const std::string flood = Execute(*alice_, absl::StrCat(kLibc, R"(
code = r'''
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
class sigval(ctypes.Union):
    _fields_ = [('sival_int', ctypes.c_int), ('sival_ptr', ctypes.c_void_p)]
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
n = 0
while libc.sigqueue(os.getpid(), signal.SIGRTMIN, sigval(0)) == 0:
    n += 1
print(n, ctypes.get_errno(), flush=True)
sys.stdin.read()
'''
flooder = subprocess.Popen([sys.executable, '-c', code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
print(flooder.stdout.readline(), end='')
)"));
  struct rlimit pending;
  ASSERT_EQ(getrlimit(RLIMIT_SIGPENDING, &pending), 0);
  EXPECT_EQ(flood, absl::StrCat(pending.rlim_cur, " ", EAGAIN, "\n")) << "alice did not reach her limit";
  // Root on the host queues one (in a child: this process's own signals stay as they are).
  const pid_t child = fork();
  if (child == 0) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGRTMIN);
    sigprocmask(SIG_BLOCK, &set, nullptr);
    union sigval value = {};
    _exit(sigqueue(getpid(), SIGRTMIN, value) == 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "root could not queue a signal";
  // So does bob's sandbox.
  EXPECT_EQ(Execute(*bob_, absl::StrCat(kLibc, R"(
class sigval(ctypes.Union):
    _fields_ = [('sival_int', ctypes.c_int), ('sival_ptr', ctypes.c_void_p)]
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN + 1])
print(libc.sigqueue(os.getpid(), signal.SIGRTMIN + 1, sigval(0)))
signal.sigtimedwait([signal.SIGRTMIN + 1], 0)
)")),
            "0\n");
  EXPECT_EQ(Execute(*alice_, "flooder.kill(); flooder.wait(); print('gone')"), "gone\n");
}

TEST_F(TenantStarvationTest, LockedSharedMemoryOfOneSandboxIsItsOwn) {
  // Alice locks as much SysV shared memory as her RLIMIT_MEMLOCK allows.
  const std::string locked = Execute(*alice_, absl::StrCat(kLibc, R"(
import resource
limit = min(resource.getrlimit(resource.RLIMIT_MEMLOCK)[0], 64 << 20)
IPC_CREAT, IPC_RMID, SHM_LOCK = 0o1000, 0, 11
segment = libc.shmget(0, ctypes.c_size_t(limit), IPC_CREAT | 0o600)
first = libc.shmctl(segment, SHM_LOCK, None)
extra = libc.shmget(0, ctypes.c_size_t(4096), IPC_CREAT | 0o600)
more = libc.shmctl(extra, SHM_LOCK, None)
print(first, more)
)"));
  EXPECT_EQ(locked, "0 -1\n") << "alice did not reach her limit";
  // Bob locks a page of his own.
  EXPECT_EQ(Execute(*bob_, absl::StrCat(kLibc, R"(
s = libc.shmget(0, ctypes.c_size_t(4096), 0o1000 | 0o600)
print(libc.shmctl(s, 11, None))
libc.shmctl(s, 0, None)
)")),
            "0\n");
  EXPECT_EQ(Execute(*alice_, "libc.shmctl(segment, IPC_RMID, None); libc.shmctl(extra, IPC_RMID, None); print('ok')"),
            "ok\n");
}

// ---- wardend's memory

TEST_F(TenantStarvationTest, ListingFilesWithHugeMetadataCostsWardendNothingMuch) {
  // Ten files, each with 100 extended attributes of 60,000 bytes (64 MiB
  // in all, in alice's own memory: the kernel allocates each in 64 KiB).
  ASSERT_EQ(Execute(*alice_, R"(
import os
os.makedirs('/home/user/meta', exist_ok=True)
value = b'v' * 60000
for f in range(10):
    p = '/home/user/meta/f%d' % f
    open(p, 'w').close()
    for k in range(100):
        os.setxattr(p, 'user.e2b.k%d' % k, value)
print('set')
)"),
            "set\n");
  const int64_t rss_before = RssKb();
  ResetPeak();
  std::vector<std::thread> listers;
  std::atomic<int> good{0};
  for (int i = 0; i < 8; ++i) {
    listers.emplace_back([&] {
      Reply r = Send("POST", "/filesystem.Filesystem/ListDir", Plane(*alice_),
                     json({{"path", "/home/user/meta"}, {"depth", 1}}).dump());
      json body = r.Json();
      if (r.status != 200 || !body["entries"].is_array() || body["entries"].size() != 10) return;
      for (const json& entry : body["entries"]) {
        size_t total = 0;
        const json metadata = entry.value("metadata", json::object());  // items() does not keep a temporary alive
        for (const auto& [key, value] : metadata.items()) {
          total += 9 + key.size() + value.get<std::string>().size();
        }
        if (total > 4096) return;
      }
      ++good;
    });
  }
  for (std::thread& t : listers) t.join();
  EXPECT_EQ(good, 8) << "every listing answers, with at most 4 KiB of metadata per file";
  const int64_t peak = PeakKb(), rss_after = RssKb();
  printf("8 listings of 10 files with 6 MB of metadata each: wardend %ld KiB before, peak %ld, after %ld\n",
         static_cast<long>(rss_before), static_cast<long>(peak), static_cast<long>(rss_after));
  if (kMemoryMeans) {
    EXPECT_LT(peak - rss_before, 64 << 10) << "KiB";
    EXPECT_LT(rss_after - rss_before, 32 << 10) << "KiB";
  }

  // A listing larger than one answer may hold is refused, saying what to do.
  ASSERT_EQ(Execute(*alice_, R"(
os.makedirs('/home/user/many', exist_ok=True)
for f in range(1500):
    p = '/home/user/many/%04d' % f
    open(p, 'w').close()
    os.setxattr(p, 'user.e2b.k', b'x' * 3500)
print('made')
)"),
            "made\n");
  Reply big = Send("POST", "/filesystem.Filesystem/ListDir", Plane(*alice_),
                   json({{"path", "/home/user/many"}, {"depth", 1}}).dump());
  EXPECT_EQ(big.status, 429u) << big.body;
  EXPECT_TRUE(absl::StrContains(big.body, "list a directory further down")) << big.body;
  EXPECT_FALSE(absl::StrContains(big.body, "Sent message larger than max")) << big.body;
  ASSERT_EQ(Execute(*alice_, "import shutil; shutil.rmtree('/home/user/meta'); shutil.rmtree('/home/user/many'); "
                             "print('removed')"),
            "removed\n");
}

TEST_F(TenantStarvationTest, GzipBombsInflateAPieceAtATimeAndTogetherCostLittle) {
  // 24 uploads at once of 100 MiB of zeros, gzip'ed to a few hundred KiB each.
  const std::string bomb = Gzip(std::string(100 << 20, '\0'));
  ASSERT_LT(bomb.size(), 1u << 20);
  const int64_t rss_before = RssKb();
  ResetPeak();
  std::vector<std::thread> uploads;
  std::atomic<int> refused{0};
  std::string message;
  absl::Mutex mu;
  for (int i = 0; i < 24; ++i) {
    uploads.emplace_back([&, i] {
      Headers h = Plane(*alice_, "application/octet-stream");
      h.emplace_back("Content-Encoding", "gzip");
      Reply r = Send("POST", absl::StrCat("/files?path=/tmp/bomb", i), h, bomb);
      if (r.status == 400) {
        ++refused;
        absl::MutexLock lock(&mu);
        message = r.body;
      }
    });
  }
  // Bob uploads his file meanwhile.
  Reply mine = Send("POST", "/files?path=/home/user/mine.txt", Plane(*bob_, "application/octet-stream"), "bob's");
  for (std::thread& t : uploads) t.join();
  EXPECT_EQ(mine.status, 200u) << mine.body;
  EXPECT_EQ(refused, 24);
  EXPECT_TRUE(absl::StrContains(message, absl::StrCat("inflates past ", kMaxFileBytes))) << message;
  const int64_t peak = PeakKb();
  printf("24 gzip bombs at once: wardend %ld KiB before, peak %ld\n", static_cast<long>(rss_before),
         static_cast<long>(peak));
  if (kMemoryMeans) EXPECT_LT(peak - rss_before, 128 << 10) << "KiB";
  ASSERT_EQ(Execute(*alice_, "import glob\nfor p in glob.glob('/tmp/bomb*'): os.unlink(p)\nprint('ok')"), "ok\n");
}

// ---- Streams and the handler threads

// A Connect stream following command `pid` of sandbox `s`, left open.
std::unique_ptr<RawSocket> Follow(unsigned short port, const Sandbox& s, int pid) {
  auto socket = std::make_unique<RawSocket>(port);
  const std::string body = Envelope({{"process", {{"pid", pid}}}});
  socket->Send(absl::StrCat("POST /process.Process/Connect HTTP/1.1\r\nHost: 127.0.0.1\r\n",
                            "Content-Type: application/connect+json\r\nE2b-Sandbox-Id: ", s.id,
                            "\r\nX-Access-Token: ", s.token, "\r\nContent-Length: ", body.size(), "\r\n\r\n", body));
  return socket;
}

TEST_F(TenantStarvationTest, OneTenantsStreamsAndBlockedHandlersLeaveRoomForTheOther) {
  // A command that runs until the test ends, to follow.
  auto start = std::make_unique<RawSocket>(port_);
  const std::string body = Envelope({{"process", {{"cmd", "sleep"}, {"args", {"600"}}}}});
  ASSERT_TRUE(start->Send(absl::StrCat("POST /process.Process/Start HTTP/1.1\r\nHost: 127.0.0.1\r\n",
                                       "Content-Type: application/connect+json\r\nE2b-Sandbox-Id: ", alice_->id,
                                       "\r\nX-Access-Token: ", alice_->token, "\r\nContent-Length: ", body.size(),
                                       "\r\n\r\n", body)));
  const std::string started = start->ReadUntil("\"pid\"");
  const size_t at = started.find("\"pid\":");
  ASSERT_NE(at, std::string::npos) << started;
  const int pid = std::atoi(started.c_str() + at + 6);
  start.reset();  // the command runs on, as envd's do

  // Alice follows it on as many streams as she may: her share of the
  // threads streams hold, then 429.
  std::vector<std::unique_ptr<RawSocket>> alice;
  std::string refusal;
  for (int i = 0; i < kHandlerThreads && refusal.empty(); ++i) {
    auto s = Follow(port_, *alice_, pid);
    const std::string first = ReadFor(*s, absl::Seconds(10), [](const std::string& got) {
      return !absl::StrContains(got, "start") && !absl::StrContains(got, "resource_exhausted");
    });
    const std::string head = first.substr(0, first.find("\r\n"));
    if (absl::StrContains(first, "resource_exhausted")) {
      refusal = first;
    } else {
      ASSERT_TRUE(absl::StartsWith(head, "HTTP/1.1 200")) << i << ": " << head;
      alice.push_back(std::move(s));
    }
  }
  ASSERT_FALSE(refusal.empty()) << "alice was never refused";
  EXPECT_TRUE(absl::StrContains(refusal, "http.handler_threads")) << refusal;
  printf("alice streams on %zu of the %d threads streams may hold\n", alice.size(), kHandlerThreads / 2);
  EXPECT_LE(alice.size(), static_cast<size_t>(kHandlerThreads / 4));
  // Bob runs cells, which stream, and streams a command of his own.
  EXPECT_EQ(Execute(*bob_, "print('bob')"), "bob\n");
  EXPECT_EQ(Send("GET", "/health", Plane(*bob_)).status, 204u);

  // Alice's clients all leave at once: her streams are hers again at once,
  // not at their next keepalive (50 s).
  const absl::Time left = absl::Now();
  const size_t had = alice.size();
  alice.clear();
  bool reopened = false;
  while (!reopened && absl::Now() - left < absl::Seconds(20)) {
    std::vector<std::unique_ptr<RawSocket>> again;
    for (size_t i = 0; i < had; ++i) {
      auto s = Follow(port_, *alice_, pid);
      const std::string first = ReadFor(*s, absl::Seconds(10), [](const std::string& got) {
        return !absl::StrContains(got, "start") && !absl::StrContains(got, "resource_exhausted");
      });
      if (absl::StrContains(first, "resource_exhausted")) break;
      again.push_back(std::move(s));
    }
    reopened = again.size() == had;
    if (!reopened) absl::SleepFor(absl::Milliseconds(200));
  }
  const absl::Duration took = absl::Now() - left;
  printf("alice's %zu streams free again %ld ms after her clients left\n", had,
         static_cast<long>(absl::ToInt64Milliseconds(took)));
  EXPECT_TRUE(reopened);
  EXPECT_LT(took, absl::Seconds(10));

  // Handlers that block without streaming: alice's cells wait behind one
  // that sleeps, each request holding a handler thread; she holds at most
  // half of them, and bob is served at once beside.
  std::thread sleeper([&] { Execute(*alice_, "import time; time.sleep(4)"); });
  absl::SleepFor(absl::Milliseconds(500));
  std::atomic<int> alice_done{0};
  std::vector<std::thread> waiting;
  for (int i = 0; i < kHandlerThreads; ++i) {
    waiting.emplace_back([&] {
      Send("POST", "/execute", Plane(*alice_), json({{"code", "1"}}).dump());
      ++alice_done;
    });
  }
  absl::SleepFor(absl::Milliseconds(500));
  const absl::Time asked = absl::Now();
  Reply bobs = Send("GET", absl::StrCat("/sandboxes/", bob_->id), Key(kBob));
  const int done_when_bob_was_served = alice_done;
  printf("bob served in %ld ms while %d of alice's %d requests waited\n",
         static_cast<long>(absl::ToInt64Milliseconds(absl::Now() - asked)), kHandlerThreads - done_when_bob_was_served,
         kHandlerThreads);
  EXPECT_EQ(bobs.status, 200u) << bobs.body;
  EXPECT_EQ(done_when_bob_was_served, 0) << "bob waited behind alice's requests";
  sleeper.join();
  for (std::thread& t : waiting) t.join();
}

// ---- Snapshots

TEST_F(TenantStarvationTest, ADamagedSnapshotRecordIsReportedAndSkipped) {
  Reply taken = Send("POST", absl::StrCat("/sandboxes/", alice_->id, "/snapshots"), Key(kAlice), "{}");
  ASSERT_EQ(taken.status, 201u) << taken.body;
  const std::string good = taken.Json().value("snapshotID", "");
  // A second one, damaged as a hand edit or another version would: its env a string.
  Reply second = Send("POST", absl::StrCat("/sandboxes/", alice_->id, "/snapshots"), Key(kAlice), "{}");
  ASSERT_EQ(second.status, 201u) << second.body;
  const std::string bad = second.Json().value("snapshotID", "");
  const std::string record =
      absl::StrCat(*dir_, "/snapshots/t-", absl::BytesToHexString("alice"), "/", bad, ".json");
  json j = json::parse(std::ifstream(record), nullptr, false);
  ASSERT_TRUE(j.is_object()) << record;
  j["env"] = "A=1";
  std::ofstream(record, std::ios::trunc) << j.dump();

  Reply listed = Send("GET", "/snapshots", Key(kAlice));
  ASSERT_EQ(listed.status, 200u) << listed.body;
  std::vector<std::string> ids;
  for (const json& s : listed.Json()) ids.push_back(s.value("snapshotID", ""));
  EXPECT_NE(std::find(ids.begin(), ids.end(), good), ids.end()) << listed.body;
  EXPECT_EQ(std::find(ids.begin(), ids.end(), bad), ids.end()) << listed.body;
  // Restoring it is a clear error, naming neither a host path nor gRPC's words.
  Reply restored = Send("POST", "/sandboxes", Key(kAlice), json({{"templateID", bad}}).dump());
  EXPECT_GE(restored.status, 400u) << restored.body;
  EXPECT_TRUE(absl::StrContains(restored.body, "damaged")) << restored.body;
  EXPECT_TRUE(absl::StrContains(restored.body, "'env'")) << restored.body;
  EXPECT_FALSE(absl::StrContains(restored.body, *dir_)) << restored.body;
  // The daemon is whole, and the damaged one can be deleted.
  EXPECT_EQ(Execute(*bob_, "print('still here')"), "still here\n");
  EXPECT_EQ(Send("DELETE", absl::StrCat("/templates/", bad), Key(kAlice)).status, 204u);
  EXPECT_EQ(Send("DELETE", absl::StrCat("/templates/", good), Key(kAlice)).status, 204u);
}

TEST_F(TenantStarvationTest, ASnapshotAtTheMemoryLimitFailsSayingWhyAndHarmsNothing) {
  // 180 of the sandbox's 256 MiB in one object: packing it needs as much again.
  ASSERT_EQ(Execute(*alice_, "big = bytearray(180 << 20)\nfor i in range(0, len(big), 4096): big[i] = 1\n"
                             "print(len(big) >> 20)"),
            "180\n");
  Reply r = Send("POST", absl::StrCat("/sandboxes/", alice_->id, "/snapshots"), Key(kAlice), "{}");
  EXPECT_EQ(r.status, 429u) << r.body;
  EXPECT_TRUE(absl::StrContains(r.body, "memory")) << r.body;
  EXPECT_TRUE(absl::StrContains(r.body, "unharmed")) << r.body;
  // The session and its state are as they were.
  EXPECT_EQ(Execute(*alice_, "print(len(big) >> 20, big[4096])"), "180 1\n");
  EXPECT_EQ(Execute(*alice_, "del big\nimport gc; gc.collect()\nprint('freed')"), "freed\n");
  EXPECT_EQ(Execute(*bob_, "print('bob')"), "bob\n");
}

TEST_F(TenantStarvationTest, AHibernatedSessionWhoseSnapshotIsDamagedSaysSoForGood) {
  v1::CreateSessionRequest create;
  create.set_language(v1::LANGUAGE_PYTHON);
  v1::Session session;
  ASSERT_TRUE(stub_->CreateSession(Call(kAlice).get(), create, &session).ok());
  v1::ExecuteRequest cell;
  cell.set_session_id(session.id());
  cell.set_code("x = 41");
  v1::ExecuteResponse result;
  ASSERT_TRUE(stub_->Execute(Call(kAlice).get(), cell, &result).ok());
  // It hibernates once idle (sessions.hibernate_after_seconds: 2).
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  v1::GetSessionRequest get;
  get.set_session_id(session.id());
  for (;;) {
    ASSERT_LT(absl::Now(), deadline) << "the session never hibernated";
    v1::Session now;
    ASSERT_TRUE(stub_->GetSession(Call(kAlice).get(), get, &now).ok());
    if (now.state() == v1::SESSION_STATE_HIBERNATED) break;
    absl::SleepFor(absl::Milliseconds(200));
  }
  // Its archive damaged on disk.
  int damaged = 0;
  for (const auto& e : std::filesystem::directory_iterator(
           absl::StrCat(*dir_, "/snapshots/t-", absl::BytesToHexString("alice")))) {
    if (e.path().extension() == ".tar") {
      std::filesystem::resize_file(e.path(), 40);
      ++damaged;
    }
  }
  ASSERT_EQ(damaged, 1);
  cell.set_code("print(x + 1)");
  for (int attempt = 0; attempt < 2; ++attempt) {
    v1::ExecuteResponse again;
    grpc::Status s = stub_->Execute(Call(kAlice).get(), cell, &again);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::DATA_LOSS) << attempt << ": " << s.error_message();
    EXPECT_TRUE(absl::StrContains(s.error_message(), "close the session")) << s.error_message();
    EXPECT_FALSE(absl::StrContains(s.error_message(), "try again")) << s.error_message();
    EXPECT_FALSE(absl::StrContains(s.error_message(), *dir_)) << s.error_message();
  }
  v1::CloseSessionRequest close;
  close.set_session_id(session.id());
  v1::CloseSessionResponse closed;
  EXPECT_TRUE(stub_->CloseSession(Call(kAlice).get(), close, &closed).ok());
}

TEST_F(TenantStarvationTest, OneTenantsSnapshotsAreBoundedAndTheOthersAreNot) {
  // Alice fills her share of the snapshot disk (16 MiB here).
  ASSERT_EQ(Execute(*alice_, "fill = os.urandom(6 << 20)\nprint('ok')"), "ok\n");
  std::vector<std::string> taken;
  Reply r;
  for (int i = 0; i < 5; ++i) {
    r = Send("POST", absl::StrCat("/sandboxes/", alice_->id, "/snapshots"), Key(kAlice), "{}");
    if (r.status != 201) break;
    taken.push_back(r.Json().value("snapshotID", ""));
  }
  EXPECT_EQ(r.status, 429u) << r.body;
  EXPECT_TRUE(absl::StrContains(r.body, "snapshots.max_bytes_per_tenant")) << r.body;
  // Bob's are his own.
  Reply bobs = Send("POST", absl::StrCat("/sandboxes/", bob_->id, "/snapshots"), Key(kBob), "{}");
  EXPECT_EQ(bobs.status, 201u) << bobs.body;
  for (const std::string& id : taken) Send("DELETE", absl::StrCat("/templates/", id), Key(kAlice));
  Send("DELETE", absl::StrCat("/templates/", bobs.Json().value("snapshotID", "")), Key(kBob));
  EXPECT_EQ(Execute(*alice_, "del fill\nprint('ok')"), "ok\n");
}

// ---- The E2B front's own state

TEST_F(TenantStarvationTest, AnEndedSandboxIsForgottenAndItsTokenAnswers502) {
  Sandbox brief = CreateSandbox(kAlice, /*timeout=*/2);
  ASSERT_EQ(Send("GET", "/health", Plane(brief)).status, 204u);  // seen, cached
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  Reply r;
  do {
    absl::SleepFor(absl::Milliseconds(250));
    r = Send("GET", "/health", Plane(brief));
  } while (r.status == 204 && absl::Now() < deadline);
  EXPECT_EQ(r.status, 502u) << r.body;
  // Every route of the plane says the same for it, as for a killed one.
  Reply listed = Send("POST", "/filesystem.Filesystem/ListDir", Plane(brief), json({{"path", "/home/user"}}).dump());
  EXPECT_NE(listed.status, 404u) << listed.body;
  Reply executed = Send("POST", "/execute", Plane(brief), json({{"code", "1"}}).dump());
  EXPECT_EQ(executed.status, 502u) << executed.body;
}

TEST_F(TenantStarvationTest, SignedUrlsExpireWithinTheSetting) {
  ASSERT_EQ(Send("POST", "/files?path=/home/user/signed.txt", Plane(*alice_, "application/octet-stream"), "hello")
                .status,
            200u);
  auto url = [&](int64_t expiration) {
    return absl::StrCat("/files?path=%2Fhome%2Fuser%2Fsigned.txt&signature=",
                        absl::StrReplaceAll(e2b::FileSignature("/home/user/signed.txt", "read", "", alice_->token,
                                                               expiration),
                                            {{"+", "%2B"}, {"/", "%2F"}}),
                        "&signature_expiration=", expiration);
  };
  const int64_t now = absl::ToUnixSeconds(absl::Now());
  Reply soon = Send("GET", url(now + 600));
  EXPECT_EQ(soon.status, 200u) << soon.body;
  EXPECT_EQ(soon.body, "hello");
  Reply far = Send("GET", url(now + 3 * 86'400));
  EXPECT_EQ(far.status, 401u) << far.body;
  EXPECT_TRUE(absl::StrContains(far.body, "http.e2b_signed_url_max_seconds")) << far.body;
}

// Last: what the whole suite cost wardend.
TEST_F(TenantStarvationTest, ZzWardendsMemoryAfterEverythingIsWithinTwiceItsStart) {
  ASSERT_GT(start_rss_kb_, 0);
  // wardend returns what its allocator holds free to the system every 5 s
  // (server/main.cc): a moment for it.
  int64_t rss = RssKb();
  for (int i = 0; kMemoryMeans && i < 48 && rss > 2 * start_rss_kb_; ++i) {
    absl::SleepFor(absl::Milliseconds(250));
    rss = RssKb();
  }
  printf("wardend's resident memory: %ld KiB at the start, %ld KiB after the suite\n",
         static_cast<long>(start_rss_kb_), static_cast<long>(rss));
  if (kMemoryMeans) {
    EXPECT_LE(rss, 2 * start_rss_kb_);
  }
  EXPECT_EQ(Execute(*alice_, "print('alice')"), "alice\n");
  EXPECT_EQ(Execute(*bob_, "print('bob')"), "bob\n");
}

}  // namespace
}  // namespace warden
