#include "egress/certificate_authority.h"

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace warden::egress {
namespace {

using ::testing::HasSubstr;

X509* FromPem(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return cert;
}

// Verifies the leaf an SSL_CTX presents against the CA, for `name` (or an IP).
bool Verifies(SSL_CTX* ctx, const std::string& ca_pem, const std::string& name, bool ip) {
  X509* leaf = SSL_CTX_get0_certificate(ctx);
  X509* ca = FromPem(ca_pem);
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca);
  X509_STORE_CTX* check = X509_STORE_CTX_new();
  X509_STORE_CTX_init(check, store, leaf, nullptr);
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(check);
  X509_VERIFY_PARAM_set_flags(param, X509_V_FLAG_X509_STRICT);
  if (ip) {
    X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str());
  } else {
    X509_VERIFY_PARAM_set1_host(param, name.c_str(), 0);
  }
  const bool ok = X509_verify_cert(check) == 1;
  X509_STORE_CTX_free(check);
  X509_STORE_free(store);
  X509_free(ca);
  return ok;
}

Host Name(const char* n) {
  Host h;
  h.name = n;
  return h;
}

TEST(CertificateAuthorityTest, IssuesLeavesThatVerifyForTheirHostOnly) {
  auto ca = CertificateAuthority::Create("Warden test egress CA");
  ASSERT_TRUE(ca.ok()) << ca.status();
  auto ctx = (*ca)->ServerContext(Name("api.example.com"));
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  EXPECT_TRUE(Verifies(ctx->get(), (*ca)->certificate_pem(), "api.example.com", false));
  EXPECT_FALSE(Verifies(ctx->get(), (*ca)->certificate_pem(), "other.example.com", false));
  Host ip;
  ip.address = Address::Parse("1.1.1.1");
  auto ip_ctx = (*ca)->ServerContext(ip);
  ASSERT_TRUE(ip_ctx.ok());
  EXPECT_TRUE(Verifies(ip_ctx->get(), (*ca)->certificate_pem(), "1.1.1.1", true));
  // Another CA's leaves do not verify.
  auto other = CertificateAuthority::Create("another");
  EXPECT_FALSE(Verifies(ctx->get(), (*other)->certificate_pem(), "api.example.com", false));
}

TEST(CertificateAuthorityTest, LeavesAreCached) {
  auto ca = CertificateAuthority::Create("cache");
  auto a = (*ca)->ServerContext(Name("a.test"));
  auto b = (*ca)->ServerContext(Name("a.test"));
  EXPECT_EQ(a->get(), b->get());
  EXPECT_NE(a->get(), (*ca)->ServerContext(Name("b.test"))->get());
}

class CaFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/egress-ca-XXXXXX";
    dir_ = mkdtemp(tmpl);
    cert_ = dir_ + "/ca.pem";
    key_ = dir_ + "/ca.key";
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string dir_, cert_, key_;
};

TEST_F(CaFilesTest, MadeOnceThenLoaded) {
  auto first = CertificateAuthority::LoadOrCreate(cert_, key_, "files");
  ASSERT_TRUE(first.ok()) << first.status();
  struct stat st;
  ASSERT_EQ(stat(key_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto second = CertificateAuthority::LoadOrCreate(cert_, key_, "files");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*first)->certificate_pem(), (*second)->certificate_pem());
  // A leaf of the reloaded CA verifies against the first one's certificate.
  auto ctx = (*second)->ServerContext(Name("reload.test"));
  EXPECT_TRUE(Verifies(ctx->get(), (*first)->certificate_pem(), "reload.test", false));
}

TEST_F(CaFilesTest, OneFileMissingOrAMismatchedKeyIsAnError) {
  ASSERT_TRUE(CertificateAuthority::LoadOrCreate(cert_, key_, "x").ok());
  unlink(key_.c_str());
  auto missing = CertificateAuthority::LoadOrCreate(cert_, key_, "x");
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr(key_ + " is missing"));
  // Another CA's key beside this certificate.
  const std::string other = dir_ + "/other";
  ASSERT_TRUE(CertificateAuthority::LoadOrCreate(other + ".pem", other + ".key", "y").ok());
  ASSERT_EQ(rename((other + ".key").c_str(), key_.c_str()), 0);
  auto mismatched = CertificateAuthority::LoadOrCreate(cert_, key_, "x");
  EXPECT_FALSE(mismatched.ok());
  EXPECT_THAT(std::string(mismatched.status().message()), HasSubstr("is not the key of"));
}

}  // namespace
}  // namespace warden::egress
