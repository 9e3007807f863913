// The kernel specs the gateway offers, one per Warden language: python3,
// javascript and bash (the names Jupyter users write), and what
// kernel_info_reply says about each.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "warden/v1/executor.pb.h"

namespace warden::jupyter {

struct KernelSpec {
  const char* name;          // python3, javascript, bash
  v1::Language language;
  const char* display_name;  // what a notebook UI shows
  const char* language_name; // language_info.name
  const char* version;
  const char* mimetype;
  const char* file_extension;
  const char* pygments_lexer;
  const char* codemirror_mode;
};

inline constexpr absl::string_view kDefaultKernelName = "python3";

const std::vector<KernelSpec>& KernelSpecs();
// By name, or by the aliases people also write (python, js, node, sh);
// nullptr when none matches.
const KernelSpec* FindKernelSpec(absl::string_view name);
// The spec for a session's language (python3 for an unspecified one).
const KernelSpec& KernelSpecFor(v1::Language language);

// GET /api/kernelspecs: {"default": ..., "kernelspecs": {name: {name, spec, resources}}}.
nlohmann::json KernelSpecsJson();
// The content of kernel_info_reply for a kernel of this spec.
nlohmann::json KernelInfoContent(const KernelSpec& spec);
// The comma-separated names, for error messages.
std::string KernelSpecNames();

}  // namespace warden::jupyter
