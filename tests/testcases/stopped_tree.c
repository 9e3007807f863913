// Builds a tree of stopped processes: four children stop themselves with
// SIGSTOP. Then the main process stops too, so nothing in the sandbox can
// ever run again - or, with argv[1] == "exit", exits 0 and leaves them.
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
  for (int i = 0; i < 4; ++i) {
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      raise(SIGSTOP);
      _exit(0);
    }
    siginfo_t info;
    if (waitid(P_PID, pid, &info, WSTOPPED) != 0) return 1;  // it is stopped now
  }
  printf("children stopped\n");
  fflush(stdout);
  if (argc > 1 && strcmp(argv[1], "exit") == 0) return 0;
  raise(SIGSTOP);
  return 0;
}
