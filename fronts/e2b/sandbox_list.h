// GET /v2/sandboxes' query as E2B's OpenAPI spec defines it (metadata,
// state, order, startedAfter, template, limit and nextToken), and the
// keyset pagination E2B's API serves it with: one page of the caller's
// sandboxes, newest first by default, and the cursor of the next page in
// X-Next-Token. The cursor is the last listed sandbox's start time and id,
// so a page starts after it whatever was created or killed meanwhile: no
// sandbox listed twice, none still there skipped. GET /snapshots pages the
// same way (PageOf).
//
// Pure: the front lists the tenant's sessions (warden.v1's ListSessions)
// and hands them here as ListedSandboxes.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "fronts/http/request.h"

namespace warden::e2b {

// What the query looks at of one sandbox.
struct ListedSandbox {
  std::string id;
  absl::Time started;
  bool paused = false;
  // The names a template filter matches it by: its templateID and its
  // template's aliases.
  std::vector<std::string> template_names;
  std::map<std::string, std::string> metadata;
};

// Where a page starts: after the item with this start time and id, in the
// order the cursor was made for (a cursor replayed under the other order
// would serve the same items again, so it is refused).
struct ListCursor {
  absl::Time time;
  std::string id;
  bool ascending = false;
};

struct SandboxQuery {
  // Every key given with this value (E2B: "user=abc&app=prod", each key and
  // value URL-encoded); unset: any. A sandbox without metadata never matches.
  std::optional<std::map<std::string, std::string>> metadata;
  bool running = true;
  bool paused = true;
  bool ascending = false;  // order=asc: oldest first
  std::optional<absl::Time> started_after;  // inclusive
  std::optional<std::string> template_name;
  int limit = 100;
  std::optional<ListCursor> cursor;
};

inline constexpr int kMaxListLimit = 100;  // E2B's paginationLimit: 1 to 100, default 100

// The query of GET /v2/sandboxes; InvalidArgument naming what is wrong and
// how to write it. `v2`: false for the deprecated GET /sandboxes, which
// takes `metadata` only and lists the running sandboxes, newest first.
absl::StatusOr<SandboxQuery> ParseSandboxQuery(const http::Request& request, bool v2);

struct SandboxPage {
  std::vector<size_t> items;  // indexes into the sandboxes given, in order
  std::string next_token;     // "" on the last page
  int total_running = 0;      // running ones matching the filters, before paging
};

SandboxPage SelectSandboxes(const SandboxQuery& query, const std::vector<ListedSandbox>& sandboxes);

// limit and nextToken alone (GET /snapshots): newest first.
struct PageQuery {
  int limit = 100;
  std::optional<ListCursor> cursor;
};
absl::StatusOr<PageQuery> ParsePageQuery(const http::Request& request);
// One page of items given as (time, id) keys, newest first.
SandboxPage PageOf(const PageQuery& query, const std::vector<std::pair<absl::Time, std::string>>& keys);

// base64url("<RFC 3339 time>__<id>[__asc]"), as E2B's API makes them.
std::string EncodeCursor(const ListCursor& cursor);
absl::StatusOr<ListCursor> DecodeCursor(const std::string& token);

}  // namespace warden::e2b
