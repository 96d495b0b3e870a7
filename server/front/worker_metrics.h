// The front's /metrics in worker mode: its own families, then every worker's families with a
// `worker` label added to each sample, so that one scrape of the pod sees all of them (and
// sum() over `worker` gives the pod's totals, e.g. the queue depth the autoscaler reads).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace gpucompute::front {

// Merges Prometheus text expositions (format 0.0.4) of several workers, given as (worker
// label value, text): each family once, with the HELP and TYPE of its first appearance and
// the samples of every worker, each with worker="<label>" as its first label.
std::string MergeWorkerExpositions(const std::vector<std::pair<std::string, std::string>>& workers);

// GET http://127.0.0.1:<port>/metrics with a short timeout; empty on any failure.
std::string ScrapeWorker(int port);

}  // namespace gpucompute::front
