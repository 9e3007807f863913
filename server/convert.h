// Conversions between the API (warden.v1 protos, grpc::Status) and the core
// (absl::Status, CellResult, ManagedSession). absl::Status becomes
// grpc::Status here and nowhere else.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "egress/policy.h"
#include "grpcpp/support/status.h"
#include "kernel/session.h"
#include "kernel/workspace.h"
#include "server/session_manager.h"
#include "server/snapshot_store.h"
#include "warden/v1/executor.pb.h"

namespace warden {

grpc::Status ToGrpc(const absl::Status& status);

v1::Outcome ToProto(Outcome outcome);
// LANGUAGE_UNSPECIFIED -> nullopt (the server's default).
absl::StatusOr<std::optional<Language>> FromProto(v1::Language language);
v1::Language ToProto(Language language);

// MIME bundles: binary types arrive from kernels as base64 and leave as bytes.
v1::Result ToProto(const MimeBundle& bundle);
v1::Error ToProto(const CellError& error);
void FillResponse(const CellResult& cell, const std::string& session_id, v1::ExecuteResponse* out);
// A session's peak memory: of all its contexts and commands together when it
// has several (0 if unknown).
int64_t PeakMemoryBytes(const ManagedSession& entry);
void FillSession(const ManagedSession& entry, v1::Session* out);
// warden.v1's NetworkPolicy as the egress library writes it, and back
// (with values hidden, for showing).
egress::PolicySpec FromProto(const v1::NetworkPolicy& policy);
void FillNetworkPolicy(const egress::PolicySpec& spec, v1::NetworkPolicy* out);
void FillSnapshot(const SnapshotRecord& record, v1::Snapshot* out);
void FillFileInfo(const WorkspaceListing& entry, v1::FileInfo* out);
v1::SessionState StateOf(const ManagedSession& entry);
void FillContext(const ManagedSession& context, v1::Context* out);
void FillCommand(const ManagedCommand& command, v1::CommandInfo* out);
v1::CommandEvent ToProto(const CommandEvent& event);

}  // namespace warden
