// A dense layer on Hopper's tensor cores: y = act(LN?(x) . W + bias) in one kernel (see
// LaunchTensorCore in dense_kernels.cuh). Built for sm_90a only (wgmma, setmaxnreg).
//
// Shape of the work: one CTA per 128 x 256 tile of y, three warpgroups. Warpgroup 0 is the
// producer: one thread issues TMA loads of 64-wide k slices of x (128 rows, 16 KiB) and of W^T
// (256 rows, 32 KiB) into a ring of kStages shared-memory stages (128-byte swizzle), signalling
// a "full" mbarrier per stage. Warpgroups 1 and 2 each own 64 rows of the tile: per stage they
// issue four wgmma.m64n256k16 (float accumulators, 128 registers a thread); a stage is handed
// back ("empty" mbarrier) once the wgmma reading it has completed. The LayerNorm's row
// statistics come from a small kernel that runs beside this one (RowStatsKernel). With
// cluster = 2 the two CTAs of a cluster own vertically adjacent tiles with the same W tile:
// each loads half of it and multicasts it to both, halving W's traffic out of L2.
//
// Epilogue: per element act(rstd (acc - mean colsum_j) + bias_j), computed from the
// accumulators in registers, rounded into 64 x 64 boxes in the freed stage buffers and stored
// by TMA (each warp its 16 rows), box by box, so that one box's stores run while the next is
// computed. The fold trades the exact normalise-then-round of x for one float cancellation of
// mean x colsum against acc, which keeps ~7 digits of the row mean's share (fine for 16-bit
// outputs unless |mean| / std exceeds ~1e3, where the input's own rounding has already lost
// the spread).
#include <algorithm>
#include <cstdint>
#include <mutex>
#include <set>

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudaTypedefs.h>

#include "math/activation.cuh"
#include "kernels/dense/dense_kernels.cuh"
#include "kernels/dense/element.cuh"

namespace gpucompute::kernels {
namespace {

constexpr int kBM = 128;  // rows of x per CTA (two consumer warpgroups of 64)
constexpr int kBN = 256;  // outputs per CTA
constexpr int kBK = 64;   // k per stage: 128 bytes of 16-bit values, one swizzle row
constexpr int kStages = 4;
constexpr int kThreads = 384;
constexpr int kATileBytes = kBM * kBK * 2;
constexpr int kBTileBytes = kBN * kBK * 2;
constexpr int kStageBytes = kATileBytes + kBTileBytes;

struct Shared {
  uint8_t a[kStages][kATileBytes];  // 1024-byte aligned (the 128-byte swizzle's atom)
  uint8_t b[kStages][kBTileBytes];
  uint64_t full[kStages];
  uint64_t empty[kStages];
  float bias[kBN];    // the tile's columns (zero past n)
  float colsum[kBN];  // zero without LayerNorm
};
constexpr size_t kSharedBytes = sizeof(Shared) + 1024;  // + alignment slack

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GPUCOMPUTE_SM90A 1
#endif

__device__ __forceinline__ uint32_t SharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void BarrierInit(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(SharedAddress(bar)), "r"(count));
}

__device__ __forceinline__ void BarrierExpectBytes(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(SharedAddress(bar)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void BarrierArrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(SharedAddress(bar)) : "memory");
}

// Arrive on the barrier at the same offset in CTA `rank` of the cluster. Release at CTA scope
// (the default) is enough: what is released is shared memory this thread has finished reading.
// (release.cluster costs a MEMBAR.GPU per arrival: 11 % of the kernel's samples in ncu.)
__device__ __forceinline__ void BarrierArriveRemote(uint64_t* bar, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(SharedAddress(bar)), "r"(rank));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}

__device__ __forceinline__ void BarrierWait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(SharedAddress(bar)),
      "r"(parity)
      : "memory");
}

