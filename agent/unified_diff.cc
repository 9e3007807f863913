#include "agent/unified_diff.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace warden::agent {
namespace {

struct Lines {
  std::vector<std::string> lines;
  bool final_newline = true;
};

Lines SplitLines(absl::string_view text) {
  Lines out;
  if (text.empty()) return out;
  out.final_newline = text.back() == '\n';
  if (out.final_newline) text.remove_suffix(1);
  out.lines = absl::StrSplit(text, '\n');
  return out;
}

std::string JoinLines(const std::vector<std::string>& lines, bool final_newline) {
  std::string out;
  for (const std::string& l : lines) absl::StrAppend(&out, l, "\n");
  if (!final_newline && !out.empty()) out.pop_back();
  return out;
}

std::string StripPathPrefix(absl::string_view path) {
  // "--- a/src/x.py\t2024-01-01 ..." -> "src/x.py"
  if (size_t tab = path.find('\t'); tab != absl::string_view::npos) path = path.substr(0, tab);
  path = absl::StripAsciiWhitespace(path);
  if (path == "/dev/null") return "";
  if (absl::StartsWith(path, "a/") || absl::StartsWith(path, "b/")) path.remove_prefix(2);
  return std::string(path);
}

// "-12,3" -> {12, 3}; "-12" -> {12, 1}.
bool ParseRange(absl::string_view text, int* start, int* count) {
  text.remove_prefix(1);
  std::pair<absl::string_view, absl::string_view> parts = absl::StrSplit(text, absl::MaxSplits(',', 1));
  if (!absl::SimpleAtoi(parts.first, start)) return false;
  *count = 1;
  if (!parts.second.empty() && !absl::SimpleAtoi(parts.second, count)) return false;
  return *start >= 0 && *count >= 0;
}

}  // namespace

absl::StatusOr<std::vector<FilePatch>> ParseUnifiedDiff(absl::string_view patch) {
  std::vector<std::string> lines = absl::StrSplit(patch, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  std::vector<FilePatch> files;
  size_t i = 0;
  auto error = [&](size_t line, absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("patch line ", line + 1, ": ", what));
  };
  while (i < lines.size()) {
    absl::string_view line = absl::StripSuffix(lines[i], "\r");
    if (!absl::StartsWith(line, "--- ")) {
      ++i;  // "diff --git", "index ...", prose around the patch
      continue;
    }
    if (i + 1 >= lines.size() || !absl::StartsWith(lines[i + 1], "+++ ")) {
      return error(i + 1, "a '--- OLD' line must be followed by '+++ NEW'");
    }
    FilePatch file;
    file.old_path = StripPathPrefix(line.substr(4));
    file.new_path = StripPathPrefix(absl::StripSuffix(lines[i + 1], "\r").substr(4));
    if (file.old_path.empty() && file.new_path.empty()) return error(i, "both sides are /dev/null");
    i += 2;
    while (i < lines.size() && absl::StartsWith(lines[i], "@@")) {
      absl::string_view header = absl::StripSuffix(lines[i], "\r");
      std::vector<absl::string_view> parts = absl::StrSplit(header, ' ', absl::SkipEmpty());
      Hunk hunk;
      if (parts.size() < 4 || parts[0] != "@@" || parts[1].empty() || parts[1][0] != '-' || parts[2].empty() ||
          parts[2][0] != '+' || !ParseRange(parts[1], &hunk.old_start, &hunk.old_count) ||
          !ParseRange(parts[2], &hunk.new_start, &hunk.new_count)) {
        return error(i, "a hunk header must read '@@ -START,COUNT +START,COUNT @@'");
      }
      ++i;
      int old_seen = 0, new_seen = 0;
      while (i < lines.size() && (old_seen < hunk.old_count || new_seen < hunk.new_count)) {
        std::string body(absl::StripSuffix(lines[i], "\r"));
        if (body.empty()) body = " ";  // some writers drop the space of an empty context line
        const char kind = body[0];
        if (kind == '\\') {
          ++i;
          continue;
        }
        if (kind != ' ' && kind != '-' && kind != '+') {
          return error(i, absl::StrCat("a hunk line must start with ' ', '-' or '+' (the hunk header promised ",
                                       hunk.old_count, " old and ", hunk.new_count, " new lines)"));
        }
        if (kind != '+') ++old_seen;
        if (kind != '-') ++new_seen;
        hunk.lines.push_back(std::move(body));
        ++i;
      }
      if (old_seen != hunk.old_count || new_seen != hunk.new_count) {
        return error(i - 1, absl::StrCat("the hunk has ", old_seen, " old and ", new_seen,
                                         " new lines; its header says ", hunk.old_count, " and ",
                                         hunk.new_count));
      }
      if (i < lines.size() && absl::StartsWith(lines[i], "\\")) {
        // "\ No newline at end of file" after the last line of the hunk.
        if (!hunk.lines.empty() && hunk.lines.back()[0] != '-') file.no_newline_at_end = true;
        ++i;
      }
      file.hunks.push_back(std::move(hunk));
    }
    if (file.hunks.empty() && !(file.new_path.empty())) {
      return error(i - 1, absl::StrCat("the patch for ", file.path(), " has no hunks"));
    }
    files.push_back(std::move(file));
  }
  if (files.empty()) return absl::InvalidArgumentError("no '--- a/PATH' / '+++ b/PATH' file header in the patch");
  return files;
}

