#include "egress/certificate_authority.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace warden::egress {
namespace {

std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  return buf;
}

absl::StatusOr<EVP_PKEY*> NewEcKey() {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  if (key == nullptr) return absl::InternalError(absl::StrCat("making an EC key: ", OpenSslError()));
  return key;
}

bool AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return false;
  const bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

bool RandomSerial(X509* cert) {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) return false;
  bytes[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(bytes, sizeof(bytes), nullptr);
  if (bn == nullptr) return false;
  const bool ok = BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert)) != nullptr;
  BN_free(bn);
  return ok;
}

std::string ToPem(X509* cert) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, cert);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<size_t>(n));
  BIO_free(bio);
  return pem;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::ErrnoToStatus(errno, absl::StrCat("reading ", path));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

absl::Status WriteFile(const std::string& path, const std::string& data, mode_t mode) {
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("writing ", tmp));
  const bool ok = write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size()) && fsync(fd) == 0;
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
    return absl::ErrnoToStatus(errno, absl::StrCat("writing ", path));
  }
  return absl::OkStatus();
}

}  // namespace

CertificateAuthority::~CertificateAuthority() {
  EVP_PKEY_free(key_);
  X509_free(cert_);
  EVP_PKEY_free(leaf_key_);
}

absl::Status CertificateAuthority::MakeLeafKey() {
  ASSIGN_OR_RETURN(leaf_key_, NewEcKey());
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CertificateAuthority>> CertificateAuthority::Create(const std::string& name) {
  auto ca = std::unique_ptr<CertificateAuthority>(new CertificateAuthority());
  ASSIGN_OR_RETURN(ca->key_, NewEcKey());
  X509* cert = X509_new();
  ca->cert_ = cert;
  X509_set_version(cert, 2);
  if (!RandomSerial(cert)) return absl::InternalError(OpenSslError());
  X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 10L * 365 * 24 * 3600);
  X509_NAME* subject = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(subject, "O", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>("Warden"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(name.c_str()), -1,
                             -1, 0);
  X509_set_issuer_name(cert, subject);
  X509_set_pubkey(cert, ca->key_);
  if (!AddExtension(cert, cert, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
      !AddExtension(cert, cert, NID_key_usage, "critical,keyCertSign,cRLSign") ||
      !AddExtension(cert, cert, NID_subject_key_identifier, "hash") ||
      X509_sign(cert, ca->key_, EVP_sha256()) == 0) {
    return absl::InternalError(absl::StrCat("making the egress CA: ", OpenSslError()));
  }
  ca->certificate_pem_ = ToPem(cert);
  RETURN_IF_ERROR(ca->MakeLeafKey());
  return ca;
}

absl::StatusOr<std::unique_ptr<CertificateAuthority>> CertificateAuthority::LoadOrCreate(
    const std::string& cert_file, const std::string& key_file, const std::string& name) {
  const bool cert_exists = access(cert_file.c_str(), F_OK) == 0;
  const bool key_exists = access(key_file.c_str(), F_OK) == 0;
  if (!cert_exists && !key_exists) {
    ASSIGN_OR_RETURN(auto ca, Create(name));
    BIO* bio = BIO_new(BIO_s_mem());
    PEM_write_bio_PrivateKey(bio, ca->key_, nullptr, nullptr, 0, nullptr, nullptr);
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio, &data);
    std::string key_pem(data, static_cast<size_t>(n));
    BIO_free(bio);
    RETURN_IF_ERROR(WriteFile(key_file, key_pem, 0600));
    RETURN_IF_ERROR(WriteFile(cert_file, ca->certificate_pem_, 0644));
    return ca;
  }
  if (!cert_exists || !key_exists) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the egress CA needs both ", cert_file, " and ", key_file, "; ", cert_exists ? key_file : cert_file,
        " is missing: restore it, or remove the other to have a new CA made"));
  }
  ASSIGN_OR_RETURN(std::string cert_pem, ReadFile(cert_file));
  ASSIGN_OR_RETURN(std::string key_pem, ReadFile(key_file));
  auto ca = std::unique_ptr<CertificateAuthority>(new CertificateAuthority());
  BIO* cb = BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size()));
  ca->cert_ = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
  BIO_free(cb);
  BIO* kb = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  ca->key_ = PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr);
  BIO_free(kb);
  if (ca->cert_ == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(cert_file, " holds no PEM certificate: ", OpenSslError()));
  }
  if (ca->key_ == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(key_file, " holds no PEM private key: ", OpenSslError()));
  }
  if (X509_check_ca(ca->cert_) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(cert_file, " is not a CA certificate (basicConstraints CA:TRUE)"));
  }
  if (X509_check_private_key(ca->cert_, ca->key_) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(key_file, " is not the key of ", cert_file));
  }
  ca->certificate_pem_ = ToPem(ca->cert_);
  RETURN_IF_ERROR(ca->MakeLeafKey());
  return ca;
}

