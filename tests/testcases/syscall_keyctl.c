// Tries to join a new session keyring with keyctl(2) (CVE-2016-0728's path).
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#define KEYCTL_JOIN_SESSION_KEYRING 1

int main(void) {
  long rc = syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, "warden-escape");
  printf("keyctl returned %ld\n", rc);
  return 0;
}
