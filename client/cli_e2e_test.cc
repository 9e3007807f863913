// The warden CLI end to end, as a user runs it: a real wardend (started as
// a subprocess on a UNIX socket in a temporary directory, with sandboxes and
// kernels behind it) and the real `warden` binary for exec (text and
// --json), sessions, and a files round trip. Label "daemon": needs what
// wardend needs (root here).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

extern char** environ;

namespace {

using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
}

// Runs argv with stdin, stdout and stderr redirected to the given files;
// returns its wait status.
int Spawn(const std::vector<std::string>& argv, const std::string& in, const std::string& out,
          const std::string& err, pid_t* pid_out = nullptr) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, in.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  if (pid_out != nullptr) {
    *pid_out = pid;
    return 0;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

// wardend on unix:<dir>/w.sock, with small pools and a host id range of its
// own so that it never meets another test's sandboxes.
class Wardend {
 public:
  explicit Wardend(const std::string& dir) : dir_(dir), address_("unix:" + dir + "/w.sock") {}

  ~Wardend() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);  // graceful shutdown: sessions closed, cgroups removed
    int status;
    waitpid(pid_, &status, 0);
  }

  const std::string& address() const { return address_; }
  std::string log() const { return ReadFile(dir_ + "/wardend.log"); }

  // Starts it and waits until it accepts connections.
  bool Start() {
    nlohmann::json config = {
        {"pools",
         {{{"language", "python"}, {"size", 1}, {"warm", nlohmann::json::array()}},
          {{"language", "bash"}, {"size", 1}}}},
        {"executor",
         {{"host_id_base", 6'000'000 + (getpid() % 4096) * 512}, {"host_id_count", 512}}},
        {"shutdown_grace_ms", 2000},
    };
    WriteFile(dir_ + "/wardend.json", config.dump());
    if (Spawn({WARDEN_BIN_DIR "/wardend", "--config", dir_ + "/wardend.json", "--listen", address_},
              "/dev/null", dir_ + "/wardend.log", dir_ + "/wardend.log", &pid_) != 0) {
      return false;
    }
    auto channel = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
    return channel->WaitForConnected(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  }

 private:
  std::string dir_;
  std::string address_;
  pid_t pid_ = -1;
};

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

class CliE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char dir[] = "/tmp/warden_cli_e2e_XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = new std::string(dir);
    wardend_ = new Wardend(*dir_);
    daemon_up_ = wardend_->Start();
  }

  static void TearDownTestSuite() {
    delete wardend_;
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }

  void SetUp() override {
    ASSERT_TRUE(daemon_up_) << "wardend did not come up:\n" << wardend_->log();
  }

  // Runs `warden --addr <daemon> args...` with `input` on stdin.
  CliResult Warden(std::vector<std::string> args, const std::string& input = "") {
    args.insert(args.begin(), {WARDEN_BIN_DIR "/warden", "--addr", wardend_->address()});
    std::string in = Path("stdin"), out = Path("stdout"), err = Path("stderr");
    WriteFile(in, input);
    int status = Spawn(args, in, out, err);
    CliResult result;
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    result.out = ReadFile(out);
    result.err = ReadFile(err);
    return result;
  }

  nlohmann::json Json(const CliResult& result) {
    auto json = nlohmann::json::parse(result.out, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(json.is_discarded()) << result.out << result.err;
    return json;
  }

  std::string CreateSession(const std::vector<std::string>& flags = {}) {
    std::vector<std::string> args = {"session", "create"};
    args.insert(args.end(), flags.begin(), flags.end());
    CliResult created = Warden(args);
    EXPECT_EQ(created.exit_code, 0) << created.err;
    std::string id = created.out;
    if (!id.empty() && id.back() == '\n') id.pop_back();
    return id;
  }

  static std::string Path(const std::string& name) { return *dir_ + "/" + name; }

  static std::string* dir_;
  static Wardend* wardend_;
  static bool daemon_up_;
};

std::string* CliE2eTest::dir_ = nullptr;
Wardend* CliE2eTest::wardend_ = nullptr;
bool CliE2eTest::daemon_up_ = false;

TEST_F(CliE2eTest, ExecPrintsOutputAndResults) {
  CliResult r = Warden({"exec", "-"}, "print('hello')\n6 * 7\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello\n42\n");
}

TEST_F(CliE2eTest, ExecOfABashFileExitsWithItsStatus) {
  WriteFile(Path("job.sh"), "echo out; echo err >&2; exit 3\n");
  CliResult r = Warden({"exec", Path("job.sh")});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(r.out, "out\n");
  EXPECT_THAT(r.err, HasSubstr("err\n"));
}

