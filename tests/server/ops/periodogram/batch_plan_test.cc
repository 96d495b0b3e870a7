// The plan of a periodogram batch (batch_plan.h) without a GPU: each series' path, its range of
// partial peaks, the product pieces, the staging layout and the device buffers' sizes, checked
// for what the launch code relies on (ranges disjoint and covering, sections ordered and
// aligned, every buffer sized for what is written to it).
#include "server/ops/periodogram/batch_plan.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/lombscargle_abi.cuh"
#include "math/fft_sizes.h"
#include "server/ops/periodogram/nufft.h"
#include "server/ops/periodogram/tuning.h"

namespace gpucompute::periodogram {
namespace {

constexpr int kMultiprocessors = 132;

SeriesSpec Series(int samples, UniformGrid grid, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  SeriesSpec s;
  double t = 0;
  for (int i = 0; i < samples; ++i) {
    t += 0.05 + u(rng);
    s.t.push_back(t);
    s.y.push_back(std::sin(0.7 * t) + 0.1 * u(rng));
  }
  s.grid.uniform = grid;
  return s;
}

// One request of every kind: a small direct series, a harmonic one, a fast one, one large
// enough for the product form, an explicit grid, and a bootstrap resampling (peak only).
Batch MixedBatch(ElementType dtype) {
  auto request = std::make_shared<Request>();
  request->dtype = dtype;
  request->series.push_back(Series(300, {0.01, 0.01, 2000}, 1));
  SeriesSpec harmonic = Series(200, {0.02, 0.005, 1500}, 2);
  harmonic.nterms = 3;
  request->series.push_back(std::move(harmonic));
  SeriesSpec fast = Series(1000, {0.001, 0.0005, 40000}, 3);
  fast.method = Method::kFast;
  request->series.push_back(std::move(fast));
  request->series.push_back(Series(4096, {0.0, 0.0002, 70000}, 4));  // 2.9e8 pairs: products
  SeriesSpec listed = Series(50, {}, 5);
  listed.grid.uniform.reset();
  listed.grid.explicit_frequencies = {0.1, 0.2, 0.35, 0.5};
  request->series.push_back(std::move(listed));
  SeriesSpec bootstrap = Series(300, {0.01, 0.01, 2000}, 6);
  bootstrap.bootstrap_of = 0;
  request->series.push_back(std::move(bootstrap));
  request->user_series = 5;
  Batch batch;
  batch.dtype = dtype;
  batch.requests.push_back(std::move(request));
  return batch;
}

void ExpectRangesPartitionThePartials(const BatchPlan& p) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (size_t i = 0; i < p.series.size(); ++i) {
    EXPECT_GE(p.partial_count[i], 0);
    if (p.partial_count[i] > 0) ranges.emplace_back(p.partial_begin[i], p.partial_count[i]);
    // The NVRTC kernel's blocks come first: its partial is its blockIdx.x.
    if (p.kinds[i] == SeriesKind::kDirect1) {
      EXPECT_LE(p.partial_begin[i] + p.partial_count[i], p.n_blocks) << "series " << i;
    } else {
      EXPECT_GE(p.partial_begin[i], p.n_blocks) << "series " << i;
    }
  }
  std::sort(ranges.begin(), ranges.end());
  int64_t at = 0;
  for (const auto& [begin, count] : ranges) {
    EXPECT_EQ(begin, at) << "partial ranges overlap or leave a gap";
    at = begin + count;
  }
  EXPECT_EQ(at, p.total_partials);
}

void ExpectPiecesInsideTheirSeries(const BatchPlan& p) {
  ASSERT_EQ(p.pieces.size(), p.piece_series.size());
  for (size_t q = 0; q < p.pieces.size(); ++q) {
    const size_t i = static_cast<size_t>(p.piece_series[q]);
    const int64_t begin = p.pieces[q].peak_offset;
    const int64_t end = begin + kernels::ProductPartials(p.pieces[q]);
    EXPECT_GE(begin, p.partial_begin[i]) << "piece " << q;
    EXPECT_LE(end, p.partial_begin[i] + p.partial_count[i]) << "piece " << q;
  }
}

void ExpectLayoutOrderedAndAligned(const BatchPlan& p, int elem) {
  const InputLayout& l = p.layout;
  const std::vector<size_t> sections = {l.desc, l.work, l.seg,  l.hdesc, l.hwork, l.ndesc, l.ntrans,
                                        l.pdesc, l.topk, l.t,  l.w,     l.wy,    l.freqs, l.done,
                                        l.total};
  for (size_t k = 0; k < sections.size(); ++k) {
    EXPECT_EQ(sections[k] % 256, 0u) << "section " << k;
    if (k > 0) EXPECT_LE(sections[k - 1], sections[k]) << "section " << k;
  }
  EXPECT_GE(l.w - l.t, static_cast<size_t>(p.samples) * sizeof(double));
  EXPECT_GE(l.wy - l.w, static_cast<size_t>(p.samples) * elem);
  EXPECT_GE(l.done - l.freqs, static_cast<size_t>(p.explicit_freqs) * sizeof(double));
  // Outputs: power copied back, peaks, device top-k, then device-only scratch.
  EXPECT_GE(p.power_bytes, static_cast<size_t>(p.copied_freqs) * elem);
  EXPECT_LE(p.power_bytes, p.top_peaks_offset);
  EXPECT_LE(p.top_peaks_offset, p.out_bytes);
  EXPECT_LE(p.out_bytes, p.partials_at);
  EXPECT_GE(p.part_sums_at, p.partials_at + static_cast<size_t>(p.total_partials) * sizeof(gpucompute_kernels::LsPeak));
  EXPECT_GE(p.device_out_bytes, p.part_sums_at);
}

class BatchPlanTest : public ::testing::TestWithParam<ElementType> {};

TEST_P(BatchPlanTest, MixedBatchTakesEveryPathAndSizesEveryBuffer) {
  const ElementType dtype = GetParam();
  const int elem = dtype == ElementType::kFloat32 ? 4 : 8;
  const Batch batch = MixedBatch(dtype);
  auto plan = PlanBatch(batch, PlanOptions{}, kMultiprocessors);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const BatchPlan& p = *plan;
  ASSERT_EQ(p.series.size(), 6u);
  EXPECT_EQ(p.kinds[0], SeriesKind::kDirect1);
  EXPECT_EQ(p.kinds[1], SeriesKind::kHarmonicDirect);
  EXPECT_EQ(p.kinds[2], SeriesKind::kFast);
  EXPECT_EQ(p.kinds[3], SeriesKind::kProduct);
  EXPECT_EQ(p.kinds[4], SeriesKind::kDirect1);
  EXPECT_EQ(p.direct1.size(), 3u);  // the small, the listed and the bootstrap series
  EXPECT_EQ(p.n_harmonic, 1);
  EXPECT_EQ(p.n_fast, 1);
  // Only the caller's series' power comes back; the bootstrap's peak alone.
  EXPECT_TRUE(p.power_plans[0].copied);
  EXPECT_FALSE(p.power_plans[5].copied);
  EXPECT_EQ(p.copied_freqs, 2000 + 1500 + 40000 + 70000 + 4);
  EXPECT_EQ(p.explicit_freqs, 4);
  int64_t samples = 0;
  for (const SeriesSpec* s : p.series) samples += static_cast<int64_t>(s->t.size());
  EXPECT_EQ(p.samples, samples);
  ExpectRangesPartitionThePartials(p);
  ExpectPiecesInsideTheirSeries(p);
  ExpectLayoutOrderedAndAligned(p, elem);
  // The fast series: its NUFFT plan's grid (or window) for each of its transforms.
  ASSERT_EQ(p.nufft_plans.size(), 1u);
  EXPECT_GE(p.nufft_plans[0].grid_size, 40000);
  EXPECT_TRUE(IsFftSize(p.nufft_plans[0].grid_size));  // a size with a cuFFT plan at start
  EXPECT_EQ(p.grid_bytes, static_cast<size_t>(p.grid_cells) * 2 * elem);
  EXPECT_GE(p.grid_cells, p.nufft_plans[0].grid_size * p.n_transforms);
  // The product series: its pieces' operands and products fit the scratch.
  EXPECT_GT(p.product_scratch.total, 0u);
  EXPECT_EQ(p.product_scratch.total, 2 * p.product_scratch.b + p.product_scratch.a1 +
                                         p.product_scratch.a2 + p.product_scratch.c1 +
                                         p.product_scratch.c2);
}

// A fast series on a grid far finer than 1 / baseline takes the windowed form: its window, like
// its grid, is an FFT ladder size (each has a cuFFT plan made at start), divides the grid and
// leaves at least four copies.
TEST_P(BatchPlanTest, FastGridsAndWindowsAreFftLadderSizes) {
  auto request = std::make_shared<Request>();
  request->dtype = GetParam();
  SeriesSpec s;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, 10);
  for (int i = 0; i < 3000; ++i) {
    s.t.push_back(u(rng));
    s.y.push_back(std::sin(s.t.back()));
  }
  std::sort(s.t.begin(), s.t.end());
  s.grid.uniform = UniformGrid{0.5, 1e-5, 1000000};
  s.method = Method::kFast;
  request->series.push_back(std::move(s));
  Batch batch;
  batch.dtype = GetParam();
  batch.requests.push_back(request);
  auto plan = PlanBatch(batch, PlanOptions{}, kMultiprocessors);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->nufft_plans.size(), 1u);
  const int64_t grid = plan->nufft_plans[0].grid_size, window = plan->nufft_windows[0];
  EXPECT_TRUE(IsFftSize(grid)) << grid;
  EXPECT_GE(grid, 1250000);
  ASSERT_GT(window, 0);
  EXPECT_TRUE(IsFftSize(window)) << window;
  EXPECT_EQ(grid % window, 0);
  EXPECT_GE(grid / window, 4);
}

