// The three operations' schedulers: each operation's traits for BatchScheduler (scheduler.h):
// what its requests batch by, what a request costs, and how a batch runs on the backend.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "server/runtime/backend.h"
#include "server/runtime/scheduler.h"

namespace gpucompute {

// Periodogram requests batch by compute dtype; cost is sample x frequency pairs.
struct PeriodogramTraits {
  using Request = periodogram::Request;
  using Result = std::vector<periodogram::SeriesPower>;  // one per series of the request
  static constexpr const char* kName = "periodogram";

  PeriodogramTraits(Backend* b) : backend(b) {}  // NOLINT(google-explicit-constructor)
  static ElementType Key(const Request& r) { return r.dtype; }
  static int64_t Cost(const Request& r) { return r.pairs(); }
  void Run(std::vector<std::shared_ptr<const Request>> requests, std::function<bool()> abandoned,
           std::function<void(absl::StatusOr<std::vector<Result>>)> done) const;

  Backend* backend;
};

// Dense requests batch by (model, input dtype); cost is rows.
struct DenseTraits {
  using Request = dense::Request;
  using Result = dense::Output;
  static constexpr const char* kName = "dense";
  struct BatchKey {
    const dense::LoadedModel* model;
    ElementType input_dtype;
    bool operator==(const BatchKey& o) const { return model == o.model && input_dtype == o.input_dtype; }
    bool operator!=(const BatchKey& o) const { return !(*this == o); }
  };

  DenseTraits(Backend* b) : backend(b) {}  // NOLINT(google-explicit-constructor)
  static BatchKey Key(const Request& r) { return {r.model.get(), r.input_dtype}; }
  static int64_t Cost(const Request& r) { return r.rows; }
  void Run(std::vector<std::shared_ptr<const Request>> requests, std::function<bool()> abandoned,
           std::function<void(absl::StatusOr<std::vector<Result>>)> done) const;

  Backend* backend;
};

// Assimilate requests batch by compute dtype; cost is estimated flops (assimilate::ProblemFlops),
// so many small analyses share a launch and a large one goes alone.
struct AssimilateTraits {
  using Request = assimilate::Request;
  using Result = assimilate::Output;  // carries the request's own status
  static constexpr const char* kName = "assimilate";

  AssimilateTraits(Backend* b) : backend(b) {}  // NOLINT(google-explicit-constructor)
  static ElementType Key(const Request& r) { return r.dtype; }
  static int64_t Cost(const Request& r);
  void Run(std::vector<std::shared_ptr<const Request>> requests, std::function<bool()> abandoned,
           std::function<void(absl::StatusOr<std::vector<Result>>)> done) const;

  Backend* backend;
};

extern template class BatchScheduler<PeriodogramTraits>;
extern template class BatchScheduler<DenseTraits>;
extern template class BatchScheduler<AssimilateTraits>;
using PeriodogramScheduler = BatchScheduler<PeriodogramTraits>;
using DenseScheduler = BatchScheduler<DenseTraits>;
using AssimilateScheduler = BatchScheduler<AssimilateTraits>;

}  // namespace gpucompute
