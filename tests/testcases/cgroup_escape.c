// The ways a program could reach a cgroup file it may write, one per run
// (the first forbidden call ends the run): mounting cgroup2, or a cgroup v1
// hierarchy for its release_agent (CVE-2022-0492's way out: a v1 hierarchy
// mounted in a new user and cgroup namespace runs its release_agent as root
// on the host), with mount(2) or the fd-based mount API; a cgroup namespace
// of its own; and cgroup v2's clone3(CLONE_INTO_CGROUP), which starts a
// child in the cgroup a directory fd names.
//   cgroup_escape mount-cgroup2 | mount-cgroup1 | fsopen-cgroup2 | unshare-cgroupns | clone-into-cgroup
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

struct clone_args_v2 {
  uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
  uint64_t set_tid, set_tid_size, cgroup;
};

int main(int argc, char** argv) {
  const char* what = argc > 1 ? argv[1] : "";
  long rc = -1;
  if (strcmp(what, "mount-cgroup2") == 0) {
    rc = mount("none", "/tmp", "cgroup2", 0, NULL);
  } else if (strcmp(what, "mount-cgroup1") == 0) {
    rc = mount("none", "/tmp", "cgroup", 0, "none,name=warden-escape");
    if (rc == 0) rc = open("/tmp/release_agent", O_WRONLY);
  } else if (strcmp(what, "fsopen-cgroup2") == 0) {
    rc = syscall(SYS_fsopen, "cgroup2", 0);
  } else if (strcmp(what, "unshare-cgroupns") == 0) {
    rc = unshare(CLONE_NEWCGROUP);
  } else if (strcmp(what, "clone-into-cgroup") == 0) {
    struct clone_args_v2 args;
    memset(&args, 0, sizeof(args));
    args.flags = 0x200000000ULL;  // CLONE_INTO_CGROUP
    args.exit_signal = 17;        // SIGCHLD
    args.cgroup = (uint64_t)open("/", O_PATH | O_DIRECTORY);
    rc = syscall(SYS_clone3, &args, sizeof(args));
    if (rc == 0) _exit(0);
    if (rc < 0) {
      printf("clone3: %s\n", errno == ENOSYS ? "ENOSYS" : strerror(errno));
      return 0;
    }
  } else {
    fprintf(stderr, "usage: cgroup_escape mount-cgroup2|mount-cgroup1|fsopen-cgroup2|unshare-cgroupns|clone-into-cgroup\n");
    return 2;
  }
  printf("%s returned %ld (%s)\n", what, rc, rc < 0 ? strerror(errno) : "success");
  return 1;
}
