// The server process's memory allocator: jemalloc, configured so that large buffers are reused.
//
// The large buffers of a call (resident tensors, 72 MB analyses, power arrays, response
// messages) are allocated and freed once per call. glibc hands every allocation over 64 MiB
// made on a thread other than the main one (and by default every one over 128 KiB-32 MiB)
// straight to mmap and back to the kernel on free, so each call pays a page fault per 4 KiB page
// on first touch: 72 MB took ~50 ms to fill on the GPU machine's host and here, ten times the
// copy itself. jemalloc keeps freed extents and hands them out again (`oversize_threshold:0`:
// also the large ones, which by default go to an arena that returns them at once), returning
// unused memory to the kernel after its decay time (10 s), so memory stays bounded by the peak
// of the last seconds.
#pragma once

#include <string>

namespace gpucompute {

// "jemalloc <version>, oversize_threshold <bytes>" as the allocator reports itself, for the
// start-up log (a check that the configuration took).
std::string AllocatorDescription();

}  // namespace gpucompute
