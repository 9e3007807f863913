// The keeper protocol: wardend <-> warden-keeper over one SOCK_SEQPACKET
// UNIX socket (docs/keeper-design.md). Every message is one packet: a fixed
// header, an optional payload of at most kMaxPayload bytes, and the file
// descriptors of one sandbox (SCM_RIGHTS) on HOLD and HELD.
//
//   wardend -> keeper   HOLD id +fds   keep these (a copy of a Worker's handles)
//                       DROP id        close them; SIGKILL the init first
//                       ADOPT          hand back every held sandbox
//                       STOP           end every held sandbox; quit once wardend exits
//                       SERVING        wardend listens: the keeper tells systemd it is ready
//   keeper -> wardend   HELD id +fds   one held sandbox (ended: its init is gone)
//                       OUTPUT id      bytes it wrote while no daemon was attached
//                       ADOPT_END      that was all
//
// The keeper never interprets what a sandbox writes: it counts and keeps bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace warden::keeper {

enum class MessageType : uint32_t {
  kHold = 1,
  kDrop = 2,
  kAdopt = 3,
  kStop = 4,
  kServing = 5,
  kHeld = 10,
  kOutput = 11,
  kAdoptEnd = 12,
};

// The handles of one sandbox, in the order they travel; `Header::mask` says
// which are present (bit i: handle i), since a Worker may lack some.
enum Handle : int {
  kInitPidfd = 0,
  kControl,
  kStdin,
  kStdout,
  kStderr,
  kChannel,
  kListener,
  kProgramPidfd,
  kHandleCount,
};

// The streams the keeper buffers while detached, for OUTPUT's `a`.
enum Stream : int64_t { kStreamStdout = 0, kStreamStderr = 1, kStreamChannel = 2 };

inline constexpr size_t kMaxIdBytes = 63;
inline constexpr size_t kMaxPayload = 32 * 1024;
inline constexpr size_t kDefaultBufferBytes = 1 << 20;

struct Header {
  MessageType type;
  uint32_t mask = 0;  // HOLD, HELD: which handles come along
  int64_t a = 0;      // HELD: 1 if the init has exited; OUTPUT: the stream
  int64_t b = 0;      // HELD: the init's wait status; OUTPUT: bytes dropped before these
  char id[kMaxIdBytes + 1] = {};

  void set_id(const std::string& value) {
    std::memset(id, 0, sizeof(id));
    std::memcpy(id, value.data(), std::min(value.size(), kMaxIdBytes));
  }
  std::string id_string() const { return std::string(id, strnlen(id, sizeof(id))); }
};

}  // namespace warden::keeper
