#include "images/image_source.h"

#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "images/fs_util.h"
#include "images/testing/oci_builder.h"

namespace warden::images {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::File;
using testing::ImageSpec;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/warden-images-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { RemoveTree(path_).IgnoreError(); }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

ImageSpec Simple(const std::string& ref) {
  ImageSpec image;
  image.ref = ref;
  image.layers = {{{File("a", "1")}}, {{File("b", "2")}}};
  image.config.env = {"PATH=/usr/bin", "GREETING=hi"};
  image.config.working_dir = "/app";
  image.config.user = "1000:1000";
  image.config.cmd = {"/bin/sh"};
  return image;
}

TEST(ImageSourceTest, ReadsAnOciLayoutsConfigAndLayersBottomFirst) {
  TempDir dir;
  ASSERT_TRUE(testing::WriteOciLayout(dir / "oci", {Simple("app:1")}).ok());
  auto source = ReadImageSource(dir / "oci");
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ(source->ref, "app:1");
  EXPECT_THAT(source->config.env, ElementsAre("PATH=/usr/bin", "GREETING=hi"));
  EXPECT_EQ(source->config.working_dir, "/app");
  EXPECT_EQ(source->config.user, "1000:1000");
  ASSERT_EQ(source->layers.size(), 2u);
  EXPECT_EQ(source->layers[0].blob_path, "blobs/sha256/" + source->layers[0].digest.hex());
  EXPECT_NE(source->layers[0].digest, source->layers[0].diff_id);  // gzip'd
}

TEST(ImageSourceTest, PicksAnImageByNameAndAsksWhenSeveralAreThere) {
  TempDir dir;
  ASSERT_TRUE(testing::WriteOciLayout(dir / "oci", {Simple("one"), Simple("two")}).ok());
  auto two = ReadImageSource(dir / "oci", "two");
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->ref, "two");
  auto neither = ReadImageSource(dir / "oci");
  EXPECT_THAT(neither.status().message(), HasSubstr("holds 2 images; name the one to import (one, two)"));
  EXPECT_TRUE(absl::IsNotFound(ReadImageSource(dir / "oci", "three").status()));
}

TEST(ImageSourceTest, ReadsDockerSaveWithTheSameConfigDigestAndDiffIds) {
  TempDir dir;
  ImageSpec image = Simple("app:1");
  for (auto& layer : image.layers) layer.compression = testing::LayerSpec::Compression::kNone;
  ASSERT_TRUE(testing::WriteOciLayout(dir / "oci", {image}).ok());
  ASSERT_TRUE(testing::WriteDockerSave(dir / "docker", image).ok());
  auto oci = ReadImageSource(dir / "oci");
  auto docker = ReadImageSource(dir / "docker", "app:1");
  ASSERT_TRUE(oci.ok()) << oci.status();
  ASSERT_TRUE(docker.ok()) << docker.status();
  EXPECT_EQ(docker->format, ImageSource::Format::kDockerSave);
  EXPECT_EQ(docker->config_digest, oci->config_digest);
  ASSERT_EQ(docker->layers.size(), 2u);
  EXPECT_EQ(docker->layers[1].diff_id, oci->layers[1].diff_id);
}

TEST(ImageSourceTest, RefusesADamagedBlobAndForeignPlatforms) {
  TempDir dir;
  ASSERT_TRUE(testing::WriteOciLayout(dir / "oci", {Simple("")}).ok());
  auto source = ReadImageSource(dir / "oci");
  ASSERT_TRUE(source.ok());
  std::ofstream(dir / ("oci/blobs/sha256/" + source->config_digest.hex()), std::ios::app) << " ";
  EXPECT_THAT(ReadImageSource(dir / "oci").status().message(), HasSubstr("does not match its digest"));

  ImageSpec arm = Simple("");
  arm.architecture = "arm64";
  ASSERT_TRUE(testing::WriteOciLayout(dir / "arm", {arm}).ok());
  EXPECT_THAT(ReadImageSource(dir / "arm").status().message(), HasSubstr("amd64 images only"));
  EXPECT_THAT(ReadImageSource(dir / "missing").status().message(), HasSubstr("missing"));
}

}  // namespace
}  // namespace warden::images
