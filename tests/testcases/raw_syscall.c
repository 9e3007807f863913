// Makes the system call numbered argv[1] with the remaining arguments
// (decimal or 0x hex; at most 6), and prints what it returned.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 2 || argc > 8) return 2;
  long nr = strtol(argv[1], NULL, 0);
  long a[6] = {0};
  for (int i = 2; i < argc; ++i) a[i - 2] = strtol(argv[i], NULL, 0);
  long rc = syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
  printf("syscall %ld returned %ld (%s)\n", nr, rc, rc < 0 ? strerror(errno) : "ok");
  return 0;
}