// Wait whose arrivals may come from other CTAs of the cluster (release.cluster arrivals).
__device__ __forceinline__ void BarrierWaitCluster(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(SharedAddress(bar)),
      "r"(parity)
      : "memory");
}

__device__ __forceinline__ void ClusterSync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}

__device__ __forceinline__ uint32_t ClusterRank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// TMA: the box at (c0 = k, c1 = row) of `map` into `dst`, completing bytes on `bar`; with a
// mask, into the same offsets of every CTA in the mask (and their barriers).
__device__ __forceinline__ void TmaLoad(const CUtensorMap* map, uint64_t* bar, void* dst, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::"r"(
          SharedAddress(dst)),
      "l"(map), "r"(SharedAddress(bar)), "r"(c0), "r"(c1)
      : "memory");
}
__device__ __forceinline__ void TmaLoadMulticast(const CUtensorMap* map, uint64_t* bar, void* dst, int c0,
                                                 int c1, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, "
      "{%3, %4}], [%2], %5;" ::"r"(SharedAddress(dst)),
      "l"(map), "r"(SharedAddress(bar)), "r"(c0), "r"(c1), "h"(mask)
      : "memory");
}

// wgmma shared-memory descriptor of a K-major tile with 128-byte swizzle: 8-row groups 1024
// bytes apart (stride byte offset), leading byte offset unused.
__device__ __forceinline__ uint64_t Descriptor(const void* tile) {
  const uint64_t address = SharedAddress(tile);
  return ((address & 0x3FFFF) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

#define GPUCOMPUTE_WGMMA_M64N256K16(TYPE)                                                                      \
  asm volatile(                                                                                                \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                                            \
      "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE " {"                                        \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                 \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                       \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                        \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "                        \
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "                        \
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "                        \
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "            \
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"          \
      "}, %128, %129, p, 1, 1, 0, 0;\n}\n"                                                                     \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),         \
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),   \
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]),              \
        "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),              \
        "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),              \
        "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),              \
        "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]),              \
        "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]),              \
        "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]),              \
        "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),              \
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]),              \
        "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]),              \
        "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]),              \
        "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]),              \
        "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]),       \
        "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]),       \
        "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]),       \
        "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])        \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d))

// The product instruction per element type.
template <typename T>
struct Mma;
template <>
struct Mma<__nv_bfloat16> {
  __device__ __forceinline__ static void Run(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int scale_d) {
#ifdef GPUCOMPUTE_SM90A
    GPUCOMPUTE_WGMMA_M64N256K16("bf16");
#endif
  }
};
template <>
struct Mma<__half> {
  __device__ __forceinline__ static void Run(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int scale_d) {
#ifdef GPUCOMPUTE_SM90A
    GPUCOMPUTE_WGMMA_M64N256K16("f16");
#endif
  }
};