absl::StatusOr<std::shared_ptr<SSL_CTX>> CertificateAuthority::Issue(const Host& host, absl::Time now) {
  X509* cert = X509_new();
  std::unique_ptr<X509, void (*)(X509*)> owner(cert, X509_free);
  X509_set_version(cert, 2);
  if (!RandomSerial(cert)) return absl::InternalError(OpenSslError());
  time_t t = absl::ToTimeT(now);
  X509_time_adj_ex(X509_getm_notBefore(cert), 0, -3600, &t);
  X509_time_adj_ex(X509_getm_notAfter(cert), 7, 0, &t);
  const std::string cn = host.address ? host.address->ToString() : host.name;
  X509_NAME* subject = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                             0);
  X509_set_issuer_name(cert, X509_get_subject_name(cert_));
  X509_set_pubkey(cert, leaf_key_);
  const std::string san = host.address ? absl::StrCat("IP:", cn) : absl::StrCat("DNS:", cn);
  if (!AddExtension(cert, cert_, NID_basic_constraints, "critical,CA:FALSE") ||
      !AddExtension(cert, cert_, NID_key_usage, "critical,digitalSignature") ||
      !AddExtension(cert, cert_, NID_ext_key_usage, "serverAuth") ||
      !AddExtension(cert, cert_, NID_subject_key_identifier, "hash") ||
      !AddExtension(cert, cert_, NID_authority_key_identifier, "keyid:always") ||
      !AddExtension(cert, cert_, NID_subject_alt_name, san.c_str()) || X509_sign(cert, key_, EVP_sha256()) == 0) {
    return absl::InternalError(absl::StrCat("issuing a certificate for ", cn, ": ", OpenSslError()));
  }
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return absl::InternalError(OpenSslError());
  std::shared_ptr<SSL_CTX> context(ctx, SSL_CTX_free);
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  if (SSL_CTX_use_certificate(ctx, cert) != 1 || SSL_CTX_add1_chain_cert(ctx, cert_) != 1 ||
      SSL_CTX_use_PrivateKey(ctx, leaf_key_) != 1) {
    return absl::InternalError(absl::StrCat("a TLS context for ", cn, ": ", OpenSslError()));
  }
  // Only HTTP/1.1: the proxy reads each request (ALPN "http/1.1", or none).
  SSL_CTX_set_alpn_select_cb(
      ctx,
      [](SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in, unsigned int inlen,
         void*) -> int {
        static const unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
        unsigned char* selected = nullptr;
        if (SSL_select_next_proto(&selected, outlen, kHttp11, sizeof(kHttp11), in, inlen) != OPENSSL_NPN_NEGOTIATED) {
          return SSL_TLSEXT_ERR_ALERT_FATAL;
        }
        *out = selected;
        return SSL_TLSEXT_ERR_OK;
      },
      nullptr);
  return context;
}

absl::StatusOr<std::shared_ptr<SSL_CTX>> CertificateAuthority::ServerContext(const Host& host) {
  const std::string key = host.ToString();
  const absl::Time now = absl::Now();
  {
    absl::MutexLock lock(&mu_);
    auto it = cache_.find(key);
    if (it != cache_.end() && now < it->second.renew) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      return it->second.context;
    }
  }
  ASSIGN_OR_RETURN(std::shared_ptr<SSL_CTX> context, Issue(host, now));
  absl::MutexLock lock(&mu_);
  auto it = cache_.find(key);
  if (it != cache_.end()) {
    lru_.erase(it->second.lru);
    cache_.erase(it);
  }
  lru_.push_front(key);
  cache_[key] = Cached{context, now + absl::Hours(24 * 6), lru_.begin()};
  while (cache_.size() > kMaxCached) {
    cache_.erase(lru_.back());
    lru_.pop_back();
  }
  return context;
}

}  // namespace warden::egress
