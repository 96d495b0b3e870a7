// Channel construction for gpucompute-load.
#include "client/load/channels.h"

#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cpp/balance.h"

namespace gpucompute::load {

grpc::ChannelArguments MakeChannelArguments(const TransportConfig& transport, int index) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(transport.max_message_bytes);
  args.SetMaxReceiveMessageSize(transport.max_message_bytes);
  if (!transport.lb_policy.empty()) args.SetLoadBalancingPolicyName(transport.lb_policy);
  // Without these, channels with equal arguments share one subchannel (one TCP connection).
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("gpucompute.load.channel", index);
  if (transport.http2_lookahead_bytes > 0) {
    args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, transport.http2_lookahead_bytes);
  }
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, transport.bdp_probe ? 1 : 0);
  client::SetTlsChannelArguments(transport.tls, &args);
  if (transport.http2_max_frame_bytes > 0) {
    args.SetInt(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, transport.http2_max_frame_bytes);
  }
  if (transport.http2_write_buffer_bytes > 0) {
    args.SetInt(GRPC_ARG_HTTP2_WRITE_BUFFER_SIZE, transport.http2_write_buffer_bytes);
  }
  for (const auto& [key, value] : transport.extra_args) {
    int v = 0;
    if (absl::SimpleAtoi(value, &v)) {
      args.SetInt(key, v);
    } else {
      args.SetString(key, value);
    }
  }
  return args;
}

absl::StatusOr<std::vector<LoadChannel>> MakeChannels(const TransportConfig& transport) {
  if (transport.targets.empty()) return absl::InvalidArgumentError("no --target");
  const int n = transport.channels > 0 ? transport.channels
                                       : static_cast<int>(transport.targets.size());
  if (n < static_cast<int>(transport.targets.size())) {
    return absl::InvalidArgumentError(absl::StrCat("--channels ", n, " is fewer than the ",
                                                   transport.targets.size(), " targets"));
  }
  auto credentials = client::MakeChannelCredentials(transport.tls);
  if (!credentials.ok()) return credentials.status();
  std::vector<LoadChannel> channels;
  channels.reserve(n);
  for (int i = 0; i < n; ++i) {
    LoadChannel c;
    c.target = transport.targets[i % transport.targets.size()];
    c.channel = client::CreateChannelWithToken(c.target, *credentials,
                                               MakeChannelArguments(transport, i), transport.token);
    c.stub = std::make_unique<grpc::GenericStub>(c.channel);
    channels.push_back(std::move(c));
  }
  return channels;
}

absl::Status WaitForChannels(const std::vector<LoadChannel>& channels, absl::Time deadline) {
  for (const LoadChannel& c : channels) {
    if (!c.channel->WaitForConnected(absl::ToChronoTime(deadline))) {
      return absl::UnavailableError(absl::StrCat("cannot connect to ", c.target));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> ServerAddresses(const std::vector<std::string>& targets) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const std::string& target : targets) {
    for (std::string& address : client::TargetAddresses(target)) {
      if (seen.insert(address).second) out.push_back(std::move(address));
    }
  }
  return out;
}

}  // namespace gpucompute::load
