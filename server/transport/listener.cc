// The service port's gRPC settings (see listener.h).
#include "server/transport/listener.h"

#include <unistd.h>

#include <algorithm>
#include <climits>

#include <grpcpp/resource_quota.h>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/memory_limit.h"
#include "common/status_macros.h"

namespace gpucompute {

void AddListener(grpc::ServerBuilder& builder, const ListenerOptions& o, int* port) {
  builder.AddListeningPort(o.address, o.credentials, port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<int64_t>(o.max_receive_bytes, INT32_MAX)));
  builder.SetMaxSendMessageSize(
      o.max_send_bytes < 0 ? -1 : static_cast<int>(std::min<int64_t>(o.max_send_bytes, INT32_MAX)));
  // Bounds what clients can make gRPC allocate: per connection by the number of concurrent
  // calls, in all by the quota.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, std::max(1, o.max_concurrent_streams));
  if (o.max_connection_idle > absl::ZeroDuration()) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                               static_cast<int>(std::min<int64_t>(
                                   absl::ToInt64Milliseconds(o.max_connection_idle), INT32_MAX)));
  }
  // Compressed messages are refused (gRPC answers UNIMPLEMENTED for a disabled algorithm): a
  // 1 MB gzip message inflates to 1 GB, which a peer could send many times over, and neither
  // client compresses (tensors hardly compress).
  builder.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_DEFLATE, false);
  builder.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_GZIP, false);
  int64_t quota_bytes = o.memory_quota_bytes;
  if (quota_bytes <= 0) quota_bytes = MemoryLimitBytes() / 2;
  grpc::ResourceQuota quota(o.quota_name);
  quota.Resize(static_cast<size_t>(quota_bytes));
  builder.SetResourceQuota(quota);
  for (const auto& [key, value] : o.grpc_args) {
    if (int number = 0; absl::SimpleAtoi(value, &number)) {
      builder.AddChannelArgument(key, number);
    } else {
      builder.AddChannelArgument(key, value);
    }
  }
}

absl::StatusOr<Listening> StartListening(grpc::ServerBuilder& builder, const ListenerOptions& options,
                                         int health_port, HealthStatus& health) {
  Listening l;
  AddListener(builder, options, &l.port);
  l.server = builder.BuildAndStart();
  if (!l.server || l.port == 0) {
    return absl::UnavailableError(absl::StrCat("could not listen on ", options.address));
  }
  // The service port's status at once (gRPC's default reports "" SERVING from the start),
  // then the health port's.
  health.Attach(l.server.get(), nullptr);
  if (health_port >= 0) {
    ASSIGN_OR_RETURN(l.health_server, StartHealthServer(HostOfAddress(options.address), health_port,
                                                        &l.health_port));
  }
  health.Attach(l.server.get(), l.health_server.get());
  return l;
}

}  // namespace gpucompute
