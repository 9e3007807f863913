// Pushes a command into stdin's terminal input queue with TIOCSTI, with the
// upper 32 bits of the request set (CVE-2019-10063: the kernel ignores them,
// a filter comparing all 64 bits does not). argv[1] == "plain" omits them.
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char** argv) {
  unsigned long request = TIOCSTI;
  if (argc < 2 || strcmp(argv[1], "plain") != 0) request |= 0xdead000000000000UL;
  char c = 'x';
  long rc = syscall(SYS_ioctl, 0, request, &c);
  printf("ioctl returned %ld\n", rc);
  return 0;
}