// The largest FFT the device's plans cover holds every fast grid under the frequency limit,
// and every grid is a ladder size.
TEST(NufftPlanTest, LargestFftSizeCoversEveryGridUnderTheLimit) {
  EXPECT_EQ(LargestFftSize(int64_t{1} << 26), int64_t{1} << 27);  // nterms > 1: upsampling 2
  for (int64_t modes : {int64_t{1}, int64_t{16}, int64_t{1000}, int64_t{65536}, int64_t{999999},
                        int64_t{1} << 26}) {
    for (ElementType dtype : {ElementType::kFloat32, ElementType::kFloat64}) {
      for (int nterms : {1, 2, 3}) {
        const NufftPlan plan = MakeNufftPlan(modes, dtype, nterms);
        EXPECT_TRUE(IsFftSize(plan.grid_size)) << plan.grid_size;
        EXPECT_GE(plan.grid_size, 2 * plan.width);
        EXPECT_LE(plan.grid_size, LargestFftSize(int64_t{1} << 26));
      }
    }
  }
}

// The window against a brute-force search over every integer: the smallest even divisor of M
// at or above the need, a power of two instead when one is at most twice it, none when it
// leaves fewer than four copies.
TEST(NufftPlanTest, WindowIsTheSmallestDivisorOrAPowerOfTwoNearIt) {
  for (int64_t grid : FftSizesBetween(16, 20000)) {
    std::vector<int64_t> even_divisors;
    for (int64_t l = 2; l <= grid; l += 2) {
      if (grid % l == 0) even_divisors.push_back(l);
    }
    for (int64_t need = 1; 4 * need <= grid + 8; ++need) {
      int64_t smallest = 0, power = 0;
      for (int64_t l : even_divisors) {
        if (l < need) continue;
        if (smallest == 0) smallest = l;
        if (power == 0 && (l & (l - 1)) == 0) power = l;
      }
      int64_t expected = 0;
      if (4 * need <= grid) {  // then M itself is a divisor >= need
        expected = power != 0 && power <= 2 * smallest ? power : smallest;
        if (grid / expected < 4) expected = 0;
      }
      ASSERT_EQ(NufftWindowOfGrid(grid, static_cast<double>(need)), expected)
          << "grid " << grid << " need " << need;
    }
  }
}

