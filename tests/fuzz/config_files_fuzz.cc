// The files wardend reads at start: the configuration (/etc/warden/
// wardend.json) and the tokens file. The first byte picks which. Any bytes
// give options or a clear error, never a crash; options that load always
// validate without crashing, and tokens that load answer lookups.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/auth.h"
#include "server/options.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

// A 0600 file of root's, as LoadTokens demands, rewritten for every input.
const std::string& ScratchFile() {
  static const std::string* path = [] {
    char name[] = "/tmp/warden-fuzz-config-XXXXXX";
    const int fd = mkstemp(name);
    FUZZ_CHECK(fd >= 0);
    close(fd);
    return new std::string(name);
  }();
  return *path;
}

void Write(const std::string& path, const uint8_t* data, size_t size) {
  const int fd = open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  FUZZ_CHECK(fd >= 0);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = write(fd, data + done, size - done);
    FUZZ_CHECK(n > 0);
    done += static_cast<size_t>(n);
  }
  close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string& path = ScratchFile();
  Write(path, data + 1, size - 1);
  if (data[0] & 1) {
    auto tokens = warden::LoadTokens(path);
    if (!tokens.ok()) return 0;
    FUZZ_CHECK(!warden::TenantFromAuthorization(*tokens, "Bearer not-a-token-of-this-file-0000").ok());
    FUZZ_CHECK(!warden::TenantFromAuthorization(*tokens, "").ok());
  } else {
    auto options = warden::DaemonOptions::FromFile(path);
    if (!options.ok()) return 0;
    (void)options->Validate();
  }
  return 0;
}
