#include "egress/resolver.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace warden::egress {
namespace {

using ::testing::HasSubstr;

// A name server on 127.0.0.1 answering A queries from a map (NXDOMAIN for
// other names, no data for other types), or, when `silent`, nothing at all.
class StubNameServer {
 public:
  explicit StubNameServer(std::map<std::string, std::string> a, bool silent = false) : a_(std::move(a)), silent_(silent) {
    fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~StubNameServer() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  int queries() const { return queries_; }
  std::vector<std::string> names() {
    std::lock_guard<std::mutex> lock(mu_);
    return names_;
  }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      unsigned char q[512];
      sockaddr_in from{};
      socklen_t len = sizeof(from);
      const ssize_t n = recvfrom(fd_, q, sizeof(q), 0, reinterpret_cast<sockaddr*>(&from), &len);
      if (n < 17) continue;
      ++queries_;
      // The question's name, then its type.
      std::string name;
      size_t i = 12;
      while (i < static_cast<size_t>(n) && q[i] != 0) {
        if (!name.empty()) name += '.';
        name.append(reinterpret_cast<char*>(q + i + 1), q[i]);
        i += q[i] + 1;
      }
      const size_t question_end = i + 5;
      const int type = (q[i + 1] << 8) | q[i + 2];
      {
        std::lock_guard<std::mutex> lock(mu_);
        names_.push_back(name);
      }
      if (silent_) continue;
      std::string r(reinterpret_cast<char*>(q), question_end);
      r[2] = static_cast<char>(0x81);  // response, recursion desired
      r[3] = static_cast<char>(0x80);  // recursion available, NOERROR
      r[6] = r[7] = r[8] = r[9] = r[10] = r[11] = 0;
      auto it = a_.find(name);
      if (it == a_.end()) {
        r[3] = static_cast<char>(0x83);  // NXDOMAIN
      } else if (type == 1) {
        r[7] = 1;  // one answer
        in_addr addr;
        inet_pton(AF_INET, it->second.c_str(), &addr);
        const char answer[] = {'\xc0', '\x0c', 0, 1, 0, 1, 0, 0, 0, 60, 0, 4};
        r.append(answer, sizeof(answer));
        r.append(reinterpret_cast<char*>(&addr), 4);
      }
      sendto(fd_, r.data(), r.size(), 0, reinterpret_cast<sockaddr*>(&from), len);
    }
  }

  std::map<std::string, std::string> a_;
  bool silent_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> queries_{0};
  std::mutex mu_;
  std::vector<std::string> names_;
  std::thread thread_;
};

absl::StatusOr<std::vector<Address>> ResolveNow(Resolver& r, const std::string& name) {
  absl::Notification done;
  absl::StatusOr<std::vector<Address>> out = absl::UnknownError("none");
  r.Resolve(name, [&](absl::StatusOr<std::vector<Address>> result) {
    out = std::move(result);
    done.Notify();
  });
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  return out;
}

TEST(ResolverTest, TheOperatorsMapAnswersAloneForItsNames) {
  StubNameServer dns(std::map<std::string, std::string>{{"pypi.test", "1.2.3.4"}});
  Resolver::Options options;
  options.hosts["pypi.test"] = {*Address::Parse("10.77.0.2"), *Address::Parse("fd77::2")};
  options.servers = {dns.address()};
  auto r = Resolver::Start(options);
  ASSERT_TRUE(r.ok()) << r.status();
  auto a = ResolveNow(**r, "pypi.test");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->size(), 2u);
  EXPECT_EQ((*a)[0].ToString(), "10.77.0.2");
  EXPECT_EQ(dns.queries(), 0);
}

TEST(ResolverTest, OtherNamesGoToTheNameServer) {
  StubNameServer dns(std::map<std::string, std::string>{{"api.test", "1.2.3.4"}});
  Resolver::Options options;
  options.servers = {dns.address()};
  auto r = Resolver::Start(options);
  ASSERT_TRUE(r.ok());
  auto a = ResolveNow(**r, "api.test");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->size(), 1u);
  EXPECT_EQ((*a)[0].ToString(), "1.2.3.4");
  auto missing = ResolveNow(**r, "missing.test");
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_THAT(dns.names(), ::testing::Contains("missing.test"));
}

TEST(ResolverTest, ASilentNameServerFailsWithinTheTimeout) {
  StubNameServer dns(std::map<std::string, std::string>(), /*silent=*/true);
  Resolver::Options options;
  options.servers = {dns.address()};
  options.timeout = absl::Milliseconds(600);
  auto r = Resolver::Start(options);
  ASSERT_TRUE(r.ok());
  const absl::Time start = absl::Now();
  auto a = ResolveNow(**r, "slow.test");
  EXPECT_FALSE(a.ok());
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("slow.test"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(ResolverTest, PendingLookupsAreAnsweredWhenItStops) {
  StubNameServer dns(std::map<std::string, std::string>(), /*silent=*/true);
  Resolver::Options options;
  options.servers = {dns.address()};
  options.timeout = absl::Seconds(30);
  auto r = Resolver::Start(options);
  ASSERT_TRUE(r.ok());
  absl::Notification done;
  absl::Status status;
  (*r)->Resolve("never.test", [&](absl::StatusOr<std::vector<Address>> result) {
    status = result.status();
    done.Notify();
  });
  r->reset();
  ASSERT_TRUE(done.HasBeenNotified());
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
}

}  // namespace
}  // namespace warden::egress
