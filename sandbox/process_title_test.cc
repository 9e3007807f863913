// What `ps` reads of a process named with process_title.h: its comm and its
// command line, set and given back, in a child of this test (no privilege
// needed, as in a sandbox's init), and the fallback without PR_SET_MM_MAP.
#include "sandbox/process_title.h"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace warden {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A child of this process that runs `step` (system calls only: it is a
// fork of a process that may have threads) each time it is told to, and
// says when it has; the test reads its /proc files in between.
class Child {
 public:
  template <typename Step>
  explicit Child(Step step) {
    int go[2], done[2];
    EXPECT_EQ(pipe(go), 0);
    EXPECT_EQ(pipe(done), 0);
    pid_ = fork();
    if (pid_ == 0) {
      close(go[1]);
      close(done[0]);
      char c;
      for (int n = 0; read(go[0], &c, 1) == 1; ++n) {
        step(n);
        if (write(done[1], "x", 1) != 1) _exit(1);
      }
      _exit(0);
    }
    close(go[0]);
    close(done[1]);
    go_ = go[1];
    done_ = done[0];
  }
  ~Child() {
    close(go_);
    close(done_);
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  // Runs the next step and waits for it.
  void Step() {
    char c;
    ASSERT_EQ(write(go_, "x", 1), 1);
    ASSERT_EQ(read(done_, &c, 1), 1);
  }
  std::string comm() const { return ReadFile(absl::StrCat("/proc/", pid_, "/comm")); }
  std::string cmdline() const { return ReadFile(absl::StrCat("/proc/", pid_, "/cmdline")); }

 private:
  pid_t pid_ = -1;
  int go_ = -1, done_ = -1;
};

// On the heap, as an init keeps its title on its stack: the kernel shows a
// command line only from anonymous memory (process_title.h). Declared
// before the Child, so that it outlives the child's use of its copy.
std::unique_ptr<ProcessTitle> NewTitle() { return std::make_unique<ProcessTitle>(); }

TEST(ProcessLayoutTest, IsThisProcesssOwn) {
  auto layout = ReadProcessLayout();
  ASSERT_TRUE(layout.ok()) << layout.status();
  // The argument strings start with argv[0] and are what /proc shows.
  EXPECT_STREQ(reinterpret_cast<const char*>(layout->arg_start), program_invocation_name);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(layout->arg_start), layout->arg_end - layout->arg_start),
            ReadFile("/proc/self/cmdline"));
  EXPECT_LT(layout->start_code, layout->end_code);
  EXPECT_LE(layout->env_start, layout->env_end);
}

TEST(ProcessTitleTest, AnInitShowsWhatItIsForAndItsProgramWhatItRuns) {
  auto layout = ReadProcessLayout();
  ASSERT_TRUE(layout.ok()) << layout.status();
  const std::string own = ReadFile("/proc/self/cmdline");
  std::unique_ptr<ProcessTitle> title = NewTitle();
  Child child([&](int step) {
    if (step == 0) TitleSandboxInit(&*layout, "s-0123456789abcdef", /*may_overwrite=*/true, title.get());
    if (step == 1) TitleSandboxInit(&*layout, "s-fedcba", /*may_overwrite=*/true, title.get());
    if (step == 2) RestoreProgramTitle(&*layout, "/usr/bin/python3");
  });
  child.Step();
  EXPECT_EQ(child.comm(), "warden-sandbox\n");
  EXPECT_EQ(child.cmdline(), std::string("warden-sandbox s-0123456789abcdef\0", 34));
  child.Step();  // renamed: a pooled sandbox given to a session
  EXPECT_EQ(child.cmdline(), std::string("warden-sandbox s-fedcba\0", 24));
  child.Step();  // what a fork server's program run in place shows
  EXPECT_EQ(child.comm(), "python3\n");
  EXPECT_EQ(child.cmdline(), own);
}

TEST(ProcessTitleTest, ALongLabelIsCutAndNoLabelLeavesTheNameAlone) {
  auto layout = ReadProcessLayout();
  ASSERT_TRUE(layout.ok()) << layout.status();
  std::unique_ptr<ProcessTitle> title = NewTitle();
  const std::string long_label(300, 'x');
  Child child([&](int step) {
    TitleSandboxInit(&*layout, step == 0 ? long_label.c_str() : nullptr, true, title.get());
  });
  child.Step();
  EXPECT_EQ(child.cmdline(),
            absl::StrCat("warden-sandbox ", std::string(ProcessTitle::kMaxLabel, 'x'), std::string(1, '\0')));
  child.Step();
  EXPECT_EQ(child.cmdline(), std::string("warden-sandbox\0", 15));
}

TEST(ProcessTitleTest, WithoutPrSetMmMapTheArgumentStringsAreOverwrittenCutToTheirLength) {
  auto real = ReadProcessLayout();
  ASSERT_TRUE(real.ok()) << real.status();
  // A layout the kernel refuses (EINVAL: code ending before it starts), as
  // a kernel without CONFIG_CHECKPOINT_RESTORE refuses every one.
  ProcessLayout refused = *real;
  refused.end_code = refused.start_code;
  const std::string own = ReadFile("/proc/self/cmdline");
  std::unique_ptr<ProcessTitle> title = NewTitle();
  Child overwrites([&](int) { TitleSandboxInit(&refused, "s-1", /*may_overwrite=*/true, title.get()); });
  overwrites.Step();
  EXPECT_EQ(overwrites.comm(), "warden-sandbox\n");
  std::string expected = std::string("warden-sandbox s-1").substr(0, own.size() - 1);
  expected.resize(own.size(), '\0');
  EXPECT_EQ(overwrites.cmdline(), expected);
  // A fork server's init keeps its argument strings: its program, run in
  // place, would inherit them.
  Child keeps([&](int) { TitleSandboxInit(&refused, "s-1", /*may_overwrite=*/false, title.get()); });
  keeps.Step();
  EXPECT_EQ(keeps.comm(), "warden-sandbox\n");
  EXPECT_EQ(keeps.cmdline(), own);
}

}  // namespace
}  // namespace warden
