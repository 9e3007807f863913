// Makes an i386 system call through int 0x80: number 26 is ptrace on i386
// but msync on x86_64, so a filter keyed on x86_64 numbers alone would let
// it through.
#include <stdio.h>

int main(void) {
  long ret;
  long nr = 26;  // i386 __NR_ptrace
  __asm__ volatile("int $0x80"
                   : "=a"(ret)
                   : "a"(nr), "b"(16 /* PTRACE_ATTACH */), "c"(1), "d"(0), "S"(0)
                   : "memory");
  printf("int 0x80 returned %ld\n", ret);
  return 0;
}
