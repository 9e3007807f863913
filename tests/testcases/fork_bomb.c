// Classic fork bomb. When fork first fails it creates argv[1] (a file in a
// shared writable directory) so the test knows the pids limit is being hit,
// then every process keeps trying forever.
#include <fcntl.h>
#include <unistd.h>

int main(int argc, char** argv) {
  int announced = 0;
  for (;;) {
    if (fork() < 0 && !announced && argc > 1) {
      announced = 1;
      int fd = open(argv[1], O_WRONLY | O_CREAT, 0666);
      if (fd >= 0) close(fd);
    }
  }
}
