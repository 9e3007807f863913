#include "sandbox/mount_plan.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>

#include <algorithm>
#include <string>

#include "gtest/gtest.h"

namespace warden {
namespace {

const MountOp* Find(const MountPlan& plan, const std::string& target) {
  for (const MountOp& op : plan.ops) {
    if (op.target == target) return &op;
  }
  return nullptr;
}

TEST(ValidateSandboxPathTest, AcceptsNormalisedAbsolutePaths) {
  EXPECT_TRUE(ValidateSandboxPath("/data").ok());
  EXPECT_TRUE(ValidateSandboxPath("/data/sub/dir").ok());
}

TEST(ValidateSandboxPathTest, RejectsRelativeDotDotAndRoot) {
  for (const char* bad : {"", "data", "/", "/a/../b", "/a/./b", "/a//b", "/a/", "/.."}) {
    EXPECT_FALSE(ValidateSandboxPath(bad).ok()) << bad;
  }
}

TEST(BuildMountPlanTest, RuntimeTreesAreReadOnlyNosuidNodevBinds) {
  auto plan = BuildMountPlan(FilesystemSpec{});
  ASSERT_TRUE(plan.ok()) << plan.status();
  const MountOp* usr = Find(*plan, "usr");
  ASSERT_NE(usr, nullptr);
  EXPECT_EQ(usr->kind, MountOp::Kind::kBind);
  EXPECT_EQ(usr->source, "/usr");
  EXPECT_EQ(usr->attrs & (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV),
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
}

TEST(BuildMountPlanTest, HostSymlinksAreCopiedAsSymlinks) {
  char buf[256];
  ssize_t n = readlink("/lib", buf, sizeof(buf));
  auto plan = BuildMountPlan(FilesystemSpec{});
  ASSERT_TRUE(plan.ok());
  const MountOp* lib = Find(*plan, "lib");
  ASSERT_NE(lib, nullptr);
  if (n > 0) {  // merged-/usr hosts such as Debian 12
    EXPECT_EQ(lib->kind, MountOp::Kind::kSymlink);
    EXPECT_EQ(lib->source, std::string(buf, n));
  } else {
    EXPECT_EQ(lib->kind, MountOp::Kind::kBind);
  }
}

TEST(BuildMountPlanTest, GeneratesEtcNamingTheSandboxUser) {
  FilesystemSpec spec;
  spec.sandbox_uid = 1234;
  spec.user_name = "runner";
  auto plan = BuildMountPlan(spec);
  ASSERT_TRUE(plan.ok());
  const MountOp* passwd = Find(*plan, "etc/passwd");
  ASSERT_NE(passwd, nullptr);
  EXPECT_NE(passwd->contents.find("runner:x:1234:"), std::string::npos);
  ASSERT_NE(Find(*plan, "etc/hosts"), nullptr);
  ASSERT_NE(Find(*plan, "etc/group"), nullptr);
  // Nothing of the host's /etc beyond the allowlist: no shadow, no hostname file.
  EXPECT_EQ(Find(*plan, "etc/shadow"), nullptr);
}

TEST(BuildMountPlanTest, TmpfsMountsAreSizedAndWorkspaceOwnedBySandboxUser) {
  FilesystemSpec spec;
  spec.tmpfs_bytes = 3 << 20;
  auto plan = BuildMountPlan(spec);
  ASSERT_TRUE(plan.ok());
  for (const char* t : {"tmp", "dev/shm", "workspace"}) {
    const MountOp* op = Find(*plan, t);
    ASSERT_NE(op, nullptr) << t;
    EXPECT_EQ(op->kind, MountOp::Kind::kTmpfs) << t;
    EXPECT_EQ(op->size_text, std::to_string(3 << 20)) << t;
  }
  EXPECT_EQ(Find(*plan, "workspace")->uid_text, "1000");
  EXPECT_EQ(Find(*plan, "tmp")->mode_text, "1777");
  EXPECT_TRUE(Find(*plan, "dev/shm")->attrs & MOUNT_ATTR_NOEXEC);
}

TEST(BuildMountPlanTest, MinimalDevHasOnlyTheFiveDevices) {
  auto plan = BuildMountPlan(FilesystemSpec{});
  ASSERT_TRUE(plan.ok());
  std::vector<std::string> devices;
  for (const MountOp& op : plan->ops) {
    if (op.kind == MountOp::Kind::kBind && op.target.rfind("dev/", 0) == 0) {
      devices.push_back(op.target);
      EXPECT_FALSE(op.attrs & MOUNT_ATTR_NODEV) << op.target;
    }
  }
  EXPECT_EQ(devices, (std::vector<std::string>{"dev/null", "dev/zero", "dev/full", "dev/random",
                                               "dev/urandom"}));
}

TEST(BuildMountPlanTest, NoSysOrCgroupfsOrHostHome) {
  auto plan = BuildMountPlan(FilesystemSpec{});
  ASSERT_TRUE(plan.ok());
  for (const std::string& path : plan->Describe()) {
    EXPECT_NE(path.rfind("/sys", 0), 0u) << path;
    EXPECT_NE(path.rfind("/root", 0), 0u) << path;
    EXPECT_NE(path.rfind("/home", 0), 0u) << path;
    EXPECT_NE(path.rfind("/var", 0), 0u) << path;
  }
}

TEST(BuildMountPlanTest, ExtraBindsAreOrderedShallowFirstAndValidated) {
  FilesystemSpec spec;
  spec.binds = {{"/usr/share", "/data/deep/share", false}, {"/usr/bin", "/data", true}};
  auto plan = BuildMountPlan(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto index = [&](const std::string& t) {
    auto it = std::find_if(plan->ops.begin(), plan->ops.end(),
                           [&](const MountOp& op) { return op.target == t; });
    return it - plan->ops.begin();
  };
  EXPECT_LT(index("data"), index("data/deep/share"));
  EXPECT_FALSE(Find(*plan, "data")->attrs & MOUNT_ATTR_RDONLY);
  EXPECT_TRUE(Find(*plan, "data/deep/share")->attrs & MOUNT_ATTR_RDONLY);
  // The root is sealed read-only last, after every mount point exists.
  EXPECT_EQ(plan->ops.back().kind, MountOp::Kind::kSealRoot);
}

TEST(BuildMountPlanTest, ABootIdSourceIsBoundReadOnlyOverProcsOwnOnceProcIsMounted) {
  FilesystemSpec spec;
  EXPECT_EQ(Find(*BuildMountPlan(spec), "proc/sys/kernel/random/boot_id"), nullptr);
  spec.boot_id_source = "/etc/hostname";
  auto plan = BuildMountPlan(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const MountOp* bind = Find(*plan, "proc/sys/kernel/random/boot_id");
  ASSERT_NE(bind, nullptr);
  EXPECT_EQ(bind->kind, MountOp::Kind::kBind);
  EXPECT_EQ(bind->source, "/etc/hostname");
  EXPECT_TRUE(bind->target_is_file);
  EXPECT_TRUE(bind->attrs & MOUNT_ATTR_RDONLY);
  EXPECT_LT(Find(*plan, "proc") - plan->ops.data(), bind - plan->ops.data());
  spec.boot_id_source = "relative";
  EXPECT_FALSE(BuildMountPlan(spec).ok());
}

TEST(BuildMountPlanTest, RejectsBadBinds) {
  struct Case {
    BindMount bind;
    const char* why;
  };
  for (const Case& c : std::vector<Case>{
           {{"/usr", "relative", false}, "relative target"},
           {{"/usr", "/a/../b", false}, "dot-dot target"},
           {{"usr", "/data", false}, "relative source"},
           {{"/does/not/exist", "/data", false}, "missing source"},
           {{"/usr", "/proc/x", false}, "inside /proc"},
           {{"/usr", "/etc", false}, "over /etc"},
           {{"/usr", "/dev/sda", false}, "inside /dev"},
       }) {
    FilesystemSpec spec;
    spec.binds = {c.bind};
    EXPECT_FALSE(BuildMountPlan(spec).ok()) << c.why;
  }
  FilesystemSpec twice;
  twice.binds = {{"/usr", "/data", false}, {"/bin", "/data", false}};
  EXPECT_FALSE(BuildMountPlan(twice).ok());
}

TEST(BuildMountPlanTest, WorkspaceSourceMustBeAnExistingDirectory) {
  FilesystemSpec spec;
  spec.workspace_source = "/does/not/exist";
  EXPECT_FALSE(BuildMountPlan(spec).ok());
  spec.workspace_source = "/usr";
  auto plan = BuildMountPlan(spec);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(Find(*plan, "workspace")->kind, MountOp::Kind::kBind);
}

// A template's root, laid out on the host as the image store lays one out.
class TemplateRootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/warden-template-root-XXXXXX";
    root_ = mkdtemp(tmpl);
    for (const char* dir : {"usr", "usr/bin", "etc", "mnt", "home", "home/user", "opt", "proc", "dev", "tmp", "var"}) {
      mkdir((root_ + "/" + dir).c_str(), 0755);
    }
    symlink("usr/bin", (root_ + "/bin").c_str());
    symlink("/var/home", (root_ + "/linked-home").c_str());
    for (const char* file : {"etc/passwd", "etc/group", "etc/hosts", "etc/motd", "mnt/readme"}) {
      close(open((root_ + "/" + file).c_str(), O_CREAT | O_WRONLY, 0644));
    }
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  FilesystemSpec Spec() const {
    FilesystemSpec spec;
    spec.root = root_;
    spec.passwd_base = "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\ndaemon:x:1:1::/:/bin/false\n";
    return spec;
  }

  std::string root_;
};

TEST_F(TemplateRootTest, TopLevelEntriesAreIdmappedReadOnlyBindsAndLinksStayLinks) {
  auto plan = BuildMountPlan(Spec());
  ASSERT_TRUE(plan.ok()) << plan.status();
  const MountOp* usr = Find(*plan, "usr");
  ASSERT_NE(usr, nullptr);
  EXPECT_EQ(usr->kind, MountOp::Kind::kBind);
  EXPECT_EQ(usr->source, root_ + "/usr");
  EXPECT_EQ(usr->idmap, BindMount::Idmap::kPreferred);
  EXPECT_EQ(usr->attrs & MOUNT_ATTR_RDONLY, MOUNT_ATTR_RDONLY);
  const MountOp* bin = Find(*plan, "bin");
  ASSERT_NE(bin, nullptr);
  EXPECT_EQ(bin->kind, MountOp::Kind::kSymlink);
  EXPECT_EQ(bin->source, "usr/bin");
  // Warden's own, never the template's.
  for (const char* own : {"proc", "dev", "tmp"}) {
    const MountOp* op = Find(*plan, own);
    ASSERT_NE(op, nullptr) << own;
    EXPECT_NE(op->kind, MountOp::Kind::kBind) << own;
  }
  EXPECT_TRUE(NeedsIdmap(*plan));
}

TEST_F(TemplateRootTest, EtcIsTheTemplatesWithWardensFilesBoundOverItsOwn) {
  auto plan = BuildMountPlan(Spec());
  ASSERT_TRUE(plan.ok()) << plan.status();
  const MountOp* etc = Find(*plan, "etc");
  ASSERT_NE(etc, nullptr);
  EXPECT_EQ(etc->kind, MountOp::Kind::kBind);
  const MountOp* staged = Find(*plan, ".warden-etc-passwd");
  ASSERT_NE(staged, nullptr);
  // The image's accounts stay, but the one whose uid is the sandbox user's.
  EXPECT_NE(staged->contents.find("daemon:x:1:1:"), std::string::npos);
  EXPECT_EQ(staged->contents.find("app:x:1000"), std::string::npos);
  EXPECT_NE(staged->contents.find("sandbox:x:1000:1000:"), std::string::npos);
  const MountOp* over = Find(*plan, "etc/passwd");
  ASSERT_NE(over, nullptr);
  EXPECT_EQ(over->kind, MountOp::Kind::kBindInRoot);
  EXPECT_EQ(over->source, ".warden-etc-passwd");
  // The template has no etc/hostname: not made (its /etc is read-only).
  EXPECT_EQ(Find(*plan, "etc/hostname"), nullptr);
  // Staged files are not part of the layout the sandbox sees.
  for (const std::string& path : plan->Describe()) EXPECT_EQ(path.find(".warden-etc-"), std::string::npos) << path;
}

TEST_F(TemplateRootTest, TheEgressCaBundleGoesOverTheImagesOwnAndNowhereElse) {
  FilesystemSpec spec = Spec();
  spec.ca_bundle_source = "/etc/hostname";
  // The template has no CA bundle: none is bound (its /etc is read-only).
  auto plan = BuildMountPlan(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Find(*plan, "etc/ssl/certs/ca-certificates.crt"), nullptr);
  EXPECT_EQ(Find(*plan, "etc/ssl"), nullptr);
  // It has one: Warden's is bound over it, read-only.
  std::filesystem::create_directories(root_ + "/etc/ssl/certs");
  close(open((root_ + "/etc/ssl/certs/ca-certificates.crt").c_str(), O_CREAT | O_WRONLY, 0644));
  plan = BuildMountPlan(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const MountOp* bundle = Find(*plan, "etc/ssl/certs/ca-certificates.crt");
  ASSERT_NE(bundle, nullptr);
  EXPECT_EQ(bundle->kind, MountOp::Kind::kBind);
  EXPECT_EQ(bundle->source, "/etc/hostname");
  EXPECT_TRUE(bundle->target_is_file);
  EXPECT_EQ(bundle->attrs & MOUNT_ATTR_RDONLY, MOUNT_ATTR_RDONLY);
  EXPECT_LT(Find(*plan, "etc") - plan->ops.data(), bundle - plan->ops.data());
  EXPECT_EQ(Find(*plan, "etc/ssl"), nullptr);  // the image's own directories, not made
  spec.ca_bundle_source = "relative.crt";
  EXPECT_FALSE(BuildMountPlan(spec).ok());
}

TEST_F(TemplateRootTest, AMountPointTheTemplateLacksSplitsItsDirectory) {
  FilesystemSpec spec = Spec();
  spec.binds = {{"/usr", "/mnt/data", false}, {"/usr", "/home/user/data", false}, {"/usr", "/data", false}};
  auto plan = BuildMountPlan(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // /mnt: a tmpfs with the template's own entries bound in, sealed last.
  const MountOp* mnt = Find(*plan, "mnt");
  ASSERT_NE(mnt, nullptr);
  EXPECT_EQ(mnt->kind, MountOp::Kind::kTmpfs);
  const MountOp* readme = Find(*plan, "mnt/readme");
  ASSERT_NE(readme, nullptr);
  EXPECT_EQ(readme->kind, MountOp::Kind::kBind);
  EXPECT_TRUE(readme->target_is_file);
  EXPECT_LT(mnt - plan->ops.data(), Find(*plan, "mnt/data") - plan->ops.data());
  bool sealed = false;
  for (const MountOp& op : plan->ops) sealed |= op.kind == MountOp::Kind::kSeal && op.target == "mnt";
  EXPECT_TRUE(sealed);
  // /home/user exists in the template (a mount point of its own): /home is
  // not split; /data is new at the top, in the root's own tmpfs.
  EXPECT_EQ(Find(*plan, "home")->kind, MountOp::Kind::kBind);
  EXPECT_EQ(Find(*plan, "home/user/data")->kind, MountOp::Kind::kBind);
  EXPECT_EQ(Find(*plan, "data")->kind, MountOp::Kind::kBind);
}

TEST_F(TemplateRootTest, ADirectoryDeeperThanTheTopIsSplitUnderItsBoundParent) {
  mkdir((root_ + "/opt/app").c_str(), 0755);
  close(open((root_ + "/opt/app/main.py").c_str(), O_CREAT | O_WRONLY, 0644));
  FilesystemSpec spec = Spec();
  spec.binds = {{"/usr", "/opt/app/data", false}};
  auto plan = BuildMountPlan(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Find(*plan, "opt")->kind, MountOp::Kind::kBind);  // bound whole
  const MountOp* app = Find(*plan, "opt/app");
  ASSERT_NE(app, nullptr);
  EXPECT_EQ(app->kind, MountOp::Kind::kTmpfs);  // over its own entry in /opt
  EXPECT_EQ(Find(*plan, "opt/app/main.py")->kind, MountOp::Kind::kBind);
  EXPECT_LT(Find(*plan, "opt") - plan->ops.data(), app - plan->ops.data());
  EXPECT_LT(app - plan->ops.data(), Find(*plan, "opt/app/data") - plan->ops.data());
}

TEST_F(TemplateRootTest, ALinkTakesTheTemplatesTopLevelEntryOfItsNameButNothingDeeper) {
  // E2B's sandboxes: the workspace at /home/user and /workspace a link to
  // it, where the store made /workspace a mount point of every root.
  mkdir((root_ + "/workspace").c_str(), 0755);
  FilesystemSpec spec = Spec();
  spec.workspace = "/home/user";
  spec.links = {{"/workspace", "/home/user"}};
  auto plan = BuildMountPlan(spec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const MountOp* link = Find(*plan, "workspace");
  ASSERT_NE(link, nullptr);
  EXPECT_EQ(link->kind, MountOp::Kind::kSymlink);
  int at_workspace = 0;
  for (const MountOp& op : plan->ops) at_workspace += op.target == "workspace";
  EXPECT_EQ(at_workspace, 1);  // the template's /workspace is not bound under it
  spec.links = {{"/usr/bin", "/home/user"}};
  plan = BuildMountPlan(spec);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("the template has something there already"), std::string::npos);
}

TEST_F(TemplateRootTest, AMountThroughATemplatesSymlinkIsRefused) {
  FilesystemSpec spec = Spec();
  spec.binds = {{"/usr", "/linked-home/data", false}};
  auto plan = BuildMountPlan(spec);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("symlink at /linked-home"), std::string::npos) << plan.status();
  spec.binds.clear();
  spec.root = root_ + "/missing";
  EXPECT_FALSE(BuildMountPlan(spec).ok());
}

}  // namespace
}  // namespace warden
