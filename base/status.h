// Status helpers used at every boundary of tessel.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#define TESSEL_CONCAT_INNER_(a, b) a##b
#define TESSEL_CONCAT_(a, b) TESSEL_CONCAT_INNER_(a, b)

// Returns the status of `expr` from the enclosing function if it is not OK.
#define TESSEL_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status tessel_status_ = (expr);          \
    if (!tessel_status_.ok()) return tessel_status_; \
  } while (0)

// `TESSEL_ASSIGN_OR_RETURN(auto x, f())` binds the value of an OK StatusOr or
// returns its status.
#define TESSEL_ASSIGN_OR_RETURN(lhs, expr) \
  TESSEL_ASSIGN_OR_RETURN_IMPL_(TESSEL_CONCAT_(tessel_statusor_, __LINE__), lhs, expr)
#define TESSEL_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return std::move(tmp).status();      \
  lhs = std::move(tmp).value()

// Internal invariants: a failure is a bug in tessel, never a user error.
#define TESSEL_CHECK(cond, msg)                                                    \
  do {                                                                            \
    if (!(cond)) {                                                                \
      std::fprintf(stderr, "tessel: internal check failed at %s:%d: %s (%s)\n", \
                   __FILE__, __LINE__, #cond, msg);                               \
      std::abort();                                                               \
    }                                                                             \
  } while (0)

namespace tessel {

// `s` with "prefix: " before its message, keeping its code: how a boundary
// says where an error it passes on came from.
inline absl::Status prefixed(absl::string_view prefix, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(prefix, ": ", s.message()));
}

}  // namespace tessel
