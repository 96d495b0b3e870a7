// The memory limit rule: the smallest of the host's memory and the cgroup limits that exist.
#include "common/memory_limit.h"

#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpucompute {
namespace {

class MemoryLimit : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/memory_limit_test.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    for (const std::string& f : written_) unlink(f.c_str());
    rmdir(dir_.c_str());
  }
  // A file holding `text`, as cgroup files do.
  std::string File(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    written_.push_back(path);
    return path;
  }
  std::string dir_;
  std::vector<std::string> written_;
};

constexpr int64_t kPhysical = int64_t{512} << 30;

TEST_F(MemoryLimit, AContainerLimitBelowTheHostsMemoryIsTheLimit) {
  EXPECT_EQ(MemoryLimitBytes(kPhysical, {File("memory.max", "8589934592\n")}), int64_t{8} << 30);
}

TEST_F(MemoryLimit, NoLimitLeavesTheHostsMemory) {
  const std::string unlimited_v2 = File("memory.max", "max\n");
  // cgroup v1 writes "no limit" as the largest page-aligned int64.
  const std::string unlimited_v1 = File("memory.limit_in_bytes", "9223372036854771712\n");
  const std::string garbage = File("garbage", "lots\n");
  EXPECT_EQ(MemoryLimitBytes(kPhysical, {unlimited_v2, unlimited_v1, garbage,
                                         dir_ + "/no-such-file"}),
            kPhysical);
  EXPECT_EQ(MemoryLimitBytes(kPhysical, {}), kPhysical);
}

TEST_F(MemoryLimit, TheSmallestLimitWins) {
  EXPECT_EQ(MemoryLimitBytes(kPhysical, {File("a", "max"), File("b", "4294967296"),
                                         File("c", "17179869184\n")}),
            int64_t{4} << 30);
}

TEST_F(MemoryLimit, ThisProcesssLimitIsPositiveAndAtMostTheHostsMemory) {
  const int64_t physical = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  const int64_t limit = MemoryLimitBytes();
  EXPECT_GT(limit, 0);
  EXPECT_LE(limit, physical);
}

}  // namespace
}  // namespace gpucompute
