// Sizing a std::string that is about to be overwritten, without writing it first.
#ifndef GPUCOMPUTE_CLIENT_CPP_UNINITIALIZED_STRING_H_
#define GPUCOMPUTE_CLIENT_CPP_UNINITIALIZED_STRING_H_

#include <cstddef>
#include <string>

namespace gpucompute::client {

// Resizes `s` to `n` bytes whose values are unspecified until written. std::string::resize
// would zero them: for a downloaded tensor that is a pass over the whole buffer, on one thread,
// before any byte can land, and it faults every page in there. Left unwritten, each page is
// first touched by the copy that fills it (GetTensor: one stream per slice, in parallel). A
// buffer of several MiB is also offered to the kernel for transparent huge pages, which cut the
// number of page faults 512-fold where the kernel allows them.
void ResizeUninitialized(std::string* s, size_t n);

}  // namespace gpucompute::client

#endif  // GPUCOMPUTE_CLIENT_CPP_UNINITIALIZED_STRING_H_
