// `gpucompute health`: one grpc.health.v1.Health/Check call, for probes (the Dockerfile's
// HEALTHCHECK, scripts) against the service port or the server's plaintext --health_port.
// The messages are encoded by hand (common/health_wire.h).
#include <chrono>
#include <cstdio>
#include <future>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cli/cli_util.h"
#include "client/cli/commands.h"
#include "common/health_wire.h"
#include "grpcpp/generic/generic_stub.h"

namespace gpucompute::cli {
namespace {

}  // namespace

int RunHealth(const GlobalOptions& global, const HealthOptions& options) {
  const std::string address = options.address.empty() ? global.target : options.address;
  const client::TlsOptions tls = TlsFromFlags(global);
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      client::MakeChannelCredentials(tls);
  if (!credentials.ok()) return Fail(address, credentials.status());
  grpc::ChannelArguments args;
  client::SetTlsChannelArguments(tls, &args);
  grpc::GenericStub stub(grpc::CreateCustomChannel(address, *credentials, args));

  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(options.timeout_ms));
  const std::string encoded = EncodeHealthCheckRequest(options.service);
  grpc::Slice slice(encoded);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                 &response, [&done](grpc::Status status) { done.set_value(std::move(status)); });
  const grpc::Status status = done.get_future().get();
  if (!status.ok()) return Fail(absl::StrCat(address, " health"), client::ToAbslStatus(status));
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (response.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  const int serving = DecodeHealthStatus(bytes);
  std::printf("%s\n", HealthStatusName(serving));
  return serving == kHealthServing ? 0 : 1;
}

}  // namespace gpucompute::cli