TEST_P(BatchPlanTest, ForcedSwitchesAreHonoured) {
  const Batch batch = MixedBatch(GetParam());
  PlanOptions never;
  never.product = ProductForm::kNever;
  auto plan = PlanBatch(batch, never, kMultiprocessors);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->kinds[3], SeriesKind::kDirect1);
  EXPECT_EQ(plan->product_scratch.total, 0u);
  ExpectRangesPartitionThePartials(*plan);

  PlanOptions small_pieces;
  small_pieces.product = ProductForm::kAlways;
  small_pieces.product_piece = 8192;
  plan = PlanBatch(batch, small_pieces, kMultiprocessors);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->kinds[0], SeriesKind::kProduct);  // forced: even the small uniform series
  int64_t product_pieces = 0;
  for (size_t q = 0; q < plan->pieces.size(); ++q) {
    if (plan->piece_series[q] == 3 && !plan->pieces[q].direct) {
      ++product_pieces;
      EXPECT_LE(plan->pieces[q].n_high, 8192);
    }
  }
  EXPECT_GE(product_pieces, 70000 / 8192);
  ExpectRangesPartitionThePartials(*plan);
  ExpectPiecesInsideTheirSeries(*plan);

  const CudaKernelShape shape{64, 4, 128, 0};
  PlanOptions shaped;
  shaped.shape = &shape;
  plan = PlanBatch(batch, shaped, kMultiprocessors);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->shape.block, 64);
  EXPECT_EQ(plan->shape.k, 4);
  // The NVRTC kernel's blocks: ceil(frequencies / (block x k)) per direct series, times its parts.
  int64_t blocks = 0;
  for (size_t i = 0; i < plan->series.size(); ++i) {
    if (plan->kinds[i] == SeriesKind::kDirect1) {
      blocks += (plan->series[i]->grid.size() + 255) / 256;
    }
  }
  EXPECT_EQ(plan->n_blocks, blocks);
}

TEST_P(BatchPlanTest, EmptyBatchNeedsNothing) {
  Batch batch;
  batch.dtype = GetParam();
  auto plan = PlanBatch(batch, PlanOptions{}, kMultiprocessors);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->series.empty());
  EXPECT_EQ(plan->total_partials, 0);
  EXPECT_EQ(plan->out_bytes, 0u);
  EXPECT_EQ(plan->grid_bytes, 0u);
  EXPECT_EQ(plan->product_scratch.total, 0u);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, BatchPlanTest,
                         ::testing::Values(ElementType::kFloat32, ElementType::kFloat64),
                         [](const auto& info) {
                           return info.param == ElementType::kFloat32 ? "float32" : "float64";
                         });

}  // namespace
}  // namespace gpucompute::periodogram
