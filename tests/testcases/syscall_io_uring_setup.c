// Tries to create an io_uring instance.
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void) {
  char params[120];  // struct io_uring_params
  memset(params, 0, sizeof(params));
  long rc = syscall(SYS_io_uring_setup, 8, params);
  printf("io_uring_setup returned %ld\n", rc);
  return 0;
}
