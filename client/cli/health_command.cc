// `gpucompute health`: one grpc.health.v1.Health/Check call, for probes (the Dockerfile's
// HEALTHCHECK, scripts) against the service port or the server's plaintext --health_port.
// The messages are encoded by hand: HealthCheckRequest is {1: string service} and
// HealthCheckResponse {1: enum status}, and no generated health code ships with gRPC.
#include <chrono>
#include <cstdio>
#include <future>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cli/cli_util.h"
#include "client/cli/commands.h"
#include "grpcpp/generic/generic_stub.h"

namespace gpucompute::cli {
namespace {

// HealthCheckRequest{service}: field 1, length-delimited (service names are short).
std::string EncodeRequest(const std::string& service) {
  std::string out;
  if (service.empty()) return out;
  out.push_back(0x0a);
  for (size_t n = service.size();; n >>= 7) {
    const unsigned char byte = n & 0x7f;
    if (n < 0x80) {
      out.push_back(static_cast<char>(byte));
      break;
    }
    out.push_back(static_cast<char>(byte | 0x80));
  }
  return out + service;
}

// HealthCheckResponse.status: the varint of field 1 (0, UNKNOWN, when absent).
int DecodeStatus(const std::string& bytes) {
  int status = 0;
  size_t i = 0;
  while (i < bytes.size()) {
    const unsigned char tag = static_cast<unsigned char>(bytes[i++]);
    if ((tag & 7) != 0) break;  // only varint fields are expected
    uint64_t value = 0;
    for (int shift = 0; i < bytes.size() && shift < 64; shift += 7) {
      const unsigned char b = static_cast<unsigned char>(bytes[i++]);
      value |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) break;
    }
    if ((tag >> 3) == 1) status = static_cast<int>(value);
  }
  return status;
}

const char* StatusName(int status) {
  switch (status) {
    case 1: return "SERVING";
    case 2: return "NOT_SERVING";
    case 3: return "SERVICE_UNKNOWN";
    default: return "UNKNOWN";
  }
}

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
  const std::string encoded = EncodeRequest(options.service);
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
  const int serving = DecodeStatus(bytes);
  std::printf("%s\n", StatusName(serving));
  return serving == 1 ? 0 : 1;
}

}  // namespace gpucompute::cli