TEST_F(CliE2eTest, ExecErrorPrintsTheTracebackAndExitsOne) {
  CliResult r = Warden({"exec", "--language", "python", "-"}, "raise ValueError('nope')\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("ValueError: nope"));
}

TEST_F(CliE2eTest, ExecJsonIsOneObjectWithTheDocumentedKeys) {
  CliResult r = Warden({"exec", "--json", "-"}, "print('x')\nraise KeyError('k')\n");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  nlohmann::json json = Json(r);
  for (const char* key :
       {"outcome", "exit_code", "stdout", "stderr", "error", "results", "execution_count",
        "wall_ms", "cpu_ms", "peak_memory_bytes", "session_id"}) {
    EXPECT_TRUE(json.contains(key)) << key << " missing in " << r.out;
  }
  EXPECT_EQ(json["outcome"], "ERROR");
  EXPECT_EQ(json["stdout"], "x\n");
  EXPECT_EQ(json["error"]["name"], "KeyError");
  EXPECT_TRUE(json["results"].is_array());
}

TEST_F(CliE2eTest, ExecJsonSurvivesOutputThatIsNotUtf8) {
  CliResult r =
      Warden({"exec", "--json", "-"}, "import sys\nsys.stdout.buffer.write(b'\\xff\\xfe ok\\n')\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(Json(r)["stdout"].get<std::string>(), HasSubstr(" ok\n"));
}

TEST_F(CliE2eTest, ExecPastItsTimeoutExits124) {
  CliResult r = Warden({"exec", "--timeout-ms", "500", "-"}, "while True:\n    pass\n");
  EXPECT_EQ(r.exit_code, 124) << r.err;
  EXPECT_THAT(r.err, HasSubstr("WALL_TIMEOUT"));
}

TEST_F(CliE2eTest, SessionShellIsATerminalInTheSessionsMachine) {
  const std::string id = CreateSession({"--machine", "--env", "GREETING=hi"});
  ASSERT_FALSE(id.empty());
  // Typed input (here piped), a pseudo-terminal of the local size (80x24
  // without a local terminal), the session's environment; the exit status
  // is the remote program's.
  CliResult r = Warden({"session", "shell", id}, "echo \"[$GREETING $(tty) $(stty size)]\"; exit 3\n");
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_THAT(r.out, HasSubstr("[hi /dev/pts/0 24 80]"));
  r = Warden({"session", "shell", id, "--", "/bin/sh", "-c", "echo from-sh"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("from-sh"));
  // A plain session has no machine to open a terminal in.
  const std::string plain = CreateSession();
  r = Warden({"session", "shell", plain});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_THAT(r.err, HasSubstr("shared_workspace"));
  EXPECT_EQ(Warden({"session", "close", id}).exit_code, 0);
  EXPECT_EQ(Warden({"session", "close", plain}).exit_code, 0);
}

TEST_F(CliE2eTest, SessionCreateListExecClose) {
  std::string id = CreateSession({"--label", "suite=cli-e2e"});
  ASSERT_FALSE(id.empty());

  CliResult list = Warden({"session", "list"});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_THAT(list.out, HasSubstr("ID"));
  EXPECT_THAT(list.out, HasSubstr(id));
  EXPECT_THAT(list.out, HasSubstr("suite=cli-e2e"));

  nlohmann::json listed = Json(Warden({"session", "list", "--json", "--label", "suite=cli-e2e"}));
  ASSERT_EQ(listed["sessions"].size(), 1u) << listed.dump();
  EXPECT_EQ(listed["sessions"][0]["id"], id);

  EXPECT_EQ(Warden({"exec", "--session", id, "-"}, "x = 41\n").exit_code, 0);
  CliResult kept = Warden({"exec", "--session", id, "--json", "-"}, "x + 1\n");
  EXPECT_EQ(Json(kept)["results"][0]["text/plain"], "42");
  EXPECT_EQ(Json(kept)["session_id"], id);

  CliResult shown = Warden({"session", "show", id, "--json"});
  EXPECT_EQ(Json(shown)["execution_count"], 2);

  EXPECT_EQ(Warden({"session", "close", id}).exit_code, 0);
  CliResult gone = Warden({"session", "show", id});
  EXPECT_EQ(gone.exit_code, 125);
  EXPECT_THAT(gone.err, HasSubstr("warden: NOT_FOUND: "));
}

TEST_F(CliE2eTest, FilesRoundTrip) {
  std::string id = CreateSession();
  ASSERT_FALSE(id.empty());
  std::string content;
  for (int i = 0; i < 200'000; ++i) content += static_cast<char>((i * 7919) % 256);
  WriteFile(Path("upload.bin"), content);

  CliResult put = Warden({"files", "put", "--session", id, Path("upload.bin"), "data/blob.bin"});
  EXPECT_EQ(put.exit_code, 0) << put.err;

  CliResult ls = Warden({"files", "ls", "--session", id});
  EXPECT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_THAT(ls.out, HasSubstr("data/blob.bin"));
  EXPECT_THAT(ls.out, HasSubstr("200000"));
  nlohmann::json listed = Json(Warden({"files", "ls", "--session", id, "--json"}));
  bool found = false;
  for (const auto& file : listed["files"]) {
    if (file["path"] == "data/blob.bin") {
      found = true;
      EXPECT_EQ(file["size"], 200'000);
      EXPECT_EQ(file["type"], "file");
    }
  }
  EXPECT_TRUE(found) << listed.dump();

  CliResult get = Warden({"files", "get", "--session", id, "data/blob.bin", Path("download.bin")});
  EXPECT_EQ(get.exit_code, 0) << get.err;
  EXPECT_EQ(ReadFile(Path("download.bin")), content);
  CliResult to_stdout = Warden({"files", "get", "--session", id, "data/blob.bin", "-"});
  EXPECT_EQ(to_stdout.out, content);

  // The code in the session sees the uploaded file.
  CliResult seen = Warden({"exec", "--session", id, "-"},
                          "import os\nprint(os.path.getsize('data/blob.bin'))\n");
  EXPECT_EQ(seen.out, "200000\n") << seen.err;

  CliResult missing = Warden({"files", "get", "--session", id, "nope.txt", Path("nope.txt")});
  EXPECT_EQ(missing.exit_code, 125);
  EXPECT_FALSE(std::filesystem::exists(Path("nope.txt")));
  EXPECT_EQ(Warden({"session", "close", id}).exit_code, 0);
}

TEST_F(CliE2eTest, UnreachableDaemonIsOneLineAndExit125) {
  CliResult r = Warden({"--addr", "unix:" + Path("nobody.sock"), "session", "list"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_THAT(r.err, HasSubstr("warden: UNAVAILABLE: "));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace
