// Counter-based random numbers for the server-drawn EnKF perturbations: Philox4x32-10
// (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11; the Random123 library)
// and Box-Muller. Header-only and usable from host C++ and CUDA device code, so the CPU
// reference and a GPU backend draw the same numbers for the same (seed, problem, element):
// each element is a pure function of its key and counter, no state is carried.
//
// Layout: key = (seed low 32 bits, seed high 32 bits); counter = (block low, block high,
// problem index, kPerturbationStream). Block b yields two standard normals, elements 2b and
// 2b + 1, from two 52-bit uniforms in (0, 1) (each from two 32-bit words). The last bits of
// the normals depend on the platform's log/sin/cos (glibc vs CUDA differ by an ulp or so).
#pragma once

#include <cmath>
#include <cstdint>

#include "math/host_device.h"

namespace gpucompute::philox {

struct Uint4 {
  uint32_t v[4];
};

// Philox4x32 with `rounds` rounds (10 is the standard, "Philox4x32-10").
GPUCOMPUTE_HOST_DEVICE inline Uint4 Philox4x32(Uint4 ctr, uint32_t key0, uint32_t key1,
                                               int rounds = 10) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // multipliers
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // Weyl key increments
  for (int r = 0; r < rounds; ++r) {
    if (r > 0) {
      key0 += kW0;
      key1 += kW1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kM0) * ctr.v[0];
    const uint64_t p1 = static_cast<uint64_t>(kM1) * ctr.v[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    ctr = Uint4{{hi1 ^ ctr.v[1] ^ key0, lo1, hi0 ^ ctr.v[3] ^ key1, lo0}};
  }
  return ctr;
}

// The fourth counter word of the perturbation stream (keeps other future streams apart).
inline constexpr uint32_t kPerturbationStream = 0x454E4B46u;  // "ENKF"

// A double in (0, 1) from 64 random bits: the top 52 bits, offset by half a step, so that
// the result is exact, never 0 (log(u) stays finite) and never 1 (at most 1 - 2^-53).
GPUCOMPUTE_HOST_DEVICE inline double ToOpenUnit(uint32_t hi, uint32_t lo) {
  const uint64_t bits = ((static_cast<uint64_t>(hi) << 32) | lo) >> 12;
  return (static_cast<double>(bits) + 0.5) * (1.0 / 4503599627370496.0);  // 2^-52
}

// The two standard normals of block `block` of problem `problem` under `seed`.
GPUCOMPUTE_HOST_DEVICE inline void NormalPair(uint64_t seed, uint32_t problem, uint64_t block,
                                              double* z0, double* z1) {
  const Uint4 ctr{{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), problem,
                   kPerturbationStream}};
  const Uint4 r = Philox4x32(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  const double u1 = ToOpenUnit(r.v[0], r.v[1]);
  const double u2 = ToOpenUnit(r.v[2], r.v[3]);
  const double radius = std::sqrt(-2.0 * std::log(u1));
  const double angle = 6.283185307179586476925286766559 * u2;
  *z0 = radius * std::cos(angle);
  *z1 = radius * std::sin(angle);
}

// Standard normal number `element` (0-based) of problem `problem` under `seed`.
GPUCOMPUTE_HOST_DEVICE inline double Normal(uint64_t seed, uint32_t problem, uint64_t element) {
  double z0, z1;
  NormalPair(seed, problem, element >> 1, &z0, &z1);
  return (element & 1) ? z1 : z0;
}

}  // namespace gpucompute::philox
