// Sandboxes in a template's root filesystem (images/, sandbox/mount_plan.h):
// a small image the test lays out - a static busybox and a shell script -
// imported into a store of the test's own, then run with the containment
// sequence unchanged: the image's files and programs, its owners mapped to
// the sandbox's, the root read-only, /tmp and the workspace writable, no
// network, the same seccomp policy.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "images/fs_util.h"
#include "images/template_store.h"
#include "images/testing/oci_builder.h"
#include "tests/test_util.h"

namespace warden::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using images::testing::Dir;
using images::testing::File;
using images::testing::ImageSpec;
using images::testing::Symlink;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The busybox applets the image links to /bin/busybox.
constexpr const char* kApplets[] = {"sh", "ls", "cat", "id", "echo", "touch", "stat", "whoami",
                                    "hostname", "nc", "unshare", "wc", "mount", "head"};

ImageSpec BusyboxImage() {
  ImageSpec image;
  images::testing::LayerSpec base;
  base.entries = {Dir("bin"), File("bin/busybox", Slurp("/bin/busybox"), 0755), Dir("etc"),
                  File("etc/passwd", "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000:app:/home/app:/bin/sh\n"),
                  File("etc/group", "root:x:0:\napp:x:1000:\n"), File("etc/hosts", "127.0.0.1 localhost\n"),
                  File("etc/motd", "from the image\n"), Dir("root", 0700), Dir("home"),
                  Dir("home/app", 0700, 1000, 1000), File("home/app/secret", "app's own\n", 0600, 1000, 1000),
                  Dir("mnt"), File("mnt/readme", "the image's /mnt\n"), Dir("tmp", 01777)};
  for (const char* applet : kApplets) base.entries.push_back(Symlink(std::string("bin/") + applet, "busybox"));
  images::testing::LayerSpec app;
  app.entries = {Dir("app"), File("app/hello.sh", "#!/bin/sh\necho \"hello from $GREETING\"\n", 0755)};
  image.layers = {base, app};
  image.config.env = {"PATH=/bin", "GREETING=the image"};
  image.config.working_dir = "/app";
  return image;
}

class TemplateSandboxTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/warden-template-test-XXXXXX";
    dir_ = new std::string(mkdtemp(tmpl));
    ASSERT_TRUE(images::testing::WriteOciLayout(*dir_ + "/layout", {BusyboxImage()}).ok());
    images::TemplateStore::Options options;
    options.dir = *dir_ + "/store";
    options.mount_point_dirs = {"proc", "dev", "tmp", "workspace"};
    options.mount_point_files = {"etc/passwd", "etc/group", "etc/hosts", "etc/hostname", "etc/resolv.conf"};
    auto store = images::TemplateStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status();
    images::ImportRequest request;
    request.layout_dir = *dir_ + "/layout";
    request.name = "busybox";
    auto info = (*store)->Import(request);
    ASSERT_TRUE(info.ok()) << info.status();
    info_ = new images::TemplateInfo(*info);
    store_ = store->release();
  }
  static void TearDownTestSuite() {
    delete store_;
    delete info_;
    images::RemoveTree(*dir_).IgnoreError();
    delete dir_;
  }

  static SandboxSpec Spec(std::vector<std::string> argv) {
    SandboxSpec spec;
    spec.argv = std::move(argv);
    spec.env = {"PATH=/bin", "GREETING=the image"};
    spec.filesystem.root = info_->root_path;
    spec.filesystem.passwd_base = info_->passwd;
    spec.filesystem.group_base = info_->group;
    spec.limits.wall_ms = 10'000;
    return spec;
  }
  static Result Sh(const std::string& script) { return testing::Run(Spec({"/bin/sh", "-c", script})); }

  static std::string* dir_;
  static images::TemplateStore* store_;
  static images::TemplateInfo* info_;
};
std::string* TemplateSandboxTest::dir_ = nullptr;
images::TemplateStore* TemplateSandboxTest::store_ = nullptr;
images::TemplateInfo* TemplateSandboxTest::info_ = nullptr;

