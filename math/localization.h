// Localisation of the LETKF: distances between the coordinates of a state variable and of an
// observation, and the taper that turns a distance into the coefficient multiplying the
// observation's inverse variance. Header-only and usable from host C++ and CUDA device code, so
// the CPU reference and a GPU backend select and weigh the same observations.
//
// The radius is DAPPER's `loc_rad` (dapper/tools/localization.py, dist2coeff): the taper is
// exp(-1/2) at distance = radius for the Gaspari-Cohn and Gaussian tapers. Gaspari-Cohn is
// their compactly supported fifth-order function (Gaspari & Cohn 1999, eq. 4.10) of half-width
// c = 1.82 radius, zero from 2c; Gaussian is exp(-(d / radius)^2 / 2); step is 1 up to the
// radius. As in DAPPER, an observation enters a local analysis only when its coefficient
// exceeds kMinCoefficient (1e-3), so the Gaussian is cut at 3.72 radius.
#pragma once

#include <cmath>

#include "math/host_device.h"

namespace gpucompute::localization {

enum class Metric : int { kEuclidean = 0, kPeriodic = 1, kGreatCircle = 2 };
enum class Taper : int { kGaspariCohn = 0, kGaussian = 1, kStep = 2 };

inline constexpr double kMinCoefficient = 1e-3;  // DAPPER's CUTOFF
inline constexpr double kGaspariCohnHalfWidth = 1.82;  // c / radius (DAPPER's factor)
inline constexpr double kDegree = 3.14159265358979323846 / 180.0;

// The taper's coefficient at `distance` (>= 0) for `radius` (> 0), in [0, 1].
GPUCOMPUTE_HOST_DEVICE inline double TaperCoefficient(Taper taper, double distance, double radius) {
  switch (taper) {
    case Taper::kGaussian: {
      const double r = distance / radius;
      return std::exp(-0.5 * r * r);
    }
    case Taper::kStep:
      return distance <= radius ? 1.0 : 0.0;
    case Taper::kGaspariCohn:
    default: {
      const double r = distance / (kGaspariCohnHalfWidth * radius);
      if (r <= 1) {
        return 1 + r * r * (r * (r * (-0.25 * r + 0.5) + 0.625) - 5.0 / 3.0);
      }
      if (r < 2) {
        return r * (r * (r * (r * (r / 12 - 0.5) + 0.625) + 5.0 / 3.0) - 5) + 4 - 2.0 / (3 * r);
      }
      return 0;
    }
  }
}

// A distance beyond which every coefficient is at most kMinCoefficient: what a neighbour
// search must cover.
GPUCOMPUTE_HOST_DEVICE inline double SearchRadius(Taper taper, double radius) {
  switch (taper) {
    case Taper::kGaussian: return radius * std::sqrt(-2 * std::log(kMinCoefficient));
    case Taper::kStep: return radius;
    case Taper::kGaspariCohn:
    default: return 2 * kGaspariCohnHalfWidth * radius;
  }
}

// The distance between points a and b of `dims` coordinates. Periodic: axis k wraps at
// domain[k]. Great circle: (longitude, latitude) in degrees on a sphere of `sphere_radius`
// (the haversine formula, accurate at small separations).
GPUCOMPUTE_HOST_DEVICE inline double Distance(Metric metric, const double* a, const double* b,
                                              int dims, const double* domain, double sphere_radius) {
  if (metric == Metric::kGreatCircle) {
    const double lat_a = a[1] * kDegree, lat_b = b[1] * kDegree;
    const double s_lat = std::sin(0.5 * (lat_b - lat_a));
    const double s_lon = std::sin(0.5 * (b[0] - a[0]) * kDegree);
    double h = s_lat * s_lat + std::cos(lat_a) * std::cos(lat_b) * s_lon * s_lon;
    h = h < 0 ? 0 : (h > 1 ? 1 : h);
    return 2 * sphere_radius * std::asin(std::sqrt(h));
  }
  double sum = 0;
  for (int k = 0; k < dims; ++k) {
    double d = std::fabs(a[k] - b[k]);
    if (metric == Metric::kPeriodic) {
      if (d >= domain[k]) d = std::fmod(d, domain[k]);  // fmod is slow; most points are in one period
      d = d < domain[k] - d ? d : domain[k] - d;
    }
    sum += d * d;
  }
  return std::sqrt(sum);
}

}  // namespace gpucompute::localization
