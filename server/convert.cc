#include "server/convert.h"

#include <map>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "server/fleet_hint.h"
#include "server/network.h"

namespace warden {
namespace {

bool IsBinaryMime(const std::string& mime) {
  return (absl::StartsWith(mime, "image/") && mime != "image/svg+xml") || mime == "application/pdf" ||
         mime == "application/octet-stream";
}

}  // namespace

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl's canonical codes are gRPC's, value for value. A fleet's hint for
  // the gateway rides in the details (server/fleet_hint.h).
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()),
                      ErrorDetailsOf(status));
}

v1::Outcome ToProto(Outcome outcome) {
  switch (outcome) {
    case Outcome::kOk: return v1::OUTCOME_OK;
    case Outcome::kNonzeroExit: return v1::OUTCOME_NONZERO_EXIT;
    case Outcome::kSignaled: return v1::OUTCOME_SIGNALED;
    case Outcome::kWallTimeout: return v1::OUTCOME_WALL_TIMEOUT;
    case Outcome::kCpuTimeout: return v1::OUTCOME_CPU_TIMEOUT;
    case Outcome::kMemoryLimit: return v1::OUTCOME_MEMORY_LIMIT;
    case Outcome::kOutputLimit: return v1::OUTCOME_OUTPUT_LIMIT;
    case Outcome::kViolation: return v1::OUTCOME_VIOLATION;
    case Outcome::kSetupError: return v1::OUTCOME_SETUP_ERROR;
    case Outcome::kInternal: return v1::OUTCOME_INTERNAL;
    case Outcome::kError: return v1::OUTCOME_ERROR;
    case Outcome::kInterrupted: return v1::OUTCOME_INTERRUPTED;
    case Outcome::kSessionLost: return v1::OUTCOME_SESSION_LOST;
  }
  return v1::OUTCOME_INTERNAL;
}

absl::StatusOr<std::optional<Language>> FromProto(v1::Language language) {
  switch (language) {
    case v1::LANGUAGE_UNSPECIFIED: return std::optional<Language>();
    case v1::LANGUAGE_PYTHON: return std::optional<Language>(Language::kPython);
    case v1::LANGUAGE_JAVASCRIPT: return std::optional<Language>(Language::kJavaScript);
    case v1::LANGUAGE_BASH: return std::optional<Language>(Language::kBash);
    case v1::LANGUAGE_TYPESCRIPT: return std::optional<Language>(Language::kTypeScript);
    case v1::LANGUAGE_R: return std::optional<Language>(Language::kR);
    case v1::LANGUAGE_JAVA: return std::optional<Language>(Language::kJava);
    default:
      return absl::InvalidArgumentError(
          "unknown language: use LANGUAGE_PYTHON, LANGUAGE_JAVASCRIPT, LANGUAGE_BASH, LANGUAGE_TYPESCRIPT, "
          "LANGUAGE_R or LANGUAGE_JAVA");
  }
}

v1::Language ToProto(Language language) {
  switch (language) {
    case Language::kPython: return v1::LANGUAGE_PYTHON;
    case Language::kJavaScript: return v1::LANGUAGE_JAVASCRIPT;
    case Language::kBash: return v1::LANGUAGE_BASH;
    case Language::kTypeScript: return v1::LANGUAGE_TYPESCRIPT;
    case Language::kR: return v1::LANGUAGE_R;
    case Language::kJava: return v1::LANGUAGE_JAVA;
  }
  return v1::LANGUAGE_UNSPECIFIED;
}

v1::Result ToProto(const MimeBundle& bundle) {
  v1::Result result;
  for (const auto& [mime, data] : bundle) {
    std::string decoded;
    if (IsBinaryMime(mime) && absl::Base64Unescape(data, &decoded)) {
      (*result.mutable_data())[mime] = std::move(decoded);
    } else {
      (*result.mutable_data())[mime] = data;
    }
  }
  return result;
}

v1::Error ToProto(const CellError& error) {
  v1::Error out;
  out.set_name(error.ename);
  out.set_value(error.evalue);
  for (const std::string& line : error.traceback) out.add_traceback(line);
  return out;
}

void FillResponse(const CellResult& cell, const std::string& session_id, v1::ExecuteResponse* out) {
  out->set_outcome(ToProto(cell.outcome));
  out->set_stdout(cell.stdout_data);
  out->set_stderr(cell.stderr_data);
  out->set_stdout_truncated(cell.stdout_truncated);
  out->set_stderr_truncated(cell.stderr_truncated);
  for (const MimeBundle& display : cell.displays) *out->add_results() = ToProto(display);
  if (cell.result) {
    v1::Result* value = out->add_results();
    *value = ToProto(*cell.result);
    value->set_is_result(true);
  }
  if (cell.error) *out->mutable_error() = ToProto(*cell.error);
  out->set_execution_count(cell.execution_count);
  out->set_exit_code(cell.exit_code.value_or(-1));
  out->set_signal(cell.signal);
  out->set_wall_ms(cell.wall_ms);
  out->set_cpu_ms(cell.cpu_ms);
  out->set_peak_memory_bytes(cell.peak_memory_bytes);
  if (cell.violation) out->set_violation(*cell.violation);
  out->set_message(cell.message);
  out->set_session_id(session_id);
}

