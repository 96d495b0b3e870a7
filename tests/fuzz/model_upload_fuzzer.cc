// libFuzzer target: arbitrary bytes as a LoadModel stream (fuzz_input.proto's LoadModelStream,
// the stream's messages in order), taken as LoadModelReactor takes them: the header starts a
// ModelUpload (the server's default DenseLimits), later messages are chunks added to it, and the
// end of the stream finishes the model. Statuses are checked as in request_fuzzer.cc, and a
// finished model must match its header.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "fuzz_input.pb.h"
#include "server/service/model_upload.h"
#include "tests/fuzz/fuzz_env.h"

namespace gpucompute::fuzz {
namespace {

absl::Status Upload(const Env& env, const LoadModelStream& stream) {
  std::unique_ptr<ModelUpload> upload;
  int64_t in = 0, out = 0;
  for (const v1::LoadModelChunk& m : stream.chunks()) {
    if (m.has_header()) {
      if (upload) return absl::InvalidArgumentError("header: sent twice");
      auto started = ModelUpload::Start(m.header(), env.limits.dense);
      if (!started.ok()) return started.status();
      upload = *std::move(started);
      in = m.header().layers(0).weight().shape(0);
      out = m.header().layers(m.header().layers_size() - 1).weight().shape(1);
      continue;
    }
    if (!upload) return absl::InvalidArgumentError("header: must come first");
    if (!m.has_chunk()) return absl::InvalidArgumentError("chunk: must be a chunk");
    if (absl::Status s = upload->Add(m.chunk()); !s.ok()) return s;
  }
  if (!upload) return absl::InvalidArgumentError("the stream ended before its header");
  auto spec = upload->Finish();
  if (!spec.ok()) return spec.status();
  bool ok = !spec->layers.empty() && spec->in_features() == in && spec->out_features() == out;
  for (size_t i = 0; ok && i < spec->layers.size(); ++i) {
    const dense::LayerSpec& l = spec->layers[i];
    ok = static_cast<int64_t>(l.weight.size()) == l.in * l.out &&
         static_cast<int64_t>(l.bias.size()) == l.out &&
         (i == 0 || spec->layers[i - 1].out == l.in);
  }
  if (!ok) {
    std::fprintf(stderr, "FINDING: the finished model does not match its header: %s\n",
                 stream.ShortDebugString().substr(0, 4000).c_str());
    std::abort();
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace gpucompute::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpucompute;
  fuzz::LoadModelStream stream;
  if (!stream.ParseFromArray(data, static_cast<int>(size))) return -1;
  fuzz::CheckStatus(fuzz::Upload(fuzz::GetEnv(), stream), stream);
  return 0;
}
