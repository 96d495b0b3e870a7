// `gpucompute model load|unload|list` and `gpucompute dense`: resident dense models.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli/cli_util.h"
#include "client/cli/commands.h"
#include "client/cli/model_manifest.h"
#include "client/cli/npy.h"
#include "client/cpp/model_builder.h"
#include "client/cpp/tensor_util.h"

namespace gpucompute::cli {
namespace {

// "256->512 LN gelu_tanh"
std::string DescribeLayer(const v1::LayerInfo& layer) {
  return absl::StrCat(layer.in_features(), "->", layer.out_features(),
                      layer.layernorm() ? " LN" : "", " ",
                      client::ActivationName(layer.activation()));
}

void PrintModel(const v1::ModelInfo& m) {
  std::printf("model %s: %s%s, %d layers, %s resident\n", m.name().c_str(),
              client::DTypeName(m.dtype()), m.allow_tf32() ? " (TF32 allowed)" : "",
              m.layers_size(), FormatBytes(m.device_bytes()).c_str());
  std::printf("  layer  in_features  out_features  layernorm       activation\n");
  for (int i = 0; i < m.layers_size(); ++i) {
    const v1::LayerInfo& l = m.layers(i);
    const std::string ln = l.layernorm() ? absl::StrFormat("yes, eps %g", l.eps()) : "no";
    std::printf("  %5d  %11lld  %12lld  %-14s  %s\n", i, static_cast<long long>(l.in_features()),
                static_cast<long long>(l.out_features()), ln.c_str(),
                std::string(client::ActivationName(l.activation())).c_str());
  }
}

}  // namespace

int RunModelLoad(const GlobalOptions& global, const ModelLoadOptions& options) {
  absl::StatusOr<ModelManifest> manifest = ReadModelManifest(options.manifest);
  if (!manifest.ok()) return Fail("--manifest", manifest.status());
  const std::string dtype_name =
      !options.dtype.empty() ? options.dtype : manifest->dtype.value_or("bfloat16");
  absl::StatusOr<v1::DType> dtype = client::ParseModelDType(dtype_name);
  if (!dtype.ok()) return Fail("--dtype", dtype.status());
  absl::StatusOr<v1::DType> wire = client::ParseModelDType(options.wire_dtype);
  if (!wire.ok()) return Fail("--wire-dtype", wire.status());
  if (!(options.chunk_mib > 0) || options.chunk_mib > 1024) {
    return Fail("--chunk-mib", absl::InvalidArgumentError("must be in (0, 1024]"));
  }

  const bool allow_tf32 = options.allow_tf32 || manifest->allow_tf32.value_or(false);
  client::ModelBuilder builder = BuilderOf(options.name, *std::move(manifest), *dtype, allow_tf32);
  builder.SetWireDType(*wire);
  absl::StatusOr<client::ModelUpload> upload = builder.Build();
  if (!upload.ok()) return Fail(options.manifest, upload.status());

  absl::StatusOr<std::unique_ptr<client::Client>> client = ConnectFromFlags(global);
  if (!client.ok()) return Fail(global.target, client.status());
  const int64_t chunk_bytes =
      options.chunk_mib == 4 ? client::kDefaultChunkBytes
                             : static_cast<int64_t>(std::llround(options.chunk_mib * (1 << 20)));
  absl::StatusOr<client::LoadModelResult> loaded =
      (*client)->LoadModel(*std::move(upload), {}, std::max<int64_t>(chunk_bytes, 1));
  if (!loaded.ok()) return Fail("LoadModel", loaded.status());
  PrintModel(loaded->info);
  std::printf("uploaded %s in %lld messages, %s round trip (server load %.1f ms)\n",
              FormatBytes(loaded->bytes_sent).c_str(), static_cast<long long>(loaded->messages),
              FormatMs(loaded->latency).c_str(), loaded->info.load_ms());
  return 0;
}

int RunModelUnload(const GlobalOptions& global, const ModelUnloadOptions& options) {
  absl::StatusOr<std::unique_ptr<client::Client>> client = ConnectFromFlags(global);
  if (!client.ok()) return Fail(global.target, client.status());
  absl::StatusOr<client::UnloadModelResult> r = (*client)->UnloadModel(options.name);
  if (!r.ok()) return Fail("UnloadModel", r.status());
  std::printf("unloaded model %s\n", options.name.c_str());
  return 0;
}

int RunModelList(const GlobalOptions& global, const ModelListOptions& options) {
  absl::StatusOr<std::unique_ptr<client::Client>> client = ConnectFromFlags(global);
  if (!client.ok()) return Fail(global.target, client.status());
  absl::StatusOr<client::ListModelsResult> r = (*client)->ListModels();
  if (!r.ok()) return Fail("ListModels", r.status());
  if (options.json) return PrintJson(r->response, "ListModels");
  const auto& models = r->response.models();
  if (models.empty()) {
    std::printf("no models loaded\n");
    return 0;
  }
  size_t name_width = 4;
  for (const v1::ModelInfo& m : models) name_width = std::max(name_width, m.name().size());
  std::printf("%-*s  %-8s  %-4s  %10s  %s\n", static_cast<int>(name_width), "NAME", "DTYPE",
              "TF32", "DEVICE", "LAYERS");
  for (const v1::ModelInfo& m : models) {
    std::vector<std::string> layers;
    for (const v1::LayerInfo& l : m.layers()) layers.push_back(DescribeLayer(l));
    std::printf("%-*s  %-8s  %-4s  %10s  %s\n", static_cast<int>(name_width), m.name().c_str(),
                client::DTypeName(m.dtype()), m.allow_tf32() ? "yes" : "no",
                FormatBytes(m.device_bytes()).c_str(), absl::StrJoin(layers, ", ").c_str());
  }
  return 0;
}

int RunDense(const GlobalOptions& global, const DenseOptions& options) {
  absl::StatusOr<NpyArray> x = ReadNpyFile(options.input);
  if (!x.ok()) return Fail("--input", x.status());
  const bool one_row = x->shape.size() == 1;
  if (x->shape.size() != 1 && x->shape.size() != 2) {
    return Fail("--input", absl::InvalidArgumentError(absl::StrCat(
                               options.input, ": expected a 1-D (one row) or 2-D array, got ",
                               x->shape.size(), "-D")));
  }
  const int64_t rows = one_row ? 1 : x->shape[0];
  const int64_t cols = one_row ? x->shape[0] : x->shape[1];
  // The input travels in the file's own dtype; the server converts it.
  v1::DenseRequest request;
  request.set_model(options.model);
  const int64_t shape[] = {rows, cols};
  absl::StatusOr<v1::Tensor> input;
  if (x->item_size == 8) {
    input = client::MakeTensor(absl::Span<const double>(x->data), shape);
  } else {
    const std::vector<float> narrowed(x->data.begin(), x->data.end());  // exact
    input = client::MakeTensor(narrowed, shape, x->item_size == 4 ? v1::FLOAT32 : v1::FLOAT16);
  }
  if (!input.ok()) return Fail("--input", input.status());
  *request.mutable_input() = *std::move(input);
  const std::string input_dtype = client::DTypeName(request.input().dtype());

  absl::StatusOr<std::unique_ptr<client::Client>> client = ConnectFromFlags(global);
  if (!client.ok()) return Fail(global.target, client.status());
  absl::StatusOr<client::DenseResult> result = (*client)->Dense(std::move(request));
  if (!result.ok()) return Fail("Dense", result.status());
  absl::StatusOr<client::DenseOutput> y = client::DecodeDenseOutput(result->response);
  if (!y.ok()) return Fail("Dense", y.status());

  // bfloat16 has no NumPy dtype: written as float32 (exact); float16 stays float16.
  const int item_size = y->dtype == v1::FLOAT16 ? 2 : 4;
  std::fprintf(stderr, "dense %s: %lld x %lld %s -> %lld x %lld %s%s; round trip %s; server %s\n",
               options.model.c_str(), static_cast<long long>(rows), static_cast<long long>(cols),
               input_dtype.c_str(), static_cast<long long>(y->rows),
               static_cast<long long>(y->cols), client::DTypeName(y->dtype),
               y->dtype == v1::BFLOAT16 && !options.output.empty() ? " (written as float32)" : "",
               FormatMs(result->latency).c_str(), FormatTimings(result->timings).c_str());
  if (options.output.empty()) {
    std::string line;
    for (int64_t r = 0; r < y->rows; ++r) {
      line.clear();
      for (int64_t c = 0; c < y->cols; ++c) {
        if (c > 0) line += ',';
        line += FormatShortest(y->values[r * y->cols + c]);
      }
      line += '\n';
      std::fputs(line.c_str(), stdout);
    }
    return std::fflush(stdout) == 0 ? 0 : 1;
  }
  std::vector<int64_t> out_shape = {y->rows, y->cols};
  if (one_row && y->rows == 1) out_shape = {y->cols};
  const std::vector<double> values(y->values.begin(), y->values.end());
  const std::string bytes = EncodeNpy(out_shape, values, item_size);
  std::ofstream file(options.output, std::ios::binary | std::ios::trunc);
  if (!file) return Fail("--output", absl::PermissionDeniedError("cannot write " + options.output));
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  file.close();
  if (!file) return Fail("writing output", absl::DataLossError("write failed"));
  return 0;
}

}  // namespace gpucompute::cli
