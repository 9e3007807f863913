#include "fronts/e2b/sandbox_list.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace warden::e2b {
namespace {

constexpr char kCursorSeparator[] = "__";

absl::StatusOr<int> ParseLimit(const http::Request& request) {
  const std::string text = request.Query("limit");
  if (text.empty()) return kMaxListLimit;
  int limit = 0;
  if (!absl::SimpleAtoi(text, &limit) || limit < 1 || limit > kMaxListLimit) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit must be a whole number from 1 to ", kMaxListLimit, ", not '", text, "'"));
  }
  return limit;
}

absl::StatusOr<std::optional<ListCursor>> ParseToken(const http::Request& request, bool ascending) {
  const std::string token = request.Query("nextToken");
  if (token.empty()) return std::nullopt;
  absl::StatusOr<ListCursor> cursor = DecodeCursor(token);
  if (!cursor.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nextToken is not a cursor this server made (", cursor.status().message(),
        "): pass the X-Next-Token of the previous page as it came"));
  }
  if (cursor->ascending != ascending) {
    return absl::InvalidArgumentError(
        "nextToken was made for the other order: page with the order the first page was asked with");
  }
  return *cursor;
}

// E2B's metadata filter: "k1=v1&k2=v2", unescaped as a whole, then each
// key and value again (the SDKs quote both before encoding the pairs).
absl::StatusOr<std::map<std::string, std::string>> ParseMetadata(const std::string& query) {
  const std::string hint =
      "give metadata as URL-encoded key=value pairs joined by '&', e.g. metadata=user%3Dabc%26app%3Dprod";
  std::map<std::string, std::string> out;
  for (absl::string_view pair : absl::StrSplit(http::PercentDecode(query, /*plus_is_space=*/true), '&')) {
    std::vector<absl::string_view> parts = absl::StrSplit(pair, '=');
    if (parts.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat("'", pair, "' is not a key=value pair: ", hint));
    }
    out[http::PercentDecode(parts[0], true)] = http::PercentDecode(parts[1], true);
  }
  return out;
}

bool Matches(const SandboxQuery& query, const ListedSandbox& sandbox) {
  if (sandbox.paused ? !query.paused : !query.running) return false;
  if (query.started_after && sandbox.started < *query.started_after) return false;
  if (query.template_name && std::find(sandbox.template_names.begin(), sandbox.template_names.end(),
                                       *query.template_name) == sandbox.template_names.end()) {
    return false;
  }
  if (query.metadata) {
    if (sandbox.metadata.empty()) return false;
    for (const auto& [key, value] : *query.metadata) {
      auto it = sandbox.metadata.find(key);
      if (it == sandbox.metadata.end() || it->second != value) return false;
    }
  }
  return true;
}

// E2B's keyset order: newest first, ties by id ascending; oldest first is
// its exact reverse (ties by id descending).
bool Before(absl::Time a_time, const std::string& a_id, absl::Time b_time, const std::string& b_id, bool ascending) {
  if (a_time != b_time) return ascending ? a_time < b_time : a_time > b_time;
  return ascending ? a_id > b_id : a_id < b_id;
}

// The items after `cursor`, sorted, cut to `limit`, with the next cursor.
SandboxPage Page(std::vector<std::pair<absl::Time, std::string>> keys, std::vector<size_t> candidates, int limit,
                 const std::optional<ListCursor>& cursor, bool ascending) {
  std::sort(candidates.begin(), candidates.end(), [&](size_t a, size_t b) {
    return Before(keys[a].first, keys[a].second, keys[b].first, keys[b].second, ascending);
  });
  SandboxPage page;
  for (size_t i : candidates) {
    if (cursor && !Before(cursor->time, cursor->id, keys[i].first, keys[i].second, ascending)) continue;
    if (page.items.size() == static_cast<size_t>(limit)) {
      const auto& [time, id] = keys[page.items.back()];
      page.next_token = EncodeCursor({time, id, ascending});
      break;
    }
    page.items.push_back(i);
  }
  return page;
}

}  // namespace

std::string EncodeCursor(const ListCursor& cursor) {
  std::string text = absl::StrCat(absl::FormatTime(absl::RFC3339_full, cursor.time, absl::UTCTimeZone()),
                                  kCursorSeparator, cursor.id);
  if (cursor.ascending) absl::StrAppend(&text, kCursorSeparator, "asc");
  // base64.URLEncoding, padded, as E2B's API makes them.
  return absl::StrReplaceAll(absl::Base64Escape(text), {{"+", "-"}, {"/", "_"}});
}

