// Names the calling thread for `top -H`, `ps -L`, perf and debuggers (Linux keeps 15 bytes of
// a name: longer ones are cut there).
#pragma once

#include <pthread.h>

#include <string>

#include "absl/strings/string_view.h"

namespace gpucompute {

inline void NameThisThread(absl::string_view name) {
  const std::string cut(name.substr(0, 15));
  pthread_setname_np(pthread_self(), cut.c_str());
}

}  // namespace gpucompute