// A session's usage: of several processes, their common cgroup's, all of
// them together.
std::optional<CgroupUsage> SessionUsage(const ManagedSession& entry) {
  if (entry.cgroup != nullptr) {
    absl::StatusOr<CgroupUsage> whole = entry.cgroup->Usage();
    if (whole.ok()) return *whole;
    return std::nullopt;
  }
  return entry.session->Usage();
}

int64_t PeakMemoryBytes(const ManagedSession& entry) {
  // The cgroup's high-water mark.
  std::optional<CgroupUsage> usage = SessionUsage(entry);
  return usage ? usage->peak_memory_bytes : 0;
}

void FillSession(const ManagedSession& entry, v1::Session* out) {
  const absl::Time now = absl::Now();
  out->set_id(entry.id);
  out->set_language(ToProto(entry.language));
  out->set_state(StateOf(entry));
  for (const auto& [k, v] : entry.labels) (*out->mutable_labels())[k] = v;
  out->set_created_unix_ms(absl::ToUnixMillis(entry.created));
  out->set_age_ms(absl::ToInt64Milliseconds(now - entry.created));
  out->set_idle_ms(entry.busy() ? 0 : absl::ToInt64Milliseconds(now - entry.last_used()));
  if (std::optional<CgroupUsage> usage = SessionUsage(entry)) {
    out->set_memory_bytes(usage->peak_memory_bytes);
    out->set_memory_current_bytes(usage->memory_bytes);
    out->set_cpu_used_ns(usage->cpu_usage_ns);
  }
  if (entry.workspace != nullptr) {
    if (auto disk = entry.workspace->Disk(); disk.ok()) {
      out->set_workspace_used_bytes(disk->used_bytes);
      out->set_workspace_limit_bytes(disk->limit_bytes);
    }
  }
  out->set_execution_count(entry.session->execution_count());
  out->set_expires_unix_ms(absl::ToUnixMillis(entry.expires()));
  out->set_lost_reason(entry.session->lost_reason());
  out->mutable_limits()->set_wall_ms(entry.cell_defaults.wall_ms);
  out->mutable_limits()->set_cpu_ms(entry.cell_defaults.cpu_ms);
  out->mutable_limits()->set_memory_mb(entry.memory_mb);
  out->mutable_limits()->set_output_bytes(entry.cell_defaults.output_bytes);
  out->set_shared_workspace(entry.machine != nullptr);
  if (entry.sandbox_template != nullptr) {
    out->set_template_(entry.sandbox_template->name);
    out->set_template_digest(entry.sandbox_template->digest);
  }
  for (const VolumeMountRecord& v : entry.volumes) {
    v1::VolumeMount* mount = out->add_volumes();
    mount->set_volume(v.volume);
    mount->set_path(v.path);
    mount->set_read_only(v.read_only);
  }
  if (std::optional<CellResult> cell = entry.detached_cell()) {
    FillResponse(*cell, entry.id, out->mutable_detached_cell());
  }
  {
    absl::MutexLock lock(&entry.network_mu);
    if (entry.network) FillNetworkPolicy(entry.network->Describe(), out->mutable_network());
  }
  if (entry.egress_gate) {
    const egress::Usage usage = Network::UsageOf(entry.egress_gate.get());
    v1::NetworkUsage* u = out->mutable_network_usage();
    u->set_bytes_out(usage.bytes_out);
    u->set_bytes_in(usage.bytes_in);
    u->set_connections(usage.connections);
    u->set_refused(usage.refused);
    u->set_open(usage.open);
  }
  out->mutable_ports()->set_public_(entry.public_ports);
  out->mutable_ports()->set_host_header(entry.port_host_header);
  out->mutable_ports()->set_resume_on_request(entry.resume_on_port_request);
  out->set_traffic_token(entry.traffic_token);
}

egress::PolicySpec FromProto(const v1::NetworkPolicy& policy) {
  egress::PolicySpec spec;
  spec.allow_by_default = policy.allow_by_default();
  spec.allow.assign(policy.allow().begin(), policy.allow().end());
  spec.deny.assign(policy.deny().begin(), policy.deny().end());
  for (const v1::HeaderRule& r : policy.header_rules()) {
    egress::HeaderRule rule{r.host(), {}};
    // A map: ordered by name, so a rule reads the same every time.
    std::map<std::string, std::string> sorted(r.headers().begin(), r.headers().end());
    for (const auto& [name, value] : sorted) rule.headers.emplace_back(name, value);
    spec.header_rules.push_back(std::move(rule));
  }
  for (const v1::SecretBinding& s : policy.secrets()) {
    spec.secrets.push_back({s.name(), s.value(), {s.hosts().begin(), s.hosts().end()}});
  }
  return spec;
}

