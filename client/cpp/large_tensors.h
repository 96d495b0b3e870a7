// LargeTensors: the large tensors of one operation call, moved over several connections at
// once without the caller asking (the Python client's gpucompute.transfer does the same).
//
// One gRPC connection moves a large message at ~0.5 GB/s whatever its HTTP/2 settings; slices
// over several connections move several GB/s. So before the call every inline input Tensor of
// at least `threshold` bytes becomes a resident tensor of the caller (CreateTensor with a short
// idle expiry, then PutTensor slices in parallel, each on its own connection) and the request
// names its handle; a request without an output placement asks for outputs of more than
// `threshold` bytes to be kept (keep_above_bytes), and after the call each kept output is
// fetched back the same way into its Tensor's inline data. Every tensor the call made is
// deleted before the call returns, whatever happened; while in flight they count against the
// caller's quota, and a client that dies leaves them for kIdleExpiry at most.
//
// Copies: an input's bytes go from the request's Tensor to the wire (no copy here); an
// output's bytes are assembled once into the string that becomes the Tensor's data.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/cpp/client.h"
#include "google/protobuf/message.h"

namespace gpucompute::client {

class LargeTensors {
 public:
  static constexpr absl::Duration kIdleExpiry = absl::Seconds(60);

  // `client` is borrowed; 0 `threshold` moves nothing.
  LargeTensors(Client& client, int64_t threshold, CallOptions options);
  ~LargeTensors();  // deletes what the call still holds on the server and waits for it
  LargeTensors(const LargeTensors&) = delete;
  LargeTensors& operator=(const LargeTensors&) = delete;

  // Uploads `request`'s large inline tensors (each then names its resident tensor) and sets
  // the automatic output placement when the request has none.
  absl::Status Send(google::protobuf::Message& request);
  // Deletes the uploaded inputs (the call has answered), without waiting.
  void ReleaseInputs();
  // Fetches every output of `response` that the automatic placement kept into its Tensor.
  absl::Status Receive(google::protobuf::Message& response);

 private:
  void Delete(std::vector<std::string> handles);

  Client& client_;
  const int64_t threshold_;
  const CallOptions options_;
  bool auto_placement_ = false;
  std::vector<std::string> inputs_;   // uploaded, deleted once the call answered
  std::vector<std::string> outputs_;  // kept, deleted once fetched
  std::vector<std::future<absl::Status>> deleting_;
};

// Calls `fn` on every Tensor field of `message`, at any depth.
void ForEachTensor(google::protobuf::Message& message, const std::function<void(v1::Tensor&)>& fn);

// How many parallel streams each of `sizes` bytes gets, out of about `streams` in all, none
// smaller than `min_slice` bytes unless the whole is (at least one each).
std::vector<int> StreamsBySize(const std::vector<int64_t>& sizes, int streams, int64_t min_slice);

}  // namespace gpucompute::client
