// Tries to create a BPF map with bpf(2).
#include <linux/bpf.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void) {
  union bpf_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.map_type = BPF_MAP_TYPE_ARRAY;
  attr.key_size = 4;
  attr.value_size = 4;
  attr.max_entries = 1;
  long rc = syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof(attr));
  printf("bpf returned %ld\n", rc);
  return 0;
}
