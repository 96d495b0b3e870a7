// The load tester's gRPC channels: --channels distinct channels (each its own TCP connection)
// spread round-robin over the --target list, with the load-balancing policy and the HTTP/2 and
// message-size settings of TransportConfig, its TLS and (on every call) its bearer token.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/load/config.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace gpucompute::load {

struct LoadChannel {
  std::string target;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<grpc::GenericStub> stub;  // thread-safe; serialized ByteBuffers in and out
};

// The channel arguments of channel number `index` (a distinct "gpucompute.load.channel" value
// and a local subchannel pool keep channels from sharing a connection).
grpc::ChannelArguments MakeChannelArguments(const TransportConfig& transport, int index);

// transport.channels channels (at least one per target), channel i to targets[i % targets].
// INVALID_ARGUMENT without targets or with fewer channels than targets.
absl::StatusOr<std::vector<LoadChannel>> MakeChannels(const TransportConfig& transport);

// Waits until every channel is connected; UNAVAILABLE naming the first that is not by
// `deadline`.
absl::Status WaitForChannels(const std::vector<LoadChannel>& channels, absl::Time deadline);

// The addresses behind the targets, one target per server (client::TargetAddresses: address
// lists item by item, names resolved to every address). For setup that must reach every replica
// (loading a dense model).
std::vector<std::string> ServerAddresses(const std::vector<std::string>& targets);

}  // namespace gpucompute::load
