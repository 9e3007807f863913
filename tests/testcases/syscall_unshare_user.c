// Tries to create a nested user namespace with unshare(2).
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>

int main(void) {
  int rc = unshare(CLONE_NEWUSER);
  printf("unshare returned %d\n", rc);
  return 0;
}
