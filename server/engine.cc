#include "server/engine.h"

#include <fcntl.h>
#include <signal.h>

#include <algorithm>
#include <deque>
#include <iterator>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/constant_time.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "kernel/workspace.h"
#include "server/path_watch.h"
#include "spdlog/spdlog.h"

namespace warden {
namespace {

// FNV-1a, 64 bits: a stable digest of the code for the audit line (the code
// itself is not logged).
std::string CodeDigest(const std::string& code) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : code) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return absl::StrFormat("fnv1a64:%016x", h);
}

absl::Status CheckLimit(const char* name, int64_t asked, int64_t max) {
  if (asked < 0) return absl::InvalidArgumentError(absl::StrCat(name, " must not be negative"));
  if (asked > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " ", asked, " exceeds the server's maximum of ", max));
  }
  return absl::OkStatus();
}

// How many contexts and live commands one session may hold.
constexpr size_t kMaxContexts = 8;
constexpr int kMaxLiveCommands = 16;
constexpr size_t kKeptCommands = 64;  // ended ones are forgotten beyond this

// Stops what a session is running: the cells of its interpreters (they
// return INTERRUPTED) and its commands (killed). The sandboxes go with the
// last reference.
void Retire(ManagedSession& entry) {
  // Frozen processes cannot die: a paused session thaws to end.
  if (entry.pause.load() == ManagedSession::Pause::kFrozen && entry.cgroup != nullptr) {
    (void)entry.cgroup->SetFrozen(false);
  }
  if (entry.busy()) (void)entry.session->Interrupt();
  absl::MutexLock lock(&entry.parts_mu);
  for (auto& [id, context] : entry.contexts) {
    if (context->busy()) (void)context->session->Interrupt();
  }
  for (auto& [id, command] : entry.commands) {
    if (!command->command->ended()) (void)command->command->Signal(SIGKILL);
  }
  // All the machine's processes end now and the session's cgroups go,
  // however long calls in flight keep the objects that ran them.
  if (entry.machine != nullptr) entry.machine->Kill();
  if (entry.cgroup != nullptr) {
    if (absl::Status s = entry.cgroup->Destroy(); !s.ok()) {
      spdlog::warn("session {}: removing its cgroup: {}", entry.id, s.ToString());
    }
  }
}

// Node in a sandbox with the egress proxy: its fetch goes through it
// (Node before 24 ignores HTTPS_PROXY: kernel/bin/warden_node_egress.js,
// with Debian's undici), and it trusts the sandbox's CA bundle (Node keeps
// a list of its own unless told).
std::vector<std::string> NodeEgressEnvironment() {
  return {absl::StrCat("NODE_EXTRA_CA_CERTS=", kSandboxCaBundle), "NODE_PATH=/usr/share/nodejs",
          absl::StrCat("NODE_OPTIONS=--require=", kToolsMountPoint, "/warden_node_egress.js")};
}

// The environment a machine's processes start with: the sandboxes' own
// (a template's: its image's ENV over them), at home in `home`, then the
// session's own `env`.
std::vector<std::string> MachineEnvironment(const std::string& home, const std::vector<std::string>& env,
                                            const SandboxTemplate* t = nullptr) {
  std::vector<std::string> base = SandboxSpec::DefaultEnvironment();
  if (t != nullptr) base = MergeEnvironment(std::move(base), t->env);
  const std::string path = t != nullptr ? t->Path() : "/usr/local/bin:/usr/bin:/bin";
  base = MergeEnvironment(std::move(base), {
      absl::StrCat("PATH=", kToolsMountPoint, ":", path, ":", home, "/.local/bin"),
      "HOME=" + home, "USER=user", "LOGNAME=user", "SHELL=/bin/bash",
      // Warden's pip (docs/runtime.md) installs into the user's site, from
      // a wheelhouse, never from an index.
      "PYTHONUSERBASE=" + home + "/.local", "PIP_USER=1", "PIP_NO_INDEX=1",
      "PIP_BREAK_SYSTEM_PACKAGES=1", "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1"});
  return MergeEnvironment(std::move(base), env);
}

absl::Status ValidateEnvironment(const std::vector<std::string>& env) {
  for (const std::string& kv : env) {
    const size_t eq = kv.find('=');
    if (eq == 0 || eq == std::string::npos || kv.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "environment variable '", kv.substr(0, eq), "' needs a name without '=' or NUL"));
    }
  }
  return absl::OkStatus();
}

// The session's interpreters: its own and its contexts'.
std::vector<std::shared_ptr<ManagedSession>> Interpreters(const std::shared_ptr<ManagedSession>& entry) {
  std::vector<std::shared_ptr<ManagedSession>> out = {entry};
  absl::MutexLock parts(&entry->parts_mu);
  for (const auto& [cid, context] : entry->contexts) out.push_back(context);
  return out;
}

absl::Status RestartEntry(ManagedSession& entry, bool clear_workspace) {
  RETURN_IF_ERROR(entry.Begin(absl::Now()));
  absl::Status restarted = entry.session->Restart(clear_workspace);
  entry.End();
  return restarted;
}

}  // namespace

void Cancellation::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  if (session_) (void)session_->Interrupt();
  if (command_) command_->WakeReaders();
  if (hook_) hook_();
}

bool Cancellation::cancelled() const { return cancelled_.load(); }

void Cancellation::Attach(Session* session) {
  absl::MutexLock lock(&mu_);
  session_ = session;
}

void Cancellation::Attach(Command* command) {
  absl::MutexLock lock(&mu_);
  command_ = command;
}

void Cancellation::Attach(std::function<void()> hook) {
  absl::MutexLock lock(&mu_);
  hook_ = std::move(hook);
}

void Cancellation::Detach() {
  absl::MutexLock lock(&mu_);
  session_ = nullptr;
  command_ = nullptr;
  hook_ = nullptr;
}

std::vector<std::string> WarmModules(const DaemonOptions& options, Language language) {
  std::vector<std::string> warm;
  for (const PoolOptions& pool : options.pools) {
    auto parsed = ParseLanguage(pool.language);
    if (parsed.ok() && *parsed == language && !pool.warm.empty()) warm = pool.warm;
  }
  return warm;
}

std::string Wheelhouse(const DaemonOptions& options, Language language) {
  std::string wheelhouse;
  for (const PoolOptions& pool : options.pools) {
    auto parsed = ParseLanguage(pool.language);
    if (parsed.ok() && *parsed == language && !pool.wheelhouse.empty()) wheelhouse = pool.wheelhouse;
  }
  return wheelhouse;
}

