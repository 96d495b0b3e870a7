// The three operations' scheduler traits (op_schedulers.h) and the schedulers' instantiation.
#include "server/runtime/op_schedulers.h"

#include <algorithm>
#include <utility>

#include "server/runtime/scheduler_impl.h"

namespace gpucompute {

void PeriodogramTraits::Run(std::vector<std::shared_ptr<const Request>> requests,
                            std::function<bool()> abandoned,
                            std::function<void(absl::StatusOr<std::vector<Result>>)> done) const {
  auto batch = std::make_shared<periodogram::Batch>();
  batch->dtype = requests.front()->dtype;
  batch->requests = std::move(requests);
  batch->abandoned = std::move(abandoned);
  backend->RunPeriodogram(batch, [batch, done = std::move(done)](
                                     absl::StatusOr<std::vector<periodogram::SeriesPower>> all) {
    if (!all.ok()) {
      done(all.status());
      return;
    }
    done(periodogram::SplitByRequest(*batch, std::move(*all)));
  });
}

void DenseTraits::Run(std::vector<std::shared_ptr<const Request>> requests,
                      std::function<bool()> abandoned,
                      std::function<void(absl::StatusOr<std::vector<Result>>)> done) const {
  auto batch = std::make_shared<dense::Batch>();
  batch->model = requests.front()->model;
  batch->input_dtype = requests.front()->input_dtype;
  batch->requests = std::move(requests);
  batch->abandoned = std::move(abandoned);
  backend->RunDense(batch, std::move(done));
}

int64_t AssimilateTraits::Cost(const Request& r) {
  double flops = 0;
  for (const auto& p : r.problems) flops += assimilate::ProblemFlops(p);
  return static_cast<int64_t>(std::min(flops, 9e18));
}

void AssimilateTraits::Run(std::vector<std::shared_ptr<const Request>> requests,
                           std::function<bool()> abandoned,
                           std::function<void(absl::StatusOr<std::vector<Result>>)> done) const {
  auto batch = std::make_shared<assimilate::Batch>();
  batch->dtype = requests.front()->dtype;
  batch->requests = std::move(requests);
  batch->abandoned = std::move(abandoned);
  backend->RunAssimilate(batch, std::move(done));
}

template class BatchScheduler<PeriodogramTraits>;
template class BatchScheduler<DenseTraits>;
template class BatchScheduler<AssimilateTraits>;

}  // namespace gpucompute
