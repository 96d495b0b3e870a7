// The server's accept4(): gRPC's listeners call it for every connection they accept; the
// connections a PeerConnections table refuses are closed at once (the peer sees its connection
// reset) and the next pending one is taken, so that the listener never sees an error for them.
// Defined in the executable, it stands in for the C library's (the dynamic linker resolves
// gRPC's calls to it) and makes the same system call; until InstallAcceptGuard it does only
// that, and sockets that are not IP connections are never refused.
#pragma once

#include "common/peer_connections.h"

namespace gpucompute {

// From now on, connections accepted by any listener of this process are admitted by `table`
// (borrowed for the life of the process).
void InstallAcceptGuard(PeerConnections* table);

}  // namespace gpucompute
