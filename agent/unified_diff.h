// Unified diffs, the way repair mode changes files: parse the model's patch
// (`diff -u` / `git diff` format), apply it hunk by hunk with the context
// checked (a hunk may have moved; it may not have changed), and write the
// combined diff of a run's changes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace warden::agent {

struct Hunk {
  int old_start = 0, old_count = 0;
  int new_start = 0, new_count = 0;
  std::vector<std::string> lines;  // each with its ' ', '-' or '+' prefix
};

struct FilePatch {
  std::string old_path;  // without "a/"; empty for a new file (/dev/null)
  std::string new_path;  // without "b/"; empty for a deleted file
  std::vector<Hunk> hunks;
  bool no_newline_at_end = false;  // the new side ends without '\n'
  const std::string& path() const { return new_path.empty() ? old_path : new_path; }
};

// Errors say which line of the patch is wrong and why.
absl::StatusOr<std::vector<FilePatch>> ParseUnifiedDiff(absl::string_view patch);

// The file's new content (nullopt: deleted). `old` is nullopt for a file
// that does not exist. Fails if a hunk's context or removed lines are not
// in the file.
absl::StatusOr<std::optional<std::string>> ApplyFilePatch(const FilePatch& patch,
                                                          const std::optional<std::string>& old);

// A unified diff from `before` to `after` (nullopt: absent) with 3 lines of
// context, headed "--- a/PATH" / "+++ b/PATH"; empty when they are equal.
std::string MakeUnifiedDiff(const std::string& path, const std::optional<std::string>& before,
                            const std::optional<std::string>& after);

}  // namespace warden::agent