// Two values rounded to T, packed into 32 bits (lo first): one conversion instruction.
template <typename T>
__device__ __forceinline__ uint32_t Pack(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t Pack<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
template <>
__device__ __forceinline__ uint32_t Pack<__half>(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
#undef GPUCOMPUTE_WGMMA_M64N256K16

// Adds a 16-byte chunk of 8 values into a row's shifted sums (sum of x - shift and of its
// square).
template <typename T>
__device__ __forceinline__ void AddChunk(const uint4& raw, float shift, float& s1, float& s2) {
  float v[8];
  dense_internal::Unpack<T>(raw, v);
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const float d = v[e] - shift;
    s1 += d;
    s2 = fmaf(d, d, s2);
  }
}
// LayerNorm statistics of every row, (mean, rstd) into row_stats: a warp per row, 16-byte
// loads, sums of x - x_0 (shifted, so a large common offset costs no digits). Launched just
// before TensorCoreKernel, which it lets start at once (launch_dependents) and which waits for
// it only before its epilogue: on one wave its CTAs, one per SM, run beside the product's.
// (Sums inside the product kernel cost 6-22 us on the 1024 x 1024 -> 4096 layer on the H200:
// the x tiles' extra shared-memory reads compete with wgmma's; from global memory in the
// producer's spare warps they took 34-58k cycles.) Starting ahead of the
// product, it also asks L2 for the product's first k slices of W (`w_first_bytes` of each of
// its n rows), which the product's first loads would otherwise wait for from DRAM.
// Register budgets: the product kernel is allocated kProductRegs a thread (its producer
// warpgroup gives registers to the consumers with setmaxnreg), which leaves room on each SM for
// one statistics CTA of kStatsThreads threads at kStatsRegs (at 168 registers a product CTA
// took the whole register file). With the statistics kernel's shared-memory carveout (set at
// launch) the two share the SM: LayerNorm costs ~1.5 us over the bare product instead of ~4.3
// (H200; docs/design/dense.md).
constexpr int kProductRegs = 160;
constexpr int kProducerRegs = 40;
constexpr int kConsumerRegs = 216;
constexpr int kStatsThreads = 128;
constexpr int kStatsRegs = 32;
static_assert(kThreads * kProductRegs + kStatsThreads * kStatsRegs <= 65536, "one stats CTA fits beside");
static_assert(128 * kProducerRegs + 256 * kConsumerRegs <= kThreads * kProductRegs, "setmaxnreg budget");

template <typename T>
__global__ void __maxnreg__(kStatsRegs) RowStatsKernel(const T* __restrict__ x, int64_t ldx, int rows, int k,
                                                      float eps, float2* __restrict__ row_stats, const T* w,
                                                      int64_t ldw, int n, int w_first_bytes) {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  for (int row = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); w_first_bytes > 0 && row < n;
       row += static_cast<int>(gridDim.x * blockDim.x)) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(w + static_cast<int64_t>(row) * ldw),
                 "r"(w_first_bytes)
                 : "memory");
  }
  const int lane = threadIdx.x % 32;
  const int warps = static_cast<int>(gridDim.x * blockDim.x / 32);
  const int chunks = k / 8;
  for (int row = static_cast<int>((blockIdx.x * blockDim.x + threadIdx.x) / 32); row < rows; row += warps) {
    const T* xr = x + static_cast<int64_t>(row) * ldx;
    const float shift = static_cast<float>(xr[0]);
    float s1 = 0.f, s2 = 0.f;
    // Four 16-byte loads in flight per lane before any is used (k up to 1024 in one round).
    for (int c0 = lane; c0 < chunks; c0 += 128) {
      uint4 raw[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        raw[j] = c0 + 32 * j < chunks ? __ldg(reinterpret_cast<const uint4*>(xr) + c0 + 32 * j) : uint4{0, 0, 0, 0};
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (c0 + 32 * j < chunks) AddChunk<T>(raw[j], shift, s1, s2);
      }
    }
    for (int i = chunks * 8 + lane; i < k; i += 32) {
      const float d = static_cast<float>(xr[i]) - shift;
      s1 += d;
      s2 = fmaf(d, d, s2);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      s1 += __shfl_xor_sync(0xffffffffu, s1, o);
      s2 += __shfl_xor_sync(0xffffffffu, s2, o);
    }
    if (lane == 0) {
      const float m1 = s1 / static_cast<float>(k);
      const float var = fmaxf(s2 / static_cast<float>(k) - m1 * m1, 0.f);
      row_stats[row] = make_float2(shift + m1, rsqrtf(var + eps));
    }
  }
}

// The activation, with tanh by the hardware's approximation (max relative error 2^-10.7,
// below the 16-bit outputs' rounding) instead of the ~20-instruction tanhf; GELU in five
// float instructions and the tanh.
template <dense::Activation kAct>
__device__ __forceinline__ float FastActivate(float v) {
  if constexpr (kAct == dense::Activation::kGeluTanh) {
    float t;
    const float u = v * fmaf(0.7978845608028654f * 0.044715f, v * v, 0.7978845608028654f);
    asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(u));
    return v * fmaf(0.5f, t, 0.5f);
  } else {
    return dense::Activate(kAct, v);
  }
}

