// For tests of the HTTP front under load: a raw client socket (how
// attackers and idle clients look) and the descriptors thousands of them need.
#pragma once

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace warden::http::testing {

// The client side of thousands of connections needs their descriptors.
inline void RaiseDescriptorLimit() {
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  limit.rlim_cur = limit.rlim_max;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &limit), 0);
  ASSERT_GE(limit.rlim_cur, 8192u) << "these tests open thousands of connections";
}

// A raw client socket; closed by its destructor.
class RawSocket {
 public:
  explicit RawSocket(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~RawSocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;
  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  bool Send(const std::string& bytes) const {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  // Whether the server has closed its side (EOF or reset), without waiting.
  bool ClosedByServer() const {
    char buffer[4096];
    while (true) {
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), MSG_DONTWAIT);
      if (n == 0) return true;
      if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
    }
  }
  // Everything until the server closes, or `timeout` passes.
  std::string ReadToClose(absl::Duration timeout = absl::Seconds(30)) const {
    return ReadWhile(timeout, [](const std::string&) { return true; });
  }
  // What arrives until `text` has (or 30 s pass).
  std::string ReadUntil(const std::string& text) const {
    return ReadWhile(absl::Seconds(30),
                     [&text](const std::string& out) { return out.find(text) == std::string::npos; });
  }
  // One whole response to a request already sent (Content-Length bodies).
  std::string ReadResponse() const {
    return ReadWhile(absl::Seconds(30), [](const std::string& out) {
      const size_t head = out.find("\r\n\r\n");
      if (head == std::string::npos) return true;
      const size_t cl = out.find("Content-Length: ");
      const size_t length = cl == std::string::npos ? 0 : std::stoul(out.substr(cl + 16));
      return out.size() < head + 4 + length;
    });
  }

 private:
  // Reads while `more` says so of what has arrived, until the server closes
  // or `timeout` passes; returns what arrived.
  std::string ReadWhile(absl::Duration timeout, const std::function<bool(const std::string&)>& more) const {
    std::string out;
    char buffer[4096];
    const absl::Time deadline = absl::Now() + timeout;
    while (more(out) && absl::Now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      const int64_t wait_ms = std::min<int64_t>(1000, absl::ToInt64Milliseconds(deadline - absl::Now()));
      if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(wait_ms, 0))) <= 0) continue;
      const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      out.append(buffer, static_cast<size_t>(n));
    }
    return out;
  }

 private:
  int fd_ = -1;
};

}  // namespace warden::http::testing
