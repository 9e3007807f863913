// Tries TIOCLINUX (console selection/paste: terminal input injection) on stdin.
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void) {
  char subcode = 3;  // TIOCL_PASTESEL
  long rc = syscall(SYS_ioctl, 0, TIOCLINUX, &subcode);
  printf("ioctl returned %ld\n", rc);
  return 0;
}