// The output goes out in boxes of 64 rows x 64 columns (8 KiB), a consumer warpgroup's rows
// times a quarter of the tile's columns, laid out as TMA's 128-byte swizzle wants them (16-byte
// chunk j of row r at chunk j ^ (r % 8)).
constexpr int kOutBoxCols = 64;
constexpr int kOutBoxes = kBN / kOutBoxCols;
constexpr int kOutBoxBytes = 64 * kOutBoxCols * 2;
// A warp's rows of a box (the accumulator layout gives each warp 16 rows), stored by TMA as one
// 16 x 64 box (2 KiB, 1024-byte aligned as the swizzle needs).
constexpr int kOutSlabRows = 16;
static_assert(2 * kOutBoxes * kOutBoxBytes <= kStages * kATileBytes, "both warpgroups' boxes fit the A stages");

// What a consumer thread needs to write its share of the tile. The m64n256 accumulator layout
// gives it rows `row` and `row + 8` of its warpgroup's 64 and, in each 8-column group i,
// columns 8 i + 2 quad and + 1: d[4 i + 2 h + {0, 1}] for row + 8 h.
struct TileOutput {
  const CUtensorMap* y_map;
  uint8_t* boxes;                   // this warpgroup's kOutBoxes boxes
  const float* bias;                // the tile's columns' parameters, in shared memory
  const float* colsum;
  float mean[2], rstd[2];  // of the two rows (0 and 1 without LayerNorm)
  int row, quad;
  int t;           // thread in the warpgroup
  int col0, row0;  // where the warpgroup's first box goes in y
  int boxes_in_y;  // boxes with columns inside y
  int rows_in_y;   // rows of y from row0 on
};

constexpr int kPerBox = 4 * (kOutBoxCols / 8);  // a thread's accumulators in one box

// Box kBox's accumulators, d[kPerBox kBox ..], into a (compile-time indices keep both in
// registers; picking two boxes at once spilled).
template <int kBox>
__device__ __forceinline__ void BoxAccumulators(const float (&d)[128], float (&a)[kPerBox]) {
#pragma unroll
  for (int j = 0; j < kPerBox; ++j) a[j] = d[kBox * kPerBox + j];
}

// The tile, box by box: act(rstd (acc - mean colsum) + bias) of the box's accumulators
// rounded into shared memory (a warp's 32 four-byte writes cover 8 rows x 16 bytes, which the
// swizzle puts on 32 different banks), each warp's 16 rows then stored by one of its threads
// while the warp goes on to the next box. A loop over the boxes, not straight-line code over
// all 128 accumulators: that was ~1,500 instructions run once per CTA, fast while the previous
// launch had left them in the instruction caches (19.4 us) but 24.5 us with them cold (ncu, or
// after other kernels: the cuBLASLt layers of a stack); this loop measured 19.8-19.9 us warm
// and 16.8-17.7 us cold (H200; docs/design/dense.md).
template <typename T, dense::Activation kAct>
__device__ __forceinline__ void StoreTile(const float (&d)[128], const TileOutput& o) {
  static_assert(kOutBoxes == 4, "a case per box");
  const uint32_t swizzle = static_cast<uint32_t>(o.row % 8);  // the same for row + 8
#pragma unroll 1
  for (int box = 0; box < kOutBoxes; ++box) {
    float a[kPerBox];
    switch (box) {
      case 0: BoxAccumulators<0>(d, a); break;
      case 1: BoxAccumulators<1>(d, a); break;
      case 2: BoxAccumulators<2>(d, a); break;
      default: BoxAccumulators<3>(d, a); break;
    }
    uint8_t* base = o.boxes + box * kOutBoxBytes;
#pragma unroll
    for (int g = 0; g < kOutBoxCols / 8; ++g) {
      const int col = box * kOutBoxCols + 8 * g + 2 * o.quad;
      const float2 b = *reinterpret_cast<const float2*>(o.bias + col);
      const float2 cs = *reinterpret_cast<const float2*>(o.colsum + col);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float v0 = FastActivate<kAct>(fmaf(o.rstd[h], fmaf(-o.mean[h], cs.x, a[4 * g + 2 * h]), b.x));
        const float v1 = FastActivate<kAct>(fmaf(o.rstd[h], fmaf(-o.mean[h], cs.y, a[4 * g + 2 * h + 1]), b.y));
        *reinterpret_cast<uint32_t*>(base + (o.row + 8 * h) * 128 + ((g ^ swizzle) << 4) + o.quad * 4) =
            Pack<T>(v0, v1);
      }
    }
    // Each warp wrote its own 16 rows of the box: made visible to the TMA unit, they go out
    // as one store by the warp's lane 0, with no wait for the warpgroup's other warps.
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncwarp();
    const int slab = (o.t / 32) * kOutSlabRows;
    if (o.t % 32 == 0 && box < o.boxes_in_y && slab < o.rows_in_y) {
      asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(o.y_map),
                   "r"(SharedAddress(base + slab * 128)), "r"(o.col0 + box * kOutBoxCols), "r"(o.row0 + slab)
                   : "memory");
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
  }
  // Shared memory may be released once the stores have read it; their writes complete on their own.
  if (o.t % 32 == 0) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}

