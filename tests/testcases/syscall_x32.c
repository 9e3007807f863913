// Makes an x32-ABI system call: unshare's number with __X32_SYSCALL_BIT set,
// which a filter comparing x86_64 numbers alone would not match.
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#define X32_SYSCALL_BIT 0x40000000L

int main(void) {
  long rc = syscall(X32_SYSCALL_BIT | SYS_unshare, CLONE_NEWUSER);
  printf("x32 unshare returned %ld\n", rc);
  return 0;
}