Engine::Engine(const DaemonOptions& options, Executor& executor, Metrics* metrics,
               ForkServer* python_zygote, Network* network, TemplateCatalog* templates, VolumeCatalog* volumes)
    : options_(options), executor_(executor), python_zygote_(python_zygote), network_(network), templates_(templates),
      volumes_(volumes),
      sessions_(options.sessions, options.fleet.node_id),
      snapshots_(options.SnapshotDirectory(), options.snapshots.max_bytes_per_tenant),
      admission_({.max_running_per_tenant = options.max_concurrent_per_tenant,
                  .max_running = options.queue.max_running,
                  .max_waiting_per_tenant = options.queue.max_waiting_per_tenant}),
      // A machine's start is mostly CPU (its cgroup and mounts, a cold
      // interpreter): one per core at once, as the pools' fillers; more only
      // contend for the same cores and finish all of them later.
      starts_({.max_running_per_tenant = static_cast<int>(std::max(1u, std::thread::hardware_concurrency())),
               .max_running = static_cast<int>(std::max(1u, std::thread::hardware_concurrency())),
               .max_waiting_per_tenant = options.queue.max_depth,
               .noun = "sandbox starts",
               .waiting_key = "queue.max_depth"}),
      epoch_(options.fleet.epoch.empty() ? SessionManager::RandomHex() : options.fleet.epoch) {
  if (options_.fleet.enabled()) ledger_ = std::make_unique<SessionLedger>(options_.fleet.shared_dir + "/sessions");
  if (metrics) {
    // Registration only fails on a programming error (a bad or reused name).
    executions_ = metrics->Counter("warden_executions_total",
                                   "Executions finished, by language, mode and outcome").value_or(nullptr);
    latency_ = metrics->Histogram("warden_execution_seconds",
                                  "Wall time of executions from request to result",
                                  ExponentialBuckets(0.0005, 2, 18)).value_or(nullptr);
    rejections_ = metrics->Counter("warden_rejections_total",
                                   "Requests refused before running, by gRPC code").value_or(nullptr);
    (void)metrics->GaugeCallback("warden_sessions", "Open sessions", [this] {
      return std::vector<std::pair<MetricLabels, double>>{{{}, static_cast<double>(sessions_.size())}};
    });
    (void)metrics->GaugeCallback("warden_executions_in_flight", "Executions running now", [this] {
      return std::vector<std::pair<MetricLabels, double>>{{{}, static_cast<double>(Stats().executing)}};
    });
    (void)metrics->GaugeCallback("warden_admission_waiting",
                                 "Executions waiting for their tenant's turn", [this] {
      return std::vector<std::pair<MetricLabels, double>>{
          {{}, static_cast<double>(admission_.Stats().waiting)}};
    });
    (void)metrics->GaugeCallback("warden_admission_queued_total",
                                 "Executions that waited for their turn before running", [this] {
      return std::vector<std::pair<MetricLabels, double>>{
          {{}, static_cast<double>(admission_.Stats().queued)}};
    });
    (void)metrics->GaugeCallback("warden_pool_ready", "Warm workers ready, by language", [this] {
      std::vector<std::pair<MetricLabels, double>> out;
      for (const auto& [name, pool] : Stats().pools) out.push_back({{{"language", name}}, double(pool.ready)});
      return out;
    });
    (void)metrics->GaugeCallback("warden_pool_waiting", "Requests queued for a warm worker", [this] {
      std::vector<std::pair<MetricLabels, double>> out;
      for (const auto& [name, pool] : Stats().pools) out.push_back({{{"language", name}}, double(pool.waiting)});
      return out;
    });
    (void)metrics->GaugeCallback("warden_pool_target",
                                 "Warm workers a pool keeps ready now, from the rate it is asked for them",
                                 [this] {
      std::vector<std::pair<MetricLabels, double>> out;
      for (const auto& [name, pool] : Stats().pools) out.push_back({{{"language", name}}, double(pool.target)});
      return out;
    });
    (void)metrics->GaugeCallback("warden_pool_capacity_per_second",
                                 "Workers per second a pool's fillers start on this host (measured)", [this] {
      std::vector<std::pair<MetricLabels, double>> out;
      for (const auto& [name, pool] : Stats().pools) out.push_back({{{"language", name}}, pool.capacity_per_s});
      return out;
    });
    (void)metrics->GaugeCallback(
        "warden_pool_refused",
        "Requests for a warm worker refused: the line full (full), past the caller's deadline at the line's rate "
        "(late), the deadline come while waiting (timed_out)",
        [this] {
          std::vector<std::pair<MetricLabels, double>> out;
          for (const auto& [name, pool] : Stats().pools) {
            out.push_back({{{"language", name}, {"reason", "full"}}, double(pool.refused_full)});
            out.push_back({{{"language", name}, {"reason", "late"}}, double(pool.refused_late)});
            out.push_back({{{"language", name}, {"reason", "timed_out"}}, double(pool.timed_out)});
          }
          return out;
        });
    (void)metrics->GaugeCallback("warden_starts_waiting",
                                 "Sessions waiting to start a machine of their own (one per core starts at once)",
                                 [this] {
      return std::vector<std::pair<MetricLabels, double>>{{{}, static_cast<double>(starts_.Stats().waiting)}};
    });
    (void)metrics->GaugeCallback("warden_pool_misses", "Acquisitions that found the pool empty", [this] {
      std::vector<std::pair<MetricLabels, double>> out;
      for (const auto& [name, pool] : Stats().pools) out.push_back({{{"language", name}}, double(pool.misses)});
      return out;
    });
    (void)metrics->GaugeCallback("warden_sandbox_start_failures", "Kernels that failed to start or died idle",
                                 [this] {
      std::vector<std::pair<MetricLabels, double>> out;
      for (const auto& [name, pool] : Stats().pools) {
        out.push_back({{{"language", name}}, double(pool.start_failures)});
      }
      return out;
    });
  }
  if (metrics && network_) {
    (void)metrics->GaugeCallback("warden_egress_bytes", "Bytes the egress proxy moved, by tenant and direction", [this] {
      std::vector<std::pair<MetricLabels, double>> out;
      for (const auto& [tenant, u] : network_->TenantUsage()) {
        out.push_back({{{"tenant", tenant}, {"direction", "out"}}, double(u.bytes_out)});
        out.push_back({{{"tenant", tenant}, {"direction", "in"}}, double(u.bytes_in)});
      }
      return out;
    });
    (void)metrics->GaugeCallback("warden_egress_connections", "Egress connections since the start, by tenant and decision",
                                 [this] {
      std::vector<std::pair<MetricLabels, double>> out;
      for (const auto& [tenant, u] : network_->TenantUsage()) {
        out.push_back({{{"tenant", tenant}, {"decision", "allowed"}}, double(u.connections)});
        out.push_back({{{"tenant", tenant}, {"decision", "refused"}}, double(u.refused)});
      }
      return out;
    });
    (void)metrics->GaugeCallback("warden_egress_connections_open", "Egress connections open now, by tenant", [this] {
      std::vector<std::pair<MetricLabels, double>> out;
      for (const auto& [tenant, u] : network_->TenantUsage()) out.push_back({{{"tenant", tenant}}, double(u.open)});
      return out;
    });
  }
  const int64_t default_mb = options_.limits.defaults.memory_mb;
  for (const PoolOptions& pool : options_.pools) {
    auto language = ParseLanguage(pool.language);
    if (!language.ok()) continue;  // rejected by DaemonOptions::Validate already
    const int64_t memory_mb = pool.memory_mb != 0 ? pool.memory_mb : default_mb;
    if (!pool.template_name.empty()) {
      // A pool in a template: the public template of that name, as it is
      // now (a template imported again later needs a restart to be used).
      absl::StatusOr<std::shared_ptr<const SandboxTemplate>> t =
          templates_ == nullptr ? absl::FailedPreconditionError("this wardend has no template store")
                                : templates_->Resolve("", pool.template_name);
      absl::Status usable = t.status();
      if (t.ok() && (*t)->owner != "") usable = absl::NotFoundError("it is not a public template");
      if (usable.ok()) {
        if (const std::string why = (*t)->Unavailable(*language); !why.empty()) usable = absl::FailedPreconditionError(why);
      }
      if (usable.ok() && Network::PoolPolicy(pool.network) != nullptr) {
        usable = absl::InvalidArgumentError(
            "a pool in a template takes no network of its own yet (its sessions may bring their own policy)");
      }
      if (!usable.ok()) {
        template_pool_errors_.push_back(WorkersCannotStart(
            *language, absl::FailedPreconditionError(absl::StrCat("the pool in the template '", pool.template_name,
                                                                  "' cannot start: ", usable.message()))));
        spdlog::error("{}", template_pool_errors_.back().ToString());
        continue;
      }
      SessionOptions session = SessionOptionsFor(*language, memory_mb, *t);
      session.warm = pool.warm;
      session.wheelhouse = pool.wheelhouse.empty() ? Wheelhouse(options_, *language) : pool.wheelhouse;
      template_pools_[{*language, memory_mb, pool.template_name}] = std::make_unique<WarmPool>(
          executor_, session, pool.size, pool.max_size, options_.queue.max_depth, [this] {
            if (health_listener_) health_listener_();
          });
      continue;
    }
    if (auto policy = Network::PoolPolicy(pool.network)) pool_networks_[{*language, memory_mb}] = policy;
    SessionOptions session = SessionOptionsFor(*language, memory_mb);
    session.warm = pool.warm.empty() ? WarmModules(options_, *language) : pool.warm;
    session.wheelhouse = pool.wheelhouse.empty() ? Wheelhouse(options_, *language) : pool.wheelhouse;
    pools_[{*language, memory_mb}] = std::make_unique<WarmPool>(
        executor_, session, pool.size, pool.max_size, options_.queue.max_depth, [this] {
          if (health_listener_) health_listener_();
        });
  }
  for (Language language : kAllLanguages) {
    if (!pools_.count({language, default_mb})) {
      // No warm pool configured: start on demand.
      SessionOptions session = SessionOptionsFor(language, default_mb);
      session.warm = WarmModules(options_, language);
      session.wheelhouse = Wheelhouse(options_, language);
      pools_[{language, default_mb}] =
          std::make_unique<WarmPool>(executor_, session, 0, 0, options_.queue.max_depth);
    }
  }
}

Engine::~Engine() { Stop(); }

void Engine::Start() {
  if (ledger_) {
    // Entries whose holder died before the session ended (TTLs are longer
    // than no session's), by whichever node starts next.
    const int swept = ledger_->Sweep(absl::Now() - absl::Seconds(options_.sessions.max_ttl_seconds) - absl::Hours(1));
    if (swept > 0) spdlog::info("session ledger: {} entries of ended sessions removed", swept);
  }
  for (auto& [profile, pool] : pools_) pool->Start();
  for (auto& [profile, pool] : template_pools_) pool->Start();
  reaper_ = std::thread([this] { ReapLoop(); });
}

void Engine::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  StopAdmitting();
  stop_reaper_.Notify();
  if (reaper_.joinable()) reaper_.join();
  for (auto& entry : sessions_.TakeAll()) {
    Retire(*entry);
    DropHibernation(*entry);
  }
  for (std::thread& resumer : resumers_) resumer.join();
  for (auto& [profile, pool] : pools_) pool->Stop();
  for (auto& [profile, pool] : template_pools_) pool->Stop();
}

void Engine::StopAdmitting() {
  admission_.Stop();
  starts_.Stop();
  // The pools carry on until Stop: a request already given its turn (a
  // one-shot about to take a warm worker, a session waiting for one) is in
  // flight, and a graceful shutdown lets it finish.
}

void Engine::ReapLoop() {
  while (!stop_reaper_.WaitForNotificationWithTimeout(absl::Seconds(1))) {
    for (auto& entry : sessions_.ToPause(absl::Now())) {
      // E2B's auto-pause; a session that cannot pause closes as it would.
      if (auto paused = PauseSession(entry->tenant, entry->id, *entry->pause_on_expiry_keeping_memory);
          !paused.ok()) {
        spdlog::warn("session {} could not pause at its TTL's end, so it closes: {}", entry->id,
                     paused.status().ToString());
        entry->pause_on_expiry_keeping_memory.reset();
      }
    }
    for (auto& entry : sessions_.TakeExpired(absl::Now())) {
      spdlog::info("session {} of tenant {} expired", entry->id, entry->tenant);
      Retire(*entry);
      DropHibernation(*entry);
      if (ledger_) ledger_->Forget(entry->id);
      // The last call using it drops the final reference.
    }
    HibernateIdle();
  }
}

SessionOptions Engine::SessionOptionsFor(Language language, int64_t memory_mb,
                                         std::shared_ptr<const SandboxTemplate> sandbox_template) const {
  SessionOptions session;
  session.language = language;
  session.sandbox_template = std::move(sandbox_template);
  session.limits.memory_bytes = memory_mb << 20;
  session.limits.pids = options_.limits.pids;
  session.limits.tmpfs_bytes = options_.limits.tmpfs_mb << 20;
  session.limits.output_bytes = options_.limits.max.output_bytes;
  session.max_file_bytes = options_.limits.max_file_bytes;
  if (!options_.kernels_dir.empty()) session.kernels_dir = options_.kernels_dir;
  // The zygote holds the host's interpreter: never a template's.
  if (language == Language::kPython && session.sandbox_template == nullptr) session.fork_server = python_zygote_;
  if (network_ != nullptr) {
    session.egress = network_->GateFactory();
    session.ca_bundle = network_->ca_bundle();
    for (std::string& entry : NodeEgressEnvironment()) session.env.push_back(std::move(entry));
  }
  return session;
}

absl::StatusOr<std::shared_ptr<const SandboxTemplate>> Engine::TemplateWithDigest(const std::string& tenant,
                                                                                  const std::string& name,
                                                                                  const std::string& digest) {
  if (templates_ == nullptr) return absl::FailedPreconditionError("this wardend has no template store");
  return templates_->ResolveDigest(tenant, name, digest);
}

absl::StatusOr<std::shared_ptr<const SandboxTemplate>> Engine::TemplateFor(const std::string& tenant,
                                                                           const std::string& name,
                                                                           Language language) const {
  if (name.empty()) return nullptr;
  if (templates_ == nullptr) {
    return absl::FailedPreconditionError("this wardend runs without a template store; ask for no template");
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const SandboxTemplate> t, templates_->Resolve(tenant, name));
  if (const std::string why = t->Unavailable(language); !why.empty()) return absl::FailedPreconditionError(why);
  return t;
}

