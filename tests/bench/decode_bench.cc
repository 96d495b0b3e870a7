// What the server's host does with a small periodogram call before its batch is launched, on
// one thread: parsing the 1,000-sample request (three float64 arrays, 24 KB) from the bytes
// gRPC hands over, decoding and checking it (DecodePeriodogramRequest: the samples, the grid,
// the method, the moments), and the two together. No GPU needed: run it here and on the GPU
// machine's host. JSON lines, medians of --reps (default 20,000) in microseconds.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <grpcpp/support/byte_buffer.h>

#include "absl/strings/str_format.h"
#include "client/cpp/periodogram_request_builder.h"
#include "server/service/periodogram_decode.h"
#include "server/service/raw_calls.h"

namespace gpucompute {
namespace {

using Clock = std::chrono::steady_clock;

double MedianUs(int reps, const std::function<void()>& fn) {
  std::vector<double> us;
  us.reserve(static_cast<size_t>(reps));
  for (int r = 0; r < reps + 100; ++r) {
    const auto start = Clock::now();
    fn();
    const double d = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    if (r >= 100) us.push_back(d);
  }
  std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
  return us[us.size() / 2];
}

void Emit(const char* stage, double us, int reps) {
  std::printf("%s\n", absl::StrFormat(R"({"what":"periodogram decode","case":"1000 samples x 1000 frequencies, t y dy float64","stage":"%s","us":%.2f,"reps":%d})",
                                      stage, us, reps)
                          .c_str());
}

int Main(int argc, char** argv) {
  int reps = 20000;
  for (int i = 1; i < argc; ++i) {
    if (std::sscanf(argv[i], "--reps=%d", &reps) == 1) continue;
    std::fprintf(stderr, "usage: decode_bench [--reps=N]\n");
    return 2;
  }
  // The request gpucompute-load sends for --op periodogram --samples 1000 --frequencies 1000.
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<double> t(1000), y(t.size()), dy(t.size());
  for (double& v : t) v = 100 * u(rng);
  std::sort(t.begin(), t.end());
  for (size_t i = 0; i < t.size(); ++i) {
    dy[i] = 0.1 + 0.2 * u(rng);
    y[i] = std::sin(2 * M_PI * 0.7 * t[i]) + dy[i] * (2 * u(rng) - 1);
  }
  client::PeriodogramRequestBuilder builder;
  builder.AddSeries(t, y, dy).SetGrid(*client::RangeGrid(0.01, 5.0, 1000));
  const v1::PeriodogramRequest request = *builder.Build();
  const std::string bytes = request.SerializeAsString();
  grpc::Slice slice(bytes.data(), bytes.size());
  const grpc::ByteBuffer raw(&slice, 1);
  const ServiceLimits limits;

  Emit("parse", MedianUs(reps, [&] {
         v1::PeriodogramRequest parsed;
         if (!ParseRequest(raw, &parsed).ok()) std::abort();
       }), reps);
  Emit("decode", MedianUs(reps, [&] {
         if (!DecodePeriodogramRequest(request, limits, nullptr, nullptr).ok()) std::abort();
       }), reps);
  Emit("parse+decode", MedianUs(reps, [&] {
         v1::PeriodogramRequest parsed;
         if (!ParseRequest(raw, &parsed).ok()) std::abort();
         if (!DecodePeriodogramRequest(parsed, limits, nullptr, nullptr).ok()) std::abort();
       }), reps);
  return 0;
}

}  // namespace
}  // namespace gpucompute

int main(int argc, char** argv) { return gpucompute::Main(argc, argv); }
