// Code in plain text, for models without tool calling: fenced blocks
// (```python ... ```) and <execute_python>...</execute_python> tags, in the
// order they appear. A block whose first line is "# file: PATH" (or
// "// file: PATH") is a file to write rather than code to run; a ```diff or
// ```patch block is a patch.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace warden::agent {

struct CodeBlock {
  enum class Kind { kCode, kFile, kPatch };
  Kind kind = Kind::kCode;
  std::string language;  // the fence's info word, lower-case ("" if none)
  std::string path;      // kFile
  std::string text;      // the code, the file's content, or the patch
};

std::vector<CodeBlock> ExtractCodeBlocks(absl::string_view text);

}  // namespace warden::agent
