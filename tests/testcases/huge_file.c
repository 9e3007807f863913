// Writes a file in /tmp until something stops it; with the default SIGXFSZ
// disposition, passing RLIMIT_FSIZE kills the process.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(void) {
  int fd = open("/tmp/huge", O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return 1;
  static char block[65536];
  memset(block, 'x', sizeof(block));
  long long total = 0;
  for (;;) {
    ssize_t n = write(fd, block, sizeof(block));
    if (n <= 0) {
      printf("write failed after %lld bytes: %s\n", total, strerror(errno));
      return 0;
    }
    total += n;
  }
}
