#include "server/template_build.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>  // strerrordesc_np
#include <sys/mount.h>  // glibc 2.36: mount_setattr
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "images/fs_util.h"
#include "nlohmann/json.hpp"
#include "sandbox/cgroup.h"
#include "sandbox/unique_fd.h"

extern char** environ;

namespace warden {
namespace {

constexpr size_t kMaxDockerfileBytes = 1 << 20;
constexpr uid_t kBuildIds = 65'536;
// The instructions buildah runs here; the rest (ONBUILD, HEALTHCHECK, ...)
// mean nothing to a template and are refused by name.
const std::set<std::string> kInstructions = {"FROM",   "RUN",   "COPY",       "ADD",   "ENV",        "WORKDIR",
                                             "USER",   "ARG",   "LABEL",      "CMD",   "ENTRYPOINT", "EXPOSE",
                                             "SHELL",  "STOPSIGNAL", "VOLUME", "MAINTAINER"};

std::string BaseImage(size_t index) { return absl::StrCat("localhost/warden-base-", index); }

// 'text', for sh.
std::string Quote(absl::string_view text) { return absl::StrCat("'", absl::StrReplaceAll(text, {{"'", "'\\''"}}), "'"); }

// Checks one instruction (its lines joined) and appends what buildah gets.
class Checker {
 public:
  absl::Status Instruction(int line, const std::string& logical, const std::vector<std::string>& raw) {
    std::vector<std::string> words = absl::StrSplit(logical, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (words.empty()) return absl::OkStatus();
    const std::string op = absl::AsciiStrToUpper(words[0]);
    auto fail = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("Dockerfile line ", line, ": ", op, ": ", why));
    };
    if (!kInstructions.count(op)) {
      return fail("not an instruction a template build runs (FROM, RUN, COPY, ADD, ENV, WORKDIR, USER, ARG, "
                  "LABEL, CMD, ENTRYPOINT, EXPOSE, SHELL)");
    }
    ++out_.instructions;
    if (op != "FROM" && op != "ARG" && stages_ == 0) return fail("the Dockerfile must begin with FROM");
    if (op == "FROM") return From(words, fail);
    if (op == "RUN" && words.size() > 1 && absl::StartsWith(words[1], "--")) {
      return fail(absl::StrCat("RUN takes no flags in a template build (", words[1],
                               "): its steps have no network and mount nothing but the image"));
    }
    if (op == "COPY" || op == "ADD") {
      for (size_t i = 1; i < words.size() && absl::StartsWith(words[i], "--"); ++i) {
        if (absl::StartsWith(words[i], "--from=")) {
          const std::string from = absl::AsciiStrToLower(words[i].substr(7));
          if (!aliases_.count(from)) {
            return fail(absl::StrCat("--from=", from, " names no earlier stage of this Dockerfile (images come only "
                                     "from FROM, which names a template)"));
          }
        }
      }
    }
    for (const std::string& r : raw) absl::StrAppend(&out_.text, r, "\n");
    return absl::OkStatus();
  }
  CheckedDockerfile Done() && { return std::move(out_); }
  int stages() const { return stages_; }

 private:
  template <typename Fail>
  absl::Status From(const std::vector<std::string>& words, Fail fail) {
    if (words.size() > 1 && absl::StartsWith(words[1], "--")) return fail("FROM takes no flags here");
    const bool aliased = words.size() == 4 && absl::AsciiStrToUpper(words[2]) == "AS";
    if (words.size() != 2 && !aliased) return fail("FROM IMAGE [AS NAME]");
    const std::string& image = words[1];
    if (absl::StrContains(image, "$")) {
      return fail("FROM names its template outright here (no build arguments in it)");
    }
    std::string base;
    if (image == "scratch" || aliases_.count(absl::AsciiStrToLower(image))) {
      base = image;
    } else if (images::TemplateStore::CheckName(image).ok()) {
      size_t index = 0;
      while (index < out_.bases.size() && out_.bases[index] != image) ++index;
      if (index == out_.bases.size()) out_.bases.push_back(image);
      base = BaseImage(index);
    } else {
      return fail(absl::StrCat("'", image, "' is no template name: a build starts from a template of this server "
                               "(warden template list), an earlier stage, or scratch; it pulls from no registry"));
    }
    absl::StrAppend(&out_.text, "FROM ", base);
    if (aliased) {
      absl::StrAppend(&out_.text, " AS ", words[3]);
      aliases_.insert(absl::AsciiStrToLower(words[3]));
    }
    absl::StrAppend(&out_.text, "\n");
    aliases_.insert(absl::StrCat(stages_++));
    return absl::OkStatus();
  }

