#include "sandbox/fd_passing.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

namespace warden {

ssize_t SendWithFds(int socket, const void* a, size_t a_len, const void* b, size_t b_len,
                    const int* fds, int n_fds) {
  if (n_fds < 0 || n_fds > kMaxPassedFds) {
    errno = EINVAL;
    return -1;
  }
  struct iovec iov[2] = {{const_cast<void*>(a), a_len}, {const_cast<void*>(b), b_len}};
  struct msghdr msg = {};
  msg.msg_iov = iov;
  msg.msg_iovlen = b_len > 0 ? 2 : 1;
  alignas(struct cmsghdr) char control[CMSG_SPACE(kMaxPassedFds * sizeof(int))];
  if (n_fds > 0) {
    memset(control, 0, sizeof(control));
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(n_fds * sizeof(int));
    struct cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(n_fds * sizeof(int));
    memcpy(CMSG_DATA(cmsg), fds, n_fds * sizeof(int));
  }
  ssize_t n;
  do {
    n = sendmsg(socket, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n;
}

ssize_t ReceiveWithFds(int socket, void* buffer, size_t size, int flags, int* fds, int* n_fds) {
  *n_fds = 0;
  struct iovec iov = {buffer, size};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(struct cmsghdr) char control[CMSG_SPACE(kMaxPassedFds * sizeof(int))];
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(socket, &msg, flags | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return n;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (*n_fds < kMaxPassedFds) {
        fds[(*n_fds)++] = fd;
      } else {
        close(fd);
      }
    }
  }
  if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
    for (int i = 0; i < *n_fds; ++i) close(fds[i]);
    *n_fds = 0;
    errno = EMSGSIZE;
    return -1;
  }
  return n;
}

}  // namespace warden
