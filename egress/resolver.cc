#include "egress/resolver.h"

#include <ares.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"

namespace warden::egress {

class Resolver::Impl {
 public:
  explicit Impl(Options options) : options_(std::move(options)) {}

  absl::Status Start() {
    static const int init = ares_library_init(ARES_LIB_INIT_ALL);
    if (init != ARES_SUCCESS) return absl::InternalError(absl::StrCat("c-ares: ", ares_strerror(init)));
    ares_options opts;
    std::memset(&opts, 0, sizeof(opts));
    // Each try gets its share of the whole timeout.
    opts.timeout = static_cast<int>(std::max<int64_t>(absl::ToInt64Milliseconds(options_.timeout) / 2, 100));
    opts.tries = 2;
    int r = ares_init_options(&channel_, &opts, ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES);
    if (r != ARES_SUCCESS) return absl::InternalError(absl::StrCat("c-ares: ", ares_strerror(r)));
    if (!options_.servers.empty()) {
      const std::string csv = absl::StrJoin(options_.servers, ",");
      r = ares_set_servers_ports_csv(channel_, csv.c_str());
      if (r != ARES_SUCCESS) {
        return absl::InvalidArgumentError(absl::StrCat("egress name servers '", csv, "': ", ares_strerror(r)));
      }
    }
    wake_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_ < 0) return absl::ErrnoToStatus(errno, "eventfd");
    thread_ = std::thread([this] { Loop(); });
    return absl::OkStatus();
  }

  ~Impl() {
    if (thread_.joinable()) {
      {
        absl::MutexLock lock(&mu_);
        stopping_ = true;
      }
      Wake();
      thread_.join();
    }
    if (channel_ != nullptr) ares_destroy(channel_);  // pending callbacks run with ARES_EDESTRUCTION
    if (wake_ >= 0) close(wake_);
  }

  void Resolve(const std::string& name, Done done) {
    if (auto it = options_.hosts.find(name); it != options_.hosts.end()) {
      done(it->second);
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      if (!stopping_ && thread_.joinable()) {
        queue_.push_back({name, std::move(done)});
        done = nullptr;
      }
    }
    if (done) {
      done(absl::UnavailableError("the resolver has stopped"));
      return;
    }
    Wake();
  }

 private:
  struct Query {
    std::string name;
    Done done;
  };

  void Wake() {
    const uint64_t one = 1;
    (void)!write(wake_, &one, sizeof(one));
  }

  static void OnResult(void* arg, int status, int timeouts, ares_addrinfo* result) {
    std::unique_ptr<Query> query(static_cast<Query*>(arg));
    if (status != ARES_SUCCESS) {
      if (result != nullptr) ares_freeaddrinfo(result);
      const bool missing = status == ARES_ENOTFOUND || status == ARES_ENODATA;
      query->done(missing ? absl::NotFoundError(absl::StrCat(query->name, " does not resolve (", ares_strerror(status), ")"))
                          : absl::UnavailableError(absl::StrCat("resolving ", query->name, ": ", ares_strerror(status))));
      return;
    }
    std::vector<Address> out;
    for (ares_addrinfo_node* n = result->nodes; n != nullptr; n = n->ai_next) {
      Address a;
      if (n->ai_family == AF_INET) {
        std::memcpy(a.bytes.data(), &reinterpret_cast<sockaddr_in*>(n->ai_addr)->sin_addr, 4);
      } else if (n->ai_family == AF_INET6) {
        a.v6 = true;
        std::memcpy(a.bytes.data(), &reinterpret_cast<sockaddr_in6*>(n->ai_addr)->sin6_addr, 16);
        // An IPv4-mapped answer is the IPv4 address.
        if (auto parsed = Address::Parse(a.ToString())) a = *parsed;
      } else {
        continue;
      }
      if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
    }
    ares_freeaddrinfo(result);
    if (out.empty()) {
      query->done(absl::NotFoundError(absl::StrCat(query->name, " has no address")));
      return;
    }
    query->done(std::move(out));
  }

  void Loop() {
    for (;;) {
      std::deque<Query> incoming;
      {
        absl::MutexLock lock(&mu_);
        if (stopping_) break;
        incoming.swap(queue_);
      }
      for (Query& q : incoming) {
        ares_addrinfo_hints hints;
        std::memset(&hints, 0, sizeof(hints));
        hints.ai_family = AF_UNSPEC;
        hints.ai_flags = ARES_AI_NOSORT;
        auto* query = new Query(std::move(q));
        ares_getaddrinfo(channel_, query->name.c_str(), nullptr, &hints, &Impl::OnResult, query);
      }
      ares_socket_t socks[ARES_GETSOCK_MAXNUM];
      const int mask = ares_getsock(channel_, socks, ARES_GETSOCK_MAXNUM);
      pollfd fds[ARES_GETSOCK_MAXNUM + 1];
      int n = 0;
      fds[n++] = {wake_, POLLIN, 0};
      for (int i = 0; i < ARES_GETSOCK_MAXNUM; ++i) {
        short events = 0;
        if (ARES_GETSOCK_READABLE(mask, i)) events |= POLLIN;
        if (ARES_GETSOCK_WRITABLE(mask, i)) events |= POLLOUT;
        if (events == 0) continue;
        fds[n++] = {socks[i], events, 0};
      }
      timeval tv, max = {1, 0};
      timeval* t = ares_timeout(channel_, &max, &tv);
      const int ms = static_cast<int>(t->tv_sec * 1000 + t->tv_usec / 1000);
      const int ready = poll(fds, static_cast<nfds_t>(n), ms);
      if (ready < 0 && errno != EINTR) break;
      if (fds[0].revents & POLLIN) {
        uint64_t count;
        (void)!read(wake_, &count, sizeof(count));
      }
      bool any = false;
      for (int i = 1; i < n; ++i) {
        if (fds[i].revents == 0) continue;
        any = true;
        const bool readable = fds[i].revents & (POLLIN | POLLERR | POLLHUP);
        const bool writable = fds[i].revents & (POLLOUT | POLLERR | POLLHUP);
        ares_process_fd(channel_, readable ? fds[i].fd : ARES_SOCKET_BAD, writable ? fds[i].fd : ARES_SOCKET_BAD);
      }
      if (!any) ares_process_fd(channel_, ARES_SOCKET_BAD, ARES_SOCKET_BAD);  // timeouts
    }
    // Stopping: whatever waits in the queue is answered here.
    std::deque<Query> left;
    {
      absl::MutexLock lock(&mu_);
      left.swap(queue_);
    }
    for (Query& q : left) q.done(absl::UnavailableError("the resolver has stopped"));
  }

  const Options options_;
  ares_channel channel_ = nullptr;
  int wake_ = -1;
  std::thread thread_;
  absl::Mutex mu_;
  std::deque<Query> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

Resolver::Resolver(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Resolver::~Resolver() = default;

absl::StatusOr<std::unique_ptr<Resolver>> Resolver::Start(Options options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  if (absl::Status s = impl->Start(); !s.ok()) return s;
  return std::unique_ptr<Resolver>(new Resolver(std::move(impl)));
}

void Resolver::Resolve(const std::string& lower_name, Done done) { impl_->Resolve(lower_name, std::move(done)); }

}  // namespace warden::egress
