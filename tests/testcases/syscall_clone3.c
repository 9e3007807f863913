// Calls clone3(2) asking for a new user namespace; the policy answers ENOSYS
// (BPF cannot read clone3's flags), which the program reports.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct clone_args_v0 {
  uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};

int main(void) {
  struct clone_args_v0 args;
  memset(&args, 0, sizeof(args));
  args.flags = 0x10000000;  // CLONE_NEWUSER
  args.exit_signal = 17;    // SIGCHLD
  long rc = syscall(SYS_clone3, &args, sizeof(args));
  if (rc == 0) _exit(0);
  if (rc > 0) {
    printf("clone3 created a child %ld\n", rc);
    return 1;
  }
  printf("clone3 failed: %s\n", errno == ENOSYS ? "ENOSYS" : strerror(errno));
  return 0;
}