void FillNetworkPolicy(const egress::PolicySpec& spec, v1::NetworkPolicy* out) {
  out->set_allow_by_default(spec.allow_by_default);
  for (const std::string& a : spec.allow) out->add_allow(a);
  for (const std::string& d : spec.deny) out->add_deny(d);
  for (const egress::HeaderRule& r : spec.header_rules) {
    v1::HeaderRule* rule = out->add_header_rules();
    rule->set_host(r.host);
    for (const auto& [name, value] : r.headers) (*rule->mutable_headers())[name] = value;
  }
  for (const egress::PolicySpec::Secret& s : spec.secrets) {
    v1::SecretBinding* secret = out->add_secrets();
    secret->set_name(s.name);
    secret->set_value(s.value);
    for (const std::string& h : s.hosts) secret->add_hosts(h);
  }
}

void FillFileInfo(const WorkspaceListing& e, v1::FileInfo* info) {
  info->set_path(e.path);
  info->set_size(e.size);
  info->set_type(e.type == 'f' ? "file" : e.type == 'd' ? "directory" : e.type == 'l' ? "symlink" : "other");
  info->set_mode(e.mode);
  info->set_modified_unix_ms(e.modified_unix_ms);
  info->set_symlink_target(e.symlink_target);
  info->mutable_metadata()->insert(e.metadata.begin(), e.metadata.end());
  info->set_owner(e.owner);
  info->set_group(e.group);
}

void FillSnapshot(const SnapshotRecord& record, v1::Snapshot* out) {
  out->set_snapshot_id(record.id);
  out->set_session_id(record.session_id);
  out->set_language(ToProto(record.language));
  out->set_created_unix_ms(absl::ToUnixMillis(record.created));
  out->set_size_bytes(record.size_bytes);
  out->set_execution_count(record.execution_count);
  out->mutable_left_out()->insert(record.left_out.begin(), record.left_out.end());
  out->set_complete(record.left_out.empty());
  out->set_name(record.name);
  out->set_shared_workspace(record.shared_workspace);
  out->set_template_(record.template_name);
  out->set_template_digest(record.template_digest);
  for (const VolumeMountRecord& v : record.volumes) {
    v1::VolumeMount* mount = out->add_volumes();
    mount->set_volume(v.volume);
    mount->set_path(v.path);
    mount->set_read_only(v.read_only);
  }
}

v1::SessionState StateOf(const ManagedSession& entry) {
  return entry.paused()              ? v1::SESSION_STATE_PAUSED
         : entry.session->lost()     ? v1::SESSION_STATE_LOST
         : entry.session->released() ? v1::SESSION_STATE_HIBERNATED
         : entry.busy()              ? v1::SESSION_STATE_BUSY
                                     : v1::SESSION_STATE_IDLE;
}

void FillContext(const ManagedSession& context, v1::Context* out) {
  out->set_id(context.id);
  out->set_language(ToProto(context.language));
  out->set_state(StateOf(context));
  out->set_execution_count(context.session->execution_count());
  out->set_created_unix_ms(absl::ToUnixMillis(context.created));
  out->set_lost_reason(context.session->lost_reason());
  if (auto usage = context.session->Usage()) out->set_memory_bytes(usage->peak_memory_bytes);
  out->set_cwd(context.cwd.empty() ? context.workspace_path : context.cwd);
}

void FillCommand(const ManagedCommand& command, v1::CommandInfo* out) {
  const CommandSpec& spec = command.command->spec();
  out->set_command_id(command.id);
  out->set_tag(command.tag);
  for (const std::string& arg : spec.argv) out->add_argv(arg);
  out->set_cwd(spec.cwd);
  out->set_terminal(spec.terminal.has_value());
  out->set_running(!command.command->ended());
  out->set_started_unix_ms(absl::ToUnixMillis(command.command->started()));
  for (const std::string& kv : spec.env) {
    const size_t eq = kv.find('=');
    (*out->mutable_env())[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
}

v1::CommandEvent ToProto(const CommandEvent& event) {
  v1::CommandEvent out;
  switch (event.kind) {
    case CommandEvent::Kind::kStdout: out.set_stdout(event.data); break;
    case CommandEvent::Kind::kStderr: out.set_stderr(event.data); break;
    case CommandEvent::Kind::kEnd: {
      v1::CommandEnd* end = out.mutable_end();
      end->set_outcome(ToProto(event.end.outcome));
      end->set_exit_code(event.end.exit_code);
      end->set_signal(event.end.signal);
      end->set_wall_ms(event.end.wall_ms);
      end->set_cpu_ms(event.end.cpu_ms);
      end->set_peak_memory_bytes(event.end.peak_memory_bytes);
      if (event.end.violation) end->set_violation(*event.end.violation);
      end->set_message(event.end.message);
      break;
    }
  }
  return out;
}

}  // namespace warden
