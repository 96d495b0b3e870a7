// libFuzzer target: arbitrary bytes as the messages of one PutTensor stream and of one Submit
// stream, handled as the server's reactors handle them, without a server. The input is a
// sequence of messages, each a 2-byte little-endian length and that many bytes. PutTensor:
// each message is parsed on its wire form (ParsePutTensorChunk, split into gRPC slices at a
// point the input chooses) and given to a TensorUpload, as PutTensorReactor does, until one
// fails; then the upload is abandoned (a failure) or closed. Submit: each message is parsed as a
// SubmitRequest, as SubmitReactor does. A status the server would blame on itself, a tensor
// written past its end, a tensor left behind by a failed stream, or a sanitizer report is a
// finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "gpucompute/v1/compute.pb.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "server/service/tensor_upload.h"
#include "server/service/tensor_wire.h"
#include "tests/fuzz/fuzz_env.h"

namespace gpucompute::fuzz {
namespace {

[[noreturn]] void Finding(const std::string& what) {
  std::fprintf(stderr, "FINDING: %s\n", what.c_str());
  std::abort();
}

// The input's messages (a truncated last one is dropped).
std::vector<std::string> Messages(const uint8_t* data, size_t size) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at + 2 <= size) {
    const size_t n = static_cast<size_t>(data[at]) | (static_cast<size_t>(data[at + 1]) << 8);
    at += 2;
    if (at + n > size) break;
    out.emplace_back(reinterpret_cast<const char*>(data + at), n);
    at += n;
  }
  return out;
}

// `bytes` as gRPC hands them over: two slices, split where the message's first byte says.
grpc::ByteBuffer AsReceived(const std::string& bytes) {
  if (bytes.empty()) return grpc::ByteBuffer();
  const size_t cut = static_cast<uint8_t>(bytes[0]) % (bytes.size() + 1);
  grpc::Slice parts[2] = {grpc::Slice(bytes.data(), cut), grpc::Slice(bytes.data() + cut, bytes.size() - cut)};
  return grpc::ByteBuffer(parts, 2);
}

void PutTensorStream(Env& env, const std::vector<std::string>& messages) {
  const size_t before = env.store->List(kClient).size();
  TensorUpload upload(env.store.get(), kClient);
  absl::Status status;
  for (const std::string& m : messages) {
    auto parsed = ParsePutTensorChunk(AsReceived(m));
    status = parsed.ok() ? upload.Accept(*parsed) : parsed.status();
    CheckStatus(status, v1::PutTensorChunk());
    if (!status.ok()) break;
  }
  const std::shared_ptr<ResidentTensor> tensor = upload.tensor();
  if (tensor != nullptr && tensor->received_bytes() > tensor->bytes()) {
    Finding("more bytes received than the tensor holds");
  }
  const bool created = tensor != nullptr && env.store->List(kClient).size() > before;
  if (!status.ok()) {
    upload.Abandon();
    if (env.store->List(kClient).size() != before) Finding("a failed stream left its tensor behind");
    return;
  }
  upload.Close();
  // A stream that succeeded keeps its tensor; the next input starts from the same store.
  if (created) (void)env.store->Delete(kClient, tensor->handle());
}

void SubmitStream(const std::vector<std::string>& messages) {
  for (const std::string& m : messages) {
    grpc::ByteBuffer received = AsReceived(m);
    v1::SubmitRequest job;
    if (!grpc::SerializationTraits<v1::SubmitRequest>::Deserialize(&received, &job).ok()) break;
  }
}

}  // namespace
}  // namespace gpucompute::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpucompute;
  fuzz::Env& env = fuzz::GetEnv();
  const std::vector<std::string> messages = fuzz::Messages(data, size);
  fuzz::PutTensorStream(env, messages);
  fuzz::SubmitStream(messages);
  return 0;
}
