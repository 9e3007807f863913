// Templates end to end over real gRPC (docs/templates.md): images imported
// through warden.v1.Templates, then sessions, one-shots, pools and
// snapshots in them, with real sandboxes and the images' own interpreters.
// The images: a busybox one the test lays out (a static binary and a shell
// script: no interpreter Warden's kernels run on), and a Debian 12 one
// made by tests/images/debian_image.sh with mmdebstrap (cached; the ctest
// fixture template_debian_image builds it first): python3 in a virtualenv
// at /opt/venv with a package of its own, matplotlib, pip, node and bash.
// One process, one store (kept beside the image's cache, so that later runs
// find the Debian image's layer unpacked already).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "images/fs_util.h"
#include "images/testing/oci_builder.h"
#include "server/daemon.h"
#include "warden/v1/executor.grpc.pb.h"
#include "warden/v1/images.grpc.pb.h"

namespace warden {
namespace {

using ::testing::HasSubstr;
using images::testing::Dir;
using images::testing::File;
using images::testing::Symlink;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// What a command prints (the Debian image's archive path).
std::string Output(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  pclose(p);
  return std::string(absl::StripAsciiWhitespace(out));
}

struct Imported {
  grpc::Status status;
  v1::Template template_;
  std::vector<std::string> messages;
};

// Streams an image archive to ImportTemplate, as `warden template import` does.
Imported Import(v1::Templates::Stub& stub, const std::string& archive, const std::string& name,
                const std::string& ref = "", const std::string& token = "", bool private_template = false) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  auto stream = stub.ImportTemplate(&ctx);
  v1::ImportTemplateRequest header;
  header.mutable_header()->set_name(name);
  header.mutable_header()->set_ref(ref);
  header.mutable_header()->set_private_(private_template);
  stream->Write(header);
  std::ifstream in(archive, std::ios::binary);
  std::string chunk(1 << 20, '\0');
  while (in.read(chunk.data(), chunk.size()) || in.gcount() > 0) {
    v1::ImportTemplateRequest part;
    part.set_chunk(chunk.data(), static_cast<size_t>(in.gcount()));
    if (!stream->Write(part)) break;
  }
  stream->WritesDone();
  Imported out;
  v1::TemplateProgress progress;
  while (stream->Read(&progress)) {
    if (progress.has_template_()) out.template_ = progress.template_();
    if (!progress.message().empty()) out.messages.push_back(progress.message());
  }
  out.status = stream->Finish();
  return out;
}

// Builds a Dockerfile without a context over BuildTemplate: its status,
// the template, and buildah's lines.
Imported Build(v1::Templates::Stub& stub, const std::string& dockerfile, const std::string& name,
               const std::string& token) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
  ctx.AddMetadata("authorization", "Bearer " + token);
  auto stream = stub.BuildTemplate(&ctx);
  v1::BuildTemplateRequest header;
  header.mutable_header()->set_name(name);
  header.mutable_header()->set_dockerfile(dockerfile);
  stream->Write(header);
  stream->WritesDone();
  Imported out;
  v1::TemplateProgress progress;
  while (stream->Read(&progress)) {
    if (progress.has_template_()) out.template_ = progress.template_();
    if (!progress.message().empty()) out.messages.push_back(progress.message());
  }
  out.status = stream->Finish();
  return out;
}

class TemplateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/warden-template-daemon-XXXXXX";
    dir_ = new std::string(mkdtemp(tmpl));
    chmod(dir_->c_str(), 0755);
    // The busybox image, as an archive of its OCI layout.
    images::testing::ImageSpec busybox;
    images::testing::LayerSpec layer;
    layer.entries = {Dir("bin"), File("bin/busybox", Slurp("/bin/busybox"), 0755), Symlink("bin/sh", "busybox"),
                     Dir("app"), File("app/hello.sh", "#!/bin/sh\necho hello from busybox\n", 0755)};
    busybox.layers = {layer};
    busybox.config.env = {"PATH=/bin"};
    ASSERT_TRUE(images::testing::WriteOciLayout(*dir_ + "/busybox", {busybox}).ok());
    ASSERT_TRUE(images::testing::TarDirectory(*dir_ + "/busybox", *dir_ + "/busybox.tar", /*gzip=*/true).ok());
    // The Debian image (built by the fixture; cached).
    debian_ = new std::string(Output(absl::StrCat(WARDEN_SOURCE_DIR, "/tests/images/debian_image.sh")));
    ASSERT_TRUE(std::filesystem::exists(*debian_)) << "tests/images/debian_image.sh printed '" << *debian_ << "'";
    // A wheelhouse with wardentiny 1.0.
    wheelhouse_ = new std::string(*dir_ + "/wheels");
    mkdir(wheelhouse_->c_str(), 0755);
    ASSERT_EQ(std::system(absl::StrCat("/usr/bin/python3 ", WARDEN_SOURCE_DIR, "/kernel/testing/wheels.py ",
                                       *wheelhouse_, " wardentiny 1.0 'VALUE = 42' > /dev/null")
                              .c_str()),
              0);
    // Tokens: alice may have templates of her own, bob may not.
    const std::string tokens = *dir_ + "/tokens.json";
    std::ofstream(tokens) << R"({"tokens": [{"token": "operator-token-0123456789", "tenant": "ops"},
                                            {"token": "alice-token-0123456789ab", "tenant": "alice"},
                                            {"token": "bob-token-0123456789abcd", "tenant": "bob"}]})";
    chmod(tokens.c_str(), 0600);
    StartDaemon({});
    v1::Templates::Stub& stub = *templates_;
    Imported debian = Import(stub, *debian_, "debian-venv", "debian-venv", kOperator);
    ASSERT_TRUE(debian.status.ok()) << debian.status.error_message();
    Imported plain = Import(stub, *debian_, "debian", "debian", kOperator);
    ASSERT_TRUE(plain.status.ok()) << plain.status.error_message();
    Imported bb = Import(stub, *dir_ + "/busybox.tar", "busybox", "", kOperator);
    ASSERT_TRUE(bb.status.ok()) << bb.status.error_message();
    imports_ = new std::vector<Imported>{debian, plain, bb};
  }
  static void TearDownTestSuite() {
    StopDaemon();
    images::RemoveTree(*dir_).IgnoreError();
    delete dir_;
    delete debian_;
    delete wheelhouse_;
    delete imports_;
  }

  static DaemonOptions Options(std::vector<PoolOptions> pools) {
    DaemonOptions options;
    options.listen = {"127.0.0.1:0"};
    options.allow_insecure_loopback = true;
    options.auth.tokens_file = *dir_ + "/tokens.json";
    options.pools = {{"python", 1, {}}, {"bash", 0, {}}};
    options.pools[0].wheelhouse = *wheelhouse_;
    for (PoolOptions& p : pools) options.pools.push_back(p);
    options.zygote.enabled = false;
    options.executor.host_id_base = static_cast<uid_t>(5'000'000 + (getpid() % 4096) * 512);
    options.executor.host_id_count = 512;
    // Beside the image's cache, kept from run to run: a store of ~600 MB
    // of small files takes this machine minutes to delete, and a later run
    // (the sanitizers') finds the Debian image's layer there already.
    options.templates.dir = "/var/cache/warden-tests/template-store";
    options.templates.operators = {"ops"};
    options.templates.tenants = {"alice"};
    options.templates.max_per_tenant = 1;
    options.snapshots.dir = *dir_ + "/snapshots";
    options.queue.max_wait_ms = 60'000;
    options.shutdown_grace_ms = 5'000;
    return options;
  }
  static void StartDaemon(std::vector<PoolOptions> pools) {
    auto daemon = Daemon::Create(Options(std::move(pools)));
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = daemon->release();
    ASSERT_TRUE(daemon_->Start().ok());
    auto channel = grpc::CreateChannel(daemon_->listening().front(), grpc::InsecureChannelCredentials());
    executor_ = v1::Executor::NewStub(channel).release();
    templates_ = v1::Templates::NewStub(channel).release();
  }
  static void StopDaemon() {
    delete executor_;
    delete templates_;
    executor_ = nullptr;
    templates_ = nullptr;
    if (daemon_) daemon_->Shutdown(absl::Seconds(5));
    delete daemon_;
    daemon_ = nullptr;
  }

  static std::unique_ptr<grpc::ClientContext> Context(const std::string& token = kOperator) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    ctx->AddMetadata("authorization", "Bearer " + token);
    return ctx;
  }
  static grpc::Status CreateSession(const std::string& template_name, v1::Language language, v1::Session* session,
                                    bool shared = false, const std::string& token = kOperator) {
    v1::CreateSessionRequest request;
    request.set_template_(template_name);
    request.set_language(language);
    request.set_shared_workspace(shared);
    return executor_->CreateSession(Context(token).get(), request, session);
  }
  static v1::ExecuteResponse Execute(const std::string& code, const std::string& session,
                                     const std::string& template_name = "", v1::Language language = v1::LANGUAGE_PYTHON) {
    v1::ExecuteRequest request;
    request.set_code(code);
    request.set_session_id(session);
    request.set_template_(template_name);
    request.set_language(language);
    v1::ExecuteResponse response;
    grpc::Status s = executor_->Execute(Context().get(), request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response;
  }
  static std::string Text(const v1::ExecuteResponse& r) {
    return r.results_size() > 0 ? r.results(r.results_size() - 1).data().at("text/plain") : r.stdout();
  }

  static constexpr const char* kOperator = "operator-token-0123456789";
  static constexpr const char* kAlice = "alice-token-0123456789ab";
  static constexpr const char* kBob = "bob-token-0123456789abcd";
  static std::string* dir_;
  static std::string* debian_;
  static std::string* wheelhouse_;
  static std::vector<Imported>* imports_;
  static Daemon* daemon_;
  static v1::Executor::Stub* executor_;
  static v1::Templates::Stub* templates_;
};
std::string* TemplateTest::dir_ = nullptr;
std::string* TemplateTest::debian_ = nullptr;
std::string* TemplateTest::wheelhouse_ = nullptr;
std::vector<Imported>* TemplateTest::imports_ = nullptr;
Daemon* TemplateTest::daemon_ = nullptr;
v1::Executor::Stub* TemplateTest::executor_ = nullptr;
v1::Templates::Stub* TemplateTest::templates_ = nullptr;