absl::StatusOr<CellLimits> Engine::ResolveLimits(const CellLimitsOptions& asked,
                                                 const CellLimitsOptions& defaults) const {
  const CellLimitsOptions& max = options_.limits.max;
  RETURN_IF_ERROR(CheckLimit("wall_ms", asked.wall_ms, max.wall_ms));
  RETURN_IF_ERROR(CheckLimit("cpu_ms", asked.cpu_ms, max.cpu_ms));
  RETURN_IF_ERROR(CheckLimit("memory_mb", asked.memory_mb, max.memory_mb));
  RETURN_IF_ERROR(CheckLimit("output_bytes", asked.output_bytes, max.output_bytes));
  CellLimits limits;
  limits.wall_ms = asked.wall_ms ? asked.wall_ms : defaults.wall_ms;
  limits.cpu_ms = asked.cpu_ms ? asked.cpu_ms : defaults.cpu_ms;
  limits.output_bytes = asked.output_bytes ? asked.output_bytes : defaults.output_bytes;
  return limits;
}

absl::Status Engine::AttachVolumes(ManagedSession& entry) {
  entry.volume_binds.clear();
  entry.volume_holds.clear();
  if (entry.volumes.empty()) return absl::OkStatus();
  if (volumes_ == nullptr) return absl::FailedPreconditionError("this wardend runs without volumes (see its log)");
  ASSIGN_OR_RETURN(VolumeCatalog::Attached attached, volumes_->Attach(entry.tenant, entry.volumes));
  entry.volume_binds = std::move(attached.binds);
  entry.volume_holds = std::move(attached.holds);
  return absl::OkStatus();
}

WarmPool* Engine::PoolFor(Language language, int64_t memory_mb, const SandboxTemplate* t, bool binds) const {
  if (binds) return nullptr;  // volumes: a sandbox of its own with them, never a pool's
  if (memory_mb == 0) memory_mb = options_.limits.defaults.memory_mb;
  if (t != nullptr) {
    // A pool names a public template; a tenant's own, or one imported
    // again since the pool filled, is started on demand.
    if (!t->owner.empty()) return nullptr;
    auto pool = template_pools_.find({language, memory_mb, t->name});
    if (pool == template_pools_.end() || pool->second->options().sandbox_template->digest != t->digest) return nullptr;
    return pool->second.get();
  }
  auto pool = pools_.find({language, memory_mb});
  return pool == pools_.end() ? nullptr : pool->second.get();
}

absl::StatusOr<std::unique_ptr<Session>> Engine::StartOnDemand(Language language, int64_t memory_mb,
                                                               const std::shared_ptr<const SandboxTemplate>& t,
                                                               const std::vector<BindMount>& binds) {
  if (memory_mb == 0) memory_mb = options_.limits.defaults.memory_mb;
  // No pool for this profile: started on demand (cloned from the zygote for
  // Python, so still in milliseconds; in a template, its own interpreter).
  SessionOptions options;
  if (t != nullptr) {
    options = SessionOptionsFor(language, memory_mb, t);
    options.wheelhouse = Wheelhouse(options_, language);
  } else {
    options = pools_.at({language, options_.limits.defaults.memory_mb})->options();
  }
  options.limits.memory_bytes = memory_mb << 20;
  options.binds.insert(options.binds.end(), binds.begin(), binds.end());
  auto session = Session::Start(executor_, options);
  if (!session.ok()) return WorkersCannotStart(language, session.status());
  return session;
}

absl::StatusOr<std::unique_ptr<Session>> Engine::StartSession(const std::string& tenant, Language language,
                                                              int64_t memory_mb, absl::Time deadline, bool first,
                                                              const std::shared_ptr<const SandboxTemplate>& t,
                                                              const std::vector<BindMount>& binds) {
  if (WarmPool* pool = PoolFor(language, memory_mb, t.get(), !binds.empty())) {
    return pool->Acquire(tenant, deadline, first);
  }
  return StartOnDemand(language, memory_mb, t, binds);
}

absl::Time Engine::WaitDeadline(absl::Time asked) const {
  return asked != absl::InfiniteFuture() ? asked : absl::Now() + absl::Milliseconds(options_.queue.max_wait_ms);
}

namespace {

// Runs an asynchronous engine call to its end on this thread: whatever it
// hands its Runner runs here, until it has answered.
template <typename Result>
Result RunHere(const std::function<void(Runner, std::function<void(Result)>)>& start) {
  struct Mailbox {
    absl::Mutex mu;
    std::deque<std::function<void()>> work ABSL_GUARDED_BY(mu);
    std::optional<Result> result ABSL_GUARDED_BY(mu);
  };
  auto box = std::make_shared<Mailbox>();
  start(
      [box](std::function<void()> work) {
        absl::MutexLock lock(&box->mu);
        box->work.push_back(std::move(work));
      },
      [box](Result result) {
        absl::MutexLock lock(&box->mu);
        box->result = std::move(result);
      });
  for (;;) {
    std::function<void()> next;
    {
      absl::MutexLock lock(&box->mu);
      auto ready = [&box]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(box->mu) {
        return box->result.has_value() || !box->work.empty();
      };
      box->mu.Await(absl::Condition(&ready));
      if (box->work.empty()) return *std::move(box->result);
      next = std::move(box->work.front());
      box->work.pop_front();
    }
    next();
  }
}

}  // namespace

absl::StatusOr<ExecutionResult> Engine::Execute(const ExecuteCall& call,
                                                const Session::EventCallback& on_event,
                                                Cancellation* cancellation) {
  return RunHere<absl::StatusOr<ExecutionResult>>([&](Runner run, ExecuteDone done) {
    ExecuteAsync(call, on_event, cancellation, std::move(run), std::move(done));
  });
}

absl::Status Engine::CheckExecute(const ExecuteCall& call) const {
  if (static_cast<int64_t>(call.code.size()) > options_.limits.max_code_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("the code is ", call.code.size(),
                                                   " bytes; the server's maximum is ",
                                                   options_.limits.max_code_bytes));
  }
  if (!call.session_id.empty() && !call.template_name.empty()) {
    return absl::InvalidArgumentError("a session's template is fixed when it is created; leave template empty");
  }
  if (call.session_id.empty()) return CheckTakingWork();
  absl::MutexLock lock(&mu_);
  if (stopped_) return absl::UnavailableError("the server is shutting down");
  return absl::OkStatus();
}

void Engine::ExecuteAsync(ExecuteCall call, Session::EventCallback on_event, Cancellation* cancellation,
                          Runner run, ExecuteDone done) {
  const absl::Time start = absl::Now();
  auto finish = [this, start, done = std::move(done), language = LanguageName(call.language.value_or(Language::kPython)),
                 mode = std::string(call.session_id.empty() ? "oneshot" : "session")](
                    absl::StatusOr<ExecutionResult> result) {
    if (!result.ok()) {
      if (rejections_) rejections_->Add({{"code", absl::StatusCodeToString(result.status().code())}});
    } else {
      if (executions_) {
        executions_->Add({{"language", language}, {"mode", mode}, {"outcome", OutcomeName(result->cell.outcome)}});
      }
      if (latency_) latency_->Observe({{"language", language}, {"mode", mode}}, absl::ToDoubleSeconds(absl::Now() - start));
    }
    done(std::move(result));
  };
  if (absl::Status checked = CheckExecute(call); !checked.ok()) return finish(checked);
  // Both waits (for this tenant's turn, then for a warm worker or a busy
  // session) end at this request's own deadline.
  const absl::Time deadline = WaitDeadline(call.deadline);
  const std::string tenant = call.tenant;
  auto shared = std::make_shared<ExecuteCall>(std::move(call));
  admission_.EnterAsync(tenant, deadline, [this, shared, deadline, on_event = std::move(on_event), cancellation,
                                           run = std::move(run), finish = std::move(finish)](
                                              absl::StatusOr<TenantQueue::Slot> slot) mutable {
    if (!slot.ok()) return finish(slot.status());
    auto held = std::make_shared<TenantQueue::Slot>(*std::move(slot));
    run([this, shared, deadline, held, on_event = std::move(on_event), cancellation, finish = std::move(finish)] {
      // The turn ends before the answer goes: a client that has its answer
      // finds its turn free (a parameter may live to the end of the full
      // expression that called it, here past finish).
      auto result = ExecuteAdmitted(*shared, deadline, std::move(*held), on_event, cancellation);
      finish(std::move(result));
    });
  });
}