absl::StatusOr<ListCursor> DecodeCursor(const std::string& token) {
  std::string text;
  if (!absl::WebSafeBase64Unescape(token, &text)) return absl::InvalidArgumentError("not base64url");
  std::vector<std::string> parts = absl::StrSplit(text, kCursorSeparator);
  if (parts.size() < 2 || parts.size() > 3 || (parts.size() == 3 && parts[2] != "asc") || parts[1].empty()) {
    return absl::InvalidArgumentError("not time__id");
  }
  ListCursor cursor;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, parts[0], &cursor.time, &error)) {
    return absl::InvalidArgumentError(absl::StrCat("its time: ", error));
  }
  cursor.id = parts[1];
  cursor.ascending = parts.size() == 3;
  return cursor;
}

absl::StatusOr<SandboxQuery> ParseSandboxQuery(const http::Request& request, bool v2) {
  SandboxQuery query;
  if (request.query.count("metadata") != 0) {
    absl::StatusOr<std::map<std::string, std::string>> metadata = ParseMetadata(request.Query("metadata"));
    if (!metadata.ok()) return metadata.status();
    query.metadata = *std::move(metadata);
  }
  if (!v2) {  // the deprecated list: running sandboxes, newest first, one page
    query.paused = false;
    query.limit = INT32_MAX;
    return query;
  }
  if (const std::string states = request.Query("state"); !states.empty()) {
    query.running = query.paused = false;
    for (absl::string_view state : absl::StrSplit(states, ',')) {
      if (state == "running") {
        query.running = true;
      } else if (state == "paused") {
        query.paused = true;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("state '", state, "' is not one of running and paused (e.g. state=running,paused)"));
      }
    }
  }
  if (const std::string order = request.Query("order"); !order.empty()) {
    if (order != "asc" && order != "desc") {
      return absl::InvalidArgumentError(absl::StrCat("order '", order, "' is neither asc nor desc"));
    }
    query.ascending = order == "asc";
  }
  if (const std::string after = request.Query("startedAfter"); !after.empty()) {
    absl::Time time;
    std::string error;
    if (!absl::ParseTime(absl::RFC3339_full, after, &time, &error)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "startedAfter '", after, "' is not an RFC 3339 date-time, e.g. 2025-01-31T12:00:00Z (", error, ")"));
    }
    query.started_after = time;
  }
  if (request.query.count("template") != 0) {
    const std::string name = request.Query("template");
    if (name.find(':') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "template '", name, "' names a tag: sandboxes are not tag-scoped, give the template's id or alias"));
    }
    query.template_name = name;
  }
  absl::StatusOr<int> limit = ParseLimit(request);
  if (!limit.ok()) return limit.status();
  query.limit = *limit;
  absl::StatusOr<std::optional<ListCursor>> cursor = ParseToken(request, query.ascending);
  if (!cursor.ok()) return cursor.status();
  query.cursor = *std::move(cursor);
  return query;
}

SandboxPage SelectSandboxes(const SandboxQuery& query, const std::vector<ListedSandbox>& sandboxes) {
  std::vector<std::pair<absl::Time, std::string>> keys;
  std::vector<size_t> candidates;
  int running = 0;
  for (size_t i = 0; i < sandboxes.size(); ++i) {
    keys.emplace_back(sandboxes[i].started, sandboxes[i].id);
    if (!Matches(query, sandboxes[i])) continue;
    candidates.push_back(i);
    if (!sandboxes[i].paused) ++running;
  }
  SandboxPage page = Page(std::move(keys), std::move(candidates), query.limit, query.cursor, query.ascending);
  page.total_running = running;
  return page;
}

absl::StatusOr<PageQuery> ParsePageQuery(const http::Request& request) {
  PageQuery query;
  absl::StatusOr<int> limit = ParseLimit(request);
  if (!limit.ok()) return limit.status();
  query.limit = *limit;
  absl::StatusOr<std::optional<ListCursor>> cursor = ParseToken(request, /*ascending=*/false);
  if (!cursor.ok()) return cursor.status();
  query.cursor = *std::move(cursor);
  return query;
}

SandboxPage PageOf(const PageQuery& query, const std::vector<std::pair<absl::Time, std::string>>& keys) {
  std::vector<size_t> all(keys.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return Page(keys, std::move(all), query.limit, query.cursor, /*ascending=*/false);
}

}  // namespace warden::e2b