const v1::TemplateLanguage& LanguageOf(const v1::Template& t, v1::Language language) {
  for (const v1::TemplateLanguage& l : t.languages()) {
    if (l.language() == language) return l;
  }
  static v1::TemplateLanguage none;
  return none;
}

TEST_F(TemplateTest, ImportsReportProgressAndTheImagesInterpreters) {
  const Imported& debian = (*imports_)[0];
  EXPECT_TRUE(debian.template_.public_());
  EXPECT_THAT(debian.template_.digest(), ::testing::StartsWith("sha256:"));
  ASSERT_FALSE(debian.messages.empty());
  EXPECT_THAT(debian.messages.front(), HasSubstr("unpacking the archive"));
  bool saw_layer = false;
  for (const std::string& m : debian.messages) saw_layer |= absl::StrContains(m, "layer 1/1");
  EXPECT_TRUE(saw_layer);
  const v1::TemplateLanguage& python = LanguageOf(debian.template_, v1::LANGUAGE_PYTHON);
  EXPECT_TRUE(python.available()) << python.note();
  EXPECT_EQ(python.interpreter(), "/opt/venv/bin/python3");
  EXPECT_THAT(python.version(), ::testing::StartsWith("3.11."));
  EXPECT_TRUE(LanguageOf(debian.template_, v1::LANGUAGE_JAVASCRIPT).available());
  EXPECT_EQ(LanguageOf((*imports_)[1].template_, v1::LANGUAGE_PYTHON).interpreter(), "/usr/bin/python3");
  // Both Debian templates are one root filesystem, unpacked once.
  EXPECT_EQ(debian.template_.layers(0), (*imports_)[1].template_.layers(0));
  const v1::Template& busybox = (*imports_)[2].template_;
  EXPECT_FALSE(LanguageOf(busybox, v1::LANGUAGE_PYTHON).available());
  EXPECT_THAT(LanguageOf(busybox, v1::LANGUAGE_PYTHON).note(), HasSubstr("has no python3 (3.8 or newer)"));

  v1::ListTemplatesResponse list;
  ASSERT_TRUE(templates_->ListTemplates(Context().get(), {}, &list).ok());
  std::vector<std::string> names;
  for (const v1::Template& t : list.templates()) names.push_back(t.name());
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("busybox", "debian", "debian-venv"));
}

