// Kept for the code that includes it from here; the macros live in
// common/status_macros.h, which every component may use.
#pragma once

#include "common/status_macros.h"  // IWYU pragma: export
