#include "agent/code_blocks.h"

#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace warden::agent {
namespace {

// Languages whose fenced blocks are output or prose, never code to run.
bool IsNotCode(absl::string_view language) {
  return language == "text" || language == "txt" || language == "output" || language == "console" ||
         language == "json" || language == "plaintext" || language == "markdown" || language == "md";
}

CodeBlock Classify(std::string language, std::string body) {
  CodeBlock block;
  block.language = std::move(language);
  if (block.language == "diff" || block.language == "patch") {
    block.kind = CodeBlock::Kind::kPatch;
    block.text = std::move(body);
    return block;
  }
  absl::string_view first = body;
  if (size_t nl = first.find('\n'); nl != absl::string_view::npos) first = first.substr(0, nl);
  absl::string_view header = absl::StripAsciiWhitespace(first);
  for (absl::string_view prefix : {"# file:", "// file:", "#file:", "//file:"}) {
    if (absl::ConsumePrefix(&header, prefix)) {
      block.kind = CodeBlock::Kind::kFile;
      block.path = std::string(absl::StripAsciiWhitespace(header));
      block.text = body.size() > first.size() ? body.substr(first.size() + 1) : "";
      return block;
    }
  }
  block.text = std::move(body);
  return block;
}

}  // namespace

std::vector<CodeBlock> ExtractCodeBlocks(absl::string_view text) {
  std::vector<CodeBlock> blocks;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t fence = text.find("```", pos);
    const size_t tag = text.find("<execute_python>", pos);
    if (fence == absl::string_view::npos && tag == absl::string_view::npos) break;
    if (tag != absl::string_view::npos && (fence == absl::string_view::npos || tag < fence)) {
      const size_t start = tag + strlen("<execute_python>");
      size_t end = text.find("</execute_python>", start);
      const bool closed = end != absl::string_view::npos;
      if (!closed) end = text.size();
      std::string body(absl::StripSuffix(absl::StripPrefix(text.substr(start, end - start), "\n"), "\n"));
      if (!absl::StripAsciiWhitespace(body).empty()) blocks.push_back(Classify("python", std::move(body)));
      pos = closed ? end + strlen("</execute_python>") : text.size();
      continue;
    }
    // ```lang [attrs]\n body \n```
    const size_t line_end = text.find('\n', fence);
    if (line_end == absl::string_view::npos) break;
    std::string info = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text.substr(fence + 3, line_end - fence - 3)));
    std::string language = info.substr(0, info.find_first_of(" \t{"));
    size_t close = text.find("\n```", line_end);
    const bool closed = close != absl::string_view::npos;
    absl::string_view body = closed ? text.substr(line_end + 1, close - line_end - 1) : text.substr(line_end + 1);
    if (closed && close == line_end) body = "";
    pos = closed ? close + 4 : text.size();
    // Skip past the rest of the closing fence line.
    if (pos < text.size()) {
      const size_t nl = text.find('\n', pos);
      pos = nl == absl::string_view::npos ? text.size() : nl + 1;
    }
    if (IsNotCode(language) || absl::StripAsciiWhitespace(body).empty()) continue;
    blocks.push_back(Classify(language, std::string(body)));
  }
  return blocks;
}

}  // namespace warden::agent