template <typename T, int kCluster>
__global__ void __maxnreg__(kProductRegs)
    TensorCoreKernel(const __grid_constant__ CUtensorMap x_map, const __grid_constant__ CUtensorMap w_map,
                     const __grid_constant__ CUtensorMap y_map, const float* __restrict__ bias,
                     const float* __restrict__ colsum, const float2* __restrict__ row_stats, int rows, int k,
                     int n, int tiles_n, int layernorm, dense::Activation act) {
#ifdef GPUCOMPUTE_SM90A
  extern __shared__ uint8_t raw_shared[];
  // Aligned by pointer arithmetic on the shared array, not through an integer, so that the
  // compiler keeps knowing these are shared-memory addresses (LDS/STS, not generic accesses).
  Shared& s = *reinterpret_cast<Shared*>(raw_shared + ((1024 - (SharedAddress(raw_shared) & 1023)) & 1023));

  // Tiles: clusters walk the n tiles of a pair of m tiles; the CTAs of a cluster share n0.
  const uint32_t rank = kCluster > 1 ? ClusterRank() : 0;
  const int cluster_id = static_cast<int>(blockIdx.x) / kCluster;
  const int n0 = (cluster_id % tiles_n) * kBN;
  const int m0 = ((cluster_id / tiles_n) * kCluster + static_cast<int>(rank)) * kBM;
  const int k_tiles = (k + kBK - 1) / kBK;
  const int warpgroup = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    // The maps' descriptors, fetched while the barriers are set up.
    asm volatile("prefetch.tensormap [%0];" ::"l"(&x_map) : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(&w_map) : "memory");
    asm volatile("prefetch.tensormap [%0];" ::"l"(&y_map) : "memory");
    for (int i = 0; i < kStages; ++i) {
      BarrierInit(&s.full[i], 1);
      BarrierInit(&s.empty[i], kCluster * 8);  // lane 0 of every consumer warp of the cluster
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if (kCluster > 1) {
    ClusterSync();
  } else {
    __syncthreads();
  }

  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kProducerRegs));
    // Thread 0 issues the loads of k slice `kt` into its stage once the stage is free.
    auto issue = [&](int kt) {
      const int st = kt % kStages;
      if (kt >= kStages) {
        if (kCluster > 1) {
          BarrierWaitCluster(&s.empty[st], ((kt / kStages) + 1) & 1);
        } else {
          BarrierWait(&s.empty[st], ((kt / kStages) + 1) & 1);
        }
      }
      BarrierExpectBytes(&s.full[st], kStageBytes);
      TmaLoad(&x_map, &s.full[st], s.a[st], kt * kBK, m0);
      if (kCluster > 1) {
        // This CTA's half of the W tile, to both CTAs.
        TmaLoadMulticast(&w_map, &s.full[st], s.b[st] + rank * (kBTileBytes / 2), kt * kBK,
                         n0 + static_cast<int>(rank) * (kBN / 2), static_cast<uint16_t>((1u << kCluster) - 1));
      } else {
        TmaLoad(&w_map, &s.full[st], s.b[st], kt * kBK, n0);
        TmaLoad(&w_map, &s.full[st], s.b[st] + kBTileBytes / 2, kt * kBK, n0 + kBN / 2);
      }
    };
    if (threadIdx.x == 0) {
      for (int kt = 0; kt < k_tiles; ++kt) issue(kt);
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kConsumerRegs));
    const int c = warpgroup - 1;  // which 64 rows
    const int t = threadIdx.x % 128;
    const int lane = t % 32, warp = t / 32;
    {
      // The tile's column parameters, while the first loads are in flight.
      const int j = static_cast<int>(threadIdx.x) - 128;
      const int col = n0 + j;
      s.bias[j] = col < n ? bias[col] : 0.f;
      s.colsum[j] = layernorm && col < n ? colsum[col] : 0.f;
    }

    float d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.f;

    for (int kt = 0; kt < k_tiles; ++kt) {
      const int st = kt % kStages;
      BarrierWait(&s.full[st], (kt / kStages) & 1);
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
      const uint64_t desc_a = Descriptor(s.a[st] + c * 64 * 128);
      const uint64_t desc_b = Descriptor(s.b[st]);
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) {
        // k16 slices are 32 bytes apart inside the swizzled 128-byte rows (address field +2).
        Mma<T>::Run(d, desc_a + 2 * kk, desc_b + 2 * kk, (kt > 0 || kk > 0) ? 1 : 0);
      }
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
      // The previous stage's products are done: hand its buffers back (to both producers).
      asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
      if (kt > 0 && lane == 0) {
        uint64_t* empty = &s.empty[(kt - 1) % kStages];
        if (kCluster == 1) {
          BarrierArrive(empty);
        } else {
          for (int r = 0; r < kCluster; ++r) BarrierArriveRemote(empty, r);
        }
      }
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");

    // Both consumer warpgroups are past their last products: the stage buffers are free (the
    // producers load nothing after the last k slice) for the output boxes.
    asm volatile("bar.sync 1, 256;" ::: "memory");
    TileOutput o{&y_map, &s.a[0][0] + c * kOutBoxes * kOutBoxBytes, s.bias, s.colsum, {0.f, 0.f}, {1.f, 1.f},
                 warp * 16 + lane / 4, lane % 4, t, n0, m0 + c * 64,
                 min(kOutBoxes, (n - n0 + kOutBoxCols - 1) / kOutBoxCols), rows - (m0 + c * 64)};
    if (layernorm) {
      // The row statistics come from RowStatsKernel, which ran alongside the products (this
      // kernel is its programmatic dependent): wait for it, then take this thread's two rows.
      asm volatile("griddepcontrol.wait;" ::: "memory");
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = o.row0 + o.row + 8 * h;
        if (row < rows) {
          const float2 st = row_stats[row];
          o.mean[h] = st.x;
          o.rstd[h] = st.y;
        }
      }
    }
    switch (act) {
      case dense::Activation::kGeluTanh: StoreTile<T, dense::Activation::kGeluTanh>(d, o); break;
      case dense::Activation::kGeluErf: StoreTile<T, dense::Activation::kGeluErf>(d, o); break;
      case dense::Activation::kRelu: StoreTile<T, dense::Activation::kRelu>(d, o); break;
      case dense::Activation::kSilu: StoreTile<T, dense::Activation::kSilu>(d, o); break;
      default: StoreTile<T, dense::Activation::kNone>(d, o); break;
    }
  }
  // No CTA may leave while its partner can still multicast into it or arrive on its barriers.
  if (kCluster > 1) ClusterSync();
