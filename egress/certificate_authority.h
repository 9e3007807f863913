// CertificateAuthority: the per-daemon CA the egress proxy signs leaf
// certificates with when it terminates a sandbox's TLS (only for hosts
// that get secrets or header rules). Sandboxes trust it through their own
// CA bundle (SandboxCaBundle); the host's trust store never holds it.
//
// Its key is an EC P-256 key that never leaves the daemon's memory unless
// the operator gives files to keep it in (so that sessions kept across a
// restart still trust the proxy). Leaf certificates are made on demand per
// host name or address, all with one leaf key, and cached (LRU); each is
// valid for a week and is replaced a day before it expires.
#pragma once

#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "egress/destination.h"

typedef struct evp_pkey_st EVP_PKEY;
typedef struct x509_st X509;
typedef struct ssl_ctx_st SSL_CTX;

namespace warden::egress {

class CertificateAuthority {
 public:
  // A new CA in memory, named `name` (its subject's CN).
  static absl::StatusOr<std::unique_ptr<CertificateAuthority>> Create(const std::string& name);
  // The CA in PEM files; when neither file exists, a new one is made and
  // written there (the key 0600). Anything else (one missing, unreadable,
  // not a CA, key and certificate not a pair) is an error naming the file.
  static absl::StatusOr<std::unique_ptr<CertificateAuthority>> LoadOrCreate(const std::string& cert_file,
                                                                            const std::string& key_file,
                                                                            const std::string& name);
  ~CertificateAuthority();

  const std::string& certificate_pem() const { return certificate_pem_; }

  // A TLS server context presenting a certificate for `host` signed by this
  // CA (HTTP/1.1 only, TLS 1.2 and 1.3). Shared: callers keep it while
  // their connection uses it. Thread-safe.
  absl::StatusOr<std::shared_ptr<SSL_CTX>> ServerContext(const Host& host);

  static constexpr size_t kMaxCached = 1024;

 private:
  CertificateAuthority() = default;
  absl::Status MakeLeafKey();
  absl::StatusOr<std::shared_ptr<SSL_CTX>> Issue(const Host& host, absl::Time now);

  EVP_PKEY* key_ = nullptr;
  X509* cert_ = nullptr;
  EVP_PKEY* leaf_key_ = nullptr;
  std::string certificate_pem_;

  struct Cached {
    std::shared_ptr<SSL_CTX> context;
    absl::Time renew;
    std::list<std::string>::iterator lru;
  };
  absl::Mutex mu_;
  std::map<std::string, Cached> cache_ ABSL_GUARDED_BY(mu_);
  std::list<std::string> lru_ ABSL_GUARDED_BY(mu_);  // most recent first
};

}  // namespace warden::egress
