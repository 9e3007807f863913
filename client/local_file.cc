#include "client/local_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"

namespace warden::cli {

absl::StatusOr<std::string> ReadAll(const std::string& path, std::istream& stdin_stream) {
  std::ifstream file;
  std::istream* in = &stdin_stream;
  if (path != "-") {
    file.open(path, std::ios::binary);
    if (!file) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", path));
    in = &file;
  }
  std::ostringstream content;
  content << in->rdbuf();
  if (in->bad()) return absl::DataLossError(absl::StrCat("cannot read ", path));
  return content.str();
}

absl::StatusOr<AtomicFileWriter> AtomicFileWriter::Create(const std::string& path) {
  std::string temp_path = absl::StrCat(path, ".warden-XXXXXX");
  int fd = mkstemp(temp_path.data());
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot create a file beside ", path));
  // mkstemp makes it 0600; give it the mode a plain open() would.
  mode_t mask = umask(0);
  umask(mask);
  fchmod(fd, 0666 & ~mask);
  return AtomicFileWriter(path, std::move(temp_path), fd);
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& other) noexcept
    : path_(std::move(other.path_)),
      temp_path_(std::move(other.temp_path_)),
      fd_(std::exchange(other.fd_, -1)) {}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ < 0) return;
  close(fd_);
  unlink(temp_path_.c_str());
}

absl::Status AtomicFileWriter::Write(absl::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd_, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot write ", temp_path_));
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status AtomicFileWriter::Commit() {
  int fd = std::exchange(fd_, -1);
  if (close(fd) != 0) {
    int saved = errno;
    unlink(temp_path_.c_str());
    return absl::ErrnoToStatus(saved, absl::StrCat("cannot write ", temp_path_));
  }
  if (rename(temp_path_.c_str(), path_.c_str()) != 0) {
    int saved = errno;
    unlink(temp_path_.c_str());
    return absl::ErrnoToStatus(saved, absl::StrCat("cannot rename ", temp_path_, " to ", path_));
  }
  return absl::OkStatus();
}

}  // namespace warden::cli
