// Volumes end to end over real gRPC (docs/templates.md, "Volumes"): made and
// filled through warden.v1.Volumes, mounted into sessions' real sandboxes,
// shared by two at once, kept after their sessions and a daemon restart,
// full at their quota (ENOSPC to the writer), safe from the symlinks a
// sandbox plants in them, and another tenant's refused.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "images/fs_util.h"
#include "server/daemon.h"
#include "warden/v1/executor.grpc.pb.h"
#include "warden/v1/images.grpc.pb.h"

namespace warden {
namespace {

using ::testing::HasSubstr;

constexpr const char* kAlice = "alice-token-0123456789ab";
constexpr const char* kBob = "bob-token-0123456789abcd";

class VolumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/warden-volume-daemon-XXXXXX";
    dir_ = mkdtemp(tmpl);
    chmod(dir_.c_str(), 0755);
    const std::string tokens = dir_ + "/tokens.json";
    std::ofstream(tokens) << absl::StrCat(R"({"tokens": [{"token": ")", kAlice, R"(", "tenant": "alice"},
                                                        {"token": ")", kBob, R"(", "tenant": "bob"}]})");
    chmod(tokens.c_str(), 0600);
    Start();
  }
  void TearDown() override {
    Stop();
    images::RemoveTree(dir_).IgnoreError();
  }
  void Start() {
    DaemonOptions options;
    options.listen = {"127.0.0.1:0"};
    options.allow_insecure_loopback = true;
    options.auth.tokens_file = dir_ + "/tokens.json";
    options.pools = {{"python", 1, {}}, {"bash", 0, {}}};
    options.zygote.enabled = false;
    options.executor.host_id_base = static_cast<uid_t>(6'000'000 + (getpid() % 4096) * 512);
    options.executor.host_id_count = 512;
    options.volumes.dir = dir_ + "/volumes";
    options.volumes.max_per_tenant = 4;
    options.templates.dir = dir_ + "/templates";
    options.snapshots.dir = dir_ + "/snapshots";
    options.shutdown_grace_ms = 5'000;
    auto daemon = Daemon::Create(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    ASSERT_TRUE(daemon_->Start().ok());
    auto channel = grpc::CreateChannel(daemon_->listening().front(), grpc::InsecureChannelCredentials());
    executor_ = v1::Executor::NewStub(channel);
    volumes_ = v1::Volumes::NewStub(channel);
  }
  void Stop() {
    executor_.reset();
    volumes_.reset();
    if (daemon_) daemon_->Shutdown(absl::Seconds(5));
    daemon_.reset();
  }
  static std::unique_ptr<grpc::ClientContext> Context(const std::string& token = kAlice) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    ctx->AddMetadata("authorization", std::string("Bearer ") + token);
    return ctx;
  }
  grpc::Status CreateVolume(const std::string& name, int64_t bytes = 16 << 20, int64_t files = 64,
                            const std::string& token = kAlice) {
    v1::CreateVolumeRequest create;
    create.set_name(name);
    create.set_max_bytes(bytes);
    create.set_max_files(files);
    v1::Volume volume;
    return volumes_->CreateVolume(Context(token).get(), create, &volume);
  }
  grpc::Status Session(std::vector<v1::VolumeMount> mounts, std::string* id, v1::Language language = v1::LANGUAGE_PYTHON,
                       bool shared = false, const std::string& token = kAlice) {
    v1::CreateSessionRequest create;
    create.set_language(language);
    create.set_shared_workspace(shared);
    for (auto& m : mounts) *create.add_volumes() = m;
    v1::Session session;
    grpc::Status s = executor_->CreateSession(Context(token).get(), create, &session);
    *id = session.id();
    return s;
  }
  static v1::VolumeMount Mount(const std::string& volume, const std::string& path, bool read_only = false) {
    v1::VolumeMount m;
    m.set_volume(volume);
    m.set_path(path);
    m.set_read_only(read_only);
    return m;
  }
  v1::ExecuteResponse Run(const std::string& session, const std::string& code,
                          v1::Language language = v1::LANGUAGE_PYTHON) {
    v1::ExecuteRequest request;
    request.set_session_id(session);
    request.set_code(code);
    request.set_language(language);
    v1::ExecuteResponse response;
    grpc::Status s = executor_->Execute(Context().get(), request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response;
  }
  void Close(const std::string& session) {
    v1::CloseSessionRequest close;
    close.set_session_id(session);
    v1::CloseSessionResponse closed;
    EXPECT_TRUE(executor_->CloseSession(Context().get(), close, &closed).ok());
  }
  std::string Read(const std::string& volume, const std::string& path, grpc::Status* status = nullptr) {
    v1::ReadVolumeFileRequest read;
    read.set_volume(volume);
    read.set_path(path);
    auto ctx = Context();
    auto reader = volumes_->ReadVolumeFile(ctx.get(), read);
    std::string out;
    v1::FileChunk chunk;
    while (reader->Read(&chunk)) out += chunk.data();
    grpc::Status s = reader->Finish();
    if (status) *status = s;
    else EXPECT_TRUE(s.ok()) << s.error_message();
    return out;
  }
  grpc::Status Write(const std::string& volume, const std::string& path, const std::string& data) {
    auto ctx = Context();
    v1::VolumeEntry entry;
    auto writer = volumes_->WriteVolumeFile(ctx.get(), &entry);
    v1::WriteVolumeFileRequest header;
    header.mutable_header()->set_volume(volume);
    header.mutable_header()->set_path(path);
    header.mutable_header()->set_make_parents(true);
    writer->Write(header);
    v1::WriteVolumeFileRequest chunk;
    chunk.set_chunk(data);
    writer->Write(chunk);
    writer->WritesDone();
    return writer->Finish();
  }

  std::string dir_;
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<v1::Executor::Stub> executor_;
  std::unique_ptr<v1::Volumes::Stub> volumes_;
};

