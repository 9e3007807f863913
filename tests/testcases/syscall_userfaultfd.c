// Tries to create a userfaultfd (used to widen kernel race windows).
#include <fcntl.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void) {
  long rc = syscall(SYS_userfaultfd, O_CLOEXEC);
  printf("userfaultfd returned %ld\n", rc);
  return 0;
}
