// Messages with file descriptors over UNIX sockets (SCM_RIGHTS), for the
// control socket between supervisor and sandbox and for the fork server.
// Both make system calls only, so the sandbox's child side may use them.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace warden {

// A fork request carries the most: five pipes and sockets and one detached
// mount per bind (kMaxMountOps at most). The kernel allows 253 (SCM_MAX_FD).
inline constexpr int kMaxPassedFds = 160;

// Sends one message made of `a` and `b` (b_len may be 0) with `n_fds` (at
// most kMaxPassedFds) fds. Retries on EINTR; -1 with errno on failure.
ssize_t SendWithFds(int socket, const void* a, size_t a_len, const void* b, size_t b_len,
                    const int* fds, int n_fds);

// Receives one message into `buffer` and up to kMaxPassedFds fds (opened
// close-on-exec) into `fds`, setting *n_fds. A message or fd list that did
// not fit is -1 with EMSGSIZE (its fds are closed). `flags` as for recvmsg.
ssize_t ReceiveWithFds(int socket, void* buffer, size_t size, int flags, int* fds, int* n_fds);

}  // namespace warden
