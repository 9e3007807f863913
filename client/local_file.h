// Local files the CLI reads and writes: code to run and uploads ("-" is
// stdin), and downloads, which replace their target only once complete.
#pragma once

#include <istream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace warden::cli {

// All of `path`, or of `stdin_stream` (not owned) when path is "-".
absl::StatusOr<std::string> ReadAll(const std::string& path, std::istream& stdin_stream);

// Writes to a temporary file beside `path` and renames it over `path` on
// Commit(); destroyed uncommitted, it removes the temporary file, so a
// failed download never leaves a partial file behind. Move-only.
class AtomicFileWriter {
 public:
  static absl::StatusOr<AtomicFileWriter> Create(const std::string& path);

  AtomicFileWriter(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&&) = delete;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  ~AtomicFileWriter();

  absl::Status Write(absl::string_view data);
  absl::Status Commit();

 private:
  AtomicFileWriter(std::string path, std::string temp_path, int fd)
      : path_(std::move(path)), temp_path_(std::move(temp_path)), fd_(fd) {}

  std::string path_;
  std::string temp_path_;
  int fd_ = -1;  // owned; -1 once closed
};

}  // namespace warden::cli