TEST_F(VolumeTest, TwoSandboxesShareAVolumeAndItOutlivesThemAndARestart) {
  ASSERT_TRUE(CreateVolume("repo").ok());
  ASSERT_TRUE(Write("repo", "seed/readme.txt", "put without a session\n").ok());
  std::string a, b;
  ASSERT_TRUE(Session({Mount("repo", "/data")}, &a).ok());
  ASSERT_TRUE(Session({Mount("repo", "/mnt/repo")}, &b, v1::LANGUAGE_BASH).ok());
  v1::ExecuteResponse r = Run(a, "import os\nprint(open('/data/seed/readme.txt').read(), end='')\n"
                                 "open('/data/from-a.txt', 'w').write('written by a')\n"
                                 "print(os.stat('/data/from-a.txt').st_uid, os.getuid())");
  EXPECT_EQ(r.stdout(), "put without a session\n1000 1000\n") << r.DebugString();
  // The other sandbox, at once: it owns what the first wrote, and writes too.
  r = Run(b, "cat /mnt/repo/from-a.txt; echo; echo ' and b' >> /mnt/repo/from-a.txt; stat -c %U /mnt/repo/from-a.txt",
          v1::LANGUAGE_BASH);
  EXPECT_EQ(r.stdout(), "written by a\nsandbox\n") << r.DebugString();
  EXPECT_EQ(Run(a, "print(open('/data/from-a.txt').read())").stdout(), "written by a and b\n\n");
  Close(a);
  Close(b);
  Stop();
  Start();
  EXPECT_EQ(Read("repo", "from-a.txt"), "written by a and b\n");
  v1::ListVolumesResponse list;
  ASSERT_TRUE(volumes_->ListVolumes(Context().get(), {}, &list).ok());
  ASSERT_EQ(list.volumes_size(), 1);
  EXPECT_EQ(list.volumes(0).name(), "repo");
  EXPECT_EQ(list.volumes(0).used_files(), 3);  // seed, seed/readme.txt, from-a.txt
}