TEST_F(TemplateTest, ASessionAskingForWhatTheImageLacksIsToldWhy) {
  v1::Session session;
  grpc::Status s = CreateSession("busybox", v1::LANGUAGE_PYTHON, &session);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("has no python3 (3.8 or newer) on its PATH"));
  s = CreateSession("no-such-image", v1::LANGUAGE_PYTHON, &session);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("there is no template 'no-such-image'; there are: "));
  v1::ExecuteRequest request;
  request.set_code("print(1)");
  request.set_template_("busybox");
  v1::ExecuteResponse response;
  s = executor_->Execute(Context().get(), request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(TemplateTest, APythonSessionRunsOnTheImagesInterpreterKeepsStateDrawsAndInstalls) {
  v1::Session session;
  ASSERT_TRUE(CreateSession("debian-venv", v1::LANGUAGE_PYTHON, &session).ok());
  EXPECT_EQ(session.template_(), "debian-venv");
  EXPECT_EQ(session.template_digest(), (*imports_)[0].template_.digest());
  const std::string id = session.id();
  EXPECT_EQ(Execute("x = 41", id).outcome(), v1::OUTCOME_OK);
  v1::ExecuteResponse r = Execute("import sys, os, warden_extra\n(x + 1, sys.executable, sys.prefix, "
                                  "warden_extra.WHERE, os.environ['IMAGE_GREETING'], os.getcwd())",
                                  id);
  ASSERT_EQ(r.outcome(), v1::OUTCOME_OK) << r.DebugString();
  EXPECT_EQ(Text(r), "(42, '/opt/venv/bin/python3', '/opt/venv', "
                     "'/opt/venv/lib/python3.11/site-packages/warden_extra/__init__.py', 'debian-venv', '/workspace')");
  // The host's runtime is not there: pandas is the host's, not the image's.
  r = Execute("import pandas", id);
  EXPECT_EQ(r.outcome(), v1::OUTCOME_ERROR);
  EXPECT_EQ(r.error().name(), "ModuleNotFoundError");
  r = Execute("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3]);", id);
  ASSERT_EQ(r.outcome(), v1::OUTCOME_OK) << r.DebugString();
  ASSERT_EQ(r.results_size(), 1);
  EXPECT_EQ(r.results(0).data().at("image/png").substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  r = Execute("%pip install wardentiny", id);
  EXPECT_THAT(r.stdout(), HasSubstr("Successfully installed wardentiny-1.0")) << r.DebugString();
  r = Execute("import wardentiny\nwardentiny.VALUE", id);
  EXPECT_EQ(Text(r), "42") << r.DebugString();
  // The root is the image's, read-only; /tmp and the workspace are not.
  r = Execute("import subprocess\nprint(subprocess.run('cat /etc/debian_version; touch /opt/x', shell=True,"
              " capture_output=True, text=True))", id);
  EXPECT_THAT(r.stdout(), HasSubstr("stdout='12."));
  EXPECT_THAT(r.stdout(), HasSubstr("Read-only file system"));
  v1::CloseSessionRequest close;
  close.set_session_id(id);
  v1::CloseSessionResponse closed;
  EXPECT_TRUE(executor_->CloseSession(Context().get(), close, &closed).ok());
}

TEST_F(TemplateTest, JavaScriptAndBashRunOnTheImagesInterpreters) {
  v1::ExecuteResponse js = Execute("console.log(process.execPath, process.version.split('.')[0])", "", "debian",
                                   v1::LANGUAGE_JAVASCRIPT);
  ASSERT_EQ(js.outcome(), v1::OUTCOME_OK) << js.DebugString();
  EXPECT_EQ(js.stdout(), "/usr/bin/node v18\n");
  v1::ExecuteResponse bash = Execute("echo ${BASH_VERSINFO[0]} $(. /etc/os-release; echo $ID)", "", "debian",
                                     v1::LANGUAGE_BASH);
  ASSERT_EQ(bash.outcome(), v1::OUTCOME_OK) << bash.DebugString();
  EXPECT_EQ(bash.stdout(), "5 debian\n");
}

TEST_F(TemplateTest, ASharedWorkspaceSessionIsAMachineOfTheImage) {
  v1::Session session;
  grpc::Status created = CreateSession("debian", v1::LANGUAGE_PYTHON, &session, /*shared=*/true);
  ASSERT_TRUE(created.ok()) << created.error_message();
  v1::RunCommandRequest run;
  run.set_session_id(session.id());
  run.add_argv("/bin/sh");
  run.add_argv("-c");
  run.add_argv("echo $HOME; whoami; cat /etc/debian_version | cut -c1-3; command -v python3");
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", std::string("Bearer ") + kOperator);
  auto reader = executor_->RunCommand(&ctx, run);
  std::string out;
  v1::CommandEvent event;
  while (reader->Read(&event)) {
    if (event.has_stdout()) out += event.stdout();
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(out, "/workspace\nuser\n12.\n/usr/bin/python3\n");
  v1::ExecuteResponse r = Execute("import sys\nsys.executable", session.id());
  EXPECT_EQ(Text(r), "'/usr/bin/python3'") << r.DebugString();
}

TEST_F(TemplateTest, SnapshotsRecordTheTemplateAndRestoreOnlyOntoIt) {
  v1::Session session;
  ASSERT_TRUE(CreateSession("debian-venv", v1::LANGUAGE_PYTHON, &session).ok());
  Execute("kept = 'in the image'", session.id());
  v1::SnapshotSessionRequest snap;
  snap.set_session_id(session.id());
  v1::Snapshot snapshot;
  ASSERT_TRUE(executor_->SnapshotSession(Context().get(), snap, &snapshot).ok());
  EXPECT_EQ(snapshot.template_(), "debian-venv");
  EXPECT_EQ(snapshot.template_digest(), session.template_digest());

  v1::ForkSessionRequest fork;
  fork.set_session_id(session.id());
  v1::ForkSessionResponse forked;
  ASSERT_TRUE(executor_->ForkSession(Context().get(), fork, &forked).ok());
  EXPECT_EQ(forked.session().template_digest(), session.template_digest());
  EXPECT_EQ(Text(Execute("import sys\n(kept, sys.prefix)", forked.session().id())), "('in the image', '/opt/venv')");

  // Without the image, the snapshot has nowhere to go: never onto another.
  v1::DeleteTemplateRequest del;
  del.set_name("debian-venv");
  del.set_public_(true);
  v1::DeleteTemplateResponse deleted;
  ASSERT_TRUE(templates_->DeleteTemplate(Context().get(), del, &deleted).ok());
  v1::RestoreSnapshotRequest restore;
  restore.set_snapshot_id(snapshot.snapshot_id());
  v1::Session restored;
  grpc::Status s = executor_->RestoreSnapshot(Context().get(), restore, &restored);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("no longer here"));
  // The running session keeps running in it meanwhile.
  EXPECT_EQ(Text(Execute("kept", session.id())), "'in the image'");
  Imported again = Import(*templates_, *debian_, "debian-venv", "debian-venv", kOperator);
  ASSERT_TRUE(again.status.ok()) << again.status.error_message();
  ASSERT_TRUE(executor_->RestoreSnapshot(Context().get(), restore, &restored).ok());
  EXPECT_EQ(restored.template_digest(), session.template_digest());
  EXPECT_EQ(Text(Execute("import sys\n(kept, sys.executable)", restored.id())),
            "('in the image', '/opt/venv/bin/python3')");
}

TEST_F(TemplateTest, TenantsManageTheirOwnTemplatesOnlyWhereTheOperatorAllowsIt) {
  Imported bob = Import(*templates_, *dir_ + "/busybox.tar", "mine", "", kBob);
  EXPECT_EQ(bob.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(bob.status.error_message(), HasSubstr("templates.tenants"));
  Imported alice = Import(*templates_, *dir_ + "/busybox.tar", "mine", "", kAlice);
  ASSERT_TRUE(alice.status.ok()) << alice.status.error_message();
  EXPECT_FALSE(alice.template_.public_());
  // Her quota is one template.
  Imported second = Import(*templates_, *dir_ + "/busybox.tar", "second", "", kAlice);
  EXPECT_EQ(second.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Hers alone: bob cannot see or use it; nor may she delete a public one.
  v1::GetTemplateRequest get;
  get.set_name("mine");
  v1::Template t;
  EXPECT_TRUE(templates_->GetTemplate(Context(kAlice).get(), get, &t).ok());
  EXPECT_EQ(templates_->GetTemplate(Context(kBob).get(), get, &t).error_code(), grpc::StatusCode::NOT_FOUND);
  v1::Session session;
  EXPECT_EQ(CreateSession("mine", v1::LANGUAGE_BASH, &session, false, kBob).error_code(),
            grpc::StatusCode::NOT_FOUND);
  v1::DeleteTemplateRequest del;
  del.set_name("busybox");
  del.set_public_(true);
  v1::DeleteTemplateResponse deleted;
  EXPECT_EQ(templates_->DeleteTemplate(Context(kAlice).get(), del, &deleted).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  del.set_name("mine");
  del.set_public_(false);
  EXPECT_TRUE(templates_->DeleteTemplate(Context(kAlice).get(), del, &deleted).ok());
}

// `warden template build` through the real CLI: a Dockerfile FROM the
// busybox template, whose COPY brings a file and a bash (with the
// libraries it loads) from the context, whose RUN installs busybox's
// applets and records who ran it and which network interfaces it had,
// and whose ENV, WORKDIR and USER set the template's config. Its sandbox
// then behaves as the Dockerfile says.
TEST_F(TemplateTest, ADockerfileBuildsATemplateWhoseSandboxBehavesAsItSays) {
  const std::string context = *dir_ + "/context";
  std::filesystem::create_directories(context + "/files");
  std::ofstream(context + "/greeting.txt") << "a file from the context\n";
  std::string dockerfile = "# the test's\nFROM busybox\n";
  std::vector<std::string> copied = {"/bin/bash"};
  for (absl::string_view line : absl::StrSplit(Output("ldd /bin/bash"), '\n')) {
    for (absl::string_view word : absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
      if (absl::StartsWith(word, "/")) {
        copied.emplace_back(word);
        break;
      }
    }
  }
  for (size_t i = 0; i < copied.size(); ++i) {
    std::filesystem::copy_file(copied[i], absl::StrCat(context, "/files/", i));
    absl::StrAppend(&dockerfile, "COPY files/", i, " ", copied[i], "\n");
  }
  dockerfile += R"DF(COPY greeting.txt /srv/app/
RUN /bin/busybox --install -s /bin \
 && echo "made by uid $(id -u)" > /srv/app/made \
 && tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' > /srv/app/interfaces \
 && tr -s ' ' < /proc/self/uid_map > /srv/app/uid_map \
 && ls -d /proc/[0-9]* | wc -l > /srv/app/processes
ENV GREETING="hello from the Dockerfile"
WORKDIR /srv/app
USER 1000
)DF";
  std::ofstream(context + "/Dockerfile") << dockerfile;

  const std::string command = absl::StrCat("WARDEN_ADDR=", daemon_->listening().front(), " WARDEN_TOKEN=", kOperator,
                                           " ", WARDEN_BIN_DIR, "/warden template build ", context,
                                           " --name built 2>&1; echo exit=$?");
  const std::string out = Output(command);
  EXPECT_THAT(out, HasSubstr("STEP 1/")) << out;  // buildah's progress, as it came
  ASSERT_TRUE(absl::EndsWith(out, "\nbuilt\nexit=0")) << out;

  v1::GetTemplateRequest get;
  get.set_name("built");
  v1::Template t;
  ASSERT_TRUE(templates_->GetTemplate(Context().get(), get, &t).ok());
  EXPECT_THAT(t.env(), ::testing::Contains("GREETING=hello from the Dockerfile"));
  EXPECT_EQ(t.working_dir(), "/srv/app");
  EXPECT_EQ(t.user(), "1000");
  EXPECT_TRUE(LanguageOf(t, v1::LANGUAGE_BASH).available()) << t.DebugString();
  EXPECT_EQ(t.layers_size(), 2) << t.DebugString();  // the base's files, then the build's

  // RUN ran as the image's root, which is an unprivileged host id (the
  // build's namespace maps templates.build_host_id_base on), with no
  // network but a loopback and none of the host's processes in sight.
  v1::ExecuteResponse r = Execute(
      "cd /srv/app; cat greeting.txt made interfaces uid_map; echo \"$GREETING\"; id -u; cat processes", "", "built",
      v1::LANGUAGE_BASH);
  const std::vector<std::string> lines = absl::StrSplit(r.stdout(), '\n');
  ASSERT_EQ(lines.size(), 8u) << r.DebugString();
  EXPECT_EQ(absl::StrJoin(lines.begin(), lines.begin() + 6, "\n"),
            "a file from the context\nmade by uid 0\nlo\n 0 1000000 65536\nhello from the Dockerfile\n1000");
  int processes = 0;
  EXPECT_TRUE(absl::SimpleAtoi(lines[6], &processes)) << r.DebugString();
  EXPECT_LT(processes, 30) << "the build's /proc shows the host's processes";

  v1::DeleteTemplateRequest del;
  del.set_name("built");
  del.set_public_(true);
  v1::DeleteTemplateResponse deleted;
  EXPECT_TRUE(templates_->DeleteTemplate(Context().get(), del, &deleted).ok());
}

// What fails says where and why: a failing step by its number and text,
// a Dockerfile reaching for a registry or the network before anything
// runs, a tenant the operator did not allow.
TEST_F(TemplateTest, AFailingBuildSaysWhichStepAndWhy) {
  Imported failed = Build(*templates_, "FROM busybox\nRUN echo one\nRUN echo broken >&2; exit 3\n", "broken",
                          kOperator);
  EXPECT_EQ(failed.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(failed.status.error_message(), HasSubstr("STEP 3/3 (RUN echo broken >&2; exit 3)"));
  EXPECT_THAT(failed.status.error_message(), HasSubstr("exit status 3"));
  EXPECT_THAT(failed.messages, ::testing::Contains("broken"));

  Imported registry = Build(*templates_, "FROM docker.io/library/debian:12\n", "x", kOperator);
  EXPECT_EQ(registry.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(registry.status.error_message(), HasSubstr("pulls from no registry"));
  Imported missing = Build(*templates_, "FROM not-imported\n", "x", kOperator);
  EXPECT_EQ(missing.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(missing.status.error_message(), HasSubstr("there are: "));
  Imported network = Build(*templates_, "FROM busybox\nRUN \\\n  --network=host true\n", "x", kOperator);
  EXPECT_EQ(network.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(network.status.error_message(), HasSubstr("line 2: RUN: RUN takes no flags"));
  Imported bob = Build(*templates_, "FROM busybox\n", "x", kBob);
  EXPECT_EQ(bob.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  for (const Imported* i : {&failed, &registry, &missing, &network, &bob}) EXPECT_EQ(i->template_.name(), "");
}

TEST_F(TemplateTest, APoolNamesItsTemplateAndServesOneShotsWarm) {
  StopDaemon();
  PoolOptions pool;
  pool.language = "python";
  pool.size = 1;
  pool.template_name = "debian";
  PoolOptions missing;
  missing.language = "bash";
  missing.size = 1;
  missing.template_name = "not-imported";
  StartDaemon({pool, missing});
  EXPECT_THAT(daemon_->engine().Health().message(), HasSubstr("the pool in the template 'not-imported' cannot start"));
  v1::ExecuteResponse r = Execute("import sys\nprint(sys.executable)", "", "debian");
  EXPECT_EQ(r.stdout(), "/usr/bin/python3\n") << r.DebugString();
  const EngineStats stats = daemon_->engine().Stats();
  ASSERT_TRUE(stats.pools.count("python@debian"));
  EXPECT_EQ(stats.pools.at("python@debian").acquired, 1);
  StopDaemon();
  StartDaemon({});
}

}  // namespace
}  // namespace warden