#endif
}

PFN_cuTensorMapEncodeTiled_v12000 EncodeFunction() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult result{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &result) !=
            cudaSuccess ||
        result != cudaDriverEntryPointSuccess) {
      f = nullptr;
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// A 2-D map over `rows` rows of `cols` 16-bit values (stride `ld` elements), boxes of
// kBK x box_rows, 128-byte swizzle; loads read zeros outside, stores write nothing there.
cudaError_t EncodeMap(CUtensorMap* map, const void* base, ElementType type, int64_t rows, int64_t cols, int64_t ld,
                      int box_rows) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = EncodeFunction();
  if (encode == nullptr) return cudaErrorNotSupported;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * 2};
  const cuuint32_t box[2] = {kBK, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r = encode(map, type == ElementType::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                            2, const_cast<void*>(base), dims, strides, box, element_strides,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// y's 128 x 256 tiles: one CTA each.
int64_t Tiles(const TensorCoreArgs& a) { return ((a.rows + kBM - 1) / kBM) * ((a.n + kBN - 1) / kBN); }

// `device` is the current device, with `sms` multiprocessors.
template <typename T, int kCluster>
cudaError_t LaunchTyped(const TensorCoreArgs& a, const CUtensorMap& x_map, const CUtensorMap& w_map,
                        const CUtensorMap& y_map, int device, int sms, cudaStream_t stream) {
  auto kernel = TensorCoreKernel<T, kCluster>;
  // The shared-memory opt-in is per device: set it on each device's first launch (again after
  // a failure, which is returned).
  {
    static std::mutex mu;
    static std::set<int> ready;  // devices whose attributes are set
    std::lock_guard<std::mutex> lock(mu);
    if (ready.count(device) == 0) {
      cudaError_t attr = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(kSharedBytes));
      // The statistics kernel asks for the product's shared-memory carveout: an SM configured
      // for a smaller one (the default for a kernel without shared memory) must drain before a
      // product CTA can start there.
      if (attr == cudaSuccess) {
        attr = cudaFuncSetAttribute(RowStatsKernel<T>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    cudaSharedmemCarveoutMaxShared);
      }
      if (attr != cudaSuccess) return attr;
      ready.insert(device);
    }
  }
  const int tiles_n = static_cast<int>((a.n + kBN - 1) / kBN);
  const int tiles_m = static_cast<int>((a.rows + kBM * kCluster - 1) / (kBM * kCluster)) * kCluster;
  const int ctas = tiles_n * tiles_m;
  if (a.layernorm) {
    // A warp per row. When the product is one wave, at most one CTA per SM, each beside a
    // product CTA (see kProductRegs); over several waves up to four per SM, so that a large x
    // is read by enough warps (they delay only the first wave's CTAs on their SMs). (Four
    // CTAs on the SMs the product leaves free were too slow: 29.9 us for the 1024-row layer on
    // the H200, the product waiting on them.)
    const int per_sm = ctas > sms ? 4 : 1;
    const int rows_per_cta = kStatsThreads / 32;
    const int stats_ctas =
        static_cast<int>(std::min<int64_t>(int64_t{per_sm} * sms, (a.rows + rows_per_cta - 1) / rows_per_cta));
    // The first kStages slices of each W row, in whole 16-byte units (rows are 16-byte aligned).
    const int w_first_bytes = static_cast<int>(std::min<int64_t>(a.k, kStages * kBK) * 2) / 16 * 16;
    RowStatsKernel<T><<<stats_ctas, kStatsThreads, 0, stream>>>(
        static_cast<const T*>(a.x), a.ldx, static_cast<int>(a.rows), static_cast<int>(a.k), a.eps,
        static_cast<float2*>(a.row_stats), static_cast<const T*>(a.w), a.ldw, static_cast<int>(a.n), w_first_bytes);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(ctas));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = kSharedBytes;
  config.stream = stream;
  cudaLaunchAttribute attribute[2];
  attribute[0].id = cudaLaunchAttributeClusterDimension;
  attribute[0].val.clusterDim.x = kCluster;
  attribute[0].val.clusterDim.y = 1;
  attribute[0].val.clusterDim.z = 1;
  attribute[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[1].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = a.layernorm ? 2 : 1;
  return cudaLaunchKernelEx(&config, kernel, x_map, w_map, y_map, a.bias, a.colsum,
                            static_cast<const float2*>(a.row_stats), static_cast<int>(a.rows),
                            static_cast<int>(a.k), static_cast<int>(a.n), tiles_n, a.layernorm ? 1 : 0, a.act);
}

bool Aligned(const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace

bool TensorCoreFits(int device, const TensorCoreArgs& a) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    return false;
  }
  if (major != 9 || minor != 0 || EncodeFunction() == nullptr) return false;
  if (a.type != ElementType::kBFloat16 && a.type != ElementType::kFloat16) return false;
  if (a.cluster < 0 || a.cluster > 2) return false;
  if (a.rows < 1 || a.k < 1 || a.n < 1 || a.rows > (int64_t{1} << 30) || a.k > (int64_t{1} << 30) ||
      a.n > (int64_t{1} << 30)) {
    return false;
  }
  if (a.layernorm && a.colsum == nullptr) return false;
  return a.ldx % 8 == 0 && a.ldw % 8 == 0 && a.ldx >= a.k && a.ldw >= a.k && a.ldy % 8 == 0 && a.ldy >= a.n &&
         Aligned(a.x, 16) && Aligned(a.w, 16) && Aligned(a.y, 16);
}

bool TensorCorePays(int device, const TensorCoreArgs& a) {
  if (!a.layernorm || a.cluster == 2 || !TensorCoreFits(device, a)) return false;
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) return false;
  // With fewer than 8 column tiles the statistics (rows x k reads) no longer hide under the
  // product (rows x n x k).
  const int64_t tiles = Tiles(a);
  return (a.n + kBN - 1) / kBN >= 8 && 4 * tiles >= 3 * int64_t{sms} && tiles <= sms;
}

