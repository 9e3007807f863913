// The Engine's snapshots: SnapshotSession, RestoreSnapshot, ForkSession and
// hibernation. The kernel packs and unpacks a session's state inside its
// own sandbox (kernel/python/warden_snapshot.py); here it is only bytes,
// moved between a sandbox, the SnapshotStore and a fresh sandbox.
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "server/engine.h"

namespace warden {
namespace {

// How long a kernel may take to pack or unpack a session's state.
constexpr absl::Duration kSnapshotTimeout = absl::Seconds(60);

// The kernel itself refuses what it cannot capture (UNIMPLEMENTED for
// languages other than Python).
absl::Status CheckSnapshottable(const ManagedSession& entry) { return entry.CheckRunning(); }

// What a snapshot of a session with a shared workspace does not hold: the
// interpreter's state and the workspace's files are captured by the kernel
// (its workspace is the shared one); the session's other interpreters and
// its commands are not, and start afresh (or not at all) from it.
void NoteUncaptured(const ManagedSession& entry, std::map<std::string, std::string>* left_out) {
  if (!entry.machine) return;
  absl::MutexLock lock(&entry.parts_mu);
  for (const auto& [id, context] : entry.contexts) {
    (*left_out)[absl::StrCat("context ", id)] =
        absl::StrCat("the state of a session's other interpreters (", LanguageName(context->language),
                     ") is not captured; its files are");
  }
  for (const auto& [id, command] : entry.commands) {
    if (!command->command->ended()) {
      (*left_out)[absl::StrCat("command ", id)] = "running processes are not captured; their files are";
    }
  }
}

std::string Names(const std::map<std::string, std::string>& left_out) {
  return absl::StrJoin(left_out, ", ", [](std::string* out, const auto& item) {
    absl::StrAppend(out, item.first);
  });
}

}  // namespace

absl::StatusOr<SessionSnapshot> Engine::Capture(ManagedSession& entry, absl::Time deadline) {
  if (!entry.session->released()) return entry.session->Snapshot(deadline);
  // Hibernating: its state is on disk already, complete by construction.
  ASSIGN_OR_RETURN(SnapshotRecord record, snapshots_.Get(entry.tenant, entry.hibernation_snapshot));
  ASSIGN_OR_RETURN(SnapshotArchive archive, snapshots_.OpenArchive(entry.tenant, record.id));
  return SessionSnapshot{std::move(archive), record.execution_count, record.left_out};
}

absl::StatusOr<SnapshotRecord> Engine::SnapshotSession(const std::string& tenant,
                                                       const std::string& id, const std::string& name) {
  if (name.size() > 128) return absl::InvalidArgumentError("a snapshot's name is at most 128 bytes");
  ASSIGN_OR_RETURN(auto entry, Find(tenant, id));
  RETURN_IF_ERROR(CheckSnapshottable(*entry));
  const absl::Time deadline = absl::Now() + absl::Milliseconds(options_.queue.max_wait_ms);
  RETURN_IF_ERROR(entry->Begin(deadline));
  auto snapshot = Capture(*entry, absl::Now() + kSnapshotTimeout);
  entry->End();
  if (!snapshot.ok()) return snapshot.status();
  SnapshotRecord record{.tenant = tenant,
                        .session_id = entry->id,
                        .language = entry->language,
                        .created = absl::Now(),
                        .execution_count = snapshot->execution_count,
                        .memory_mb = entry->memory_mb,
                        .left_out = snapshot->left_out,
                        .name = name,
                        .shared_workspace = entry->machine != nullptr,
                        .workspace_aliases = entry->workspace_aliases,
                        .workspace_path = entry->workspace_path,
                        .env = entry->env,
                        .volumes = entry->volumes};
  if (entry->sandbox_template != nullptr) {
    record.template_name = entry->sandbox_template->name;
    record.template_digest = entry->sandbox_template->digest;
  }
  NoteUncaptured(*entry, &record.left_out);
  auto stored = snapshots_.Put(std::move(record), snapshot->archive);
  CloseLater(std::move(snapshot->archive.fd));
  ASSIGN_OR_RETURN(record, std::move(stored));
  spdlog::info("snapshot {} of session {} taken for tenant {} ({} bytes{}{})", record.id, id, tenant,
               record.size_bytes, record.left_out.empty() ? "" : "; left out: ", Names(record.left_out));
  return record;
}

absl::StatusOr<std::shared_ptr<ManagedSession>> Engine::StartFromArchive(
    std::unique_ptr<ManagedSession> entry, const SnapshotArchive& archive,
    std::map<std::string, std::string>* left_out, bool shared_workspace) {
  RETURN_IF_ERROR(CheckTakingWork());
  // Its volumes again: mounted, not copied (their content is theirs).
  RETURN_IF_ERROR(AttachVolumes(*entry));
  RETURN_IF_ERROR(sessions_.Reserve(entry->tenant));
  auto started = shared_workspace
                     ? StartWithSharedWorkspace(*entry, entry->language)
                     : StartSession(entry->tenant, entry->language, entry->memory_mb,
                                    absl::Now() + absl::Milliseconds(options_.queue.max_wait_ms), /*first=*/false,
                                    entry->sandbox_template, entry->volume_binds);
  if (!started.ok()) {
    sessions_.Unreserve(entry->tenant);
    return started.status();
  }
  auto failed = (*started)->Restore(archive, absl::Now() + kSnapshotTimeout);
  if (!failed.ok()) {
    sessions_.Unreserve(entry->tenant);
    disposer_.Dispose(*std::move(started));
    return failed.status();
  }
  left_out->insert(failed->begin(), failed->end());
  entry->session = *std::move(started);
  if (!entry->machine) entry->egress_gate = entry->session->egress_gate();
  if (entry->traffic_token.empty()) entry->traffic_token = SessionManager::RandomHex() + SessionManager::RandomHex();
  std::shared_ptr<ManagedSession> shared = sessions_.Register(std::move(entry));
  NameSandboxes(*shared);
  BindNetwork(*shared);
  return shared;
}

absl::StatusOr<std::shared_ptr<ManagedSession>> Engine::RestoreSnapshot(
    const std::string& tenant, const std::string& snapshot_id, int64_t ttl_seconds,
    const std::map<std::string, std::string>& labels) {
  const SessionsOptions& so = options_.sessions;
  if (ttl_seconds < 0 || ttl_seconds > so.max_ttl_seconds) {
    return absl::InvalidArgumentError(absl::StrCat("ttl_seconds must be between 0 (the default) and ",
                                                   so.max_ttl_seconds));
  }
  ASSIGN_OR_RETURN(SnapshotRecord record, snapshots_.Get(tenant, snapshot_id));
  if (record.hibernation) {
    return absl::NotFoundError(absl::StrCat("no snapshot '", snapshot_id, "'; ListSnapshots shows yours"));
  }
  ASSIGN_OR_RETURN(SnapshotArchive archive, snapshots_.OpenArchive(tenant, snapshot_id));
  auto entry = std::make_unique<ManagedSession>();
  entry->tenant = tenant;
  entry->language = record.language;
  entry->labels = labels;
  entry->memory_mb = record.memory_mb ? record.memory_mb : options_.limits.defaults.memory_mb;
  entry->created = absl::Now();
  entry->set_expires(entry->created + absl::Seconds(ttl_seconds ? ttl_seconds : so.default_ttl_seconds));
  entry->idle_timeout = absl::Seconds(so.default_idle_timeout_seconds);
  entry->cell_defaults = options_.limits.defaults;
  entry->workspace_path = record.workspace_path.empty() ? "/workspace" : record.workspace_path;
  entry->workspace_aliases = record.workspace_aliases;
  entry->env = record.env;
  // A snapshot keeps no network policy (nor secrets): its pool's.
  entry->pool_network = PoolNetwork(entry->language, entry->memory_mb);
  if (network_ != nullptr) {
    absl::MutexLock lock(&entry->network_mu);
    entry->secret_env = network_->SecretEnvironment(tenant, entry->pool_network.get());
    if (entry->pool_network) entry->secret_env.push_back("PIP_NO_INDEX=0");
  }
  entry->volumes = record.volumes;
  if (!record.template_digest.empty()) {
    // Only onto the very image it ran in.
    if (templates_ == nullptr) return absl::FailedPreconditionError("this wardend has no template store");
    ASSIGN_OR_RETURN(entry->sandbox_template,
                     templates_->ResolveDigest(tenant, record.template_name, record.template_digest));
  }
  std::map<std::string, std::string> failed;
  auto started = StartFromArchive(std::move(entry), archive, &failed, record.shared_workspace);
  CloseLater(std::move(archive.fd));
  ASSIGN_OR_RETURN(auto restored, std::move(started));
  spdlog::info("snapshot {} restored as session {} for tenant {}{}{}", snapshot_id, restored->id,
               tenant, failed.empty() ? "" : "; could not restore: ", Names(failed));
  return restored;
}

std::vector<SnapshotRecord> Engine::ListSnapshots(const std::string& tenant) const {
  return snapshots_.List(tenant);
}

absl::Status Engine::DeleteSnapshot(const std::string& tenant, const std::string& snapshot_id) {
  absl::StatusOr<SnapshotRecord> record = snapshots_.Get(tenant, snapshot_id);
  // A damaged snapshot is deleted all the same: that is what its error says to do.
  if (absl::IsDataLoss(record.status())) return snapshots_.Delete(tenant, snapshot_id);
  if (!record.ok()) return record.status();
  if (record->hibernation) {
    return absl::NotFoundError(absl::StrCat("no snapshot '", snapshot_id, "'; ListSnapshots shows yours"));
  }
  return snapshots_.Delete(tenant, snapshot_id);
}

absl::StatusOr<Engine::Fork> Engine::ForkSession(const std::string& tenant, const std::string& id,
                                                 const std::map<std::string, std::string>& labels) {
  const absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(auto source, Find(tenant, id));
  RETURN_IF_ERROR(CheckSnapshottable(*source));
  const absl::Time deadline = absl::Now() + absl::Milliseconds(options_.queue.max_wait_ms);
  RETURN_IF_ERROR(source->Begin(deadline));
  auto snapshot = Capture(*source, absl::Now() + kSnapshotTimeout);
  source->End();
  if (!snapshot.ok()) return snapshot.status();

  auto entry = std::make_unique<ManagedSession>();
  entry->tenant = tenant;
  entry->language = source->language;
  entry->labels = labels.empty() ? source->labels : labels;
  entry->memory_mb = source->memory_mb;
  entry->created = absl::Now();
  entry->set_expires(entry->created + (source->expires() - source->created));  // the source's TTL, afresh
  entry->idle_timeout = source->idle_timeout;
  entry->cell_defaults = source->cell_defaults;
  entry->workspace_path = source->workspace_path;
  entry->workspace_aliases = source->workspace_aliases;
  entry->env = source->env;
  // The fork goes where its source may go.
  entry->pool_network = source->pool_network;
  {
    absl::MutexLock theirs(&source->network_mu);
    absl::MutexLock ours(&entry->network_mu);
    entry->network = source->network;
    entry->secret_env = source->secret_env;
  }
  entry->public_ports = source->public_ports;
  entry->port_host_header = source->port_host_header;
  entry->sandbox_template = source->sandbox_template;
  entry->volumes = source->volumes;
  entry->resume_on_port_request = source->resume_on_port_request;
  Fork fork{nullptr, snapshot->left_out};
  NoteUncaptured(*source, &fork.left_out);
  auto started =
      StartFromArchive(std::move(entry), snapshot->archive, &fork.left_out, source->machine != nullptr);
  CloseLater(std::move(snapshot->archive.fd));  // frees the source's copy off the caller's time
  ASSIGN_OR_RETURN(fork.session, std::move(started));
  spdlog::info("session {} forked from {} for tenant {} in {} ms{}{}", fork.session->id, id, tenant,
               absl::ToInt64Milliseconds(absl::Now() - start), fork.left_out.empty() ? "" : "; left out: ",
               Names(fork.left_out));
  return fork;
}

// ---- hibernation

void Engine::HibernateIdle() {
  const int64_t after = options_.sessions.hibernate_after_seconds;
  if (after <= 0) return;
  for (auto& entry : sessions_.IdleSince(absl::Now() - absl::Seconds(after))) {
    // Stop() waits for this loop: with thousands of idle sessions, finishing
    // the round first kept a stopping daemon hibernating for minutes.
    if (stop_reaper_.HasBeenNotified()) return;
    TryHibernate(*entry);
  }
}

bool Engine::TryHibernate(ManagedSession& entry) {
  if (entry.machine || entry.language != Language::kPython) return false;
  // Refused before and not used since: its state has not changed.
  if (entry.hibernation_refused > entry.last_used()) return false;
  if (!entry.Begin(absl::Now()).ok()) return false;  // busy, or closed meanwhile
  if (!entry.session->released() && !entry.session->lost()) Hibernate(entry);
  const bool released = entry.session->released();
  entry.End(/*used=*/false);
  return released;
}

void Engine::Hibernate(ManagedSession& entry) {
  auto snapshot = entry.session->Snapshot(absl::Now() + kSnapshotTimeout);
  absl::Status stored_status;
  if (!snapshot.ok()) {
    stored_status = snapshot.status();
  } else if (!snapshot->left_out.empty()) {
    stored_status = absl::FailedPreconditionError(
        absl::StrCat("its state cannot be captured completely (", Names(snapshot->left_out), ")"));
  } else {
    SnapshotRecord record{.tenant = entry.tenant,
                          .session_id = entry.id,
                          .language = entry.language,
                          .created = absl::Now(),
                          .execution_count = snapshot->execution_count,
                          .memory_mb = entry.memory_mb,
                          .hibernation = true,
                          .session_meta = EncodeSessionMeta(entry)};
    auto stored = snapshots_.Put(std::move(record), snapshot->archive);
    CloseLater(std::move(snapshot->archive.fd));
    if (stored.ok()) {
      entry.hibernation_snapshot = stored->id;
      entry.session->Release();
      spdlog::info("session {} of tenant {} hibernated ({} bytes on disk)", entry.id, entry.tenant,
                   stored->size_bytes);
      return;
    }
    stored_status = stored.status();
  }
  entry.hibernation_refused = absl::Now();
  spdlog::info("session {} of tenant {} stays live: {}", entry.id, entry.tenant,
               std::string(stored_status.message()));
}

void Engine::MakeRoomForALiveSession(const ManagedSession* keep) {
  const int64_t cap = options_.sessions.max_live;
  if (cap <= 0) return;
  int64_t live = 0;
  for (const auto& entry : sessions_.All()) {
    if (entry.get() != keep && entry->session != nullptr && !entry->session->released()) ++live;
  }
  if (live < cap) return;
  // The longest idle first, as the reaper would take them.
  for (auto& entry : sessions_.IdleSince(absl::InfiniteFuture())) {
    if (live < cap) return;
    if (entry.get() != keep && !entry->session->released() && TryHibernate(*entry)) --live;
  }
  if (live >= cap) {
    spdlog::warn("{} sessions hold a sandbox, sessions.max_live is {}: none of the idle ones could hibernate",
                 live, cap);
  }
}

absl::Status Engine::Wake(ManagedSession& entry) {
  if (!entry.session->released()) return absl::OkStatus();
  if (!entry.wake_failure.ok()) return entry.wake_failure;
  if (absl::Status fenced; !ClaimForWake(entry, &fenced)) return fenced;
  MakeRoomForALiveSession(&entry);
  const absl::Time start = absl::Now();
  // What cannot change by trying again - the snapshot damaged or gone, or
  // refused by the kernel that restores it - is said once and for good:
  // the session's state is lost, and the caller must close it.
  auto lost = [&entry](const absl::Status& why) {
    spdlog::warn("session {} of tenant {} cannot wake from hibernation: {}", entry.id, entry.tenant,
                 std::string(why.message()));
    entry.wake_failure = absl::DataLossError(absl::StrCat(
        "session ", entry.id, " was hibernated and its state cannot be restored (", why.message(),
        "): it is lost; close the session (CloseSession) and start a new one"));
    return entry.wake_failure;
  };
  absl::StatusOr<SnapshotArchive> opened = snapshots_.OpenArchive(entry.tenant, entry.hibernation_snapshot);
  if (absl::IsDataLoss(opened.status()) || absl::IsNotFound(opened.status())) return lost(opened.status());
  if (!opened.ok()) return opened.status();
  SnapshotArchive archive = *std::move(opened);
  // A warm sandbox from the pool, as a new session gets, rather than a
  // clone of the zygote started on the caller's time; the clone only when
  // the pool has none to give.
  // (With volumes its own: a pool's has none.)
  auto warm = entry.volumes.empty()
                  ? StartSession(entry.tenant, entry.language, entry.memory_mb,
                                 absl::Now() + absl::Milliseconds(options_.queue.max_wait_ms), /*first=*/true,
                                 entry.sandbox_template)
                  : absl::StatusOr<std::unique_ptr<Session>>(absl::UnavailableError("its own sandbox"));
  absl::Status reopened = warm.ok() ? entry.session->Reopen(*std::move(warm)) : warm.status();
  if (!reopened.ok()) reopened = entry.session->Reopen();
  absl::StatusOr<std::map<std::string, std::string>> failed =
      reopened.ok() ? entry.session->Restore(archive, absl::Now() + kSnapshotTimeout)
                    : absl::StatusOr<std::map<std::string, std::string>>(reopened);
  if (!failed.ok()) {
    entry.session->Release();
    // Restored and refused, or its kernel lost while restoring (out of
    // memory, as it would be again): for good. Out of time may be the load.
    if (reopened.ok() && !absl::IsDeadlineExceeded(failed.status())) return lost(failed.status());
    // No sandbox to restore into: asleep again, the snapshot kept, and the
    // next call tries anew.
    return absl::UnavailableError(absl::StrCat("the hibernated session could not be restored: ",
                                               failed.status().message(), "; try again"));
  }
  if (!failed->empty()) {
    spdlog::warn("session {} woke without: {}", entry.id, Names(*failed));
  }
  (void)snapshots_.Delete(entry.tenant, entry.hibernation_snapshot);
  CloseLater(std::move(archive.fd));  // deleted, but open: its blocks go off the caller's time
  entry.hibernation_snapshot.clear();
  spdlog::info("session {} of tenant {} woke from hibernation in {} ms", entry.id, entry.tenant,
               absl::ToInt64Milliseconds(absl::Now() - start));
  return absl::OkStatus();
}

absl::Status Engine::WakeForFiles(ManagedSession& entry) {
  RETURN_IF_ERROR(entry.CheckOpen());  // handed over since it was found: where it went
  RETURN_IF_ERROR(entry.CheckRunning());
  if (!entry.session->released()) return absl::OkStatus();
  RETURN_IF_ERROR(entry.Begin(absl::Now() + absl::Milliseconds(options_.queue.max_wait_ms)));
  absl::Status woken = Wake(entry);
  entry.End();
  return woken;
}

void Engine::DropHibernation(ManagedSession& entry) {
  if (entry.session && entry.session->released() && !entry.hibernation_snapshot.empty()) {
    (void)snapshots_.Delete(entry.tenant, entry.hibernation_snapshot);
  }
}

}  // namespace warden