absl::StatusOr<ExecutionResult> Engine::ExecuteAdmitted(const ExecuteCall& call, absl::Time deadline,
                                                        TenantQueue::Slot slot,
                                                        const Session::EventCallback& on_event,
                                                        Cancellation* cancellation) {
  ExecutionResult out;
  std::shared_ptr<ManagedSession> entry;
  std::unique_ptr<Session> one_shot;
  std::shared_ptr<const SandboxTemplate> sandbox_template;  // a one-shot's
  Session* session = nullptr;
  CellLimits limits;
  Language language = call.language.value_or(Language::kPython);
  RETURN_IF_ERROR(ValidateEnvironment(call.env));
  // Secrets' placeholders (and pip's index) where the sandbox's own
  // environment does not hold them, under the call's own.
  std::vector<std::string> cell_env;
  if (!call.session_id.empty()) {
    if (!call.files.empty()) {
      return absl::InvalidArgumentError("files go to a session with UploadFile, not with Execute");
    }
    ASSIGN_OR_RETURN(entry, Find(call.tenant, call.session_id));
    RETURN_IF_ERROR(entry->CheckRunning());
    out.session_id = entry->id;
    if (!call.context_id.empty() && call.context_id != entry->id) {
      entry->Touch();
      ASSIGN_OR_RETURN(entry, Context(*entry, call.context_id));
    }
    if (call.limits.memory_mb != 0) {
      return absl::InvalidArgumentError("a session's memory is fixed when it is created");
    }
    ASSIGN_OR_RETURN(limits, ResolveLimits(call.limits, entry->cell_defaults));
    if (call.on_accepted) call.on_accepted();
    RETURN_IF_ERROR(entry->Begin(deadline));
    if (auto woken = Wake(*entry); !woken.ok()) {
      entry->End();
      return woken;
    }
    session = entry->session.get();
    language = entry->language;
    if (entry->machine == nullptr) {
      absl::MutexLock lock(&entry->network_mu);
      cell_env = entry->secret_env;
    }
  } else {
    ASSIGN_OR_RETURN(limits, ResolveLimits(call.limits, options_.limits.defaults));
    if (call.files.size() > 1000) return absl::InvalidArgumentError("more than 1000 files");
    for (const auto& [path, content] : call.files) {
      RETURN_IF_ERROR(ValidateWorkspacePath(path));
      if (static_cast<int64_t>(content.size()) > options_.limits.max_file_bytes) {
        return absl::InvalidArgumentError(absl::StrCat("file ", path, " exceeds the maximum of ",
                                                       options_.limits.max_file_bytes, " bytes"));
      }
    }
    if (call.on_accepted) call.on_accepted();
    ASSIGN_OR_RETURN(sandbox_template, TemplateFor(call.tenant, call.template_name, language));
    ASSIGN_OR_RETURN(one_shot, StartSession(call.tenant, language, call.limits.memory_mb, deadline, /*first=*/false,
                                            sandbox_template));
    if (network_ != nullptr) {
      // A pool's sandbox, this call's now: its tenant's, under its pool's policy.
      const int64_t memory_mb = call.limits.memory_mb ? call.limits.memory_mb : options_.limits.defaults.memory_mb;
      std::shared_ptr<const egress::Policy> pool = PoolNetwork(language, memory_mb);
      network_->Bind(one_shot->egress_gate().get(), "", call.tenant, nullptr, pool);
      cell_env = network_->SecretEnvironment(call.tenant, pool.get());
      if (pool != nullptr) cell_env.push_back("PIP_NO_INDEX=0");
    }
    for (const auto& [path, content] : call.files) {
      if (auto s = one_shot->WriteFile(path, content); !s.ok()) {
        disposer_.Dispose(std::move(one_shot));
        return s;
      }
    }
    session = one_shot.get();
  }

  if (cancellation) cancellation->Attach(session);
  if (cancellation && cancellation->cancelled()) {
    out.cell.outcome = Outcome::kInterrupted;
    out.cell.message = "cancelled before it started";
  } else {
    out.cell = session->Execute(call.code, limits, on_event, cancellation ? cancellation->flag() : nullptr,
                                cell_env.empty() ? call.env : MergeEnvironment(cell_env, call.env));
  }
  if (cancellation) cancellation->Detach();
  if (one_shot && out.cell.outcome == Outcome::kSessionLost) {
    // A one-shot has no session to lose: say what happened to the program.
    if (out.cell.limit) {
      out.cell.outcome = *out.cell.limit;
    } else if (out.cell.signal != 0) {
      out.cell.outcome = Outcome::kSignaled;
    } else if (out.cell.exit_code) {
      out.cell.outcome = *out.cell.exit_code == 0 ? Outcome::kOk : Outcome::kNonzeroExit;
    }
  }
  if (entry) entry->End();
  if (one_shot) disposer_.Dispose(std::move(one_shot));  // after the reply, off this path

  const SandboxTemplate* ran_in = entry ? entry->sandbox_template.get() : sandbox_template.get();
  spdlog::info(
      "audit tenant={} session={} language={}{} code={} bytes={} outcome={} wall_ms={} cpu_ms={} "
      "peak_memory={}{}",
      call.tenant, out.session_id.empty() ? "-" : out.session_id, LanguageName(language),
      ran_in ? absl::StrCat(" template=", ran_in->name, "@", ran_in->digest.substr(7, 12)) : std::string(),
      CodeDigest(call.code), call.code.size(), OutcomeName(out.cell.outcome), out.cell.wall_ms,
      out.cell.cpu_ms, out.cell.peak_memory_bytes,
      out.cell.violation ? " violation=" + *out.cell.violation : std::string());
  return out;
}

struct Engine::Creation {
  CreateSessionCall call;
  Language language = Language::kPython;
  absl::Time deadline;
  // Everything but its sandbox; for a shared workspace, its workspace,
  // aliases and environment too.
  std::unique_ptr<ManagedSession> entry;
};

absl::StatusOr<std::shared_ptr<ManagedSession>> Engine::CreateSession(const CreateSessionCall& call) {
  return RunHere<absl::StatusOr<std::shared_ptr<ManagedSession>>>([&](Runner run, CreateDone done) {
    CreateSessionAsync(call, std::move(run), std::move(done));
  });
}

void Engine::CreateSessionAsync(CreateSessionCall call, Runner run, CreateDone done) {
  absl::StatusOr<std::shared_ptr<Creation>> prepared = PrepareCreate(std::move(call));
  if (!prepared.ok()) return done(prepared.status());
  std::shared_ptr<Creation> creation = *std::move(prepared);
  const std::string tenant = creation->call.tenant;
  if (creation->call.shared_workspace) {
    // Its own machine, started here: a turn to start one first.
    starts_.EnterAsync(tenant, creation->deadline, [this, creation, run = std::move(run), done = std::move(done)](
                                                     absl::StatusOr<TenantQueue::Slot> slot) mutable {
      if (!slot.ok()) return done(FinishCreate(*creation, slot.status()));
      auto held = std::make_shared<TenantQueue::Slot>(*std::move(slot));
      run([this, creation, held, done = std::move(done)] {
        if (creation->call.abandoned && creation->call.abandoned()) {
          held->Release();
          return done(FinishCreate(*creation, absl::CancelledError("the client went away")));
        }
        MakeRoomForALiveSession(nullptr);
        absl::StatusOr<std::unique_ptr<Session>> started = StartWithSharedWorkspace(*creation->entry, creation->language);
        held->Release();  // the next machine starts while this one registers
        done(FinishCreate(*creation, std::move(started)));
      });
    });
    return;
  }
  WarmPool* pool = PoolFor(creation->language, creation->call.limits.memory_mb,
                           creation->entry->sandbox_template.get(), !creation->entry->volume_binds.empty());
  if (pool == nullptr) {
    return run([this, creation, done = std::move(done)] {
      MakeRoomForALiveSession(nullptr);
      done(FinishCreate(*creation, StartOnDemand(creation->language, creation->entry->memory_mb,
                                                 creation->entry->sandbox_template, creation->entry->volume_binds)));
    });
  }
  pool->AcquireAsync(tenant, creation->deadline, [this, creation, pool, run = std::move(run), done = std::move(done)](
                                                     absl::StatusOr<std::unique_ptr<Session>> session) mutable {
    if (session.ok() && creation->call.abandoned && creation->call.abandoned()) {
      pool->GiveBack(*std::move(session));  // to the next in line
      session = absl::CancelledError("the client went away");
    }
    if (!session.ok()) return done(FinishCreate(*creation, session.status()));
    auto worker = std::make_shared<std::unique_ptr<Session>>(*std::move(session));
    run([this, creation, worker, done = std::move(done)] {
      MakeRoomForALiveSession(nullptr);
      done(FinishCreate(*creation, std::move(*worker)));
    });
  });
}

absl::StatusOr<std::shared_ptr<Engine::Creation>> Engine::PrepareCreate(CreateSessionCall call) {
  RETURN_IF_ERROR(CheckTakingWork());
  const SessionsOptions& so = options_.sessions;
  if (call.ttl_seconds < 0 || call.idle_timeout_seconds < 0) {
    return absl::InvalidArgumentError("ttl_seconds and idle_timeout_seconds must not be negative");
  }
  if (call.ttl_seconds > so.max_ttl_seconds) {
    return absl::InvalidArgumentError(absl::StrCat("ttl_seconds ", call.ttl_seconds,
                                                   " exceeds the server's maximum of ",
                                                   so.max_ttl_seconds));
  }
  for (const auto& [k, v] : call.labels) {
    if (k.empty() || k.size() > 63 || v.size() > 255) {
      return absl::InvalidArgumentError("labels need keys of 1-63 bytes and values of at most 255");
    }
  }
  if (call.labels.size() > 32) return absl::InvalidArgumentError("at most 32 labels");
  CellLimitsOptions defaults = options_.limits.defaults;
  ASSIGN_OR_RETURN(CellLimits cell, ResolveLimits(call.limits, defaults));
  defaults.wall_ms = cell.wall_ms;
  defaults.cpu_ms = cell.cpu_ms;
  defaults.output_bytes = cell.output_bytes;

  if (!call.shared_workspace && (!call.workspace_aliases.empty() || !call.workspace_path.empty() ||
                                 !call.env.empty())) {
    return absl::InvalidArgumentError("workspace_aliases, workspace_path and env need shared_workspace");
  }
  if (!call.shared_workspace && call.on_expiry != CreateSessionCall::OnExpiry::kClose) {
    return absl::InvalidArgumentError("only a session with shared_workspace can pause at its TTL's end");
  }
  RETURN_IF_ERROR(ValidateEnvironment(call.env));
  const std::string workspace_path = call.workspace_path.empty() ? "/workspace" : call.workspace_path;
  if (call.shared_workspace) RETURN_IF_ERROR(ValidateSandboxPath(workspace_path));
  if (call.workspace_aliases.size() > 4) return absl::InvalidArgumentError("at most 4 workspace aliases");
  for (const std::string& alias : call.workspace_aliases) {
    if (!ValidateSandboxPath(alias).ok() || alias == workspace_path) {
      return absl::InvalidArgumentError(absl::StrCat(
          "workspace alias '", alias, "' must be an absolute path inside the sandbox, like /workspace"));
    }
  }

  // The network: the session's own policy (checked against its tenant's
  // rights), else its pool's.
  std::shared_ptr<const egress::Policy> network;
  if (call.network) {
    if (network_ == nullptr) return absl::FailedPreconditionError("this wardend runs without an egress proxy");
    ASSIGN_OR_RETURN(network, network_->SessionPolicy(call.tenant, *call.network));
  }
  if (call.public_ports && !options_.http.allow_public_ports) {
    return absl::FailedPreconditionError(
        "public ports are off on this wardend (http.allow_public_ports): reach the session's ports with the "
        "tenant's token or the session's traffic_token");
  }
  if (call.port_host_header.size() > 253 ||
      call.port_host_header.find_first_of(std::string("\r\n\0", 3)) != std::string::npos) {
    return absl::InvalidArgumentError("ports.host_header must be a host name of at most 253 bytes, ${PORT} allowed");
  }

  const Language language = call.language.value_or(Language::kPython);
  ASSIGN_OR_RETURN(std::shared_ptr<const SandboxTemplate> sandbox_template,
                   TemplateFor(call.tenant, call.template_name, language));
  RETURN_IF_ERROR(sessions_.Reserve(call.tenant));
  auto creation = std::make_shared<Creation>();
  creation->language = language;
  creation->deadline = WaitDeadline(call.deadline);
  auto& entry = creation->entry = std::make_unique<ManagedSession>();
  entry->memory_mb = call.limits.memory_mb ? call.limits.memory_mb : options_.limits.defaults.memory_mb;
  entry->pool_network = PoolNetwork(creation->language, entry->memory_mb);
  {
    absl::MutexLock lock(&entry->network_mu);
    entry->network = network;
    if (network_ != nullptr) {
      const egress::Policy* effective = network ? network.get() : entry->pool_network.get();
      entry->secret_env = network_->SecretEnvironment(call.tenant, effective);
      if (effective != nullptr) entry->secret_env.push_back("PIP_NO_INDEX=0");
    }
  }
  entry->public_ports = call.public_ports;
  entry->port_host_header = call.port_host_header;
  entry->resume_on_port_request = call.resume_on_port_request;
  entry->traffic_token = SessionManager::RandomHex() + SessionManager::RandomHex();
  entry->sandbox_template = sandbox_template;
  entry->tenant = call.tenant;
  entry->volumes = call.volumes;
  if (absl::Status attached = AttachVolumes(*entry); !attached.ok()) {
    sessions_.Unreserve(call.tenant);
    return attached;
  }
  if (call.shared_workspace) {
    entry->workspace_path = workspace_path;
    entry->workspace_aliases = call.workspace_aliases;
    std::vector<std::string> env;
    {
      absl::MutexLock lock(&entry->network_mu);
      env = entry->secret_env;
    }
    if (network_ != nullptr) {
      for (std::string& line : NodeEgressEnvironment()) env.push_back(std::move(line));
    }
    env.insert(env.end(), call.env.begin(), call.env.end());
    entry->env = MachineEnvironment(workspace_path, env, sandbox_template.get());
  }
  entry->tenant = call.tenant;
  entry->language = creation->language;
  entry->labels = call.labels;
  entry->idle_timeout = absl::Seconds(call.idle_timeout_seconds ? call.idle_timeout_seconds
                                                                : so.default_idle_timeout_seconds);
  entry->cell_defaults = defaults;
  if (call.on_expiry != CreateSessionCall::OnExpiry::kClose) {
    entry->pause_on_expiry_keeping_memory = call.on_expiry == CreateSessionCall::OnExpiry::kPause;
  }
  creation->call = std::move(call);
  return creation;
}

