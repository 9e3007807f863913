// Tries to attach to its parent (the sandbox's init) with ptrace(2).
#include <stdio.h>
#include <sys/ptrace.h>
#include <unistd.h>

int main(void) {
  long rc = ptrace(PTRACE_ATTACH, getppid(), 0, 0);
  printf("ptrace returned %ld\n", rc);
  return 0;
}
