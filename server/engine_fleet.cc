// The Engine as a node of a fleet (docs/fleet.md): draining, handing
// sessions over through the shared snapshot storage, taking them over under
// their own ids, and the fence (server/session_ledger.h) that keeps a node
// which returns from serving a session another node holds now. The gateway
// learns what to do from the FleetHint each refusal carries.
#include <spdlog/spdlog.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/engine.h"
#include "server/fleet_hint.h"

namespace warden {
namespace {

constexpr absl::Duration kSnapshotTimeout = absl::Seconds(60);

}  // namespace

bool Engine::draining() const { return draining_.load(); }

void Engine::StartDraining() {
  if (draining_.exchange(true)) return;
  spdlog::info("node {} draining: no new work; its sessions are handed over", node_id());
  if (health_listener_) health_listener_();
}

absl::Status Engine::CheckTakingWork() const {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) {
      absl::Status status = absl::UnavailableError("the server is shutting down");
      return ledger_ ? WithFleetHint(status, v1::FleetHint::REFUSED, node_id()) : status;
    }
  }
  if (draining_) {
    return WithFleetHint(absl::UnavailableError(absl::StrCat("node ", node_id(),
                                                             " is draining and takes no new work; "
                                                             "try again (a gateway places it elsewhere)")),
                         v1::FleetHint::REFUSED, node_id());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<ManagedSession>> Engine::Find(const std::string& tenant,
                                                             const std::string& id) const {
  if (draining_) {
    return WithFleetHint(absl::UnavailableError(absl::StrCat("node ", node_id(), " is draining: session ", id,
                                                             " is being handed over to another node; "
                                                             "try again in a moment")),
                         v1::FleetHint::MOVING, node_id());
  }
  absl::StatusOr<std::shared_ptr<ManagedSession>> entry = sessions_.Get(tenant, id);
  if (entry.ok() || !ledger_ || !absl::IsNotFound(entry.status())) return entry;
  // Not here: if it moved, say where (a gateway that forgot follows).
  absl::StatusOr<std::optional<LedgerRecord>> record = ledger_->Current(id);
  if (!record.ok() || !*record || (*record)->tenant != tenant) return entry;
  const LedgerRecord& r = **record;
  switch (r.state) {
    case LedgerRecord::State::kOwned:
      if (r.node == node_id()) return entry;  // ours once, in an earlier process: gone with it
      return WithFleetHint(absl::NotFoundError(absl::StrCat("session ", id, " lives on node ", r.node, " now")),
                           v1::FleetHint::MOVED, r.node);
    case LedgerRecord::State::kHandedOver:
      return WithFleetHint(absl::UnavailableError(absl::StrCat("session ", id, " was handed over by node ",
                                                               r.node, " and waits to be taken over")),
                           v1::FleetHint::MOVING, r.node);
    case LedgerRecord::State::kLost:
      return WithFleetHint(absl::NotFoundError(absl::StrCat("session ", id, " is lost: ", r.reason)),
                           v1::FleetHint::LOST, r.node, r.reason);
  }
  return entry;
}

bool Engine::ClaimForWake(ManagedSession& entry, absl::Status* status) {
  if (!ledger_) return true;
  LedgerRecord mine{.state = LedgerRecord::State::kOwned, .node = node_id(), .epoch = epoch_, .tenant = entry.tenant};
  absl::StatusOr<LedgerRecord> claimed = ledger_->Append(entry.id, entry.ledger_generation, mine);
  if (claimed.ok()) {
    entry.ledger_generation = claimed->generation;
    return true;
  }
  if (!absl::IsAborted(claimed.status())) {
    // The shared storage failed: stay asleep, the next call tries again.
    *status = absl::UnavailableError(absl::StrCat("the shared snapshot storage failed: ",
                                                  claimed.status().message(), "; try again"));
    return false;
  }
  // Fenced: another node took it over while this one was unreachable.
  absl::StatusOr<std::optional<LedgerRecord>> now = ledger_->Current(entry.id);
  const std::string holder = now.ok() && *now ? (*now)->node : "";
  spdlog::warn("session {} of tenant {} moved to node {} while this node was away: ending it here", entry.id,
               entry.tenant, holder.empty() ? "?" : holder);
  *status = WithFleetHint(absl::NotFoundError(absl::StrCat("session ", entry.id, " lives on node ", holder, " now")),
                          v1::FleetHint::MOVED, holder);
  entry.SetEndedBy(*status);  // calls waiting for its turn here follow it too
  absl::StatusOr<std::shared_ptr<ManagedSession>> shared = sessions_.Get(entry.tenant, entry.id);
  if (shared.ok()) Release(*shared);
  return false;
}

bool Engine::HandOver(const std::shared_ptr<ManagedSession>& entry, absl::Time deadline) {
  ManagedSession& e = *entry;
  // Its running cell (if any) ends first, within the deadline.
  if (!e.Begin(deadline).ok()) {
    if (e.busy()) (void)e.session->Interrupt();
    if (!e.Begin(absl::Now() + absl::Seconds(2)).ok()) return false;  // closed meanwhile
  }
  std::string reason;
  std::string snapshot_id;
  if (e.workspace) {
    reason = "it has a shared workspace (contexts, commands), which cannot be captured";
  } else if (e.language != Language::kPython) {
    reason = absl::StrCat("its ", LanguageName(e.language), " interpreter's state cannot be captured");
  } else if (e.session->released()) {
    snapshot_id = e.hibernation_snapshot;  // asleep: its state is in the shared storage already
  } else if (e.session->lost()) {
    reason = "its interpreter had ended already";
  } else {
    auto snapshot = e.session->Snapshot(std::max(deadline, absl::Now() + absl::Seconds(5)));
    if (!snapshot.ok()) {
      reason = absl::StrCat("its state could not be captured: ", snapshot.status().message());
    } else if (!snapshot->left_out.empty()) {
      std::string names;
      for (const auto& [name, why] : snapshot->left_out) absl::StrAppend(&names, names.empty() ? "" : ", ", name);
      reason = absl::StrCat("its state cannot be captured completely (", names, ")");
      CloseLater(std::move(snapshot->archive.fd));
    } else {
      SnapshotRecord record{.tenant = e.tenant,
                            .session_id = e.id,
                            .language = e.language,
                            .created = absl::Now(),
                            .execution_count = snapshot->execution_count,
                            .memory_mb = e.memory_mb,
                            .hibernation = true,
                            .session_meta = EncodeSessionMeta(e)};
      auto stored = snapshots_.Put(std::move(record), snapshot->archive);
      CloseLater(std::move(snapshot->archive.fd));
      if (stored.ok()) {
        snapshot_id = stored->id;
      } else {
        reason = absl::StrCat("its snapshot could not be stored: ", stored.status().message());
      }
    }
  }
  LedgerRecord record{.node = node_id(), .epoch = epoch_, .tenant = e.tenant};
  if (!snapshot_id.empty()) {
    record.state = LedgerRecord::State::kHandedOver;
    record.snapshot_id = snapshot_id;
  } else {
    record.state = LedgerRecord::State::kLost;
    record.reason = absl::StrCat("node ", node_id(), " drained and could not hand it over: ", reason);
  }
  absl::StatusOr<LedgerRecord> written = ledger_->Append(e.id, e.ledger_generation, record);
  const bool handed_over = written.ok() && !snapshot_id.empty();
  if (!written.ok()) {
    spdlog::warn("session {}: {}", e.id, std::string(written.status().message()));
  } else if (handed_over) {
    spdlog::info("session {} of tenant {} handed over (snapshot {})", e.id, e.tenant, snapshot_id);
  } else {
    spdlog::info("session {} of tenant {} lost: {}", e.id, e.tenant, record.reason);
  }
  // Calls that found the session before the drain began and wait for its
  // turn (or have yet to ask for it) hear where it went, never NOT_FOUND:
  // MOVING while a taker may still restore it (the gateway takes it over
  // and calls again there), LOST with the reason once it is gone.
  if (handed_over || !written.ok()) {
    e.SetEndedBy(WithFleetHint(absl::UnavailableError(absl::StrCat("node ", node_id(), " is draining: session ",
                                                                    e.id, " was handed over to another node; "
                                                                    "try again in a moment")),
                               v1::FleetHint::MOVING, node_id()));
  } else {
    e.SetEndedBy(WithFleetHint(absl::NotFoundError(absl::StrCat("session ", e.id, " is lost: ", record.reason)),
                               v1::FleetHint::LOST, node_id(), record.reason));
  }
  // What the shared storage holds is the session's now (unless the ledger
  // refused: then another node took it over first); nothing is deleted.
  if (!handed_over && !snapshot_id.empty() && snapshot_id != e.hibernation_snapshot) {
    (void)snapshots_.Delete(e.tenant, snapshot_id);
  }
  if (!written.ok() || handed_over) {
    e.hibernation_snapshot.clear();  // not ours to delete any more
  } else {
    DropHibernation(e);
  }
  Release(entry);
  e.End();
  return handed_over;
}

Engine::HandoverReport Engine::HandOverAll(absl::Time deadline, int parallel) {
  HandoverReport report;
  if (!ledger_) return report;
  std::vector<std::shared_ptr<ManagedSession>> all = sessions_.All();
  absl::Mutex mu;
  size_t next = 0;
  auto work = [&] {
    for (;;) {
      std::shared_ptr<ManagedSession> entry;
      {
        absl::MutexLock lock(&mu);
        if (next >= all.size()) return;
        entry = all[next++];
      }
      const bool ok = HandOver(entry, deadline);
      absl::MutexLock lock(&mu);
      ++(ok ? report.handed_over : report.lost);
    }
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < std::max(1, parallel); ++i) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  return report;
}

absl::StatusOr<Engine::TakenOver> Engine::Claim(const std::string& tenant, const std::string& id,
                                               int64_t after, const SnapshotRecord& snapshot) {
  LedgerRecord mine{.state = LedgerRecord::State::kOwned, .node = node_id(), .epoch = epoch_, .tenant = tenant};
  absl::StatusOr<LedgerRecord> claimed = ledger_->Append(id, after, mine);
  if (!claimed.ok()) {
    if (!absl::IsAborted(claimed.status())) return claimed.status();
    // Another node was first: it holds the session (or lost it).
    ASSIGN_OR_RETURN(std::optional<LedgerRecord> now, ledger_->Current(id));
    if (now && now->state == LedgerRecord::State::kOwned) return TakenOver{now->node, nullptr};
    return WithFleetHint(absl::UnavailableError(absl::StrCat("session ", id, " is moving; try again")),
                         v1::FleetHint::MOVING, now ? now->node : "");
  }
  const absl::Time start = absl::Now();
  auto entry = std::make_unique<ManagedSession>();
  entry->id = id;
  entry->tenant = tenant;
  entry->language = snapshot.language;
  entry->memory_mb = snapshot.memory_mb ? snapshot.memory_mb : options_.limits.defaults.memory_mb;
  entry->created = absl::Now();
  entry->set_expires(entry->created + absl::Seconds(options_.sessions.default_ttl_seconds));
  entry->idle_timeout = absl::Seconds(options_.sessions.default_idle_timeout_seconds);
  entry->cell_defaults = options_.limits.defaults;
  SessionMetaRefs refs;
  if (absl::Status s = DecodeSessionMeta(snapshot.session_meta, entry.get(), &refs); !s.ok()) {
    spdlog::warn("session {}: {}; it keeps the server's defaults", id, s.ToString());
  }
  entry->volumes = refs.volumes;
  absl::Status resolved;
  if (!refs.template_digest.empty()) {
    auto t = templates_ == nullptr ? absl::StatusOr<std::shared_ptr<const SandboxTemplate>>(
                                         absl::FailedPreconditionError("this node has no template store"))
                                   : templates_->ResolveDigest(tenant, refs.template_name, refs.template_digest);
    if (t.ok()) {
      entry->sandbox_template = *std::move(t);
    } else {
      resolved = t.status();
    }
  }
  entry->ledger_generation = claimed->generation;
  // The shared storage holds no network policy (nor secrets): a session
  // taken over goes out under its pool's policy here.
  entry->pool_network = PoolNetwork(entry->language, entry->memory_mb);
  if (network_ != nullptr) {
    absl::MutexLock lock(&entry->network_mu);
    entry->secret_env = network_->SecretEnvironment(tenant, entry->pool_network.get());
  }
  absl::StatusOr<std::shared_ptr<ManagedSession>> restored = absl::InternalError("not restored");
  std::map<std::string, std::string> left_out;
  if (!resolved.ok()) {
    restored = resolved;
  } else if (auto archive = snapshots_.OpenArchive(tenant, snapshot.id); archive.ok()) {
    restored = StartFromArchive(std::move(entry), *archive, &left_out);
    CloseLater(std::move(archive->fd));
  } else {
    restored = archive.status();
  }
  if (!restored.ok()) {
    // Give it back, so that this node or another can try again.
    LedgerRecord back{.state = LedgerRecord::State::kHandedOver, .node = node_id(), .epoch = epoch_,
                      .tenant = tenant, .snapshot_id = snapshot.id};
    (void)ledger_->Append(id, claimed->generation, back);
    spdlog::warn("session {}: taking it over failed: {}", id, restored.status().ToString());
    return absl::UnavailableError(absl::StrCat("session ", id, " could not be restored here: ",
                                               restored.status().message(), "; try again"));
  }
  (void)snapshots_.Delete(tenant, snapshot.id);  // the state lives in the sandbox now
  spdlog::info("session {} of tenant {} taken over in {} ms{}", id, tenant,
               absl::ToInt64Milliseconds(absl::Now() - start), left_out.empty() ? "" : " (not all of it)");
  return TakenOver{node_id(), *std::move(restored)};
}

absl::StatusOr<Engine::TakenOver> Engine::TakeOverSession(const std::string& tenant, const std::string& id,
                                                         bool owner_lost) {
  if (!ledger_) {
    return absl::FailedPreconditionError("this wardend is not a node of a fleet (fleet.node_id is not set)");
  }
  RETURN_IF_ERROR(CheckTakingWork());
  if (auto here = sessions_.Get(tenant, id); here.ok()) return TakenOver{node_id(), *here};
  ASSIGN_OR_RETURN(std::optional<LedgerRecord> record, ledger_->Current(id));
  const std::string origin = SessionManager::NodeOf(id);
  auto not_handed_over = [&](const std::string& holder) {
    return WithFleetHint(absl::NotFoundError(absl::StrCat("the shared storage holds nothing of session ", id,
                                                          " to take over")),
                         v1::FleetHint::NOT_HANDED_OVER, holder);
  };
  // The newest hibernation snapshot a lost holder left, if newer than what
  // the ledger knows.
  auto left_hibernated = [&](absl::Time after) -> std::optional<SnapshotRecord> {
    absl::StatusOr<SnapshotRecord> found = snapshots_.FindHibernation(tenant, id);
    if (!found.ok() || found->created <= after) return std::nullopt;
    return *found;
  };
  if (!record) {
    if (!owner_lost) return not_handed_over(origin);
    std::optional<SnapshotRecord> asleep = left_hibernated(absl::InfinitePast());
    if (!asleep) return not_handed_over(origin);
    return Claim(tenant, id, 0, *asleep);
  }
  if (record->tenant != tenant) {
    return absl::NotFoundError(absl::StrCat("no session '", id, "'; it may have expired or been closed"));
  }
  switch (record->state) {
    case LedgerRecord::State::kLost:
      return WithFleetHint(absl::NotFoundError(absl::StrCat("session ", id, " is lost: ", record->reason)),
                           v1::FleetHint::LOST, record->node, record->reason);
    case LedgerRecord::State::kHandedOver: {
      absl::StatusOr<SnapshotRecord> snapshot = snapshots_.Get(tenant, record->snapshot_id);
      if (!snapshot.ok()) {
        return WithFleetHint(absl::NotFoundError(absl::StrCat("session ", id, " is lost: its snapshot ",
                                                              record->snapshot_id, " is gone")),
                             v1::FleetHint::LOST, record->node, "its snapshot is gone from the shared storage");
      }
      return Claim(tenant, id, record->generation, *snapshot);
    }
    case LedgerRecord::State::kOwned: {
      if (record->node == node_id()) {
        const std::string why = absl::StrCat("node ", node_id(), " held it in an earlier process (epoch ",
                                             record->epoch, "), which ended without handing it over");
        return WithFleetHint(absl::NotFoundError(absl::StrCat("session ", id, " is lost: ", why)),
                             v1::FleetHint::LOST, node_id(), why);
      }
      if (!owner_lost) return TakenOver{record->node, nullptr};
      std::optional<SnapshotRecord> asleep = left_hibernated(record->at);
      if (!asleep) return not_handed_over(record->node);
      return Claim(tenant, id, record->generation, *asleep);
    }
  }
  return not_handed_over(origin);
}

void Engine::FenceAdopted() {
  if (!ledger_) return;
  for (const auto& entry : sessions_.All()) {
    absl::StatusOr<std::optional<LedgerRecord>> record = ledger_->Current(entry->id);
    if (!record.ok() || !*record) continue;
    if ((*record)->state == LedgerRecord::State::kOwned && (*record)->node == node_id()) {
      entry->ledger_generation = (*record)->generation;
      continue;
    }
    spdlog::warn("session {} kept by warden-keeper moved on (ledger: {} at node {}): ending it here", entry->id,
                 LedgerStateName((*record)->state), (*record)->node);
    entry->hibernation_snapshot.clear();
    Release(entry);
  }
}

}  // namespace warden