absl::StatusOr<std::optional<std::string>> ApplyFilePatch(const FilePatch& patch,
                                                          const std::optional<std::string>& old) {
  if (patch.new_path.empty()) return std::optional<std::string>();  // deletion
  if (!patch.old_path.empty() && !old) {
    return absl::NotFoundError(absl::StrCat(patch.old_path, " does not exist; to create it, use --- /dev/null"));
  }
  if (patch.old_path.empty() && old) {
    return absl::AlreadyExistsError(absl::StrCat(patch.new_path, " already exists; patch it instead of creating it"));
  }
  Lines file = SplitLines(old.value_or(""));
  std::vector<std::string>& lines = file.lines;
  int delta = 0;  // how far earlier hunks moved the lines
  for (size_t h = 0; h < patch.hunks.size(); ++h) {
    const Hunk& hunk = patch.hunks[h];
    std::vector<std::string> before, after;
    for (const std::string& l : hunk.lines) {
      if (l[0] != '+') before.push_back(l.substr(1));
      if (l[0] != '-') after.push_back(l.substr(1));
    }
    // Where the header says (0-based), then further and further away.
    const int expected = std::max(0, (hunk.old_count == 0 ? hunk.old_start : hunk.old_start - 1) + delta);
    auto matches = [&](int at) {
      if (at < 0 || at + static_cast<int>(before.size()) > static_cast<int>(lines.size())) return false;
      return std::equal(before.begin(), before.end(), lines.begin() + at);
    };
    int found = -1;
    for (int offset = 0; offset <= static_cast<int>(lines.size()) && found < 0; ++offset) {
      if (matches(expected - offset)) found = expected - offset;
      else if (matches(expected + offset)) found = expected + offset;
    }
    if (found < 0) {
      std::string want = before.empty() ? "(nothing)" : before.front();
      return absl::FailedPreconditionError(absl::StrCat(
          "hunk ", h + 1, " of ", patch.path(), " does not apply: its context and removed lines (starting \"",
          want, "\") are not in the file; read the file again and make the patch against its current content"));
    }
    lines.erase(lines.begin() + found, lines.begin() + found + before.size());
    lines.insert(lines.begin() + found, after.begin(), after.end());
    delta += static_cast<int>(after.size()) - static_cast<int>(before.size());
  }
  const bool final_newline = !patch.no_newline_at_end;
  return std::optional<std::string>(JoinLines(lines, final_newline));
}

std::string MakeUnifiedDiff(const std::string& path, const std::optional<std::string>& before,
                            const std::optional<std::string>& after) {
  if (before == after) return "";
  const Lines a = SplitLines(before.value_or("")), b = SplitLines(after.value_or(""));
  const size_t n = a.lines.size(), m = b.lines.size();
  // Longest common subsequence by dynamic programming: fine for the source
  // files an agent edits (thousands of lines at most).
  std::vector<std::vector<int>> lcs(n + 1, std::vector<int>(m + 1, 0));
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m; j-- > 0;) {
      lcs[i][j] = a.lines[i] == b.lines[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  struct Op {
    char kind;
    size_t ai, bi;  // positions in a and b when this op happens
  };
  std::vector<Op> ops;
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a.lines[i] == b.lines[j]) {
      ops.push_back({' ', i++, j++});
    } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
      ops.push_back({'-', i++, j});  // removals before additions, as diff(1) writes them
    } else {
      ops.push_back({'+', i, j++});
    }
  }
  std::string out = absl::StrCat("--- ", before ? "a/" + path : "/dev/null", "\n+++ ",
                                 after ? "b/" + path : "/dev/null", "\n");
  constexpr size_t kContext = 3;
  size_t k = 0;
  while (k < ops.size()) {
    if (ops[k].kind == ' ') {
      ++k;
      continue;
    }
    // A hunk: from kContext lines before this change to kContext after the
    // last change that is within 2*kContext of the previous one.
    size_t start = k >= kContext ? k - kContext : 0;
    while (start < k && ops[start].kind != ' ') ++start;
    size_t end = k;
    size_t last_change = k;
    while (end < ops.size()) {
      if (ops[end].kind != ' ') last_change = end;
      if (end - last_change > 2 * kContext) break;
      ++end;
    }
    end = std::min(ops.size(), last_change + kContext + 1);
    int old_count = 0, new_count = 0;
    std::string body;
    for (size_t x = start; x < end; ++x) {
      const Op& op = ops[x];
      if (op.kind != '+') ++old_count;
      if (op.kind != '-') ++new_count;
      const std::string& text = op.kind == '+' ? b.lines[op.bi] : a.lines[op.ai];
      absl::StrAppend(&body, std::string(1, op.kind), text, "\n");
      const bool last_of_a = op.kind != '+' && op.ai + 1 == n && !a.final_newline;
      const bool last_of_b = op.kind != '-' && op.bi + 1 == m && !b.final_newline;
      if (last_of_a || last_of_b) absl::StrAppend(&body, "\\ No newline at end of file\n");
    }
    const int old_start = old_count == 0 ? static_cast<int>(ops[start].ai) : static_cast<int>(ops[start].ai) + 1;
    const int new_start = new_count == 0 ? static_cast<int>(ops[start].bi) : static_cast<int>(ops[start].bi) + 1;
    absl::StrAppend(&out, "@@ -", old_start, ",", old_count, " +", new_start, ",", new_count, " @@\n", body);
    k = end;
  }
  return out;
}

}  // namespace warden::agent
