#include "kernel/snapshot_archive.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace warden {
namespace {

// An unlinked temporary file holding `data`, read back through `fd`.
UniqueFd TempFile(const std::string& data) {
  UniqueFd fd(open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  EXPECT_TRUE(fd.valid());
  EXPECT_EQ(write(fd.get(), data.data(), data.size()), static_cast<ssize_t>(data.size()));
  return fd;
}

std::string Contents(const UniqueFd& fd) {
  std::string out(1 << 20, '\0');
  const ssize_t n = pread(fd.get(), out.data(), out.size(), 0);
  out.resize(n < 0 ? 0 : n);
  return out;
}

TEST(SnapshotArchiveTest, CopiesExactlyItsBytesAndCanBeCopiedAgain) {
  std::string data(300'000, 'a');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  SnapshotArchive archive{TempFile(data + "trailing bytes past the recorded size"),
                          static_cast<int64_t>(data.size())};
  for (int copy = 0; copy < 2; ++copy) {  // offsets are explicit: the position never moves
    UniqueFd to = TempFile("");
    ASSERT_TRUE(CopyArchive(archive, to).ok());
    EXPECT_EQ(Contents(to), data);
  }
}

TEST(SnapshotArchiveTest, AnArchiveShorterThanRecordedIsDataLoss) {
  SnapshotArchive archive{TempFile("short"), 1000};
  UniqueFd to = TempFile("");
  EXPECT_EQ(CopyArchive(archive, to).code(), absl::StatusCode::kDataLoss);
}

TEST(SnapshotArchiveTest, CloseLaterClosesTheDescriptor) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  UniqueFd reader(fds[0]);
  CloseLater(UniqueFd(fds[1]));
  // The pipe's only writer closed: the reader sees it hang up (within a
  // deadline, so a closer that never runs fails instead of hanging).
  struct pollfd pfd = {reader.get(), POLLIN, 0};
  ASSERT_EQ(poll(&pfd, 1, 30'000), 1);
  EXPECT_TRUE(pfd.revents & POLLHUP);
  char byte;
  EXPECT_EQ(read(reader.get(), &byte, 1), 0);
}

}  // namespace
}  // namespace warden
