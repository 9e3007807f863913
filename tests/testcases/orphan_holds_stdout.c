// Leaves behind a daemonised orphan - double fork, setsid, renamed to
// "warden-orphan" - that keeps stdout open and never exits, then exits 0
// as soon as the orphan is running.
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(void) {
  int ready[2];
  if (pipe(ready) != 0) return 1;
  pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    setsid();
    if (fork() != 0) _exit(0);
    // The grandchild: reparented to the sandbox's init, stdout still open.
    signal(SIGHUP, SIG_IGN);
    prctl(PR_SET_NAME, "warden-orphan");
    close(ready[0]);
    if (write(ready[1], "r", 1) != 1) _exit(1);
    close(ready[1]);
    for (;;) pause();
  }
  close(ready[1]);
  char c;
  if (read(ready[0], &c, 1) != 1) return 1;
  printf("orphan running\n");
  return 0;
}