absl::StatusOr<std::shared_ptr<ManagedSession>> Engine::FinishCreate(
    Creation& creation, absl::StatusOr<std::unique_ptr<Session>> started) {
  std::unique_ptr<ManagedSession>& entry = creation.entry;
  if (!started.ok()) {
    if (entry->machine) entry->machine->Kill();
    sessions_.Unreserve(creation.call.tenant);
    return started.status();
  }
  const SessionsOptions& so = options_.sessions;
  // Its lifetime counts from now, not from when it joined the line.
  entry->created = absl::Now();
  entry->set_expires(entry->created + absl::Seconds(creation.call.ttl_seconds ? creation.call.ttl_seconds
                                                                              : so.default_ttl_seconds));
  entry->session = *std::move(started);
  if (!entry->machine) entry->egress_gate = entry->session->egress_gate();
  auto shared = sessions_.Register(std::move(entry));
  NameSandboxes(*shared);
  BindNetwork(*shared);
  spdlog::info("session {} created for tenant {} ({}{}{})", shared->id, creation.call.tenant,
               LanguageName(creation.language), creation.call.network ? ", with a network policy" : "",
               shared->sandbox_template ? absl::StrCat(", in template ", shared->sandbox_template->name) : std::string());
  return shared;
}

absl::StatusOr<std::shared_ptr<ManagedSession>> Engine::AdoptSession(
    std::unique_ptr<ManagedSession> entry, std::unique_ptr<Worker> worker,
    const Session::Handover& snapshot, absl::Time last_used) {
  // As StartSession's on-demand path would have built it.
  const int64_t default_mb = options_.limits.defaults.memory_mb;
  auto pool = pools_.find({entry->language, default_mb});
  if (pool == pools_.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no ", LanguageName(entry->language), " pool is configured any more"));
  }
  SessionOptions options = pool->second->options();
  options.limits.memory_bytes = entry->memory_mb << 20;
  if (entry->sandbox_template != nullptr) {
    options = SessionOptionsFor(entry->language, entry->memory_mb, entry->sandbox_template);
    options.wheelhouse = Wheelhouse(options_, entry->language);
  }
  // Its volumes are mounted in its sandbox still; held here too, for the
  // sandbox a restart makes.
  RETURN_IF_ERROR(AttachVolumes(*entry));
  options.binds.insert(options.binds.end(), entry->volume_binds.begin(), entry->volume_binds.end());
  ASSIGN_OR_RETURN(entry->session, Session::Adopt(executor_, options, std::move(worker), snapshot));
  const CellLimits limits{entry->cell_defaults.wall_ms, entry->cell_defaults.cpu_ms,
                          entry->cell_defaults.output_bytes};
  entry->egress_gate = entry->session->egress_gate();
  entry->pool_network = PoolNetwork(entry->language, entry->memory_mb);
  if (network_ != nullptr) {
    absl::MutexLock lock(&entry->network_mu);
    const egress::Policy* effective = entry->network ? entry->network.get() : entry->pool_network.get();
    entry->secret_env = network_->SecretEnvironment(entry->tenant, effective);
    if (effective != nullptr) entry->secret_env.push_back("PIP_NO_INDEX=0");
  }
  if (entry->traffic_token.empty()) entry->traffic_token = SessionManager::RandomHex() + SessionManager::RandomHex();
  std::shared_ptr<ManagedSession> shared = sessions_.Adopt(std::move(entry), last_used);
  NameSandboxes(*shared);  // named already; a restart's new sandbox will be too
  BindNetwork(*shared);
  if (snapshot.busy) {
    // Its cell keeps running; the session stays busy until it ends, and
    // GetSession then reports what it produced.
    (void)shared->Begin(absl::InfiniteFuture());
    resumers_.emplace_back([shared, limits] {
      if (std::optional<CellResult> cell = shared->session->ResumeCell(limits)) {
        spdlog::info("session {}: the cell running across the restart ended ({})", shared->id,
                     OutcomeName(cell->outcome));
        shared->SetDetachedCell(*std::move(cell));
      }
      shared->End();
    });
  }
  return shared;
}

absl::StatusOr<std::shared_ptr<ManagedSession>> Engine::GetSession(const std::string& tenant,
                                                                   const std::string& id) const {
  return Find(tenant, id);
}

std::vector<std::shared_ptr<ManagedSession>> Engine::ListSessions(
    const std::string& tenant, const std::map<std::string, std::string>& labels) const {
  return sessions_.List(tenant, labels);
}

absl::Status Engine::CloseSession(const std::string& tenant, const std::string& id) {
  RETURN_IF_ERROR(Find(tenant, id).status());
  ASSIGN_OR_RETURN(auto entry, sessions_.Remove(tenant, id));
  Retire(*entry);
  DropHibernation(*entry);
  if (ledger_) ledger_->Forget(id);
  spdlog::info("session {} closed by tenant {}", id, tenant);
  return absl::OkStatus();
}

void Engine::Release(const std::shared_ptr<ManagedSession>& entry) {
  (void)sessions_.Remove(entry->tenant, entry->id);
  if (!entry->session->released()) Retire(*entry);
}

absl::StatusOr<bool> Engine::InterruptSession(const std::string& tenant, const std::string& id) {
  ASSIGN_OR_RETURN(auto entry, Find(tenant, id));
  if (!entry->busy()) return false;
  RETURN_IF_ERROR(entry->session->Interrupt());
  return true;
}

absl::StatusOr<std::shared_ptr<ManagedSession>> Engine::RestartSession(const std::string& tenant,
                                                                       const std::string& id,
                                                                       bool clear_workspace) {
  ASSIGN_OR_RETURN(auto entry, Find(tenant, id));
  RETURN_IF_ERROR(WakeForFiles(*entry));
  RETURN_IF_ERROR(RestartEntry(*entry, clear_workspace));
  if (observer_ != nullptr) observer_->OnRegistered(*entry);  // a new sandbox, or a reset count
  return entry;
}