TEST_F(TemplateSandboxTest, RunsTheImagesOwnProgramsAndSeesItsFilesNotTheHosts) {
  Result r = testing::Run(Spec({"/app/hello.sh"}));
  EXPECT_EQ(r.outcome, Outcome::kOk) << Describe(r);
  EXPECT_EQ(r.stdout_data, "hello from the image\n");
  r = Sh("cat /etc/motd; ls /usr/bin/python3 2>&1; ls /");
  EXPECT_THAT(r.stdout_data, HasSubstr("from the image\n"));
  EXPECT_THAT(r.stdout_data, HasSubstr("/usr/bin/python3: No such file or directory"));
  EXPECT_THAT(r.stdout_data, Not(HasSubstr(".warden-etc")));  // staged files are gone
  // A bare name is found in the template's /bin.
  r = testing::Run(Spec({"busybox", "echo", "found"}));
  EXPECT_EQ(r.stdout_data, "found\n") << Describe(r);
}

TEST_F(TemplateSandboxTest, RootIsReadOnlyAndTmpAndTheWorkspaceAreWritable) {
  Result r = Sh("touch /app/new 2>&1; touch /etc/new 2>&1; echo x > /tmp/t && cat /tmp/t; echo y > /workspace/w && cat /workspace/w");
  EXPECT_EQ(r.outcome, Outcome::kOk) << Describe(r);
  EXPECT_THAT(r.stdout_data, HasSubstr("touch: /app/new: Read-only file system"));
  EXPECT_THAT(r.stdout_data, HasSubstr("touch: /etc/new: Read-only file system"));
  EXPECT_THAT(r.stdout_data, HasSubstr("x\ny\n"));
  EXPECT_FALSE(std::filesystem::exists(info_->root_path + "/app/new"));
}

TEST_F(TemplateSandboxTest, TheImagesOwnersAreTheSandboxsOwn) {
  // The image's uid 1000 is the sandbox user: its 0600 file is readable;
  // root's 0700 /root is not, and root's files show as root's.
  Result r = Sh("id -u; whoami; cat /home/app/secret; ls /root 2>&1; stat -c '%u %U' /bin/busybox /home/app");
  EXPECT_EQ(r.outcome, Outcome::kOk) << Describe(r);
  EXPECT_EQ(r.stdout_data,
            "1000\nsandbox\napp's own\nls: can't open '/root': Permission denied\n0 root\n1000 sandbox\n");
  r = Sh("cat /etc/passwd");
  EXPECT_THAT(r.stdout_data, HasSubstr("root:x:0:0:root:/root:/bin/sh\n"));
  EXPECT_THAT(r.stdout_data, HasSubstr("sandbox:x:1000:1000:"));
  EXPECT_THAT(r.stdout_data, Not(HasSubstr("app:x:1000")));
}

TEST_F(TemplateSandboxTest, AMountPointTheImageLacksIsMadeWithoutTouchingTheTemplate) {
  char tmpl[] = "/tmp/warden-template-bind-XXXXXX";
  const std::string host = mkdtemp(tmpl);
  chmod(host.c_str(), 0755);
  std::ofstream(host + "/data.txt") << "host data\n";
  SandboxSpec spec = Spec({"/bin/sh", "-c", "cat /mnt/data/data.txt /mnt/readme; ls /mnt"});
  spec.filesystem.binds.push_back({host, "/mnt/data", false});
  Result r = testing::Run(spec);
  EXPECT_EQ(r.outcome, Outcome::kOk) << Describe(r);
  EXPECT_EQ(r.stdout_data, "host data\nthe image's /mnt\ndata\nreadme\n");
  EXPECT_FALSE(std::filesystem::exists(info_->root_path + "/mnt/data"));
  images::RemoveTree(host).IgnoreError();
}

TEST_F(TemplateSandboxTest, NoNetworkAndTheSameSeccompPolicy) {
  Result r = Sh("cat /proc/net/dev | wc -l; nc -w 1 1.1.1.1 53 </dev/null 2>&1; echo nc=$?");
  EXPECT_EQ(r.outcome, Outcome::kOk) << Describe(r);
  EXPECT_THAT(r.stdout_data, HasSubstr("3\n"));  // headers and lo only
  EXPECT_THAT(r.stdout_data, HasSubstr("nc=1"));
  r = testing::Run(Spec({"/bin/unshare", "-U", "/bin/true"}));
  EXPECT_EQ(r.outcome, Outcome::kViolation) << Describe(r);
  EXPECT_EQ(r.violation.value_or(""), "unshare");
  r = Sh("hostname; cat /etc/hostname 2>&1");
  EXPECT_THAT(r.stdout_data, HasSubstr("sandbox\n"));
}

}  // namespace
}  // namespace warden::testing
