// Tries to open a CPU-cycles perf event on itself.
#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void) {
  struct perf_event_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_HARDWARE;
  attr.config = PERF_COUNT_HW_CPU_CYCLES;
  long rc = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
  printf("perf_event_open returned %ld\n", rc);
  return 0;
}
