// Opens /dev/null until open fails; reports how many it got and the errno.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  int opened = 0;
  for (;;) {
    if (open("/dev/null", O_RDONLY) < 0) {
      printf("opened %d, then %s\n", opened, errno == EMFILE ? "EMFILE" : strerror(errno));
      return 0;
    }
    ++opened;
  }
}
