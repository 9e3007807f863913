#include "images/layer_unpacker.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "images/fs_util.h"
#include "images/testing/oci_builder.h"
#include "sandbox/unique_fd.h"

namespace warden::images {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;
using testing::Dir;
using testing::File;
using testing::Hardlink;
using testing::LayerSpec;
using testing::OpaqueMarker;
using testing::Symlink;
using testing::TarEntry;
using testing::Whiteout;

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/warden-images-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { RemoveTree(path_).IgnoreError(); }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Writes the layer's blob to a file and unpacks it into a fresh tree.
struct Unpacked {
  absl::StatusOr<LayerMeta> meta;
  std::string tree;
};

class LayerUnpackerTest : public ::testing::Test {
 protected:
  Unpacked Unpack(const LayerSpec& spec, bool check_digests = true, std::string tamper = "") {
    auto blob = testing::MakeLayer(spec);
    EXPECT_TRUE(blob.ok()) << blob.status();
    const std::string blob_path = dir_ / ("blob" + std::to_string(++n_));
    std::string bytes = blob->blob + tamper;
    std::ofstream(blob_path, std::ios::binary).write(bytes.data(), bytes.size());
    Unpacked out;
    out.tree = dir_ / ("tree" + std::to_string(n_));
    mkdir(out.tree.c_str(), 0755);
    UniqueFd blob_fd(open(blob_path.c_str(), O_RDONLY | O_CLOEXEC));
    UniqueFd tree_fd(open(out.tree.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    const Digest blob_digest = check_digests ? Sha256::Of(blob->blob) : Digest();
    const Digest diff_id = check_digests ? Sha256::Of(blob->tar) : Digest();
    out.meta = UnpackLayer(blob_fd.get(), tree_fd.get(), blob_digest, diff_id, UnpackOptions());
    return out;
  }

  TempDir dir_;
  int n_ = 0;
};

TEST_F(LayerUnpackerTest, UnpacksFilesDirectoriesAndSymlinksWithOwnersModesAndTimes) {
  TarEntry script = File("usr/bin/hello", "#!/bin/sh\necho hi\n", 04755, 0, 0);
  script.mtime = 1'600'000'000;
  Unpacked u = Unpack({{Dir("usr", 0755), Dir("usr/bin", 0755), script, Dir("home/app", 0700, 1000, 1000),
                        File("home/app/secret", "s3cret", 0600, 1000, 1000), Symlink("bin", "usr/bin"),
                        File("./etc/motd", "hello\n")}});
  ASSERT_TRUE(u.meta.ok()) << u.meta.status();
  struct stat st;
  ASSERT_EQ(lstat((u.tree + "/usr/bin/hello").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 04755u);  // setuid kept: sandboxes mount it nosuid
  EXPECT_EQ(st.st_mtim.tv_sec, 1'600'000'000);
  EXPECT_EQ(Slurp(u.tree + "/usr/bin/hello"), "#!/bin/sh\necho hi\n");
  ASSERT_EQ(lstat((u.tree + "/home/app/secret").c_str(), &st), 0);
  if (geteuid() == 0) {
    EXPECT_EQ(st.st_uid, 1000u);
    EXPECT_EQ(st.st_gid, 1000u);
  }
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(lstat((u.tree + "/home/app").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(fs::read_symlink(u.tree + "/bin"), "usr/bin");
  EXPECT_EQ(Slurp(u.tree + "/etc/motd"), "hello\n");
  EXPECT_THAT(u.meta->implicit_dirs, UnorderedElementsAre("home", "etc"));
  EXPECT_EQ(u.meta->bytes, 18 + 6 + 6);
}

TEST_F(LayerUnpackerTest, RefusesAPathThatClimbsOutOfTheRoot) {
  for (const char* name : {"../escaped", "a/../../escaped", "/../escaped"}) {
    Unpacked u = Unpack({{File("ok", "x"), File(name, "pwned")}});
    ASSERT_FALSE(u.meta.ok()) << name;
    EXPECT_THAT(u.meta.status().message(), HasSubstr("outside the image's root")) << name;
    EXPECT_FALSE(fs::exists(dir_ / "escaped"));
  }
}

TEST_F(LayerUnpackerTest, LeavesOutDeviceFilesAndSaysWhy) {
  TarEntry chr;
  chr.type = TarEntry::Type::kCharDevice;
  chr.path = "dev/kmsg";
  TarEntry blk;
  blk.type = TarEntry::Type::kBlockDevice;
  blk.path = "sda";
  TarEntry fifo;
  fifo.type = TarEntry::Type::kFifo;
  fifo.path = "run/pipe";
  Unpacked u = Unpack({{chr, blk, fifo, File("kept", "1")}});
  ASSERT_TRUE(u.meta.ok()) << u.meta.status();
  EXPECT_FALSE(fs::exists(u.tree + "/dev/kmsg"));
  EXPECT_FALSE(fs::exists(u.tree + "/sda"));
  EXPECT_TRUE(fs::is_fifo(u.tree + "/run/pipe"));
  EXPECT_THAT(u.meta->left_out, UnorderedElementsAre(Pair("dev/kmsg", HasSubstr("character device")),
                                                     Pair("sda", HasSubstr("block device"))));
}

TEST_F(LayerUnpackerTest, SymlinksPointingOutsideStayLinksAndPathsThroughThemStayInside) {
  // The links are kept as they are (they resolve in the sandbox's own
  // root); entries beneath them resolve inside the tree, never on the host,
  // as in Docker's chroot'ed extraction.
  const std::string host_dir = dir_ / "host-dir";
  mkdir(host_dir.c_str(), 0755);
  Unpacked u = Unpack({{Dir(host_dir.substr(1)), Symlink("out", host_dir), File("out/planted", "x"),
                        Symlink("up", "../../../../"), File("up/planted2", "y")}});
  ASSERT_TRUE(u.meta.ok()) << u.meta.status();
  EXPECT_EQ(fs::read_symlink(u.tree + "/out"), host_dir);
  EXPECT_FALSE(fs::exists(host_dir + "/planted"));
  EXPECT_EQ(Slurp(u.tree + host_dir + "/planted"), "x");
  EXPECT_EQ(Slurp(u.tree + "/planted2"), "y");
  EXPECT_FALSE(fs::exists("/planted2"));

  // Beneath a link to nowhere (inside): refused, as Docker refuses it.
  Unpacked dangling = Unpack({{Symlink("nowhere", host_dir), File("nowhere/planted3", "z")}});
  ASSERT_FALSE(dangling.meta.ok());
  EXPECT_THAT(dangling.meta.status().message(), HasSubstr("not a directory"));
  EXPECT_FALSE(fs::exists(host_dir + "/planted3"));
}

TEST_F(LayerUnpackerTest, HardLinksShareTheInodeAndLinksToLowerLayersAreRecorded) {
  Unpacked u = Unpack({{File("a", "content"), Hardlink("b", "a"), Hardlink("c", "lower/file")}});
  ASSERT_TRUE(u.meta.ok()) << u.meta.status();
  struct stat a, b;
  ASSERT_EQ(lstat((u.tree + "/a").c_str(), &a), 0);
  ASSERT_EQ(lstat((u.tree + "/b").c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  EXPECT_FALSE(fs::exists(u.tree + "/c"));
  EXPECT_THAT(u.meta->links, ElementsAre(Pair("c", "lower/file")));
}

TEST_F(LayerUnpackerTest, WhiteoutsAndOpaqueMarkersAreRecordedNotCreated) {
  Unpacked u = Unpack({{Dir("etc"), Whiteout("etc/gone"), OpaqueMarker("var/cache"), File("var/cache/new", "n"),
                        File(".wh..wh.plnk/123", "aufs")}});
  ASSERT_TRUE(u.meta.ok()) << u.meta.status();
  EXPECT_THAT(u.meta->whiteouts, ElementsAre("etc/gone"));
  EXPECT_THAT(u.meta->opaque_dirs, ElementsAre("var/cache"));
  EXPECT_FALSE(fs::exists(u.tree + "/etc/.wh.gone"));
  EXPECT_FALSE(fs::exists(u.tree + "/var/cache/.wh..wh..opq"));
  EXPECT_TRUE(fs::exists(u.tree + "/var/cache/new"));
}

TEST_F(LayerUnpackerTest, ALaterEntryReplacesAnEarlierOneOfTheSameName) {
  Unpacked u = Unpack({{Dir("x"), File("x/inner", "1"), File("x", "now a file"), Symlink("y", "x"), Dir("y")}});
  ASSERT_TRUE(u.meta.ok()) << u.meta.status();
  EXPECT_EQ(Slurp(u.tree + "/x"), "now a file");
  EXPECT_TRUE(fs::is_directory(fs::symlink_status(u.tree + "/y")));
}

TEST_F(LayerUnpackerTest, ReadsUncompressedGzipAndZstdLayers) {
  for (auto compression : {LayerSpec::Compression::kNone, LayerSpec::Compression::kGzip, LayerSpec::Compression::kZstd}) {
    LayerSpec spec{{File("f", std::string(100000, 'z'))}};
    spec.compression = compression;
    Unpacked u = Unpack(spec);
    ASSERT_TRUE(u.meta.ok()) << u.meta.status();
    EXPECT_EQ(Slurp(u.tree + "/f"), std::string(100000, 'z'));
  }
}

TEST_F(LayerUnpackerTest, ABlobThatDoesNotMatchItsDigestIsRefused) {
  Unpacked u = Unpack({{File("f", "data")}}, /*check_digests=*/true, /*tamper=*/"extra");
  ASSERT_FALSE(u.meta.ok());
  EXPECT_THAT(u.meta.status().message(), HasSubstr("does not match its digest"));
}

TEST(NormalizeEntryPathTest, DropsLeadingSlashesAndDots) {
  EXPECT_EQ(*NormalizeEntryPath("./usr//bin/"), "usr/bin");
  EXPECT_EQ(*NormalizeEntryPath("/etc/passwd"), "etc/passwd");
  EXPECT_EQ(*NormalizeEntryPath("./"), "");
  EXPECT_FALSE(NormalizeEntryPath("a/../b").ok());
}

TEST(LayerMetaTest, RoundTripsThroughJson) {
  LayerMeta meta;
  meta.diff_id = Sha256::Of("x");
  meta.blob_digests = {Sha256::Of("y")};
  meta.whiteouts = {"a/b"};
  meta.opaque_dirs = {"c"};
  meta.links = {{"d", "e"}};
  meta.implicit_dirs = {"f"};
  meta.left_out = {{"g", "why"}};
  meta.bytes = 5;
  meta.entries = 6;
  auto back = LayerMeta::FromJson(meta.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ToJson(), meta.ToJson());
}

}  // namespace
}  // namespace warden::images
