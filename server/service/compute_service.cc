// Compute service reactors (see compute_service.h).
#include "server/service/compute_service.h"

#include <chrono>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/nvtx.h"
#include "server/common/version.h"
#include "server/service/periodogram_decode.h"
#include "server/service/status_mapping.h"
#include "server/service/tensor_codec.h"
#include "spdlog/spdlog.h"

namespace gpucompute {
namespace {

absl::Time ToAbslTime(std::chrono::system_clock::time_point tp) {
  if (tp == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(tp);
}

void AddTimings(grpc::CallbackServerContext* context, const JobTimings& t, absl::Time start) {
  context->AddTrailingMetadata("x-gpucompute-queue-us",
                               absl::StrCat(absl::ToInt64Microseconds(t.queue)));
  context->AddTrailingMetadata("x-gpucompute-compute-us",
                               absl::StrCat(absl::ToInt64Microseconds(t.compute)));
  context->AddTrailingMetadata("x-gpucompute-total-us",
                               absl::StrCat(absl::ToInt64Microseconds(absl::Now() - start)));
  context->AddTrailingMetadata("x-gpucompute-batch-requests", absl::StrCat(t.batch_requests));
}

}  // namespace

ComputeService::ComputeService(Backend* backend, PeriodogramScheduler* scheduler,
                               ServiceLimits limits)
    : backend_(backend), scheduler_(scheduler), limits_(limits) {}

grpc::ServerUnaryReactor* ComputeService::Periodogram(grpc::CallbackServerContext* context,
                                                      const v1::PeriodogramRequest* request,
                                                      v1::PeriodogramResponse* response) {
  const absl::Time start = absl::Now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<periodogram::Request> decoded;
  {
    NVTX_RANGE("periodogram.decode");
    decoded = DecodePeriodogramRequest(*request, limits_);
  }
  if (!decoded.ok()) {
    reactor->Finish(ToGrpcStatus(decoded.status()));
    return reactor;
  }
  auto typed = std::make_shared<const periodogram::Request>(*std::move(decoded));
  PeriodogramScheduler::Job job;
  job.request = typed;
  job.deadline = ToAbslTime(context->deadline());
  job.is_cancelled = [context] { return context->IsCancelled(); };
  job.done = [reactor, context, response, typed, start](
                 absl::StatusOr<std::vector<periodogram::SeriesPower>> result,
                 const JobTimings& timings) {
    AddTimings(context, timings, start);
    if (!result.ok()) {
      reactor->Finish(ToGrpcStatus(result.status()));
      return;
    }
    const v1::DType dtype =
        typed->dtype == periodogram::ComputeType::kFloat32 ? v1::FLOAT32 : v1::FLOAT64;
    response->mutable_results()->Reserve(static_cast<int>(result->size()));
    for (size_t i = 0; i < result->size(); ++i) {
      periodogram::SeriesPower& p = (*result)[i];
      const periodogram::SeriesSpec& s = typed->series[i];
      v1::SeriesResult* out = response->add_results();
      EncodeVector(dtype, s.grid.size(), std::move(p.power), out->mutable_power());
      if (s.grid.uniform) {
        out->mutable_grid()->set_f0(s.grid.uniform->f0);
        out->mutable_grid()->set_df(s.grid.uniform->df);
        out->mutable_grid()->set_n(s.grid.uniform->n);
      }
      out->set_peak_frequency(p.peak_frequency);
      out->set_peak_power(p.peak_power);
      out->set_peak_index(p.peak_index);
    }
    reactor->Finish(grpc::Status::OK);
  };
  const absl::Status enqueued = scheduler_->Enqueue(std::move(job));
  if (!enqueued.ok()) reactor->Finish(ToGrpcStatus(enqueued));
  return reactor;
}

grpc::ServerUnaryReactor* ComputeService::ServerInfo(grpc::CallbackServerContext* context,
                                                     const v1::ServerInfoRequest* /*request*/,
                                                     v1::ServerInfoResponse* response) {
  response->set_version(GPUCOMPUTE_VERSION);
  response->set_backend(backend_->name());
  response->set_nvrtc_version(backend_->NvrtcVersion());
  for (const DeviceDescription& d : backend_->Devices()) {
    v1::DeviceInfo* out = response->add_devices();
    out->set_index(d.index);
    out->set_name(d.name);
    out->set_compute_capability_major(d.cc_major);
    out->set_compute_capability_minor(d.cc_minor);
    out->set_total_memory_bytes(d.total_memory_bytes);
    out->set_multiprocessors(d.multiprocessors);
    out->set_streams(d.streams);
  }
  v1::Limits* limits = response->mutable_limits();
  limits->set_max_request_bytes(limits_.max_request_bytes);
  limits->set_max_series_per_request(limits_.max_series_per_request);
  limits->set_max_samples_per_series(limits_.max_samples_per_series);
  limits->set_max_frequencies_per_series(limits_.max_frequencies_per_series);
  limits->set_max_pairs_per_request(limits_.max_pairs_per_request);
  const SchedulerOptions& so = scheduler_->options();
  limits->set_max_batch_size(so.max_batch_size);
  limits->set_max_queue_delay_us(absl::ToInt64Microseconds(so.max_queue_delay));
  limits->set_max_queue_depth(so.max_queue_depth);

  const KernelCacheStats k = backend_->KernelStats();
  v1::KernelCacheInfo* kc = response->mutable_kernel_cache();
  kc->set_entries(k.entries);
  kc->set_hits(k.hits);
  kc->set_misses(k.misses);
  kc->set_disk_hits(k.disk_hits);
  kc->set_compile_ms_total(k.compile_ms_total);
  for (const auto& name : k.kernels) kc->add_kernels(name);
  kc->set_directory(k.directory);

  const BatchingStats b = scheduler_->Stats();
  v1::BatchingStats* bs = response->mutable_periodogram_batching();
  bs->set_requests(b.requests);
  bs->set_batches(b.batches);
  bs->set_largest_batch(b.largest_batch);
  bs->set_rejected_queue_full(b.rejected_queue_full);
  bs->set_expired_before_dispatch(b.expired_before_dispatch);

  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace gpucompute
