// Descriptors passed over a Unix socket (descriptor_passing.h, worker mode's connection
// handoff): the receiver gets a working descriptor for the same open file, and either end
// closing is reported, not raised as SIGPIPE.
#include "server/transport/descriptor_passing.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace gpucompute {
namespace {

class SocketPair : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends_), 0); }
  void TearDown() override {
    for (int fd : ends_) {
      if (fd >= 0) close(fd);
    }
  }
  int ends_[2] = {-1, -1};
};

TEST_F(SocketPair, TheReceiverWritesThroughThePassedDescriptor) {
  int pipe_ends[2];
  ASSERT_EQ(pipe2(pipe_ends, O_CLOEXEC), 0);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(SendDescriptor(ends_[0], pipe_ends[1]).ok());
  close(pipe_ends[1]);  // the sender's copy: the passed ones keep the pipe open
  for (char c : {'a', 'b', 'c'}) {
    absl::StatusOr<int> fd = ReceiveDescriptor(ends_[1]);
    ASSERT_TRUE(fd.ok()) << fd.status();
    EXPECT_NE(fcntl(*fd, F_GETFD) & FD_CLOEXEC, 0);
    ASSERT_EQ(write(*fd, &c, 1), 1);
    close(*fd);
  }
  char got[4] = {};
  ASSERT_EQ(read(pipe_ends[0], got, 4), 3);  // then end of file: every copy is closed
  EXPECT_STREQ(got, "abc");
  close(pipe_ends[0]);
}

TEST_F(SocketPair, AClosedEndIsReportedNotRaised) {
  close(ends_[0]);
  ends_[0] = -1;
  EXPECT_TRUE(absl::IsNotFound(ReceiveDescriptor(ends_[1]).status()));
  const absl::Status sent = SendDescriptor(ends_[1], STDIN_FILENO);  // no SIGPIPE kills the test
  EXPECT_TRUE(absl::IsUnavailable(sent)) << sent;
}

TEST_F(SocketPair, AMessageWithoutADescriptorIsAnError) {
  ASSERT_EQ(send(ends_[0], "x", 1, 0), 1);
  EXPECT_EQ(ReceiveDescriptor(ends_[1]).status().code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace gpucompute
