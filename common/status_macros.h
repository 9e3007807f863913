// RETURN_IF_ERROR / ASSIGN_OR_RETURN for absl::Status, which Debian's Abseil
// 20220623 does not ship. Used across Warden; keep this header tiny.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define WARDEN_CONCAT_INNER_(a, b) a##b
#define WARDEN_CONCAT_(a, b) WARDEN_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                  \
  do {                                         \
    ::absl::Status warden_status_ = (expr);    \
    if (!warden_status_.ok()) return warden_status_; \
  } while (0)

#define ASSIGN_OR_RETURN(lhs, expr) \
  WARDEN_ASSIGN_OR_RETURN_IMPL_(WARDEN_CONCAT_(warden_statusor_, __LINE__), lhs, expr)

#define WARDEN_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()
