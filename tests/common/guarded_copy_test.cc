// GuardedCopy against a shared-memory object shrunk under its mapping: the copy fails with a
// status naming the field instead of the process dying of SIGBUS; a bus error outside a guarded
// copy still kills the process.
#include "common/guarded_copy.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucompute {
namespace {

// A POSIX shm object of `bytes`, mapped read-write; Shrink() truncates it to nothing. Its name
// is unlinked as soon as it is open (the descriptor and the mapping keep the object), so that
// nothing is left in /dev/shm by a test process that dies, as the death test's child does:
// a name left behind would be taken again by a later process of the same pid.
class ShrinkableMapping {
 public:
  explicit ShrinkableMapping(size_t bytes) : bytes_(bytes) {
    const std::string key = absl::StrCat("/gpucompute-guarded-copy-test-", getpid(), "-", counter_++);
    fd_ = shm_open(key.c_str(), O_CREAT | O_RDWR | O_EXCL, 0600);
    EXPECT_GE(fd_, 0) << key << ": " << std::strerror(errno);
    if (fd_ < 0) return;
    shm_unlink(key.c_str());
    EXPECT_EQ(ftruncate(fd_, static_cast<off_t>(bytes)), 0);
    void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    EXPECT_NE(data, MAP_FAILED);
    if (data == MAP_FAILED) return;
    data_ = static_cast<char*>(data);
    for (size_t i = 0; i < bytes; ++i) data_[i] = static_cast<char>(i * 7 + 1);
  }
  ~ShrinkableMapping() {
    if (data_ != nullptr) munmap(data_, bytes_);
    if (fd_ >= 0) close(fd_);
  }
  void Shrink() { ASSERT_EQ(ftruncate(fd_, 0), 0); }
  char* data() const { return data_; }

 private:
  static inline int counter_ = 0;
  size_t bytes_;
  int fd_ = -1;
  char* data_ = nullptr;
};

TEST(GuardedCopy, CopiesLikeMemmove) {
  ShrinkableMapping m(1 << 16);
  std::vector<char> out(1 << 16);
  ASSERT_TRUE(GuardedCopy(out.data(), m.data(), out.size(), "x").ok());
  EXPECT_EQ(std::memcmp(out.data(), m.data(), out.size()), 0);
  // Overlapping ranges move like memmove.
  std::string s = "abcdefgh";
  ASSERT_TRUE(GuardedCopy(s.data() + 2, s.data(), 6, "x").ok());
  EXPECT_EQ(s, "ababcdef");
  // Large, non-overlapping: the parallel path.
  std::vector<char> big(40 << 20), copy(40 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i % 253);
  ASSERT_TRUE(GuardedCopy(copy.data(), big.data(), big.size(), "x").ok());
  EXPECT_TRUE(copy == big);
}

// In blocks: every byte copied, every block visited once (on threads when large) with the
// block's bytes already in place, and a shrunk object is still an error, not a crash.
TEST(GuardedCopy, InBlocksVisitsEachBlockOnceAfterCopyingIt) {
  for (int64_t n : {int64_t{0}, int64_t{1000}, (int64_t{40} << 20) + 13}) {
    SCOPED_TRACE(n);
    std::vector<char> src(static_cast<size_t>(n)), dst(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) src[i] = static_cast<char>(i % 251);
    const int64_t block = int64_t{1} << 20;
    std::vector<std::atomic<int>> visits(static_cast<size_t>((n + block - 1) / block));
    std::atomic<bool> copied_before_visit{true};
    ASSERT_TRUE(GuardedCopyInBlocks(dst.data(), src.data(), n, "x", block,
                                    [&](int64_t begin, int64_t end) {
                                      EXPECT_EQ(begin % block, 0);
                                      EXPECT_EQ(end, std::min(n, begin + block));
                                      if (std::memcmp(dst.data() + begin, src.data() + begin,
                                                      end - begin) != 0) {
                                        copied_before_visit = false;
                                      }
                                      ++visits[begin / block];
                                    })
                    .ok());
    EXPECT_TRUE(dst == src);
    EXPECT_TRUE(copied_before_visit);
    for (const auto& v : visits) EXPECT_EQ(v.load(), 1);
  }
  ShrinkableMapping m(24 << 20);
  m.Shrink();
  std::vector<char> out(24 << 20);
  const absl::Status s =
      GuardedCopyInBlocks(out.data(), m.data(), out.size(), "x.shared_memory", 1 << 20,
                          [](int64_t, int64_t) {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("x.shared_memory: the shared-memory object was shrunk"));
}

TEST(GuardedCopy, ReadingAShrunkObjectIsAnErrorNotACrash) {
  ShrinkableMapping m(1 << 16);
  m.Shrink();
  std::vector<char> out(1 << 16);
  EXPECT_FALSE(GuardedMemmove(out.data(), m.data(), out.size()));
  const absl::Status s = GuardedCopy(out.data(), m.data(), out.size(), "x.shared_memory");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("x.shared_memory: the shared-memory object was shrunk"));
  // And again: the guard is reusable on the same thread.
  EXPECT_FALSE(GuardedMemmove(out.data(), m.data(), 4096));
}

TEST(GuardedCopy, WritingIntoAShrunkObjectIsAnError) {
  ShrinkableMapping m(48 << 20);  // parallel pieces, every one of them faults
  m.Shrink();
  std::vector<char> in(48 << 20, 'z');
  EXPECT_EQ(GuardedCopy(m.data(), in.data(), in.size(), "out").code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GuardedCopyDeathTest, ABusErrorOutsideAGuardStillKills) {
  EXPECT_EXIT(
      {
        ShrinkableMapping m(1 << 16);
        char c = 0;
        GuardedMemmove(&c, m.data(), 1);  // installs the handler
        m.Shrink();
        volatile char read = m.data()[100];
        (void)read;
        std::_Exit(0);
      },
      ::testing::KilledBySignal(SIGBUS), "");
}

}  // namespace
}  // namespace gpucompute
