// Bus-error-guarded copies (see guarded_copy.h). The SIGBUS handler jumps back to the copy
// that was running on the faulting thread; a thread not inside a guarded copy gets the handler
// that was installed before, or the default action (the faulting access repeats and the
// process dies as it would have without us).
#include "common/guarded_copy.h"

#include <setjmp.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/parallel_copy.h"

namespace gpucompute {
namespace {

// volatile, and fenced around the copy: the compiler knows memmove cannot read it and would
// otherwise drop the store before the copy as dead.
thread_local sigjmp_buf* volatile t_guard = nullptr;
struct sigaction g_previous;

void OnBusError(int sig, siginfo_t* info, void* context) {
  if (t_guard != nullptr) siglongjmp(*t_guard, 1);
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if ((g_previous.sa_flags & SA_SIGINFO) == 0 && g_previous.sa_handler != SIG_DFL &&
      g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  signal(SIGBUS, SIG_DFL);  // returning repeats the access, which now kills the process
}

void InstallHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action = {};
    action.sa_sigaction = OnBusError;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &g_previous);
  });
}

absl::Status ShrunkError(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(
      what, ": the shared-memory object was shrunk below the registered region while the "
            "server was using it (keep a registered region's object at its size)"));
}

}  // namespace

bool GuardedMemmove(void* dst, const void* src, size_t n) {
  InstallHandler();
  sigjmp_buf guard;
  if (sigsetjmp(guard, /*savemask=*/1) != 0) {  // back from the handler: SIGBUS mid-copy
    t_guard = nullptr;
    return false;
  }
  t_guard = &guard;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  std::memmove(dst, src, n);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_guard = nullptr;
  return true;
}

absl::Status GuardedCopy(void* dst, const void* src, int64_t n, absl::string_view what) {
  if (n <= 0 || dst == src) return absl::OkStatus();
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  bool ok = true;
  if (d < s + n && s < d + n) {  // overlapping (a region echoed into itself): one memmove
    ok = GuardedMemmove(d, s, static_cast<size_t>(n));
  } else {
    std::atomic<bool> all_ok{true};
    ForEachCopyPiece(n, [d, s, &all_ok](int64_t begin, int64_t end) {
      if (!GuardedMemmove(d + begin, s + begin, static_cast<size_t>(end - begin))) {
        all_ok.store(false);
      }
    });
    ok = all_ok.load();
  }
  if (ok) return absl::OkStatus();
  return ShrunkError(what);
}

absl::Status GuardedCopyInBlocks(void* dst, const void* src, int64_t n, absl::string_view what,
                                 int64_t block,
                                 const std::function<void(int64_t begin, int64_t end)>& visit) {
  if (n <= 0) return absl::OkStatus();
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  block = std::max<int64_t>(1, block);
  const int64_t blocks = (n + block - 1) / block;
  std::atomic<bool> all_ok{true};
  // As ForEachCopyPiece: serial below 16 MiB, else at least 8 MiB a thread.
  ParallelFor(blocks, n < (int64_t{16} << 20) ? 0 : n, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1 && all_ok.load(std::memory_order_relaxed); ++b) {
      const int64_t begin = b * block, end = std::min(n, begin + block);
      if (!GuardedMemmove(d + begin, s + begin, static_cast<size_t>(end - begin))) {
        all_ok.store(false);
        return;
      }
      visit(begin, end);
    }
  }, /*min_cost_per_thread=*/int64_t{8} << 20);
  if (all_ok.load()) return absl::OkStatus();
  return ShrunkError(what);
}

}  // namespace gpucompute
