// Passing an open descriptor to another process over a Unix socket (SCM_RIGHTS): worker mode's
// connection handoff, where the front accepts a client's TCP connection and a worker serves it
// (docs/server.md "Worker mode").
#pragma once

#include "absl/status/statusor.h"

namespace gpucompute {

// Sends `fd` over the Unix socket `channel` (the receiver gets its own descriptor for the same
// open file; the caller still owns `fd`). Never raises SIGPIPE: a closed peer is UNAVAILABLE.
absl::Status SendDescriptor(int channel, int fd);

// The next descriptor sent over `channel` (close-on-exec), blocking until one arrives.
// NOT_FOUND once the sender has closed its end (or the socket was shut down); INTERNAL for a
// message that carries no descriptor.
absl::StatusOr<int> ReceiveDescriptor(int channel);

}  // namespace gpucompute
