#include "sandbox/sandbox_plan.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "absl/status/status.h"

namespace warden {
namespace {

// Fixed-width little-endian-as-the-host numbers and length-prefixed bytes:
// both ends are the same build on the same machine.
class Writer {
 public:
  template <typename T>
  void Number(T value) {
    static_assert(std::is_integral_v<T> || std::is_enum_v<T>);
    const int64_t wide = static_cast<int64_t>(value);
    out_.append(reinterpret_cast<const char*>(&wide), sizeof(wide));
  }
  void Bytes(absl::string_view data) {
    Number(data.size());
    out_.append(data.data(), data.size());
  }
  void Strings(const std::vector<std::string>& list) {
    Number(list.size());
    for (const std::string& s : list) Bytes(s);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(absl::string_view data) : data_(data) {}

  template <typename T>
  T Number() {
    int64_t wide = 0;
    if (data_.size() < sizeof(wide)) {
      ok_ = false;
      return T{};
    }
    memcpy(&wide, data_.data(), sizeof(wide));
    data_.remove_prefix(sizeof(wide));
    return static_cast<T>(wide);
  }
  std::string Bytes() {
    const auto n = Number<uint64_t>();
    if (!ok_ || n > data_.size()) {
      ok_ = false;
      return {};
    }
    std::string s(data_.substr(0, n));
    data_.remove_prefix(n);
    return s;
  }
  std::vector<std::string> Strings() {
    const auto n = Number<uint64_t>();
    std::vector<std::string> list;
    for (uint64_t i = 0; ok_ && i < n; ++i) list.push_back(Bytes());
    if (n > 0 && !ok_) list.clear();
    return list;
  }
  // No read so far ran past the end.
  bool good() const { return ok_; }
  // Everything read, nothing left over.
  bool ok() const { return ok_ && data_.empty(); }

 private:
  absl::string_view data_;
  bool ok_ = true;
};

}  // namespace

ChildPlan SandboxPlan::View() {
  argv_pointers_.clear();
  for (std::string& a : argv) argv_pointers_.push_back(a.data());
  argv_pointers_.push_back(nullptr);
  env_pointers_.clear();
  for (std::string& e : env) env_pointers_.push_back(e.data());
  env_pointers_.push_back(nullptr);

  ChildPlan plan;
  plan.mounts = &mounts;
  plan.seccomp.len = static_cast<unsigned short>(seccomp.size());
  plan.seccomp.filter = seccomp.data();
  plan.path = path.c_str();
  plan.argv = argv_pointers_.data();
  plan.envp = env_pointers_.data();
  plan.cwd = cwd.c_str();
  plan.hostname = hostname.c_str();
  plan.uid = uid;
  plan.gid = gid;
  plan.init_uid = init_uid;
  plan.init_gid = init_gid;
  plan.owner_uid = owner_uid;
  plan.clear_groups = clear_groups;
  plan.rlimits = rlimits.data();
  plan.n_rlimits = static_cast<int>(rlimits.size());
  plan.machine = machine;
  plan.label = label.c_str();
  plan.egress_port = egress_port;
  return plan;
}

std::string SandboxPlan::Encode() const {
  Writer w;
  w.Number(mounts.root_size_bytes);
  w.Number(mounts.ops.size());
  for (const MountOp& op : mounts.ops) {
    w.Number(op.kind);
    w.Bytes(op.target);
    w.Bytes(op.source);
    w.Bytes(op.contents);
    w.Number(op.target_is_file);
    w.Number(op.attrs);
    w.Number(op.size_bytes);
    w.Number(op.mode);
    w.Number(op.uid);
    w.Number(op.gid);
    w.Bytes(op.size_text);
    w.Bytes(op.mode_text);
    w.Bytes(op.uid_text);
    w.Bytes(op.gid_text);
  }
  w.Bytes(absl::string_view(reinterpret_cast<const char*>(seccomp.data()),
                            seccomp.size() * sizeof(sock_filter)));
  w.Bytes(path);
  w.Strings(argv);
  w.Strings(env);
  w.Bytes(cwd);
  w.Bytes(hostname);
  w.Number(uid);
  w.Number(gid);
  w.Number(init_uid);
  w.Number(init_gid);
  w.Number(owner_uid);
  w.Number(clear_groups);
  w.Number(rlimits.size());
  for (const ChildRlimit& r : rlimits) {
    w.Number(r.resource);
    w.Number(r.soft);
    w.Number(r.hard);
  }
  w.Number(machine);
  w.Bytes(label);
  w.Number(egress_port);
  return w.Take();
}

absl::StatusOr<SandboxPlan> SandboxPlan::Decode(absl::string_view data) {
  Reader r(data);
  SandboxPlan plan;
  plan.mounts.root_size_bytes = r.Number<int64_t>();
  const auto n_ops = r.Number<uint64_t>();
  for (uint64_t i = 0; i < n_ops && r.good(); ++i) {
    MountOp op;
    op.kind = r.Number<MountOp::Kind>();
    op.target = r.Bytes();
    op.source = r.Bytes();
    op.contents = r.Bytes();
    op.target_is_file = r.Number<bool>();
    op.attrs = r.Number<uint64_t>();
    op.size_bytes = r.Number<int64_t>();
    op.mode = r.Number<mode_t>();
    op.uid = r.Number<uid_t>();
    op.gid = r.Number<gid_t>();
    op.size_text = r.Bytes();
    op.mode_text = r.Bytes();
    op.uid_text = r.Bytes();
    op.gid_text = r.Bytes();
    plan.mounts.ops.push_back(std::move(op));
  }
  const std::string filter = r.Bytes();
  if (filter.size() % sizeof(sock_filter) != 0) {
    return absl::InvalidArgumentError("sandbox plan: the seccomp program is truncated");
  }
  plan.seccomp.resize(filter.size() / sizeof(sock_filter));
  memcpy(plan.seccomp.data(), filter.data(), filter.size());
  plan.path = r.Bytes();
  plan.argv = r.Strings();
  plan.env = r.Strings();
  plan.cwd = r.Bytes();
  plan.hostname = r.Bytes();
  plan.uid = r.Number<uid_t>();
  plan.gid = r.Number<gid_t>();
  plan.init_uid = r.Number<uid_t>();
  plan.init_gid = r.Number<gid_t>();
  plan.owner_uid = r.Number<uid_t>();
  plan.clear_groups = r.Number<bool>();
  const auto n_rlimits = r.Number<uint64_t>();
  for (uint64_t i = 0; i < n_rlimits && r.good(); ++i) {
    ChildRlimit limit;
    limit.resource = r.Number<int>();
    limit.soft = r.Number<rlim_t>();
    limit.hard = r.Number<rlim_t>();
    plan.rlimits.push_back(limit);
  }
  plan.machine = r.Number<bool>();
  plan.label = r.Bytes();
  plan.egress_port = r.Number<uint16_t>();
  if (!r.ok()) return absl::InvalidArgumentError("sandbox plan: malformed message");
  return plan;
}

}  // namespace warden
