// SCM_RIGHTS over a Unix socket (see descriptor_passing.h).
#include "server/transport/descriptor_passing.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace gpucompute {
namespace {

// One byte of payload travels with each descriptor (a message may not be empty).
constexpr char kTag = 'F';

// A message of one byte with room for one descriptor, for sendmsg and recvmsg alike.
struct OneDescriptorMessage {
  OneDescriptorMessage() {
    msg.msg_iov = &io;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
  }
  OneDescriptorMessage(const OneDescriptorMessage&) = delete;
  OneDescriptorMessage& operator=(const OneDescriptorMessage&) = delete;

  char byte = kTag;
  iovec io{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
};

}  // namespace

absl::Status SendDescriptor(int channel, int fd) {
  OneDescriptorMessage m;
  msghdr& msg = m.msg;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  for (;;) {
    if (sendmsg(channel, &msg, MSG_NOSIGNAL) == 1) return absl::OkStatus();
    if (errno == EINTR) continue;
    const int err = errno;
    if (err == EPIPE || err == ECONNRESET || err == ENOTCONN) {
      return absl::UnavailableError(absl::StrCat("the receiving process is gone: ", std::strerror(err)));
    }
    return absl::InternalError(absl::StrCat("sendmsg(SCM_RIGHTS): ", std::strerror(err)));
  }
}

absl::StatusOr<int> ReceiveDescriptor(int channel) {
  OneDescriptorMessage m;
  msghdr& msg = m.msg;
  ssize_t n = 0;
  do {
    n = recvmsg(channel, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n == 0) return absl::NotFoundError("the sending process closed its end");
  if (n < 0) return absl::InternalError(absl::StrCat("recvmsg(SCM_RIGHTS): ", std::strerror(errno)));
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int))) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
      if ((msg.msg_flags & MSG_CTRUNC) == 0) return fd;
      close(fd);
    }
  }
  return absl::InternalError("a message on the handoff socket carried no descriptor");
}

}  // namespace gpucompute
