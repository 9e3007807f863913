// Starts a child, creates the file argv[1] to say it is ready, waits for
// stdin to close, then sends SIGKILL to every process it may signal
// (kill(-1, ...)) and reports whether its child died of it.
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    for (;;) pause();
  }
  int fd = open(argv[1], O_WRONLY | O_CREAT, 0666);
  if (fd < 0) return 1;
  close(fd);
  char buf[64];
  while (read(0, buf, sizeof(buf)) > 0) {
  }
  int rc = kill(-1, SIGKILL);
  int status = 0;
  if (waitpid(child, &status, 0) != child) return 1;
  printf("kill(-1) returned %d; child %s\n", rc,
         WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL ? "killed" : "survived");
  return 0;
}
