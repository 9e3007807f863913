// Prints the file descriptors open in this process (without the one used to
// read /proc/self/fd).
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
  DIR* d = opendir("/proc/self/fd");
  if (d == NULL) return 1;
  struct dirent* e;
  int first = 1;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' || atoi(e->d_name) == dirfd(d)) continue;
    printf(first ? "%s" : " %s", e->d_name);
    first = 0;
  }
  printf("\n");
  return 0;
}
