// libFuzzer target: arbitrary bytes as a SubmitRequest (the Submit stream's message, a oneof of
// every operation's request), decoded and validated exactly as the handlers do (RunPeriodogram,
// RunDense, RunAssimilate, RunEcho: decode, then the output placement check; Echo resolves and
// places its tensor), with the server's default limits and real resident tensors, a registered
// shared-memory region and loaded models (fuzz_env.h). A status other than OK or a client-error
// code, a sanitizer report, or a decoded request that breaks its own contract is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "gpucompute/v1/compute.pb.h"
#include "server/service/assimilate_decode.h"
#include "server/service/dense_decode.h"
#include "server/service/periodogram_decode.h"
#include "server/service/tensor_codec.h"
#include "tests/fuzz/fuzz_env.h"

namespace gpucompute::fuzz {
namespace {

void Periodogram(Env& env, const v1::PeriodogramRequest& request) {
  TensorResolver resolver(env.Context());
  auto decoded = DecodePeriodogramRequest(request, env.limits, &resolver);
  absl::Status status = decoded.status();
  if (decoded.ok()) {
    for (const periodogram::SeriesSpec& s : decoded->series) {
      FUZZ_CHECK(s.t.size() >= 2 && s.y.size() == s.t.size(), "series lengths");
      FUZZ_CHECK(s.dy.empty() || s.dy.size() == s.t.size(), "dy length");
      FUZZ_CHECK(s.grid.size() >= 1 && s.grid.size() <= env.limits.max_frequencies_per_series,
                 "grid size");
    }
    status = CheckOutputPlacement(resolver.context(), request.output_placement());
  }
  CheckStatus(status, request);
}

void Dense(Env& env, const v1::DenseRequest& request) {
  TensorResolver resolver(env.Context());
  auto decoded = DecodeDenseRequest(request, *env.models, env.limits, &resolver);
  absl::Status status = decoded.status();
  if (decoded.ok()) {
    const dense::ModelInfo& info = decoded->model->info();
    FUZZ_CHECK(decoded->rows >= 0 && decoded->rows <= env.limits.dense.max_rows_per_request,
               "rows");
    FUZZ_CHECK(static_cast<int64_t>(decoded->input.size()) ==
                   decoded->rows * info.in_features() * ElementSize(decoded->input_dtype),
               "input bytes");
    status = CheckOutputPlacement(resolver.context(), request.output_placement());
  }
  CheckStatus(status, request);
}

void Assimilate(Env& env, const v1::AssimilateRequest& request) {
  TensorResolver resolver(env.Context());
  auto decoded = DecodeAssimilateRequest(request, env.limits, &resolver);
  absl::Status status = decoded.status();
  if (decoded.ok()) {
    for (const assimilate::Problem& p : decoded->problems) {
      FUZZ_CHECK(p.form != assimilate::Form::kAuto, "form resolved");
      FUZZ_CHECK(p.N >= 2 && p.n >= 1 && p.m >= 1, "dimensions");
    }
    status = CheckOutputPlacement(resolver.context(), request.output_placement());
  }
  CheckStatus(status, request);
}

void Echo(Env& env, const v1::EchoRequest& request) {
  TensorResolver resolver(env.Context());
  auto view = resolver.Resolve(request.tensor(), "tensor");
  absl::Status status = view.status();
  if (view.ok()) {
    FUZZ_CHECK(static_cast<int64_t>(view->bytes.size()) == view->count * DTypeSize(view->dtype),
               "resolved bytes");
    if (!request.discard()) {
      v1::Tensor out;
      out.set_dtype(view->dtype);
      out.mutable_shape()->Add(view->shape.begin(), view->shape.end());
      const absl::string_view source = view->bytes;
      status = PlaceOutputs(resolver.context(), request.output_placement(),
                            {OutputTensor{&out, &source}});
      // Kept outputs would fill the quota run after run: give them back.
      if (status.ok() && out.has_handle()) (void)env.store->Delete(kClient, out.handle());
    }
  }
  CheckStatus(status, request);
}

}  // namespace
}  // namespace gpucompute::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpucompute;
  fuzz::Env& env = fuzz::GetEnv();
  return fuzz::FuzzSubmitRequest(
      data, size,
      {[&](const v1::PeriodogramRequest& r) { fuzz::Periodogram(env, r); },
       [&](const v1::DenseRequest& r) { fuzz::Dense(env, r); },
       [&](const v1::AssimilateRequest& r) { fuzz::Assimilate(env, r); },
       [&](const v1::EchoRequest& r) { fuzz::Echo(env, r); }});
}