TEST_F(VolumeTest, AFullVolumeIsEnospcToTheWriter) {
  ASSERT_TRUE(CreateVolume("small", 16 << 20, 32).ok());
  std::string s;
  ASSERT_TRUE(Session({Mount("small", "/data")}, &s).ok());
  v1::ExecuteResponse r = Run(s, R"(import errno
try:
    with open('/data/big', 'wb') as f:
        for _ in range(24):
            f.write(b'x' * (1 << 20))
            f.flush()
    print('no error')
except OSError as e:
    print(errno.errorcode[e.errno])
n = 0
try:
    while n < 100:
        open('/data/f%d' % n, 'w').close()
        n += 1
except OSError as e:
    print(errno.errorcode[e.errno], n <= 32)
)");
  EXPECT_EQ(r.stdout(), "ENOSPC\nENOSPC True\n") << r.DebugString();
}

TEST_F(VolumeTest, ASymlinkOneSandboxPlantsLeadsTheNextNowhereOutsideItsOwnView) {
  ASSERT_TRUE(CreateVolume("shared").ok());
  std::string a;
  ASSERT_TRUE(Session({Mount("shared", "/data")}, &a, v1::LANGUAGE_BASH).ok());
  // A link to the host's secrets, a link up and out, a link to another mount.
  Run(a, "ln -s /etc/shadow /data/shadow; ln -s ../../../../../etc /data/up; ln -s /proc/1/root /data/host-root",
      v1::LANGUAGE_BASH);
  Close(a);
  std::string b;
  ASSERT_TRUE(Session({Mount("shared", "/data")}, &b, v1::LANGUAGE_BASH).ok());
  v1::ExecuteResponse r = Run(b, "cat /data/shadow 2>&1 | head -c 60; echo; ls /data/up/ | head -3; "
                                 "ls /data/host-root/ 2>&1 | head -c 60",
                              v1::LANGUAGE_BASH);
  // What the links name is the sandbox's own view (no /etc/shadow in it, its
  // generated /etc, its own pid 1 out of reach), never the host's.
  EXPECT_THAT(r.stdout(), HasSubstr("/data/shadow: No such file or directory"));
  EXPECT_THAT(r.stdout(), HasSubstr("alternatives"));
  EXPECT_THAT(r.stdout(), ::testing::Not(HasSubstr("shadow\n")));
  // Read from the host side, a link is never followed.
  grpc::Status s;
  Read("shared", "shadow", &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("symlink"));
  Read("shared", "up/passwd", &s);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(VolumeTest, AnotherTenantsVolumeIsRefusedAndAMountedOneIsNotDeleted) {
  ASSERT_TRUE(CreateVolume("private").ok());
  std::string s;
  grpc::Status refused = Session({Mount("private", "/data")}, &s, v1::LANGUAGE_PYTHON, false, kBob);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::NOT_FOUND);
  v1::GetVolumeRequest get;
  get.set_name("private");
  v1::Volume v;
  EXPECT_EQ(volumes_->GetVolume(Context(kBob).get(), get, &v).error_code(), grpc::StatusCode::NOT_FOUND);
  ASSERT_TRUE(Session({Mount("private", "/data", /*read_only=*/true)}, &s).ok());
  EXPECT_THAT(Run(s, "touch /data/x 2>&1", v1::LANGUAGE_PYTHON).stdout(), ::testing::IsEmpty());
  v1::ExecuteResponse r = Run(s, "import os\ntry:\n    open('/data/x', 'w')\nexcept OSError as e:\n    print(e.strerror)");
  EXPECT_EQ(r.stdout(), "Read-only file system\n");
  v1::DeleteVolumeRequest del;
  del.set_name("private");
  v1::DeleteVolumeResponse deleted;
  EXPECT_EQ(volumes_->DeleteVolume(Context().get(), del, &deleted).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  Close(s);
  EXPECT_TRUE(volumes_->DeleteVolume(Context().get(), del, &deleted).ok());
}

TEST_F(VolumeTest, SnapshotsRecordTheMountsAndRestoreMountsThemAgain) {
  ASSERT_TRUE(CreateVolume("cache").ok());
  std::string a;
  ASSERT_TRUE(Session({Mount("cache", "/cache")}, &a).ok());
  Run(a, "x = 7\nopen('/cache/model.bin', 'w').write('weights')");
  v1::SnapshotSessionRequest snap;
  snap.set_session_id(a);
  v1::Snapshot snapshot;
  ASSERT_TRUE(executor_->SnapshotSession(Context().get(), snap, &snapshot).ok());
  ASSERT_EQ(snapshot.volumes_size(), 1);
  EXPECT_EQ(snapshot.volumes(0).volume(), "cache");
  EXPECT_EQ(snapshot.volumes(0).path(), "/cache");
  Run(a, "open('/cache/after.txt', 'w').write('later')");  // the volume's, not the snapshot's
  v1::RestoreSnapshotRequest restore;
  restore.set_snapshot_id(snapshot.snapshot_id());
  v1::Session restored;
  ASSERT_TRUE(executor_->RestoreSnapshot(Context().get(), restore, &restored).ok());
  ASSERT_EQ(restored.volumes_size(), 1);
  v1::ExecuteResponse r = Run(restored.id(), "import os\nprint(x, sorted(os.listdir('/cache')))");
  EXPECT_EQ(r.stdout(), "7 ['after.txt', 'model.bin']\n") << r.DebugString();
}

// A transfer holds its volume mounted while its stream is live and no
// longer: DeleteVolume refuses a volume that is being read, and the client
// that saw a read or a write end may delete the volume at once (the hold
// used to outlive Finish: the unmount raced the next call).
TEST_F(VolumeTest, ALiveReadHoldsTheVolumeAndAFinishedTransferDoesNot) {
  ASSERT_TRUE(CreateVolume("held").ok());
  const std::string big(3 << 20, 'x');  // three of the server's 1 MiB chunks
  ASSERT_TRUE(Write("held", "big", big).ok());
  // A reader that takes one chunk and waits: with no BDP probing its window
  // stays small, so the server is still sending.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64 << 10);
  auto slow = v1::Volumes::NewStub(
      grpc::CreateCustomChannel(daemon_->listening().front(), grpc::InsecureChannelCredentials(), args));
  v1::ReadVolumeFileRequest read;
  read.set_volume("held");
  read.set_path("big");
  auto ctx = Context();
  auto reader = slow->ReadVolumeFile(ctx.get(), read);
  v1::FileChunk chunk;
  ASSERT_TRUE(reader->Read(&chunk));
  v1::DeleteVolumeRequest del;
  del.set_name("held");
  v1::DeleteVolumeResponse deleted;
  grpc::Status refused = volumes_->DeleteVolume(Context().get(), del, &deleted);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << refused.error_message();
  EXPECT_THAT(refused.error_message(), HasSubstr("in use"));
  size_t got = chunk.data().size();
  while (reader->Read(&chunk)) got += chunk.data().size();
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(got, big.size());
  grpc::Status after_read = volumes_->DeleteVolume(Context().get(), del, &deleted);
  EXPECT_TRUE(after_read.ok()) << after_read.error_message();

  ASSERT_TRUE(CreateVolume("written").ok());
  ASSERT_TRUE(Write("written", "a.txt", "a").ok());
  del.set_name("written");
  grpc::Status after_write = volumes_->DeleteVolume(Context().get(), del, &deleted);
  EXPECT_TRUE(after_write.ok()) << after_write.error_message();
}

// `warden volume` and `warden session create --volume` through the real
// CLI against this wardend.
TEST_F(VolumeTest, TheCliCreatesFillsMountsListsReadsAndRemovesAVolume) {
  const std::string bin = WARDEN_BIN_DIR "/warden";
  const std::string env = absl::StrCat("WARDEN_ADDR=", daemon_->listening().front(), " WARDEN_TOKEN=", kAlice, " ");
  // Its exit status and what it printed (stdout, then stderr).
  auto run = [&](const std::string& args) {
    std::string out;
    FILE* p = popen(absl::StrCat(env, bin, " ", args, " 2>&1").c_str(), "r");
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
    const int status = pclose(p);
    return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : -1, out);
  };
  using Result = std::pair<int, std::string>;
  EXPECT_EQ(run("volume create cli-vol --max-mb 16 --max-files 16"), Result(0, "cli-vol\n"));
  std::ofstream(dir_ + "/a.txt") << "from the cli\n";
  EXPECT_EQ(run(absl::StrCat("volume put cli-vol ", dir_, "/a.txt dir/a.txt")), Result(0, ""));
  std::ofstream(dir_ + "/run.sh") << "echo ran\n";
  EXPECT_EQ(run(absl::StrCat("volume put cli-vol - dir/run.sh --mode 755 < ", dir_, "/run.sh")), Result(0, ""));

  Result listed = run("volume ls");
  EXPECT_EQ(listed.first, 0) << listed.second;
  EXPECT_THAT(listed.second, HasSubstr("NAME     USED"));
  EXPECT_THAT(listed.second, ::testing::ContainsRegex("cli-vol +[0-9.]+ [KM]iB +16.0 MiB +3/16 +0 "));
  EXPECT_EQ(run("volume ls cli-vol --depth 2"), Result(0, "TYPE       SIZE  PATH\n"
                                                           "directory  -     dir/\n"
                                                           "file       13    dir/a.txt\n"
                                                           "file       9     dir/run.sh\n"));
  EXPECT_EQ(run("volume get cli-vol dir/a.txt -"), Result(0, "from the cli\n"));
  std::filesystem::create_directory(dir_ + "/out");
  EXPECT_EQ(run(absl::StrCat("volume get cli-vol dir/a.txt ", dir_, "/out")), Result(0, ""));
  std::ifstream got(dir_ + "/out/a.txt");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(got), {}), "from the cli\n");
  Result missing = run("volume get cli-vol nothing.txt -");
  EXPECT_EQ(missing.first, 125);
  EXPECT_THAT(missing.second, HasSubstr("NOT_FOUND"));

  // Mounted by a session, it is refused with what to do, then removed.
  Result session = run("session create --language bash --volume cli-vol:/data:ro");
  ASSERT_EQ(session.first, 0) << session.second;
  const std::string id = session.second.substr(0, session.second.find('\n'));
  std::ofstream(dir_ + "/cell.sh") << "stat -c %a /data/dir/run.sh; touch /data/x\n";
  Result cell = run(absl::StrCat("exec --session ", id, " ", dir_, "/cell.sh"));
  EXPECT_THAT(cell.second, HasSubstr("755\n"));
  EXPECT_THAT(cell.second, HasSubstr("Read-only file system"));
  EXPECT_THAT(run("session show " + id).second, HasSubstr("cli-vol at /data (read-only)"));
  EXPECT_THAT(run("volume ls").second, ::testing::ContainsRegex("cli-vol .* 1 "));
  Result refused = run("volume rm cli-vol");
  EXPECT_EQ(refused.first, 125);
  EXPECT_THAT(refused.second, HasSubstr("close the sessions"));
  EXPECT_EQ(run("session close " + id), Result(0, ""));
  EXPECT_EQ(run("volume rm cli-vol"), Result(0, ""));
  EXPECT_EQ(run("volume ls"), Result(0, "NAME  USED  QUOTA  FILES  MOUNTS  CREATED\n"));
}

}  // namespace
}  // namespace warden
