// DaemonOptions: everything wardend can be configured with, as small nested
// structs with the built-in defaults. Filled from the JSON configuration file
// (docs/operations.md documents the schema) and then from flags, which win.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fronts/host/http_settings.h"
#include "sandbox/sandbox.h"

namespace warden {

struct CellLimitsOptions {
  int64_t wall_ms = 30'000;
  int64_t cpu_ms = 30'000;
  int64_t memory_mb = 512;
  int64_t output_bytes = 1 << 20;
};

struct LimitsOptions {
  CellLimitsOptions defaults;  // used where a request says 0
  CellLimitsOptions max = {300'000, 300'000, 4096, 16 << 20};  // requests above are refused
  int64_t max_code_bytes = 1 << 20;
  int64_t max_file_bytes = 64LL << 20;  // one file up or down
  int64_t pids = 64;                    // per sandbox
  int64_t tmpfs_mb = 64;                // each of /tmp, /dev/shm, /workspace
  // The largest gRPC message wardend receives or sends: code and a file,
  // and room for the rest of the request.
  int64_t max_message_bytes() const { return max_code_bytes + max_file_bytes + (1 << 20); }
};

struct SessionsOptions {
  int max_total = 1000;
  int max_per_tenant = 100;
  int64_t default_ttl_seconds = 3600;
  int64_t max_ttl_seconds = 86'400;
  int64_t default_idle_timeout_seconds = 600;
  // A Python session idle this long is snapshotted to disk and its sandbox
  // released, if its state can be captured completely; the next call
  // restores it (docs/operations.md). 0: never.
  int64_t hibernate_after_seconds = 0;
  // At most this many sessions hold a sandbox at once: before one more is
  // created or woken, the least recently used idle Python sessions
  // hibernate (whatever hibernate_after_seconds says). Each live session
  // holds about ten of wardend's descriptors, a hibernated one none, so
  // this is how many sessions fit under RLIMIT_NOFILE when all are called.
  // 0: no bound.
  int64_t max_live = 0;
};

// Session snapshots (SnapshotSession, ForkSession, hibernation).
struct SnapshotsOptions {
  // One directory per tenant beneath it, 0700, snapshots 0600; it survives
  // restarts of wardend. Empty: /var/lib/warden/snapshots.
  std::string dir;
  // What one tenant's snapshots (hibernated sessions included) may hold on
  // disk; beyond it RESOURCE_EXHAUSTED (and idle sessions stay live).
  int64_t max_bytes_per_tenant = 1LL << 30;
  std::string Directory() const { return dir.empty() ? "/var/lib/warden/snapshots" : dir; }
};

// Where sandboxes' connections may go, as the configuration file writes a
// policy (egress/policy.h: entries, precedence).
struct NetworkPolicyOptions {
  bool allow_by_default = false;
  std::vector<std::string> allow, deny;
  bool empty() const { return !allow_by_default && allow.empty() && deny.empty(); }
};

// The most a tenant's sessions may reach (docs/operations.md "egress"):
// whatever a session or pool asks for is narrowed to it.
struct EgressCeilingOptions {
  NetworkPolicyOptions policy;
  // Sessions may bind secrets of their own (CreateSessionRequest.network.secrets,
  // E2B's network rules), to hosts this ceiling lets them reach.
  bool session_secrets = true;
  int64_t max_bytes_per_session = 0;    // egress bytes over a session's life; 0: no bound
  int max_connections_per_session = 64;  // open at once
};

// A secret the operator binds to hosts for some tenants' sessions.
struct EgressSecretOptions {
  std::string name;        // the environment variable the placeholder is in
  std::string value_file;  // the value, read at start (0600, root's or wardend's own)
  std::vector<std::string> hosts;
  std::vector<std::string> tenants;  // empty: every tenant
};

// The egress proxy (egress/): the sandboxes' only way out.
struct EgressOptions {
  // Off: every sandbox still finds the proxy, which answers each attempt
  // saying the network is off here and which setting turns it on.
  bool enabled = false;
  // Names the proxy resolves itself, before DNS (a test's hosts, an
  // internal mirror): name -> addresses.
  std::map<std::string, std::vector<std::string>> hosts;
  std::vector<std::string> name_servers;  // "IP[:PORT]"; empty: /etc/resolv.conf
  // Internal networks (loopback, private, link-local, ...) the proxy may
  // reach all the same; never by default.
  std::vector<std::string> allow_internal;
  std::string upstream_ca_file;               // empty: the host's trust store
  std::vector<std::string> sandbox_ca_files;  // more CAs the sandboxes trust
  // The interception CA (PEM); empty: kept in the state directory as
  // egress-ca.pem and egress-ca.key, or in memory without one.
  std::string ca_cert_file, ca_key_file;
  EgressCeilingOptions default_ceiling;                  // tenants not listed
  std::map<std::string, EgressCeilingOptions> tenants;   // by tenant
  std::vector<EgressSecretOptions> secrets;
  int max_connections_per_tenant = 256;
  int64_t connect_timeout_ms = 10'000;
  int64_t idle_timeout_ms = 600'000;
  int io_threads = 1;
};

// A warm pool of ready workers of one language and limits profile, for
// one-shot executions and new sessions asking for that profile.
struct PoolOptions {
  std::string language = "python";
  int size = 2;                   // workers kept ready at the least
  std::vector<std::string> warm;  // Python modules imported ahead of time
  int64_t memory_mb = 0;          // the profile's memory limit; 0: limits.defaults
  int max_size = 0;               // ready at the most, as demand grows (0: `size`, a fixed pool)
  // Host directory of wheels that `pip install` in this pool's sandboxes
  // installs from (python and bash pools); empty: none (docs/runtime.md).
  std::string wheelhouse;
  // Where its sandboxes may connect (one-shots, and sessions that bring no
  // policy of their own), within each tenant's ceiling; empty: nowhere.
  NetworkPolicyOptions network;
  // A public template ("template" in the file, docs/templates.md) whose
  // root filesystem and interpreter the pool's workers run in; empty: the
  // host's runtime.
  std::string template_name;
};

// Templates (docs/templates.md): root filesystems made from OCI images, in
// the image store (images/template_store.h).
struct TemplatesOptions {
  // The store (made 0700). Empty: /var/lib/warden/templates, or in a fleet
  // <fleet.shared_dir>/templates.
  std::string dir;
  // Tenants that manage the public templates through warden.v1 (import,
  // build, delete); "*": every tenant. Without auth every caller is the
  // tenant "default", the operator at the UNIX socket.
  std::vector<std::string> operators = {"default"};
  // Tenants that may import, build and delete templates of their own
  // (every tenant uses the public ones); "*": every tenant.
  std::vector<std::string> tenants;
  // A tenant's own templates together (unpacked bytes, count).
  int64_t max_bytes_per_tenant = 8LL << 30;
  int max_per_tenant = 16;
  // One image as it is sent (the archive), and one image unpacked.
  int64_t max_archive_bytes = 16LL << 30;
  int64_t max_image_bytes = 32LL << 30;
  // BuildTemplate (buildah on this host; RUN without network, in a cgroup
  // of wardend's with these limits).
  bool build = true;
  int64_t build_timeout_ms = 1'800'000;
  int64_t build_memory_mb = 4096;
  int64_t build_pids = 1024;
  // The host ids a build's user namespace maps (65536 from here; its root
  // is the first): ids nothing else on the host uses.
  int64_t build_host_id_base = 1'000'000;
};

// Volumes (docs/templates.md, "Volumes"): tenants' directory trees that
// outlive sessions, each a file system image of its own.
struct VolumesOptions {
  // Empty: /var/lib/warden/volumes, or in a fleet <fleet.shared_dir>/volumes.
  std::string dir;
  int64_t default_bytes = 1LL << 30;  // a volume's quota when the request names none
  int64_t max_bytes = 64LL << 30;     // the most one volume may hold
  int64_t default_files = 65'536;
  int64_t max_files = 4'000'000;
  // A tenant's volumes together: the quotas they reserve, and how many.
  int64_t max_bytes_per_tenant = 256LL << 30;
  int max_per_tenant = 32;
  // Volumes one session may mount.
  int max_mounts = 8;
};

// Requests wait in lines (admission/), each until its own deadline, with
// no thread held: a queued request costs about 16 KiB of wardend's memory, nearly all gRPC's open call
// (docs/operations.md, "Queueing"). Refused at once, saying when to retry:
// a full line, and a request its line would keep past its deadline at the
// rate the line has been served (measured).
struct QueueOptions {
  // Requests waiting for a warm worker of one pool (new sessions, one-shots
  // given their turn, sessions waking), all tenants together; and of one
  // tenant waiting to start a sandbox no pool holds (a session with a
  // shared workspace). Beyond it: RESOURCE_EXHAUSTED.
  int max_depth = 10'000;
  // How long a request that sets no deadline of its own may wait (for its
  // turn, a worker, a busy session); a request's deadline replaces it.
  int64_t max_wait_ms = 60'000;
  // Executions of one tenant waiting for their turn (past
  // max_concurrent_per_tenant); beyond: RESOURCE_EXHAUSTED with a retry hint.
  int max_waiting_per_tenant = 1024;
  // Executions of all tenants at once; those past it wait, tenants served in
  // turn. 0: only the per-tenant limit.
  int max_running = 0;
};

struct TlsOptions {
  std::string cert_file;       // PEM; TCP listeners need these unless insecure
  std::string key_file;
  std::string client_ca_file;  // set: clients must present a certificate (mTLS)
};

struct AuthOptions {
  // JSON {"tokens": [{"token": "...", "tenant": "..."}]}. Empty: no
  // authentication, every caller is the tenant "default" (fine on a UNIX
  // socket only the owner can open).
  std::string tokens_file;
};

struct LogOptions {
  std::string format = "text";  // text | json
  std::string level = "info";   // trace | debug | info | warn | error
};

// The agent service's model server (docs/agent.md): any OpenAI-compatible
// chat-completions endpoint. The agent is off while base_url is empty.
struct LlmOptions {
  std::string base_url;      // e.g. "http://127.0.0.1:8000/v1"
  std::string model;
  std::string api_key_env;   // the API key is read from this variable...
  std::string api_key_file;  // ...or this file; never logged
  int64_t request_timeout_ms = 120'000;
  int max_tokens = 2048;     // per reply
  double temperature = 0.2;
  bool stream = true;
  int max_retries = 4;       // on 429, 5xx and timeouts
  std::string tools = "auto";  // auto | native | text (fenced blocks)
  // What `tool_choice` asks of the model when tools are offered: auto,
  // required, or a tool's name (e.g. execute_code), which small local
  // models that never call a tool on their own need.
  std::string tool_choice = "auto";
};

struct AgentOptions {
  LlmOptions llm;
  int default_max_iterations = 12;  // budgets where a request says 0...
  int max_iterations = 100;         // ...and the most it may ask for
  int64_t default_max_wall_ms = 600'000;
  int64_t max_wall_ms = 3'600'000;
  int64_t default_max_tokens = 200'000;
  int64_t max_tokens = 5'000'000;
  int64_t max_observation_bytes = 8'000;  // of each result the model is sent
};

// The Python fork server (warden-python-zygote): Python sessions and pool
// workers are cloned from it, with the python pool's warm modules already
// imported, instead of starting an interpreter each.
struct ZygoteOptions {
  bool enabled = true;
  std::string program;  // empty: warden-python-zygote beside wardend
};

// wardend as a node of a fleet behind warden-gateway (docs/fleet.md).
struct FleetOptions {
  // This node's id, in every session id it makes: a DNS label (a-z, 0-9,
  // '-'). The environment's WARDEN_NODE_ID wins (the Swarm node id, the
  // Kubernetes node name), made a label by NodeIdFrom. Empty: not in a
  // fleet, and session ids carry no node.
  std::string node_id;
  std::string node_name;  // as WARDEN_NODE_ID gave it, before NodeIdFrom (not read from the file)
  // Shared snapshot storage: a directory every node mounts (NFS, a
  // ReadWriteMany volume). Draining nodes hand their sessions over through
  // it and the session ledger in it fences a node that returns. Set with
  // node_id; snapshots.dir then defaults to <shared_dir>/snapshots.
  std::string shared_dir;
  // The gateway's client certificate: the CA that signed it (and nothing
  // else) and the name it carries (a DNS SAN, or the CN). Only a peer with
  // it may forward a tenant or use the Node service; set both, with
  // tls.cert_file and tls.key_file, for a node reachable from the network.
  std::string gateway_ca_file;
  std::string gateway_name;
  // This wardend process among those that ran as this node: WARDEN_EPOCH
  // (the Swarm task id, the Kubernetes pod uid), else random at start. Not
  // read from the configuration file.
  std::string epoch;
  // SIGTERM: how long running executions may take to finish before the
  // sessions are handed over (what is left of stop_grace_period after that
  // goes to the handover itself).
  int64_t drain_wait_ms = 5'000;

