// The kernel protocol's frames as wardend reads them from a sandbox's
// channel (fd 3), which sandboxed code can write anything to. Whatever the
// bytes, KernelChannel yields messages or an error, never a crash, and the
// same bytes split anywhere give the same messages.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernel/kernel_channel.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

// Every message (its type and id) until an error or the bytes run out;
// "!" marks an error.
std::vector<std::string> Drain(warden::KernelChannel& channel) {
  std::vector<std::string> out;
  while (true) {
    auto next = channel.Next();
    if (!next.ok()) {
      out.push_back("!");
      return out;
    }
    if (!next->has_value()) return out;
    out.push_back(std::to_string(static_cast<int>((*next)->type)) + ":" + std::to_string((*next)->id));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* bytes = reinterpret_cast<const char*>(data);
  // A small cap, so the frame-size check is reached too.
  warden::KernelChannel whole(1 << 16);
  whole.Feed(bytes, size);
  std::vector<std::string> at_once = Drain(whole);

  warden::KernelChannel split(1 << 16);
  std::vector<std::string> piecewise;
  const size_t step = size == 0 ? 1 : (data[0] % 7) + 1;
  for (size_t i = 0; i < size; i += step) {
    split.Feed(bytes + i, std::min(step, size - i));
    for (std::string& m : Drain(split)) piecewise.push_back(std::move(m));
    if (!piecewise.empty() && piecewise.back() == "!") break;
  }
  FUZZ_CHECK(at_once == piecewise);
  return 0;
}
