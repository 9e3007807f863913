// Tries to add a key to the user keyring with add_key(2).
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#define KEY_SPEC_USER_KEYRING -4

int main(void) {
  long rc = syscall(SYS_add_key, "user", "warden-escape", "secret", 6, KEY_SPEC_USER_KEYRING);
  printf("add_key returned %ld\n", rc);
  return 0;
}