absl::Status Engine::InFiles(ManagedSession& entry, const std::string& path, const FileOp& op) {
  entry.Touch();
  RETURN_IF_ERROR(WakeForFiles(entry));
  if (entry.machine == nullptr) {
    // A workspace of its own: nothing outside it, nothing through a link.
    return entry.session->InWorkspace([&](int root) {
      return op(root, path, Resolve::kBeneath, [](WorkspaceListing& e) { e.owner = e.group = "sandbox"; });
    });
  }
  // A machine: its whole filesystem, from its root, as its user would.
  const Machine& machine = *entry.machine;
  UniqueFd root(open(machine.RootPath().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root || !machine.Alive()) {
    return absl::FailedPreconditionError("the session's sandbox is gone, and its files with it");
  }
  const std::string home = entry.workspace_path.substr(1);
  const bool absolute = !path.empty() && path[0] == '/';
  std::string rel;
  if (absolute) {
    rel = path.substr(1);
  } else {
    rel = path.empty() ? home : absl::StrCat(home, "/", path);
  }
  const uid_t user = machine.program_host_uid();
  const gid_t group = machine.program_host_gid();
  auto present = [absolute, home, user, group](WorkspaceListing& e) {
    if (absolute) {
      e.path = "/" + e.path;
    } else if (e.path == home) {
      e.path = "";
    } else {
      e.path = absl::StartsWith(e.path, home + "/") ? e.path.substr(home.size() + 1) : "/" + e.path;
    }
    e.owner = e.uid == user ? "user" : "root";
    e.group = e.gid == group ? "user" : "root";
  };
  ScopedFsIds as_sandbox_user(user, group);
  return op(root.get(), rel, Resolve::kInRoot, present);
}

absl::StatusOr<WorkspaceListing> Engine::WriteFile(const std::string& tenant, const std::string& id,
                                                   const std::string& path, const std::string& data,
                                                   const FileMetadata& metadata) {
  ASSIGN_OR_RETURN(auto entry, Find(tenant, id));
  if (!metadata.empty() && entry->machine == nullptr) {
    return absl::InvalidArgumentError("file metadata needs a session with a shared workspace");
  }
  absl::StatusOr<WorkspaceListing> out = absl::InternalError("not run");
  RETURN_IF_ERROR(InFiles(*entry, path, [&](int root, const std::string& rel, Resolve resolve, const auto& present) {
    RETURN_IF_ERROR(WriteWorkspaceFile(root, rel, data, options_.limits.max_file_bytes, resolve, metadata));
    out = StatWorkspacePath(root, rel, resolve);
    if (out.ok()) present(*out);
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::unique_ptr<Engine::Upload>> Engine::StartUpload(const std::string& tenant,
                                                                    const std::string& id, const std::string& path,
                                                                    const FileMetadata& metadata) {
  ASSIGN_OR_RETURN(auto entry, Find(tenant, id));
  if (!metadata.empty() && entry->machine == nullptr) {
    return absl::InvalidArgumentError("file metadata needs a session with a shared workspace");
  }
  absl::StatusOr<UniqueFd> fd = absl::InternalError("not run");
  RETURN_IF_ERROR(InFiles(*entry, path, [&](int root, const std::string& rel, Resolve resolve, const auto&) {
    fd = OpenWorkspaceFileToWrite(root, rel, resolve, metadata);
    return absl::OkStatus();
  }));
  if (!fd.ok()) return fd.status();
  return std::unique_ptr<Upload>(new Upload(*this, std::move(entry), path, *std::move(fd)));
}

absl::Status Engine::Upload::Write(absl::string_view piece) {
  const int64_t max = engine_.options_.limits.max_file_bytes;
  if (written_ + static_cast<int64_t>(piece.size()) > max) {
    return absl::InvalidArgumentError(absl::StrCat("the file passed the server's maximum of ", max, " bytes"));
  }
  RETURN_IF_ERROR(WriteToWorkspaceFile(fd_.get(), piece, path_));
  written_ += static_cast<int64_t>(piece.size());
  entry_->Touch();
  return absl::OkStatus();
}

absl::StatusOr<WorkspaceListing> Engine::Upload::Finish() {
  fd_.Reset();
  absl::StatusOr<WorkspaceListing> out = absl::InternalError("not run");
  RETURN_IF_ERROR(engine_.InFiles(*entry_, path_, [&](int root, const std::string& rel, Resolve resolve,
                                                       const auto& present) {
    out = StatWorkspacePath(root, rel, resolve);
    if (out.ok()) present(*out);
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::string> Engine::ReadFile(const std::string& tenant, const std::string& id,
                                             const std::string& path) {
  ASSIGN_OR_RETURN(auto entry, Find(tenant, id));
  absl::StatusOr<std::string> out = absl::InternalError("not run");
  RETURN_IF_ERROR(InFiles(*entry, path, [&](int root, const std::string& rel, Resolve resolve, const auto&) {
    out = ReadWorkspaceFile(root, rel, options_.limits.max_file_bytes, resolve);
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::vector<WorkspaceListing>> Engine::ListFiles(const std::string& tenant,
                                                                const std::string& id,
                                                                const std::string& path, int max_depth) {
  ASSIGN_OR_RETURN(auto entry, Find(tenant, id));
  absl::StatusOr<std::vector<WorkspaceListing>> out = absl::InternalError("not run");
  RETURN_IF_ERROR(InFiles(*entry, path, [&](int root, const std::string& rel, Resolve resolve, const auto& present) {
    // Never an answer larger than gRPC may send (its own refusal would
    // reach the caller as "Sent message larger than max").
    const size_t budget = static_cast<size_t>(
        std::min<int64_t>(kMaxListingBytes, options_.limits.max_message_bytes() - (64 << 10)));
    out = ListWorkspace(root, rel, 10'000, max_depth, resolve, budget);
    if (out.ok()) {
      for (WorkspaceListing& e : *out) present(e);
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<WorkspaceListing> Engine::StatPath(const std::string& tenant, const std::string& id,
                                                  const std::string& path) {
  ASSIGN_OR_RETURN(auto entry, Find(tenant, id));
  absl::StatusOr<WorkspaceListing> out = absl::InternalError("not run");
  RETURN_IF_ERROR(InFiles(*entry, path, [&](int root, const std::string& rel, Resolve resolve, const auto& present) {
    out = StatWorkspacePath(root, rel, resolve);
    if (out.ok()) present(*out);
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<WorkspaceListing> Engine::MakeDirectory(const std::string& tenant, const std::string& id,
                                                       const std::string& path) {
  ASSIGN_OR_RETURN(auto entry, Find(tenant, id));
  absl::StatusOr<WorkspaceListing> out = absl::InternalError("not run");
  RETURN_IF_ERROR(InFiles(*entry, path, [&](int root, const std::string& rel, Resolve resolve, const auto& present) {
    out = MakeWorkspaceDirectory(root, rel, resolve);
    if (out.ok()) present(*out);
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<WorkspaceListing> Engine::MovePath(const std::string& tenant, const std::string& id,
                                                  const std::string& from, const std::string& to) {
  ASSIGN_OR_RETURN(auto entry, Find(tenant, id));
  absl::StatusOr<WorkspaceListing> out = absl::InternalError("not run");
  // Both paths from the same root: `to` is made relative to it the way
  // `from` is (a machine's root, or the workspace).
  std::string to_rel = to;
  if (entry->machine != nullptr) {
    to_rel = !to.empty() && to[0] == '/' ? to.substr(1)
                                         : absl::StrCat(entry->workspace_path.substr(1), to.empty() ? "" : "/", to);
  }
  RETURN_IF_ERROR(InFiles(*entry, from, [&](int root, const std::string& rel, Resolve resolve, const auto& present) {
    out = MoveWorkspacePath(root, rel, to_rel, resolve);
    if (out.ok()) {
      present(*out);
      // Named as the caller named its new place.
      if ((!to.empty() && to[0] == '/') != (!from.empty() && from[0] == '/')) out->path = to;
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::Status Engine::RemovePath(const std::string& tenant, const std::string& id, const std::string& path) {
  ASSIGN_OR_RETURN(auto entry, Find(tenant, id));
  absl::Status out = absl::InternalError("not run");
  RETURN_IF_ERROR(InFiles(*entry, path, [&](int root, const std::string& rel, Resolve resolve, const auto&) {
    out = RemoveWorkspacePath(root, rel, resolve);
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::shared_ptr<Machine>> Engine::StartMachine(ManagedSession& entry, Language language) {
  const int64_t default_mb = options_.limits.defaults.memory_mb;
  const SessionOptions& python = pools_.at({Language::kPython, default_mb})->options();
  SandboxSpec spec;
  spec.name = "machine";  // until NameSandboxes names it after its session
  spec.limits = pools_.at({language, default_mb})->options().limits;
  spec.limits.memory_bytes = entry.memory_mb << 20;
  // The workspace is a directory of the host's (a size-limited tmpfs),
  // bound into the machine: it outlives the machine's processes.
  ASSIGN_OR_RETURN(entry.workspace, SharedWorkspace::Create(executor_, SharedWorkspace::DefaultParent(),
                                                            options_.limits.tmpfs_mb << 20));
  if (!entry.workspace->size_limited()) {
    spdlog::warn("shared workspace {} is a plain directory (wardend may not mount a tmpfs): "
                 "its size is bounded by the host's disk only", entry.workspace->path());
  }
  // The session's cgroup carries its limits; the machine's nests in it.
  ASSIGN_OR_RETURN(entry.cgroup, executor_.CreateGroup({entry.memory_mb << 20, spec.limits.pids,
                                                        spec.limits.cpu_percent}));
  FilesystemSpec& fs = spec.filesystem;
  const SandboxTemplate* t = entry.sandbox_template.get();
  if (t != nullptr) {
    fs.root = t->root;
    fs.passwd_base = t->passwd;
    fs.group_base = t->group;
  }
  ASSIGN_OR_RETURN(entry.boot_id, BootId::Create(SharedWorkspace::DefaultParent()));
  fs.boot_id_source = entry.boot_id->path();
  fs.workspace = entry.workspace_path;
  fs.workspace_source = entry.workspace->path();
  fs.user_name = "user";
  fs.terminals = true;
  fs.dirs = {"/root"};
  for (const std::string& alias : entry.workspace_aliases) {
    // Relative, so the host never resolves it into its own tree.
    std::string link;
    for (size_t i = 1; i < static_cast<size_t>(std::count(alias.begin(), alias.end(), '/')); ++i) link += "../";
    fs.links.push_back({alias, link + entry.workspace_path.substr(1)});
  }
  fs.binds = python.binds;
  fs.binds.insert(fs.binds.end(), entry.volume_binds.begin(), entry.volume_binds.end());
  // Every language's kernel, so any of them can be a context (each kernel
  // directory once: some languages share one).
  std::set<std::string> kernel_dirs;
  for (Language l : kAllLanguages) {
    if (!kernel_dirs.insert(KernelSubdirectory(l)).second) continue;
    fs.binds.push_back({absl::StrCat(python.kernels_dir, "/", KernelSubdirectory(l)),
                        KernelMountPoint(l, /*machine=*/true), false});
  }
  fs.binds.push_back({absl::StrCat(python.kernels_dir, "/", kToolsSubdirectory), kToolsMountPoint, false});
  if (const std::string watch = HostWatchProgram(); !watch.empty()) {
    fs.binds.push_back({watch, kWatchProgramInSandbox, false});
  }
  if (!python.wheelhouse.empty()) fs.binds.push_back({python.wheelhouse, kWheelhouseMountPoint, false});
  fs.ca_bundle_source = python.ca_bundle;
  // One way out for the whole machine (its network namespace is one).
  if (network_ != nullptr && !entry.egress_gate) entry.egress_gate = network_->GateFactory()();
  // Cloned from the Python zygote when there is one: its interpreter then
  // runs Python contexts in place, warm.
  SpawnOptions spawn{.fork_server = t == nullptr ? python_zygote_ : nullptr,
                     .identity_slot = entry.workspace->identity_slot(),
                     .parent_cgroup = entry.cgroup.get(),
                     .egress = entry.egress_gate};
  auto machine = Machine::Start(executor_, spec, spawn);
  if (spawn.fork_server != nullptr && absl::IsUnavailable(machine.status())) {
    spawn.fork_server = nullptr;
    machine = Machine::Start(executor_, spec, spawn);
  }
  return machine;
}

void Engine::NameSandboxes(const ManagedSession& entry) {
  if (entry.session) entry.session->SetName(entry.id);
  if (entry.machine) (void)entry.machine->Retitle(entry.id);  // best effort, as SetName
}

absl::StatusOr<std::unique_ptr<Session>> Engine::StartWithSharedWorkspace(ManagedSession& entry,
                                                                         Language language) {
  ASSIGN_OR_RETURN(entry.machine, StartMachine(entry, language));
  return StartSharedSession(entry, language, "");
}

absl::StatusOr<std::unique_ptr<Session>> Engine::StartSharedSession(const ManagedSession& owner,
                                                                    Language language, const std::string& cwd) {
  SessionOptions options = pools_.at({language, options_.limits.defaults.memory_mb})->options();
  if (owner.sandbox_template != nullptr) {
    if (const std::string why = owner.sandbox_template->Unavailable(language); !why.empty()) {
      return absl::FailedPreconditionError(why);
    }
    options.sandbox_template = owner.sandbox_template;
  }
  options.machine = owner.machine;
  options.workspace = owner.workspace_path;
  options.cwd = cwd;
  options.env = owner.env;
  options.fork_server = nullptr;
  options.egress = nullptr;  // the machine's way out is its processes'
  return Session::Start(executor_, options);
}

absl::StatusOr<std::shared_ptr<ManagedSession>> Engine::SharedSession(const std::string& tenant,
                                                                      const std::string& id) const {
  ASSIGN_OR_RETURN(auto entry, Find(tenant, id));
  if (!entry->machine) {
    return absl::FailedPreconditionError(absl::StrCat(
        "session ", id, " has no shared workspace; create it with shared_workspace to give it "
        "contexts and commands"));
  }
  RETURN_IF_ERROR(entry->CheckRunning());
  entry->Touch();
  return entry;
}

absl::StatusOr<std::shared_ptr<ManagedSession>> Engine::Context(const ManagedSession& session,
                                                                const std::string& context_id) const {
  absl::MutexLock lock(&session.parts_mu);
  auto it = session.contexts.find(context_id);
  if (it == session.contexts.end()) {
    return absl::NotFoundError(absl::StrCat("session ", session.id, " has no context '", context_id,
                                            "'; list its contexts, or create one"));
  }
  return it->second;
}

absl::StatusOr<std::shared_ptr<ManagedSession>> Engine::CreateContext(const std::string& tenant,
                                                                      const std::string& session_id,
                                                                      std::optional<Language> language,
                                                                      const std::string& cwd) {
  ASSIGN_OR_RETURN(auto owner, SharedSession(tenant, session_id));
  if (!cwd.empty()) RETURN_IF_ERROR(ValidateSandboxPath(cwd));
  {
    absl::MutexLock lock(&owner->parts_mu);
    if (owner->contexts.size() + 1 >= kMaxContexts) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "session ", session_id, " already has ", kMaxContexts, " contexts, its maximum; remove one first"));
    }
  }
  auto context = std::make_shared<ManagedSession>();
  context->id = "c-" + SessionManager::RandomHex();
  context->tenant = tenant;
  context->language = language.value_or(Language::kPython);
  context->labels = owner->labels;
  context->created = absl::Now();
  context->set_expires(owner->expires());
  context->idle_timeout = owner->idle_timeout;
  context->cell_defaults = owner->cell_defaults;
  context->memory_mb = owner->memory_mb;
  context->cwd = cwd;
  context->workspace_path = owner->workspace_path;
  ASSIGN_OR_RETURN(context->session, StartSharedSession(*owner, context->language, cwd));
  context->Touch();
  absl::MutexLock lock(&owner->parts_mu);
  owner->contexts[context->id] = context;
  spdlog::info("session {} of tenant {}: context {} ({})", session_id, tenant, context->id,
               LanguageName(context->language));
  return context;
}

absl::StatusOr<std::vector<std::shared_ptr<ManagedSession>>> Engine::ListContexts(
    const std::string& tenant, const std::string& session_id) const {
  ASSIGN_OR_RETURN(auto owner, SharedSession(tenant, session_id));
  std::vector<std::shared_ptr<ManagedSession>> out = {owner};
  absl::MutexLock lock(&owner->parts_mu);
  for (const auto& [id, context] : owner->contexts) out.push_back(context);
  std::sort(out.begin() + 1, out.end(), [](const auto& a, const auto& b) { return a->created < b->created; });
  return out;
}

// PauseSession, ResumeSession.
absl::StatusOr<std::shared_ptr<ManagedSession>> Engine::PauseSession(const std::string& tenant,
                                                                     const std::string& id, bool keep_memory) {
  ASSIGN_OR_RETURN(auto entry, Find(tenant, id));
  if (!entry->machine || !entry->cgroup) {
    return absl::FailedPreconditionError(absl::StrCat(
        "session ", id, " has no shared workspace (and cgroup of its own): only such sessions pause"));
  }
  absl::MutexLock lock(&entry->pause_mu);
  if (entry->paused()) return absl::AlreadyExistsError(absl::StrCat("session ", id, " is already paused"));
  if (keep_memory) {
    // Everything stops where it is: interpreters, a running cell, commands.
    RETURN_IF_ERROR(entry->cgroup->SetFrozen(true));
    entry->pause = ManagedSession::Pause::kFrozen;
  } else {
    // E2B's filesystem-only pause, a shutdown: every process of the machine
    // ends now (interpreters, commands and what they left running), the
    // files stay (the workspace, /tmp, all the machine's own); a running
    // cell is interrupted. Resuming boots the interpreters afresh.
    for (const auto& interpreter : Interpreters(entry)) {
      if (interpreter->busy()) (void)interpreter->session->Interrupt();
    }
    RETURN_IF_ERROR(entry->machine->KillProcesses());
    // The init's kill(-1) is asked for, not yet done: the pause answers once
    // only the init is left, so nothing of before it outlives it (a resume
    // at once met a killed process still exiting, now and then).
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    for (;;) {
      ASSIGN_OR_RETURN(const int left, entry->cgroup->ProcessCount());
      if (left <= 1) break;
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "session ", id, ": ", left - 1, " processes still ran 5 s after the pause killed them"));
      }
      absl::SleepFor(absl::Milliseconds(1));
    }
    // And its commands have said so (ListCommands: not running).
    std::vector<std::shared_ptr<ManagedCommand>> commands;
    {
      absl::MutexLock parts(&entry->parts_mu);
      for (const auto& [command_id, command] : entry->commands) commands.push_back(command);
    }
    for (const auto& command : commands) {
      if (!command->command->WaitEnded(deadline)) {
        return absl::DeadlineExceededError(absl::StrCat(
            "session ", id, ": command ", command->id, " had not ended 5 s after the pause killed it"));
      }
    }
    entry->pause = ManagedSession::Pause::kFilesystemOnly;
  }
  const absl::Time now = absl::Now();
  entry->paused_remaining = std::max(entry->expires() - now, absl::ZeroDuration());
  entry->set_expires(now + absl::Seconds(options_.sessions.max_ttl_seconds));
  spdlog::info("session {} of tenant {} paused ({})", id, tenant, keep_memory ? "frozen" : "filesystem only");
  return entry;
}

absl::StatusOr<std::shared_ptr<ManagedSession>> Engine::ResumeSession(const std::string& tenant,
                                                                      const std::string& id) {
  ASSIGN_OR_RETURN(auto entry, Find(tenant, id));
  absl::MutexLock lock(&entry->pause_mu);
  if (!entry->paused()) return absl::FailedPreconditionError(absl::StrCat("session ", id, " is not paused"));
  RETURN_IF_ERROR(Resume(entry));
  spdlog::info("session {} of tenant {} resumed", id, tenant);
  return entry;
}

absl::Status Engine::Resume(const std::shared_ptr<ManagedSession>& entry) {
  if (entry->pause.load() == ManagedSession::Pause::kFrozen) RETURN_IF_ERROR(entry->cgroup->SetFrozen(false));
  if (entry->pause.load() == ManagedSession::Pause::kFilesystemOnly) {
    // A cold boot: a new boot id, and each interpreter starts afresh (their
    // cells interrupted at the pause have ended by now, or end as their
    // kernels are gone).
    RETURN_IF_ERROR(entry->boot_id->Renew());
    for (const auto& interpreter : Interpreters(entry)) {
      RETURN_IF_ERROR(interpreter->Begin(absl::Now() + absl::Seconds(10)));
      interpreter->End(/*used=*/false);
      RETURN_IF_ERROR(RestartEntry(*interpreter, /*clear_workspace=*/false));
    }
  }
  entry->pause = ManagedSession::Pause::kRunning;
  entry->set_expires(absl::Now() + std::max(entry->paused_remaining, absl::Seconds(1)));
  entry->Touch();
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<ManagedSession>> Engine::RestartContext(const std::string& tenant,
                                                                       const std::string& session_id,
                                                                       const std::string& context_id) {
  ASSIGN_OR_RETURN(auto owner, SharedSession(tenant, session_id));
  std::shared_ptr<ManagedSession> context = owner;
  if (context_id != session_id) {
    ASSIGN_OR_RETURN(context, Context(*owner, context_id));
  }
  RETURN_IF_ERROR(RestartEntry(*context, /*clear_workspace=*/false));
  return context;
}

absl::Status Engine::RemoveContext(const std::string& tenant, const std::string& session_id,
                                   const std::string& context_id) {
  ASSIGN_OR_RETURN(auto owner, SharedSession(tenant, session_id));
  if (context_id == session_id) {
    return absl::FailedPreconditionError(
        "a session's own interpreter is not removed on its own; close the session instead");
  }
  std::shared_ptr<ManagedSession> context;
  {
    absl::MutexLock lock(&owner->parts_mu);
    auto it = owner->contexts.find(context_id);
    if (it == owner->contexts.end()) {
      return absl::NotFoundError(absl::StrCat("session ", session_id, " has no context '", context_id, "'"));
    }
    context = it->second;
    owner->contexts.erase(it);
  }
  context->MarkClosed();
  if (context->busy()) (void)context->session->Interrupt();
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<ManagedCommand>> Engine::StartCommand(const RunCommandCall& call) {
  ASSIGN_OR_RETURN(auto owner, SharedSession(call.tenant, call.session_id));
  if (call.argv.empty() || call.argv[0].empty()) {
    return absl::InvalidArgumentError("a command needs a program: argv[0], e.g. /bin/bash");
  }
  if (call.wall_ms < 0) return absl::InvalidArgumentError("wall_ms must not be negative");
  size_t bytes = 0;
  for (const auto& a : call.argv) bytes += a.size();
  for (const auto& e : call.env) bytes += e.size();
  if (static_cast<int64_t>(bytes) > options_.limits.max_code_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("the command and its environment are ", bytes,
                                                   " bytes; the server's maximum is ",
                                                   options_.limits.max_code_bytes));
  }
  {
    absl::MutexLock lock(&owner->parts_mu);
    int live = 0;
    for (const auto& [id, c] : owner->commands) live += c->command->ended() ? 0 : 1;
    if (live >= kMaxLiveCommands) {
      return absl::ResourceExhaustedError(absl::StrCat("session ", call.session_id, " already runs ",
                                                       live, " commands, its maximum; kill one first"));
    }
  }
  RETURN_IF_ERROR(ValidateEnvironment(call.env));
  if (!call.cwd.empty() && call.cwd[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat("the command's cwd '", call.cwd, "' must be an absolute path"));
  }
  CommandSpec spec;
  spec.machine = owner->machine;
  spec.argv = call.argv;
  spec.env = MergeEnvironment(owner->env, call.env);
  spec.cwd = call.cwd.empty() ? owner->workspace_path : call.cwd;
  spec.wall_ms = call.wall_ms;
  spec.output_bytes = options_.limits.max.output_bytes;
  spec.stdin_open = call.stdin_open;
  spec.terminal = call.terminal;
  auto managed = std::make_shared<ManagedCommand>();
  managed->tag = call.tag;
  ASSIGN_OR_RETURN(managed->command, Command::Start(spec));
  managed->id = managed->command->pid();
  absl::MutexLock lock(&owner->parts_mu);
  // A pid names one process at a time: an ended command whose pid came back
  // round is forgotten.
  owner->commands[managed->id] = managed;
  for (auto it = owner->commands.begin(); owner->commands.size() > kKeptCommands && it != owner->commands.end();) {
    it = it->second->command->ended() ? owner->commands.erase(it) : std::next(it);
  }
  spdlog::info("audit tenant={} session={} command={} program={} args={}", call.tenant, call.session_id,
               managed->id, call.argv[0], call.argv.size() - 1);
  return managed;
}

absl::StatusOr<std::shared_ptr<ManagedCommand>> Engine::GetCommand(const std::string& tenant,
                                                                   const std::string& session_id,
                                                                   int id) const {
  ASSIGN_OR_RETURN(auto owner, SharedSession(tenant, session_id));
  absl::MutexLock lock(&owner->parts_mu);
  auto it = owner->commands.find(id);
  if (it == owner->commands.end()) {
    return absl::NotFoundError(absl::StrCat("session ", session_id, " has no command ", id,
                                            "; it may have ended long ago"));
  }
  return it->second;
}

absl::StatusOr<std::vector<std::shared_ptr<ManagedCommand>>> Engine::ListCommands(
    const std::string& tenant, const std::string& session_id) const {
  ASSIGN_OR_RETURN(auto owner, SharedSession(tenant, session_id));
  std::vector<std::shared_ptr<ManagedCommand>> out;
  absl::MutexLock lock(&owner->parts_mu);
  for (const auto& [id, command] : owner->commands) out.push_back(command);
  return out;
}

absl::StatusOr<Engine::WatchTarget> Engine::WatchTargetOf(const std::string& tenant,
                                                          const std::string& session_id,
                                                          const std::string& path) {
  ASSIGN_OR_RETURN(auto owner, SharedSession(tenant, session_id));
  std::string dir = path;
  if (dir.empty() || dir[0] != '/') dir = dir.empty() ? owner->workspace_path : absl::StrCat(owner->workspace_path, "/", dir);
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  // It must be a directory the sandbox's user can see.
  ASSIGN_OR_RETURN(WorkspaceListing listing, StatPath(tenant, session_id, dir));
  if (listing.type != 'd') {
    return absl::FailedPreconditionError(absl::StrCat("'", path, "' is not a directory: watch a directory"));
  }
  return WatchTarget{owner->machine, dir};
}

absl::StatusOr<std::shared_ptr<ManagedSession>> Engine::SetSessionTtl(const std::string& tenant,
                                                                      const std::string& id,
                                                                      int64_t ttl_seconds) {
  const int64_t max = options_.sessions.max_ttl_seconds;
  if (ttl_seconds < 0 || ttl_seconds > max) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ttl_seconds must be between 0 (its TTL ends now) and the server's maximum of ", max));
  }
  // 0: the TTL ends now, and the reaper does what its end does (closes the
  // session, or pauses it) at its next round, within a second (E2B's
  // set_timeout(0)).
  RETURN_IF_ERROR(Find(tenant, id).status());
  RETURN_IF_ERROR(sessions_.SetExpires(tenant, id, absl::Now() + absl::Seconds(ttl_seconds)));
  return sessions_.Get(tenant, id);
}

std::shared_ptr<const egress::Policy> Engine::PoolNetwork(Language language, int64_t memory_mb) const {
  auto it = pool_networks_.find({language, memory_mb ? memory_mb : options_.limits.defaults.memory_mb});
  return it == pool_networks_.end() ? nullptr : it->second;
}

void Engine::BindNetwork(ManagedSession& entry) {
  if (network_ == nullptr || !entry.egress_gate) return;
  std::shared_ptr<const egress::Policy> own;
  {
    absl::MutexLock lock(&entry.network_mu);
    own = entry.network;
  }
  network_->Bind(entry.egress_gate.get(), entry.id, entry.tenant, own, entry.pool_network);
}

absl::StatusOr<std::shared_ptr<ManagedSession>> Engine::UpdateNetwork(const std::string& tenant, const std::string& id,
                                                                      std::optional<egress::PolicySpec> network) {
  if (network_ == nullptr) return absl::FailedPreconditionError("this wardend runs without an egress proxy");
  ASSIGN_OR_RETURN(auto entry, Find(tenant, id));
  std::shared_ptr<const egress::Policy> policy;
  if (network) {
    ASSIGN_OR_RETURN(policy, network_->SessionPolicy(tenant, *network));
  }
  {
    absl::MutexLock lock(&entry->network_mu);
    entry->network = policy;
    const egress::Policy* effective = policy ? policy.get() : entry->pool_network.get();
    entry->secret_env = network_->SecretEnvironment(tenant, effective);
    if (effective != nullptr) entry->secret_env.push_back("PIP_NO_INDEX=0");
  }
  BindNetwork(*entry);
  entry->Touch();
  spdlog::info("session {} of tenant {}: network policy {}", id, tenant, policy ? "replaced" : "removed");
  return entry;
}

absl::StatusOr<Engine::PortConnection> Engine::ConnectPort(const std::optional<std::string>& tenant,
                                                           const std::string& id, int port,
                                                           const std::string& traffic_token, absl::Time deadline) {
  if (port < 1 || port > 65535) return absl::InvalidArgumentError(absl::StrCat("port ", port, " is not 1 to 65535"));
  if (port == kEgressPort) {
    return absl::InvalidArgumentError(absl::StrCat("port ", port, " is the sandbox's egress proxy, not a server of its own"));
  }
  std::shared_ptr<ManagedSession> entry;
  if (tenant) {
    ASSIGN_OR_RETURN(entry, Find(*tenant, id));
  } else {
    // Without the tenant's token: the session's own traffic token, or its
    // ports are public. Anything else is NOT_FOUND, as an unknown id.
    // (Saying that an id exists tells nothing: ids are 96 random bits.)
    entry = sessions_.GetOfAnyTenant(id);
    if (entry == nullptr) {
      return absl::NotFoundError(absl::StrCat("no session '", id, "'; it may have expired or been closed"));
    }
    const bool token_ok = !traffic_token.empty() && ConstantTimeEquals(traffic_token, entry->traffic_token);
    if (!token_ok && !entry->public_ports) {
      return absl::PermissionDeniedError(absl::StrCat(
          "session ", id, "'s ports need the tenant's token or the session's traffic token"));
    }
  }
  if (entry->paused()) {
    // E2B's autoResume: a request to a port resumes the session that asked
    // for it, when its servers are there, frozen. A filesystem-only pause
    // ended them: E2B too resumes that one only when asked to.
    absl::MutexLock lock(&entry->pause_mu);
    if (entry->paused() && !entry->resume_on_port_request) {
      return absl::FailedPreconditionError(absl::StrCat(
          "session ", id, " is paused: resume it first (ResumeSession; E2B: connect), or create it with "
          "ports.resume_on_request (E2B: lifecycle.autoResume) so that a request to its ports resumes it"));
    }
    if (entry->paused() && entry->pause.load() != ManagedSession::Pause::kFrozen) {
      return absl::FailedPreconditionError(absl::StrCat(
          "session ", id, " was paused without its memory, which ended its servers, so a request does not "
          "resume it: resume it (ResumeSession; E2B: connect) and start them again"));
    }
    if (entry->paused()) {
      RETURN_IF_ERROR(Resume(entry));
      spdlog::info("session {} of tenant {} resumed by a request to its port {}", id, entry->tenant, port);
    }
  }
  // A hibernated session wakes for its port, as for any call.
  RETURN_IF_ERROR(WakeForFiles(*entry));
  entry->Touch();
  absl::StatusOr<UniqueFd> fd = entry->machine ? entry->machine->ConnectToPort(static_cast<uint16_t>(port), deadline)
                                               : entry->session->ConnectToPort(static_cast<uint16_t>(port), deadline);
  if (!fd.ok()) return fd.status();
  PortConnection out;
  out.fd = *std::move(fd);
  out.host_header = absl::StrReplaceAll(entry->port_host_header, {{"${PORT}", absl::StrCat(port)}});
  return out;
}

egress::Usage Engine::NetworkUsage(const ManagedSession& entry) const {
  return entry.egress_gate ? Network::UsageOf(entry.egress_gate.get()) : egress::Usage();
}

bool Engine::Ready() const {
  for (const auto& [profile, pool] : pools_) {
    if (pool->size() > 0 && pool->Stats().ready == 0) return false;
  }
  for (const auto& [profile, pool] : template_pools_) {
    if (pool->size() > 0 && pool->Stats().ready == 0) return false;
  }
  return template_pool_errors_.empty();
}

absl::Status Engine::Health() const {
  for (const auto& [profile, pool] : pools_) RETURN_IF_ERROR(pool->Health());
  for (const absl::Status& broken : template_pool_errors_) return broken;
  for (const auto& [profile, pool] : template_pools_) RETURN_IF_ERROR(pool->Health());
  return absl::OkStatus();
}

std::vector<SessionOptions> Engine::ConfiguredProfiles() const {
  std::vector<SessionOptions> profiles;
  const int64_t default_mb = options_.limits.defaults.memory_mb;
  for (Language language : kAllLanguages) {
    for (const PoolOptions& pool : options_.pools) {
      auto parsed = ParseLanguage(pool.language);
      if (!parsed.ok() || *parsed != language) continue;
      profiles.push_back(pools_.at({language, default_mb})->options());
      break;
    }
  }
  return profiles;
}

EngineStats Engine::Stats() const {
  EngineStats stats;
  stats.sessions = sessions_.size();
  for (const auto& entry : sessions_.All()) {
    if (entry->session != nullptr && !entry->session->released()) ++stats.live_sessions;
    stats.memory_committed_bytes += entry->memory_mb << 20;
  }
  stats.admission = admission_.Stats();
  stats.starts = starts_.Stats();
  stats.executing = stats.admission.running;
  for (const auto& [profile, pool] : pools_) {
    const auto& [language, memory_mb] = profile;
    std::string name = LanguageName(language);
    if (memory_mb != options_.limits.defaults.memory_mb) absl::StrAppend(&name, ":", memory_mb, "mb");
    stats.pools[name] = pool->Stats();
  }
  for (const auto& [profile, pool] : template_pools_) {
    const auto& [language, memory_mb, template_name] = profile;
    std::string name = absl::StrCat(LanguageName(language), "@", template_name);
    if (memory_mb != options_.limits.defaults.memory_mb) absl::StrAppend(&name, ":", memory_mb, "mb");
    stats.pools[name] = pool->Stats();
  }
  return stats;
}

}  // namespace warden
