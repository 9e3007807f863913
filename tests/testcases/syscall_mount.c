// Tries to mount a tmpfs over /usr.
#include <stdio.h>
#include <sys/mount.h>

int main(void) {
  int rc = mount("none", "/usr", "tmpfs", 0, "size=1m");
  printf("mount returned %d\n", rc);
  return 0;
}
