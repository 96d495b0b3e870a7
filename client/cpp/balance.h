// Round robin over every address of a target (ClientOptions::round_robin, the default): a
// target of several servers ("ipv4:10.0.0.1:50051,10.0.0.2:50051", or a name with several
// addresses such as a Kubernetes headless Service, "dns:///gpucompute:50051") gets one pinned
// client per address, resolved by Client::Connect; each operation call goes to the next of them
// with every message it sends (a plain call's uploads, slices and fetches reach one server).
// Models and shared-memory regions are set up on every server. Resident tensors live on one
// server: a balanced client refuses calls that make or name them (FAILED_PRECONDITION) and
// Client::Pin gives a client of one server for them. The Python client's rules are the same,
// except that it follows the tensors it made to their server (docs/python.md "Several servers").
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace gpucompute::client {

// Every server address `target` names, each a target of its own: "ipv4:" and "ipv6:" lists
// item by item; "dns:///host:port", "dns://authority/host:port" and "host:port" through the
// system's resolver (its order, duplicates removed, IPv4's only when it gives both families: a
// name such as localhost is one server reachable two ways). A target of one endpoint
// ("unix:..."), without a port or that does not resolve gives {target}: the channel's own
// resolver then reports what is wrong when a call is made.
std::vector<std::string> TargetAddresses(const std::string& target);

// The host name `target` asks for ("dns:///svc:443" -> "svc"), for TLS's name check on one of
// its addresses; nullopt for address lists and socket paths.
std::optional<std::string> TargetHost(const std::string& target);

}  // namespace gpucompute::client