  CheckedDockerfile out_;
  std::set<std::string> aliases_;  // earlier stages' names and numbers
  int stages_ = 0;
};

// What the child of the build's namespaces does, prepared beforehand: it
// may only make system calls (the daemon has threads).
struct ChildPlan {
  int go_fd = -1;       // read one byte, once the maps are written
  int output_fd = -1;   // stdout and stderr
  int null_fd = -1;     // stdin
  std::string root;     // the new root's mount point (an empty directory)
  std::string build;    // bound at /tmp in it
  struct Entry {
    std::string host, target, link;  // a symlink when link is set
  };
  std::vector<Entry> system;        // the host's system directories, read-only
  std::vector<std::string> devices;  // host /dev nodes, bound one by one
  std::vector<std::string> targets;  // pre-formatted: root + "/dev/" + node
  std::string dev, proc, sys, tmp, dev_pts, dev_shm;
  std::vector<char*> argv, envp;
};

[[noreturn]] void ChildFail(int fd, const char* what) {
  const int error = errno;
  (void)!write(fd, what, strlen(what));
  (void)!write(fd, ": ", 2);
  const char* text = strerrordesc_np(error);  // a static string: safe after clone
  if (text == nullptr) text = "unknown error";
  (void)!write(fd, text, strlen(text));
  (void)!write(fd, "\n", 1);
  _exit(125);
}

int ReadOnly(const char* path) {
  struct mount_attr attr = {};
  attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
  return mount_setattr(AT_FDCWD, path, AT_RECURSIVE, &attr, sizeof(attr));
}

[[noreturn]] void Child(const ChildPlan& plan) {
  const int out = plan.output_fd;
  char go;
  if (read(plan.go_fd, &go, 1) != 1) _exit(126);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) ChildFail(out, "make / private");
  if (mount("tmpfs", plan.root.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m,uid=0,gid=0") != 0) {
    ChildFail(out, "tmpfs for the build's root");
  }
  // Still the host's root (its id unmapped here): reach the build's
  // directory, beneath the store's 0700 one, and the new root; then become
  // the namespace's root, which may create files (an unmapped id may not),
  // and make the rest relative to the new root.
  const int build = open(plan.build.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (build < 0) ChildFail(out, "the build's directory");
  if (chdir(plan.root.c_str()) != 0) ChildFail(out, "chdir to the build's root");
  if (setgroups(0, nullptr) != 0 || setresgid(0, 0, 0) != 0 || setresuid(0, 0, 0) != 0) {
    ChildFail(out, "become the namespace's root");
  }
  for (const ChildPlan::Entry& e : plan.system) {
    if (!e.link.empty()) {
      if (symlink(e.link.c_str(), e.target.c_str()) != 0) ChildFail(out, e.target.c_str());
      continue;
    }
    if (mkdir(e.target.c_str(), 0755) != 0 ||
        mount(e.host.c_str(), e.target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0 ||
        ReadOnly(e.target.c_str()) != 0) {
      ChildFail(out, e.host.c_str());
    }
  }
  for (const std::string* dir : {&plan.dev, &plan.proc, &plan.sys, &plan.tmp}) {
    if (mkdir(dir->c_str(), 0755) != 0) ChildFail(out, dir->c_str());
  }
  if (mount("tmpfs", plan.dev.c_str(), "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=1m") != 0) {
    ChildFail(out, "tmpfs for /dev");
  }
  if (mkdir(plan.dev_pts.c_str(), 0755) != 0 || mkdir(plan.dev_shm.c_str(), 01777) != 0) ChildFail(out, "/dev");
  for (size_t i = 0; i < plan.devices.size(); ++i) {
    const int fd = open(plan.targets[i].c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
    if (fd < 0) ChildFail(out, plan.targets[i].c_str());
    close(fd);
    if (mount(plan.devices[i].c_str(), plan.targets[i].c_str(), nullptr, MS_BIND, nullptr) != 0) {
      ChildFail(out, plan.devices[i].c_str());
    }
  }
  if (mount("proc", plan.proc.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    ChildFail(out, "proc");
  }
  if (mount("/sys", plan.sys.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0 || ReadOnly(plan.sys.c_str()) != 0) {
    ChildFail(out, "/sys");
  }
  char build_path[64] = "/proc/self/fd/";
  {
    char digits[16];
    int n = 0;
    for (int fd = build; fd > 0 || n == 0; fd /= 10) digits[n++] = static_cast<char>('0' + fd % 10);
    size_t at = strlen(build_path);
    while (n > 0) build_path[at++] = digits[--n];
    build_path[at] = '\0';
  }
  if (mount(build_path, plan.tmp.c_str(), nullptr, MS_BIND, nullptr) != 0) ChildFail(out, "the build's /tmp");
  close(build);
  if (syscall(SYS_pivot_root, ".", ".") != 0 || umount2(".", MNT_DETACH) != 0 || chdir("/") != 0) {
    ChildFail(out, "pivot_root");
  }
  if (dup2(plan.null_fd, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0) _exit(125);
  execve(plan.argv[0], plan.argv.data(), plan.envp.data());
  ChildFail(2, "exec /bin/sh");
}

// "STEP 3/5: RUN make" -> kept, for the error.
bool StepLine(absl::string_view line) { return absl::StartsWith(line, "STEP ") && absl::StrContains(line, ": "); }

}  // namespace

absl::StatusOr<CheckedDockerfile> CheckDockerfile(const std::string& dockerfile) {
  if (dockerfile.size() > kMaxDockerfileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the Dockerfile is ", dockerfile.size() >> 10, " KiB; at most 1 MiB is taken"));
  }
  if (dockerfile.find('\0') != std::string::npos) return absl::InvalidArgumentError("the Dockerfile holds a NUL");
  Checker checker;
  std::vector<std::string> lines = absl::StrSplit(dockerfile, '\n');
  std::string logical;
  std::vector<std::string> raw;
  int first = 0;
  bool directives = true;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string line = lines[i];
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const absl::string_view trimmed = absl::StripAsciiWhitespace(line);
    if (logical.empty() && raw.empty()) {
      if (trimmed.empty() || trimmed[0] == '#') {
        if (directives && trimmed.size() > 1) {
          std::string d = absl::AsciiStrToLower(std::string(trimmed.substr(1)));
          d.erase(std::remove_if(d.begin(), d.end(), [](char c) { return c == ' ' || c == '\t'; }), d.end());
          if (absl::StartsWith(d, "escape=") && d != "escape=\\") {
            return absl::InvalidArgumentError(
                absl::StrCat("Dockerfile line ", i + 1, ": only \\ escapes lines here (the escape directive)"));
          }
        }
        continue;  // comments and blank lines are left out
      }
      directives = false;
      first = static_cast<int>(i + 1);
    } else if (!trimmed.empty() && trimmed[0] == '#') {
      raw.push_back(line);  // a comment inside a continued instruction
      continue;
    }
    raw.push_back(line);
    absl::string_view body = absl::StripTrailingAsciiWhitespace(line);
    if (absl::ConsumeSuffix(&body, "\\")) {
      absl::StrAppend(&logical, body, " ");
      continue;
    }
    absl::StrAppend(&logical, body);
    RETURN_IF_ERROR(checker.Instruction(first, logical, raw));
    logical.clear();
    raw.clear();
  }
  if (!raw.empty()) RETURN_IF_ERROR(checker.Instruction(first, logical, raw));
  if (checker.stages() == 0) return absl::InvalidArgumentError("the Dockerfile has no FROM");
  CheckedDockerfile out = std::move(checker).Done();
  return out;
}

absl::StatusOr<std::string> RunBuild(const BuildJob& job) {
  // One build at a time: they share the build's host ids.
  static absl::Mutex* const one_at_a_time = new absl::Mutex;
  if (!one_at_a_time->TryLock()) {
    if (job.line) job.line("waiting for another build to finish");
    one_at_a_time->Lock();
  }
  struct Unlock {
    ~Unlock() { one_at_a_time->Unlock(); }
  } unlock;
  const uid_t host = job.host_id_base;
  const std::string build = job.dir + "/build";
  const std::string root = job.dir + "/root";
  for (const std::string& d : {build, root}) {
    if (mkdir(d.c_str(), 0700) != 0) return absl::ErrnoToStatus(errno, "mkdir " + d);
  }
  if (chown(build.c_str(), host, host) != 0) return absl::ErrnoToStatus(errno, "chown " + build);

  // The templates FROM names, as tars of their roots with their owners,
  // for buildah to make images of; and the script that does it all.
  std::string script = "set -e\nB='buildah --root /tmp/storage --runroot /tmp/run --storage-driver vfs'\n"
                       "mkdir -p /tmp/storage /tmp/run /tmp/tmp /tmp/home /tmp/context\n";
  if (!job.context_tar.empty()) {
    const std::string context = build + "/context.tar";
    if (rename(job.context_tar.c_str(), context.c_str()) != 0) return absl::ErrnoToStatus(errno, "move the context");
    chmod(context.c_str(), 0644);
    script += "tar -C /tmp/context --no-same-owner --no-overwrite-dir -xf /tmp/context.tar\n";
  }
  for (size_t i = 0; i < job.bases.size(); ++i) {
    const images::TemplateInfo& base = job.bases[i];
    if (job.line) job.line(absl::StrCat("FROM ", base.name, ": the template's files (", base.size_bytes >> 20, " MiB)"));
    const std::string tar = absl::StrCat(build, "/base-", i, ".tar");
    RETURN_IF_ERROR(images::RunProgram({"/bin/tar", "--numeric-owner", "--xattrs", "--xattrs-include=user.*", "-C",
                                    base.root_path, "-cf", tar, "."}));
    chmod(tar.c_str(), 0644);
    std::string config;
    for (const std::string& e : base.config.env) absl::StrAppend(&config, " --env ", Quote(e));
    if (!base.config.working_dir.empty()) absl::StrAppend(&config, " --workingdir ", Quote(base.config.working_dir));
    if (!base.config.user.empty()) absl::StrAppend(&config, " --user ", Quote(base.config.user));
    if (!base.config.entrypoint.empty()) {
      absl::StrAppend(&config, " --entrypoint ", Quote(nlohmann::json(base.config.entrypoint).dump()));
    }
    if (!base.config.cmd.empty()) {
      absl::StrAppend(&config, " --cmd ", Quote(nlohmann::json(base.config.cmd).dump()));  // exec form
    }
    absl::StrAppend(&script, "c=$($B from scratch)\n$B add --quiet \"$c\" /tmp/base-", i, ".tar / >/dev/null\n");
    if (!config.empty()) absl::StrAppend(&script, "$B config", config, " \"$c\"\n");
    absl::StrAppend(&script, "$B commit --quiet \"$c\" ", BaseImage(i), " >/dev/null\n$B rm \"$c\" >/dev/null\n",
                    "rm /tmp/base-", i, ".tar\n");
  }
  RETURN_IF_ERROR(images::WriteFileAtomically(build + "/Dockerfile", job.dockerfile.text, 0644));
  absl::StrAppend(&script, "$B bud --pull=never --isolation chroot --layers=false -f /tmp/Dockerfile");
  for (const auto& [name, value] : job.build_args) {
    absl::StrAppend(&script, " --build-arg ", Quote(absl::StrCat(name, "=", value)));
  }
  absl::StrAppend(&script, " -t localhost/warden-build /tmp/context\n",
                  "$B push --quiet localhost/warden-build oci-archive:/tmp/image.tar\n");
  RETURN_IF_ERROR(images::WriteFileAtomically(build + "/build.sh", script, 0644));

  // The child's plan, made before it is cloned.
  ChildPlan plan;
  plan.root = root;
  plan.build = build;
  for (const char* dir : {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc"}) {
    const std::string host_path = absl::StrCat("/", dir);
    struct stat st;
    if (lstat(host_path.c_str(), &st) != 0) continue;
    ChildPlan::Entry e{host_path, dir, ""};
    if (S_ISLNK(st.st_mode)) {
      char target[4096];
      const ssize_t n = readlink(host_path.c_str(), target, sizeof(target) - 1);
      if (n <= 0) continue;
      e.link.assign(target, static_cast<size_t>(n));
    } else if (!S_ISDIR(st.st_mode)) {
      continue;
    }
    plan.system.push_back(std::move(e));
  }
  for (const char* node : {"null", "zero", "full", "random", "urandom", "tty"}) {
    plan.devices.push_back(absl::StrCat("/dev/", node));
    plan.targets.push_back(absl::StrCat("dev/", node));
  }
  // Relative to the new root (the child's working directory).
  plan.dev = "dev";
  plan.dev_pts = "dev/pts";
  plan.dev_shm = "dev/shm";
  plan.proc = "proc";
  plan.sys = "sys";
  plan.tmp = "tmp";
  std::vector<std::string> argv = {"/bin/sh", "/tmp/build.sh"};
  std::vector<std::string> env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp/home", "TMPDIR=/tmp/tmp",
                                  "LANG=C.UTF-8", "BUILDAH_ISOLATION=chroot"};
  for (std::string& a : argv) plan.argv.push_back(a.data());
  plan.argv.push_back(nullptr);
  for (std::string& e : env) plan.envp.push_back(e.data());
  plan.envp.push_back(nullptr);

  int go[2], output[2];
  if (pipe2(go, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe");
  UniqueFd go_r(go[0]), go_w(go[1]);
  if (pipe2(output, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe");
  UniqueFd out_r(output[0]), out_w(output[1]);
  UniqueFd null(open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!null) return absl::ErrnoToStatus(errno, "open /dev/null");
  plan.go_fd = go_r.get();
  plan.output_fd = out_w.get();
  plan.null_fd = null.get();

  std::unique_ptr<Cgroup> cgroup;
  if (job.cgroups != nullptr) {
    CgroupLimits limits;
    limits.memory_bytes = job.memory_bytes;
    limits.pids = job.pids;
    ASSIGN_OR_RETURN(cgroup, job.cgroups->CreateGroup(images::RandomName("build-"), limits));
  }
  const long pid = syscall(SYS_clone,
                           CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
                               CLONE_NEWCGROUP | SIGCHLD,
                           nullptr, nullptr, nullptr, 0);
  if (pid < 0) return absl::ErrnoToStatus(errno, "clone the build's namespaces");
  if (pid == 0) Child(plan);
  go_r.Reset();
  out_w.Reset();
  null.Reset();
  struct Reap {
    long pid;
    bool reaped = false;
    int status = 0;
    ~Reap() {
      if (reaped) return;
      kill(static_cast<pid_t>(pid), SIGKILL);
      while (waitpid(static_cast<pid_t>(pid), &status, 0) < 0 && errno == EINTR) {
      }
    }
  } reap{pid};
  const std::string map = absl::StrCat("0 ", host, " ", kBuildIds, "\n");
  for (const char* file : {"uid_map", "gid_map"}) {
    const std::string path = absl::StrCat("/proc/", pid, "/", file);
    UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd || write(fd.get(), map.data(), map.size()) != static_cast<ssize_t>(map.size())) {
      return absl::ErrnoToStatus(errno, "write the build's " + std::string(file));
    }
  }
  if (cgroup) RETURN_IF_ERROR(cgroup->AddProcess(static_cast<pid_t>(pid)));
  if (write(go_w.get(), "g", 1) != 1) return absl::ErrnoToStatus(errno, "start the build");
  go_w.Reset();

  // Its output, line by line, until it ends or runs out of time.
  const absl::Time deadline = absl::Now() + job.timeout;
  std::string pending, step, error;
  std::vector<std::string> tail;
  bool timed_out = false, cancelled = false, too_big = false;
  absl::Time next_measure = absl::Now() + absl::Seconds(2);
  char buffer[8192];
  // buildah's lines name the templates as the Dockerfile did.
  std::vector<std::pair<std::string, std::string>> names;
  for (size_t i = 0; i < job.bases.size(); ++i) names.emplace_back(BaseImage(i), job.bases[i].name);
  auto take = [&](std::string line) {
    line = absl::StrReplaceAll(line, names);
    if (StepLine(line)) step = line;
    if (absl::StartsWith(line, "Error: ")) error = line.substr(7);
    tail.push_back(line);
    if (tail.size() > 5) tail.erase(tail.begin());
    if (job.line) job.line(line);
  };
  for (;;) {
    if (job.cancelled && job.cancelled()) {
      cancelled = true;
      break;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      timed_out = true;
      break;
    }
    if (job.max_bytes > 0 && absl::Now() >= next_measure) {
      absl::StatusOr<images::TreeUsage> usage = images::MeasureTree(build);
      if (usage.ok() && usage->bytes > job.max_bytes) {
        too_big = true;
        break;
      }
      next_measure = absl::Now() + absl::Seconds(2);
    }
    struct pollfd p = {out_r.get(), POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 500)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    const ssize_t n = read(out_r.get(), buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buffer, static_cast<size_t>(n));
    size_t newline;
    while ((newline = pending.find('\n')) != std::string::npos) {
      take(pending.substr(0, newline));
      pending.erase(0, newline + 1);
    }
    if (pending.size() > 16384) {  // a line without end: shown in pieces
      take(pending);
      pending.clear();
    }
  }
  if (!pending.empty()) take(pending);
  if (timed_out || cancelled || too_big) kill(static_cast<pid_t>(pid), SIGKILL);
  while (waitpid(static_cast<pid_t>(pid), &reap.status, 0) < 0 && errno == EINTR) {
  }
  reap.reaped = true;
  bool oom = false;
  if (cgroup) {
    if (auto usage = cgroup->Usage(); usage.ok()) oom = usage->oom_kills > 0;
    cgroup->Destroy().IgnoreError();
  }
  if (cancelled) return absl::CancelledError("the build was stopped: the caller went away");
  const std::string where = step.empty() ? std::string("before its first step")
                                         : absl::StrCat("at ", step.substr(0, step.find(':')), " (",
                                                        step.substr(step.find(": ") + 2), ")");
  if (timed_out) {
    return absl::DeadlineExceededError(absl::StrCat("the build ran out of time ", where, " after ",
                                                    absl::FormatDuration(job.timeout),
                                                    " (templates.build_timeout_ms)"));
  }
  if (too_big) {
    return absl::ResourceExhaustedError(absl::StrCat("the build's files passed ", job.max_bytes >> 20, " MiB ", where,
                                                     " (twice templates.max_image_bytes)"));
  }
  const int status = reap.status;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string why = !error.empty() ? error : absl::StrJoin(tail, "; ");
    if (oom) absl::StrAppend(&why, " (the build passed its memory limit, templates.build_memory_mb)");
    if (WIFSIGNALED(status)) absl::StrAppend(&why, " (killed by signal ", WTERMSIG(status), ")");
    return absl::FailedPreconditionError(absl::StrCat("the build failed ", where, ": ", why));
  }
  return build + "/image.tar";
}

}  // namespace warden
