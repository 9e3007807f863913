// Tries to create a nested user namespace with a raw clone(2).
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void) {
  long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
  if (pid == 0) _exit(0);
  printf("clone returned %ld\n", pid);
  return 0;
}
