// The worker's end of worker mode's connection handoff (docs/server.md "Worker mode",
// `--worker_connections=handoff`): a thread receives the client connections the front accepted
// (descriptor_passing.h) and adds each to this process's gRPC server, which then serves it
// whole, under its own limits, as a plaintext connection. Each is first admitted by the
// process's connection table (per-peer and total limits), which closes the refused ones.
#pragma once

#include <memory>
#include <thread>

#include <grpcpp/server.h>

#include "absl/status/statusor.h"
#include "common/peer_connections.h"

namespace gpucompute {

class HandedConnections {
 public:
  // Takes `channel` (the worker's end of its socket pair with the front); `server` (started)
  // and `table` (may be null: no limits) must outlive this object.
  static absl::StatusOr<std::unique_ptr<HandedConnections>> Start(int channel, grpc::Server* server,
                                                                  PeerConnections* table);
  ~HandedConnections();  // Stop()
  HandedConnections(const HandedConnections&) = delete;
  HandedConnections& operator=(const HandedConnections&) = delete;

  // Takes no more connections (those taken stay with the server) and joins the thread.
  void Stop();

 private:
  HandedConnections(int channel, grpc::Server* server, PeerConnections* table)
      : channel_(channel), server_(server), table_(table) {}
  void Run();

  const int channel_;
  grpc::Server* const server_;
  PeerConnections* const table_;
  std::thread thread_;
};

}  // namespace gpucompute
