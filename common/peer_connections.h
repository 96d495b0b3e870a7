// The TCP connections the server holds open, by peer address: each peer (an IP address) may
// hold at most `per_peer` of them and all peers together at most `total`, so that no peer can
// take every descriptor (gRPC stops listening for good when accept() finds none left), and
// others can still connect while one peer is at its limit.
//
// gRPC (1.51) has no hook at accept time and its file-descriptor API bypasses TLS and the
// memory quota, so the server decides in its own accept4() (server/accept_guard.cc, which
// calls Admit for each connection gRPC accepts and closes the refused ones at once). A
// connection's end is not reported to us: each admitted one is kept with the socket's identity
// (device and inode), and a peer's list is pruned of the connections closed since (fstat no
// longer finds that socket at that descriptor) whenever it would be over its limit, so counts
// are exact when a decision depends on them.
//
// Unix-socket and other non-IP connections (worker mode's workers) are not counted.
// Thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace gpucompute {

// Negative: derived from the open-descriptor limit when each connection is admitted (it may be
// changed while the server runs): per_peer half of it, total all of it less a quarter (at most
// 256) kept for files and shared memory.
struct PeerConnectionLimits {
  int64_t per_peer = -1;  // 0: no limit per peer
  int64_t total = -1;     // 0: no limit for all peers together
};

struct PeerConnectionStats {
  int64_t open = 0;     // admitted and not seen closed (pruned lazily)
  int64_t peers = 0;
  int64_t refused_peer = 0;   // refused: the peer held per_peer
  int64_t refused_total = 0;  // refused: all peers held total
};

class PeerConnections {
 public:
  explicit PeerConnections(PeerConnectionLimits limits) : limits_(limits) {}
  PeerConnections(const PeerConnections&) = delete;
  PeerConnections& operator=(const PeerConnections&) = delete;

  // True when the just-accepted connection `fd` is admitted (and now counted), false when it
  // would put its peer or the server over a limit (the caller closes it).
  bool Admit(int fd);

  PeerConnectionStats stats();
  // The limits in force now (negative ones derived from the descriptor limit).
  PeerConnectionLimits limits() const;

  // The peer of a connected socket: its IP address as text (IPv4-mapped IPv6 as IPv4), or
  // empty when it is not an IP socket.
  static std::string PeerOf(int fd);

 private:
  struct Connection {
    int fd;
    dev_t device;
    ino_t inode;
  };
  // Drops `peer`'s connections whose descriptor no longer holds the socket admitted there.
  void Prune(std::vector<Connection>& peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PruneAll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const PeerConnectionLimits limits_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::vector<Connection>> peers_ ABSL_GUARDED_BY(mu_);
  int64_t open_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t refused_peer_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t refused_total_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gpucompute
