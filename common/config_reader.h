// Reading Warden's JSON configuration files strictly (wardend's and
// warden-gateway's): an unknown key, a wrong type or an out-of-range integer
// is an error naming the key's path, never a silent default; every problem
// is reported at once, each saying what to do. Also the checks both
// programs make of listen addresses and certificate files.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace warden::config {

using Json = nlohmann::json;

// Collects problems so the operator sees all of them in one go.
class Problems {
 public:
  void Add(std::string message) { messages_.push_back(std::move(message)); }
  bool empty() const { return messages_.empty(); }

  absl::Status ToStatus(absl::string_view what) const {
    if (messages_.empty()) return absl::OkStatus();
    if (messages_.size() == 1) return absl::InvalidArgumentError(messages_.front());
    return absl::InvalidArgumentError(absl::StrCat(messages_.size(), " problems in ", what, ":\n  ",
                                                   absl::StrJoin(messages_, "\n  ")));
  }

 private:
  std::vector<std::string> messages_;
};

// Line and column (both from 1) of the byte at `offset` of `text`; an offset
// past the end names the end. For "syntax error at line L, column C".
struct TextPosition {
  size_t line = 1;
  size_t column = 1;
  size_t line_start = 0;  // offset of the line's first byte
};
TextPosition PositionOf(absl::string_view text, size_t offset);

// Levenshtein distance, for "did you mean" on unknown keys.
size_t EditDistance(absl::string_view a, absl::string_view b);
// "a string \"30s\"", "the number 1.5", "null", ... for type errors.
std::string Describe(const Json& value);

// Reads one JSON object's keys into fields. Every key the code asks for is
// "known"; Finish() reports the keys nobody asked for, with the known list
// and a suggestion for a likely typo.
class ObjectReader {
 public:
  // `path` is "" for the top level, else "limits.defaults", "pools[1]", ...
  ObjectReader(const Json& object, std::string path, const std::string& file, Problems* problems)
      : object_(object), path_(std::move(path)), file_(file), problems_(problems) {}

  void Int(const char* key, int64_t* out) {
    ReadInteger(key, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                [out](int64_t v) { *out = v; });
  }
  void Int(const char* key, int* out) {
    ReadInteger(key, std::numeric_limits<int>::min(), std::numeric_limits<int>::max(),
                [out](int64_t v) { *out = static_cast<int>(v); });
  }
  void Uint32(const char* key, uint32_t* out) {
    ReadInteger(key, 0, std::numeric_limits<uint32_t>::max(),
                [out](int64_t v) { *out = static_cast<uint32_t>(v); });
  }

  void Bool(const char* key, bool* out) {
    const Json* value = Find(key);
    if (value == nullptr) return;
    if (!value->is_boolean()) return TypeError(key, *value, "true or false");
    *out = value->get<bool>();
  }

  void Double(const char* key, double* out) {
    const Json* value = Find(key);
    if (value == nullptr) return;
    if (!value->is_number()) return TypeError(key, *value, "a number");
    *out = value->get<double>();
  }

  void String(const char* key, std::string* out) {
    const Json* value = Find(key);
    if (value == nullptr) return;
    if (!value->is_string()) return TypeError(key, *value, "a string");
    *out = value->get<std::string>();
  }

  void StringList(const char* key, std::vector<std::string>* out) {
    const Json* value = Find(key);
    if (value == nullptr) return;
    if (!value->is_array()) return TypeError(key, *value, "an array of strings");
    std::vector<std::string> result;
    for (size_t i = 0; i < value->size(); ++i) {
      const Json& item = (*value)[i];
      if (!item.is_string()) {
        return TypeError(absl::StrCat(key, "[", i, "]"), item, "a string");
      }
      result.push_back(item.get<std::string>());
    }
    *out = std::move(result);
  }

  // Reads a nested object with `read`, which gets a reader for it.
  void Object(const char* key, const std::function<void(ObjectReader&)>& read) {
    const Json* value = Find(key);
    if (value == nullptr) return;
    if (!value->is_object()) return TypeError(key, *value, "an object {...}");
    ObjectReader nested(*value, Child(key), file_, problems_);
    read(nested);
    nested.Finish();
  }

  // Reads an array of objects, each with `read(index, reader)`; `on_array`
  // runs first with the array's size (to replace a default list).
  void ObjectList(const char* key, const std::function<void(size_t)>& on_array,
                  const std::function<void(size_t, ObjectReader&)>& read) {
    const Json* value = Find(key);
    if (value == nullptr) return;
    if (!value->is_array()) return TypeError(key, *value, "an array of objects [{...}, ...]");
    on_array(value->size());
    for (size_t i = 0; i < value->size(); ++i) {
      const std::string item_key = absl::StrCat(key, "[", i, "]");
      const Json& item = (*value)[i];
      if (!item.is_object()) {
        TypeError(item_key, item, "an object {...}");
        continue;
      }
      ObjectReader nested(item, Child(item_key), file_, problems_);
      read(i, nested);
      nested.Finish();
    }
  }

