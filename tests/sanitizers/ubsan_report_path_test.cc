// Undefined behaviour on purpose, for the ASan+UBSan build's check that
// UBSan's report reaches UBSAN_OPTIONS' log_path (ubsan_report_path.cc):
// signed overflow of a value the compiler cannot know.
#include <climits>
#include <cstdio>

int main(int argc, char**) {
  int value = INT_MAX - 1;
  value += argc;  // argc 2: overflows
  std::printf("%d\n", value);
  return 0;
}
