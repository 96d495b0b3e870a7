// Connections by peer (see peer_connections.h).
#include "common/peer_connections.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>

#include "common/descriptor_limit.h"

namespace gpucompute {

std::string PeerConnections::PeerOf(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return "";
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    return inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text)) != nullptr ? text : "";
  }
  if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    if (IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) {
      in_addr v4{};
      std::copy_n(v6->sin6_addr.s6_addr + 12, 4, reinterpret_cast<unsigned char*>(&v4));
      return inet_ntop(AF_INET, &v4, text, sizeof(text)) != nullptr ? text : "";
    }
    return inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text)) != nullptr ? text : "";
  }
  return "";
}

PeerConnectionLimits PeerConnections::limits() const {
  if (limits_.per_peer >= 0 && limits_.total >= 0) return limits_;
  const int64_t descriptors = OpenDescriptorLimit();
  PeerConnectionLimits in_force = limits_;
  if (in_force.per_peer < 0) in_force.per_peer = std::max<int64_t>(1, descriptors / 2);
  if (in_force.total < 0) {
    in_force.total = std::max<int64_t>(1, descriptors - std::min<int64_t>(256, descriptors / 4));
  }
  return in_force;
}

bool PeerConnections::Admit(int fd) {
  const std::string peer = PeerOf(fd);
  if (peer.empty()) return true;  // not an IP connection: not counted
  struct stat st {};
  if (fstat(fd, &st) != 0) return true;
  const PeerConnectionLimits in_force = limits();
  absl::MutexLock lock(&mu_);
  std::vector<Connection>& held = peers_[peer];
  if (in_force.per_peer > 0 && static_cast<int64_t>(held.size()) >= in_force.per_peer) {
    Prune(held);
    if (static_cast<int64_t>(held.size()) >= in_force.per_peer) {
      ++refused_peer_;
      return false;
    }
  }
  if (in_force.total > 0 && open_ >= in_force.total) {
    PruneAll();
    if (open_ >= in_force.total) {
      ++refused_total_;
      if (peers_[peer].empty()) peers_.erase(peer);
      return false;
    }
  }
  peers_[peer].push_back(Connection{fd, st.st_dev, st.st_ino});  // PruneAll may have rehashed
  ++open_;
  // Peers whose connections all closed stay listed until a prune: keep the list bounded by
  // the connections open, whatever number of addresses connect over time.
  if (peers_.size() > 4096 && static_cast<int64_t>(peers_.size()) > 2 * open_) PruneAll();
  return true;
}

void PeerConnections::Prune(std::vector<Connection>& peer) {
  const size_t before = peer.size();
  peer.erase(std::remove_if(peer.begin(), peer.end(),
                            [](const Connection& c) {
                              struct stat st {};
                              return fstat(c.fd, &st) != 0 || st.st_dev != c.device ||
                                     st.st_ino != c.inode;
                            }),
             peer.end());
  open_ -= static_cast<int64_t>(before - peer.size());
}

void PeerConnections::PruneAll() {
  for (auto it = peers_.begin(); it != peers_.end();) {
    Prune(it->second);
    if (it->second.empty()) {
      peers_.erase(it++);
    } else {
      ++it;
    }
  }
}

PeerConnectionStats PeerConnections::stats() {
  absl::MutexLock lock(&mu_);
  PeerConnectionStats s;
  s.open = open_;
  s.peers = static_cast<int64_t>(peers_.size());
  s.refused_peer = refused_peer_;
  s.refused_total = refused_total_;
  return s;
}

}  // namespace gpucompute