cudaError_t LaunchTensorCore(const TensorCoreArgs& a, cudaStream_t stream) {
  if (a.layernorm && a.row_stats == nullptr) return cudaErrorInvalidValue;
  CUtensorMap x_map, w_map, y_map;
  if (cudaError_t e = EncodeMap(&x_map, a.x, a.type, a.rows, a.k, a.ldx, kBM); e != cudaSuccess) return e;
  if (cudaError_t e = EncodeMap(&w_map, a.w, a.type, a.n, a.k, a.ldw, kBN / 2); e != cudaSuccess) return e;
  if (cudaError_t e = EncodeMap(&y_map, a.y, a.type, a.rows, a.n, a.ldy, kOutSlabRows); e != cudaSuccess) return e;
  int device = 0, sms = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device); e != cudaSuccess) {
    return e;
  }
  const bool bf16 = a.type == ElementType::kBFloat16;
  const int cluster = a.cluster != 0 ? a.cluster : Tiles(a) > sms ? 2 : 1;
  if (cluster == 2) {
    return bf16 ? LaunchTyped<__nv_bfloat16, 2>(a, x_map, w_map, y_map, device, sms, stream)
                : LaunchTyped<__half, 2>(a, x_map, w_map, y_map, device, sms, stream);
  }
  return bf16 ? LaunchTyped<__nv_bfloat16, 1>(a, x_map, w_map, y_map, device, sms, stream)
              : LaunchTyped<__half, 1>(a, x_map, w_map, y_map, device, sms, stream);
}

}  // namespace gpucompute::kernels