  // An object whose keys are names the operator chose (tenants, hosts),
  // each value read with `read(name, reader-of-the-object)`; with
  // `read_list`, each value is an array of strings instead.
  void NamedObjects(const char* key, const std::function<void(const std::string&, ObjectReader&)>& read) {
    const Json* value = Find(key);
    if (value == nullptr) return;
    if (!value->is_object()) return TypeError(key, *value, "an object {\"name\": {...}, ...}");
    for (const auto& [name, item] : value->items()) {
      const std::string item_key = absl::StrCat(key, ".", name);
      if (!item.is_object()) {
        TypeError(item_key, item, "an object {...}");
        continue;
      }
      ObjectReader nested(item, Child(item_key), file_, problems_);
      read(name, nested);
      nested.Finish();
    }
  }
  void NamedStringLists(const char* key, std::map<std::string, std::vector<std::string>>* out) {
    const Json* value = Find(key);
    if (value == nullptr) return;
    if (!value->is_object()) return TypeError(key, *value, "an object {\"name\": [\"...\"], ...}");
    std::map<std::string, std::vector<std::string>> result;
    for (const auto& [name, item] : value->items()) {
      const std::string item_key = absl::StrCat(key, ".", name);
      if (!item.is_array()) return TypeError(item_key, item, "an array of strings");
      for (size_t i = 0; i < item.size(); ++i) {
        if (!item[i].is_string()) return TypeError(absl::StrCat(item_key, "[", i, "]"), item[i], "a string");
        result[name].push_back(item[i].get<std::string>());
      }
    }
    *out = std::move(result);
  }

  bool Has(const char* key) const { return object_.contains(key); }
  const std::string& path() const { return path_; }

  void Finish() {
    for (const auto& [key, value] : object_.items()) {
      if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
      std::string message =
          absl::StrCat("unknown key '", key, "' ",
                       path_.empty() ? "at the top level" : absl::StrCat("in ", path_), " of ",
                       file_, "; known keys: ", absl::StrJoin(known_, ", "));
      std::string best;
      size_t best_distance = 3;  // suggest only close matches
      for (const std::string& candidate : known_) {
        size_t d = EditDistance(absl::AsciiStrToLower(key), candidate);
        if (d < best_distance) {
          best_distance = d;
          best = candidate;
        }
      }
      if (!best.empty()) absl::StrAppend(&message, ". Did you mean '", best, "'?");
      problems_->Add(std::move(message));
    }
  }

 private:
  const Json* Find(const char* key) {
    known_.push_back(key);
    auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }

  std::string Child(absl::string_view key) const {
    return path_.empty() ? std::string(key) : absl::StrCat(path_, ".", key);
  }

  void TypeError(absl::string_view key, const Json& value, absl::string_view expected) {
    problems_->Add(
        absl::StrCat(Child(key), " in ", file_, " must be ", expected, ", not ", Describe(value)));
  }

  void ReadInteger(const char* key, int64_t min, int64_t max,
                   const std::function<void(int64_t)>& store) {
    const Json* value = Find(key);
    if (value == nullptr) return;
    if (!value->is_number_integer()) return TypeError(key, *value, "an integer");
    if (value->is_number_unsigned() &&
        value->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      problems_->Add(absl::StrCat(Child(key), " in ", file_, " is ", value->dump(),
                                  "; it must be at most ", max));
      return;
    }
    const int64_t v = value->get<int64_t>();
    if (v < min || v > max) {
      problems_->Add(absl::StrCat(Child(key), " in ", file_, " is ", v, "; it must be between ",
                                  min, " and ", max));
      return;
    }
    store(v);
  }

  const Json& object_;
  const std::string path_;
  const std::string& file_;
  Problems* problems_;
  std::vector<std::string> known_;  // in the order the code reads them
};


// Reads `path` as a JSON object, with syntax errors given by line and
// column (and the two classic mistakes named). `example` names a file to
// start from, for the message when `path` does not exist.
absl::StatusOr<Json> ReadJsonObjectFile(const std::string& path, absl::string_view example);

struct ListenAddress {
  bool unix_socket = false;
  std::string path;  // unix
  std::string host;  // tcp, without brackets
  int port = 0;
  bool loopback = false;
};

bool IsLoopbackHost(const std::string& host);
// `what` names the setting for messages ("listen[0]", "admin_listen").
// gRPC listeners may be UNIX sockets and host names; the HTTP front
// (fronts/http/server.h) binds IP literals and "localhost" only.
absl::StatusOr<ListenAddress> ParseAddress(const std::string& what, const std::string& address,
                                           bool allow_unix, bool allow_host_names);
// An empty string when `path` is a readable regular file, else the problem.
std::string CheckReadableFile(const std::string& setting, const std::string& path);
void CheckPositive(Problems& p, const std::string& name, int64_t value);

}  // namespace warden::config
