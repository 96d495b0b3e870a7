// The NVRTC kernel sources of kernels/, embedded at build time (see embed_sources.cmake).
#pragma once

#include <string_view>

namespace gpucompute {
// Contents of kernels/<name> (e.g. "lombscargle_rtc.cu"); empty when unknown.
std::string_view EmbeddedKernelSource(std::string_view name);
}  // namespace gpucompute
