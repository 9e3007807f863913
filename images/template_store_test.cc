#include "images/template_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "images/archive_input.h"
#include "images/fs_util.h"
#include "images/testing/oci_builder.h"
#include "sandbox/unique_fd.h"

namespace warden::images {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Key;
using testing::Dir;
using testing::File;
using testing::Hardlink;
using testing::ImageSpec;
using testing::OpaqueMarker;
using testing::Symlink;
using testing::TarEntry;
using testing::Whiteout;

namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

ino_t Inode(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

class TemplateStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/warden-store-XXXXXX";
    dir_ = mkdtemp(tmpl);
    TemplateStore::Options options;
    options.dir = dir_ + "/store";
    options.set_owners = geteuid() == 0;
    options.mount_point_dirs = {"proc", "dev", "tmp", "opt/warden/kernel"};
    options.mount_point_files = {"etc/hosts", "etc/resolv.conf"};
    auto store = TemplateStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }
  void TearDown() override { RemoveTree(dir_).IgnoreError(); }

  std::string Layout(const std::string& name, const std::vector<ImageSpec>& images) {
    const std::string path = dir_ + "/" + name;
    EXPECT_TRUE(testing::WriteOciLayout(path, images).ok());
    return path;
  }

  absl::StatusOr<TemplateInfo> Import(const std::string& layout, const std::string& name,
                                      const std::string& owner = "", std::vector<ImportProgress>* progress = nullptr) {
    ImportRequest request;
    request.layout_dir = layout;
    request.name = name;
    request.owner = owner;
    if (progress) request.progress = [progress](const ImportProgress& p) { progress->push_back(p); };
    return store_->Import(request);
  }

  std::string dir_;
  std::unique_ptr<TemplateStore> store_;
};

// The layers the issue lists: deletes and replacements across layers.
ImageSpec Layered() {
  ImageSpec image;
  image.config.env = {"PATH=/usr/bin:/bin"};
  TarEntry dev;
  dev.type = TarEntry::Type::kCharDevice;
  dev.path = "dev/console";
  image.layers = {
      {{Dir("etc"), File("etc/keep", "kept"), File("etc/gone", "gone"), Dir("cache"), File("cache/old1", "1"),
        Dir("cache/sub"), File("cache/sub/old2", "2"), File("bin-file", "binary", 0755), Dir("tmp", 01777),
        File("replaced", "v1")}},
      {{Whiteout("etc/gone"), OpaqueMarker("cache"), File("cache/new", "n"), Hardlink("linked", "bin-file"),
        Symlink("escape", "/etc/shadow"), dev, File("tmp/x", "x"), File("replaced", "v2")}},
  };
  return image;
}

TEST_F(TemplateStoreTest, MergesLayersAsDockerShowsThem) {
  std::vector<ImportProgress> progress;
  auto info = Import(Layout("layered", {Layered()}), "layered", "", &progress);
  ASSERT_TRUE(info.ok()) << info.status();
  const std::string root = info->root_path;
  EXPECT_EQ(Slurp(root + "/etc/keep"), "kept");
  EXPECT_FALSE(fs::exists(root + "/etc/gone"));                      // whiteout
  EXPECT_FALSE(fs::exists(root + "/cache/old1"));                    // opaque directory
  EXPECT_FALSE(fs::exists(root + "/cache/sub"));
  EXPECT_EQ(Slurp(root + "/cache/new"), "n");
  EXPECT_EQ(Inode(root + "/linked"), Inode(root + "/bin-file"));     // hard link across layers
  EXPECT_EQ(fs::read_symlink(root + "/escape"), "/etc/shadow");       // kept as a link
  EXPECT_EQ(Slurp(root + "/replaced"), "v2");
  EXPECT_FALSE(fs::exists(root + "/dev/console"));
  EXPECT_THAT(info->left_out, Contains(Key("dev/console")));
  struct stat st;
  ASSERT_EQ(stat((root + "/tmp").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 01777u);  // an implicit parent above does not reset it
  // Warden's mount points.
  EXPECT_TRUE(fs::is_directory(root + "/opt/warden/kernel"));
  EXPECT_TRUE(fs::is_directory(root + "/proc"));
  EXPECT_TRUE(fs::is_regular_file(root + "/etc/hosts"));
  EXPECT_EQ(info->layers.size(), 2u);
  EXPECT_GT(info->size_bytes, 0);
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back().stage, ImportProgress::Stage::kDone);
}

TEST_F(TemplateStoreTest, ReimportingTheSameLayersUnpacksNothing) {
  const std::string layout = Layout("layered", {Layered()});
  auto first = Import(layout, "one");
  ASSERT_TRUE(first.ok()) << first.status();
  std::vector<ImportProgress> progress;
  auto second = Import(layout, "two", "", &progress);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->root, first->root);
  int layers_seen = 0;
  for (const ImportProgress& p : progress) {
    if (p.stage != ImportProgress::Stage::kLayer) continue;
    ++layers_seen;
    EXPECT_TRUE(p.reused) << p.message;
  }
  EXPECT_GT(layers_seen, 0);
  EXPECT_EQ(store_->List("").size(), 2u);
}

