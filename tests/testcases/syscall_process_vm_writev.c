// Tries to write into its parent's memory with process_vm_writev(2).
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

int main(void) {
  char data[8] = "pwned";
  struct iovec local = {data, sizeof(data)};
  struct iovec remote = {(void*)0x400000, sizeof(data)};
  long rc = syscall(SYS_process_vm_writev, getppid(), &local, 1, &remote, 1, 0);
  printf("process_vm_writev returned %ld\n", rc);
  return 0;
}