  bool enabled() const { return !node_id.empty(); }
  // A node name (a Kubernetes node name may hold dots and capitals) as the
  // id session ids carry: lower case, '.' and '_' as '-', and a longer name
  // cut to kMaxNodeIdBytes with a digest of the whole; an error if what is
  // left is not a DNS label.
  static constexpr size_t kMaxNodeIdBytes = 36;
  static absl::StatusOr<std::string> NodeIdFrom(const std::string& name);
};

struct DaemonOptions {
  // "unix:PATH" or "HOST:PORT". TCP needs TLS, unless it is loopback and
  // allow_insecure_loopback is set.
  std::vector<std::string> listen = {"unix:/run/warden/wardend.sock"};
  bool allow_insecure_loopback = false;
  // "HOST:PORT" for the HTTP front (fronts/): MCP at /mcp and /metrics,
  // /healthz, /readyz, all on one port; empty: off. Plain HTTP: off
  // loopback it needs auth.tokens_file (and a TLS proxy in front).
  std::string http_listen;
  // "HOST:PORT" for /metrics, /healthz and /readyz alone (no protocol
  // fronts, no token), e.g. for a scrape port apart from http_listen.
  std::string admin_listen;
  // The HTTP front (http_listen): who may call it from a browser, and how
  // many connections, streams and threads it holds (shared with
  // warden-gateway).
  fronts::HttpSettings http;
  TlsOptions tls;
  AuthOptions auth;
  LimitsOptions limits;
  SessionsOptions sessions;
  SnapshotsOptions snapshots;
  TemplatesOptions templates;
  VolumesOptions volumes;
  std::vector<PoolOptions> pools = {{"python", 2, {"numpy", "pandas"}}, {"javascript", 1, {}},
                                    {"bash", 1, {}}};
  QueueOptions queue;
  int max_concurrent_per_tenant = 16;
  int64_t shutdown_grace_ms = 10'000;
  // Under warden-keeper only (docs/operations.md): SIGTERM detaches from the
  // keeper and keeps every session for the next wardend (true), or ends
  // them all, as a stop for real does (false).
  bool keep_sessions = true;
  // wardend --drop-sessions: end every session the keeper holds at start.
  bool drop_sessions = false;
  FleetOptions fleet;
  EgressOptions egress;
  LogOptions log;
  ExecutorOptions executor;  // cgroups, degraded mode, host ids
  std::string kernels_dir;   // empty: the built-in location
  ZygoteOptions zygote;
  AgentOptions agent;
  // Where wardend keeps its lock and its crash-recovery record (StateDir).
  // Empty: the directory of the first UNIX listen socket (/run/warden by
  // default); with only TCP listeners and no state_dir there is no lock and
  // nothing is reclaimed after a crash.
  std::string state_dir;
  // A group whose members may connect to the UNIX listen sockets (mode 0660,
  // owned by root and this group), e.g. "warden" as the Debian package makes
  // it. Empty: mode 0600, only wardend's own user.
  std::string socket_group;

  // Reads a JSON configuration file over the defaults; unknown keys are
  // errors (a typo must not silently fall back to a default).
  static absl::StatusOr<DaemonOptions> FromFile(const std::string& path);
  absl::Status Validate() const;
  // state_dir, or what it defaults to (empty: none).
  std::string StateDirectory() const;
  // snapshots.dir, or what it defaults to (in a fleet: in the shared storage).
  std::string SnapshotDirectory() const;
  // templates.dir and volumes.dir, or what they default to, the same way.
  std::string TemplateDirectory() const;
  std::string VolumeDirectory() const;
};

// True for a TCP listen address ("HOST:PORT") whose host is loopback, by the
// same parser Validate() uses: 127.0.0.0/8, ::1, ::ffff:127.x, localhost.
bool IsLoopbackListenAddress(const std::string& address);

}  // namespace warden