TEST_F(TemplateStoreTest, TemplatesSharingABaseLayerShareItsFiles) {
  ImageSpec base = Layered();
  ImageSpec derived = base;
  derived.layers.push_back({{File("app/main.py", "print(1)")}});
  auto a = Import(Layout("base", {base}), "base");
  auto b = Import(Layout("derived", {derived}), "derived");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->root, b->root);
  EXPECT_EQ(Inode(a->root_path + "/etc/keep"), Inode(b->root_path + "/etc/keep"));
  EXPECT_EQ(Slurp(b->root_path + "/app/main.py"), "print(1)");
}

TEST_F(TemplateStoreTest, ADockerSaveArchiveGivesTheSameRootAsItsOciLayout) {
  ImageSpec image = Layered();
  image.ref = "layered:1";
  for (auto& layer : image.layers) layer.compression = testing::LayerSpec::Compression::kNone;
  const std::string saved = dir_ + "/saved";
  ASSERT_TRUE(testing::WriteDockerSave(saved, image).ok());
  ASSERT_TRUE(testing::TarDirectory(saved, dir_ + "/saved.tar").ok());
  const std::string extracted = dir_ + "/extracted";
  mkdir(extracted.c_str(), 0700);
  UniqueFd archive(open((dir_ + "/saved.tar").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(ExtractImageArchive(archive.get(), extracted, 1 << 30).ok());
  auto docker = Import(extracted, "from-docker");
  auto oci = Import(Layout("oci", {image}), "from-oci");
  ASSERT_TRUE(docker.ok()) << docker.status();
  ASSERT_TRUE(oci.ok()) << oci.status();
  EXPECT_EQ(docker->root, oci->root);
  EXPECT_EQ(docker->digest, oci->digest);
  EXPECT_EQ(docker->source_ref, "layered:1");
}

TEST_F(TemplateStoreTest, QuotasBoundBytesAndCount) {
  ImportRequest request;
  request.layout_dir = Layout("layered", {Layered()});
  request.owner = "alice";
  request.max_count = 1;
  request.name = "first";
  ASSERT_TRUE(store_->Import(request).ok());
  request.name = "second";
  EXPECT_TRUE(absl::IsResourceExhausted(store_->Import(request).status()));
  request.name = "first";  // replacing it is fine
  EXPECT_TRUE(store_->Import(request).ok());
  request.max_count = 0;
  request.max_bytes = 10;
  request.name = "big";
  auto big = store_->Import(request);
  EXPECT_TRUE(absl::IsResourceExhausted(big.status())) << big.status();
  EXPECT_THAT(big.status().message(), HasSubstr("quota"));
  EXPECT_EQ(store_->UsageOf("alice").count, 1);
  EXPECT_THAT(store_->List("bob"), IsEmpty());
  EXPECT_TRUE(absl::IsNotFound(store_->Get("bob", "first").status()));
}

TEST_F(TemplateStoreTest, RemovingATemplateCollectsItsRootUnlessPinned) {
  auto a = Import(Layout("a", {Layered()}), "a");
  ASSERT_TRUE(a.ok());
  auto pin = store_->PinRoot(a->root);
  ASSERT_TRUE(pin.ok());
  ASSERT_TRUE(store_->Remove("", "a").ok());
  EXPECT_TRUE(fs::exists(a->root_path));  // a sandbox still uses it
  pin->reset();
  ASSERT_TRUE(store_->Collect().ok());
  EXPECT_FALSE(fs::exists(a->root_path));
  EXPECT_TRUE(fs::is_empty(dir_ + "/store/layers/sha256"));
  EXPECT_FALSE(fs::is_empty(dir_ + "/store/tmp"));  // moved out, for PurgeGarbage
  store_->PurgeGarbage();
  EXPECT_TRUE(fs::is_empty(dir_ + "/store/tmp"));
  EXPECT_TRUE(absl::IsNotFound(store_->Remove("", "a")));
}

TEST_F(TemplateStoreTest, ALayerIsReusedOnlyForTheBytesThatMadeIt) {
  ImageSpec image = Layered();
  const std::string layout = Layout("good", {image});
  ASSERT_TRUE(Import(layout, "good").ok());
  // Same manifest and config, but the blob's bytes are not the layer's.
  auto source = ReadImageSource(layout);
  ASSERT_TRUE(source.ok());
  std::ofstream(layout + "/" + source->layers[0].blob_path, std::ios::trunc) << "not the layer";
  auto forged = Import(layout, "forged");
  ASSERT_FALSE(forged.ok());
  EXPECT_THAT(forged.status().message(), HasSubstr("does not match its digest"));
}

TEST_F(TemplateStoreTest, NamesAreChecked) {
  const std::string layout = Layout("a", {Layered()});
  EXPECT_TRUE(absl::IsInvalidArgument(Import(layout, "../x").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Import(layout, "").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Import(layout, "ok", "bad/tenant").status()));
  EXPECT_TRUE(Import(layout, "python-3.11_slim").ok());
}

}  // namespace
}  // namespace warden::images
