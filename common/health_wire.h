// grpc.health.v1 messages by hand, for the CLI's `gpucompute health` and the worker-mode
// front's watch of its workers: HealthCheckRequest is {1: string service} and
// HealthCheckResponse {1: enum status}, and no generated health code ships with gRPC.
#pragma once

#include <cstdint>
#include <string>

namespace gpucompute {

// HealthCheckResponse.status values.
inline constexpr int kHealthServing = 1;

// The service name whose status only gpucompute sets (HealthStatus in server/service): unlike
// the overall status "", which gRPC's default health service reports SERVING from the moment
// a server starts, it is unknown until the server attaches its status.
inline constexpr char kComputeHealthService[] = "gpucompute.v1.Compute";

// HealthCheckRequest{service}: field 1, length-delimited (empty: the overall status).
inline std::string EncodeHealthCheckRequest(const std::string& service) {
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
inline int DecodeHealthStatus(const std::string& bytes) {
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

inline const char* HealthStatusName(int status) {
  switch (status) {
    case 1: return "SERVING";
    case 2: return "NOT_SERVING";
    case 3: return "SERVICE_UNKNOWN";
    default: return "UNKNOWN";
  }
}

}  // namespace gpucompute
