// SharedMemoryRegistry: disabled by default, key and name rules, registration proofs, ranges
// within the object, duplicates, owner isolation, and regions that stay mapped while held.
#include "server/runtime/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/server/runtime/register_own_region.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucompute {
namespace {

using ::testing::HasSubstr;

// A POSIX shared-memory object of `size` bytes, unlinked at the end of the test.
class ShmObject {
 public:
  explicit ShmObject(int64_t size) {
    static int counter = 0;
    key_ = absl::StrCat("/gpucompute-test-", getpid(), "-", counter++);
    const int fd = shm_open(key_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    EXPECT_GE(fd, 0) << std::strerror(errno);
    EXPECT_EQ(ftruncate(fd, size), 0);
    close(fd);
  }
  ~ShmObject() { shm_unlink(key_.c_str()); }
  const std::string& key() const { return key_; }
  void Truncate(int64_t size) {
    const int fd = shm_open(key_.c_str(), O_RDWR, 0);
    EXPECT_EQ(ftruncate(fd, size), 0);
    close(fd);
  }

 private:
  std::string key_;
};

using testing::RegisterOwnRegion;

TEST(SharedMemoryRegistryTest, DisabledNamesTheFlag) {
  SharedMemoryRegistry registry(/*enabled=*/false);
  ShmObject obj(4096);
  for (const absl::Status& s : {registry.Register("c", "r", obj.key(), 0, 4096, ""),
                                registry.IssueProof("c", obj.key(), 0).status(),
                                registry.Find("c", "r").status(), registry.Unregister("c", "r")}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(s.message()), HasSubstr("--allow_shared_memory"));
  }
}

TEST(SharedMemoryRegistryTest, RegisterMapsTheRegionReadWrite) {
  SharedMemoryRegistry registry(true);
  ShmObject obj(3 * 4096);
  ASSERT_TRUE(RegisterOwnRegion(registry, "c", "r", obj.key(), 5000, 6000).ok());
  auto region = registry.Find("c", "r");
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_EQ((*region)->size(), 6000);
  std::memcpy((*region)->data(), "hello", 5);
  // The bytes land at offset 5000 of the object, as another mapping sees them.
  const int fd = shm_open(obj.key().c_str(), O_RDONLY, 0);
  char buf[5];
  ASSERT_EQ(pread(fd, buf, 5, 5000), 5);
  close(fd);
  EXPECT_EQ(std::string(buf, 5), "hello");
  EXPECT_TRUE((*region)->CheckStillMapped().ok());
  EXPECT_EQ(registry.Stats().regions, 1);
  EXPECT_EQ(registry.Stats().bytes, 6000);
}

TEST(SharedMemoryRegistryTest, BadKeysAndNames) {
  SharedMemoryRegistry registry(true);
  ShmObject obj(4096);
  struct Case {
    std::string name, key;
    absl::StatusCode code;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"r", "no-slash", absl::StatusCode::kInvalidArgument, "key"},
           {"r", "/a/b", absl::StatusCode::kInvalidArgument, "key"},
           {"r", "/", absl::StatusCode::kInvalidArgument, "key"},
           {"r", "/gpucompute-test-does-not-exist", absl::StatusCode::kNotFound, "key"},
           {"", obj.key(), absl::StatusCode::kInvalidArgument, "name"},
           {"a/b", obj.key(), absl::StatusCode::kInvalidArgument, "name"},
           {std::string(129, 'a'), obj.key(), absl::StatusCode::kInvalidArgument, "name"},
       }) {
    const absl::Status s = RegisterOwnRegion(registry, "c", c.name, c.key, 0, 64);
    EXPECT_EQ(s.code(), c.code) << c.name << " " << c.key << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message));
  }
  EXPECT_EQ(registry.Stats().regions, 0);
}

TEST(SharedMemoryRegistryTest, RegionsOutsideTheObjectAreRefused) {
  SharedMemoryRegistry registry(true);
  ShmObject obj(4096);
  EXPECT_EQ(RegisterOwnRegion(registry, "c", "r", obj.key(), 0, 4097).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RegisterOwnRegion(registry, "c", "r", obj.key(), 4000, 97).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RegisterOwnRegion(registry, "c", "r", obj.key(), -1, 10).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RegisterOwnRegion(registry, "c", "r", obj.key(), 0, 0).code(), absl::StatusCode::kInvalidArgument);
  const absl::Status s = RegisterOwnRegion(registry, "c", "r", obj.key(), 4000, 97);
  EXPECT_THAT(std::string(s.message()), HasSubstr("outside the object"));
  EXPECT_TRUE(RegisterOwnRegion(registry, "c", "r", obj.key(), 4000, 96).ok());
}

TEST(SharedMemoryRegistryTest, DuplicateNamesPerClient) {
  SharedMemoryRegistry registry(true);
  ShmObject obj(4096);
  ASSERT_TRUE(RegisterOwnRegion(registry, "c", "r", obj.key(), 0, 4096).ok());
  EXPECT_EQ(RegisterOwnRegion(registry, "c", "r", obj.key(), 0, 64).code(), absl::StatusCode::kAlreadyExists);
  // Names are per client.
  EXPECT_TRUE(RegisterOwnRegion(registry, "d", "r", obj.key(), 0, 64).ok());
  EXPECT_EQ(registry.Find("e", "r").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(registry.Unregister("c", "r").ok());
  EXPECT_TRUE(RegisterOwnRegion(registry, "c", "r", obj.key(), 0, 64).ok());
}

TEST(SharedMemoryRegistryTest, UnregisterOneOrAll) {
  SharedMemoryRegistry registry(true);
  ShmObject obj(4096);
  ASSERT_TRUE(RegisterOwnRegion(registry, "c", "a", obj.key(), 0, 64).ok());
  ASSERT_TRUE(RegisterOwnRegion(registry, "c", "b", obj.key(), 0, 64).ok());
  ASSERT_TRUE(RegisterOwnRegion(registry, "d", "a", obj.key(), 0, 64).ok());
  EXPECT_EQ(registry.Unregister("c", "zz").code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(registry.Unregister("c", "").ok());
  EXPECT_TRUE(registry.List("c").empty());
  EXPECT_EQ(registry.List("d").size(), 1u);
  EXPECT_TRUE(registry.Unregister("c", "").ok());  // nothing left: still OK
}

TEST(SharedMemoryRegistryTest, HeldRegionsStayMappedAfterUnregister) {
  SharedMemoryRegistry registry(true);
  ShmObject obj(4096);
  ASSERT_TRUE(RegisterOwnRegion(registry, "c", "r", obj.key(), 0, 4096).ok());
  auto held = registry.Find("c", "r");
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(registry.Unregister("c", "r").ok());
  registry.Clear();
  std::memset((*held)->data(), 7, 4096);  // still mapped
  EXPECT_EQ((*held)->data()[4095], 7);
}

TEST(SharedMemoryRegistryTest, ShrunkObjectsAreDetected) {
  SharedMemoryRegistry registry(true);
  ShmObject obj(8192);
  ASSERT_TRUE(RegisterOwnRegion(registry, "c", "r", obj.key(), 0, 8192).ok());
  obj.Truncate(4096);
  auto region = registry.Find("c", "r");
  ASSERT_TRUE(region.ok());
  const absl::Status s = (*region)->CheckStillMapped();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("shrunk"));
}

// Proofs: the owner's own, for this key and offset, unexpired; anything else is refused, and a
// proof that checks must also be found at the start of the region.
TEST(SharedMemoryProofsTest, OnlyTheIssuedProofChecksAndOnlyUntilItExpires) {
  const SharedMemoryProofs proofs;
  const absl::Time now = absl::FromUnixSeconds(2000000000);
  const std::string proof = proofs.Issue("alice", "/gpucompute-x", 64, now);
  ASSERT_EQ(proof.size(), static_cast<size_t>(SharedMemoryProofs::kProofBytes));
  EXPECT_NE(proof, proofs.Issue("alice", "/gpucompute-x", 64, now));  // random each time
  EXPECT_TRUE(proofs.Check("alice", "/gpucompute-x", 64, proof, now).ok());
  EXPECT_TRUE(proofs.Check("alice", "/gpucompute-x", 64, proof, now + SharedMemoryProofs::kLifetime).ok());
  const absl::Status expired =
      proofs.Check("alice", "/gpucompute-x", 64, proof, now + SharedMemoryProofs::kLifetime + absl::Seconds(1));
  EXPECT_EQ(expired.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(expired.message()), HasSubstr("expired"));
  for (const auto& [owner, key, offset] : std::vector<std::tuple<std::string, std::string, int64_t>>{
           {"bob", "/gpucompute-x", 64}, {"alice", "/gpucompute-y", 64}, {"alice", "/gpucompute-x", 0},
           {"alic", "e/gpucompute-x", 64}}) {
    EXPECT_EQ(proofs.Check(owner, key, offset, proof, now).code(), absl::StatusCode::kPermissionDenied)
        << owner << " " << key << " " << offset;
  }
  for (size_t i = 0; i < proof.size(); ++i) {  // any byte changed, the expiry's too
    std::string bad = proof;
    bad[i] ^= 0x20;
    EXPECT_FALSE(proofs.Check("alice", "/gpucompute-x", 64, bad, now).ok()) << i;
  }
  // Another server's secret: its proofs do not check here; the same secret's do.
  EXPECT_FALSE(SharedMemoryProofs().Check("alice", "/gpucompute-x", 64, proof, now).ok());
  const SharedMemoryProofs a(std::string(32, 's')), b(std::string(32, 's'));
  EXPECT_TRUE(b.Check("alice", "/gpucompute-x", 64, a.Issue("alice", "/gpucompute-x", 64, now), now).ok());
}

TEST(SharedMemoryRegistryTest, TheProofMustBeInTheRegion) {
  SharedMemoryRegistry registry(true);
  ShmObject obj(4096);
  auto proof = registry.IssueProof("c", obj.key(), 0);
  ASSERT_TRUE(proof.ok()) << proof.status();
  const absl::Status s = registry.Register("c", "r", obj.key(), 0, 4096, *proof);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(s.message()), HasSubstr("does not start with it"));
  EXPECT_EQ(registry.Stats().regions, 0);
  EXPECT_EQ(registry.Register("c", "r", obj.key(), 0, 55, *proof).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.IssueProof("c", "/elsewhere", 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.IssueProof("c", obj.key(), -1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(RegisterOwnRegion(registry, "c", "r", obj.key(), 0, 4096).ok());
}

// Callers name themselves, so the server bounds all their regions together (each holds a
// descriptor): past the limit registration is RESOURCE_EXHAUSTED naming the flag, and an
// unregistered region makes room again.
TEST(SharedMemoryRegistryTest, AllCallersTogetherAreBoundedByTheServersLimit) {
  SharedMemoryRegistry registry(true, "", /*max_regions=*/3);
  ShmObject obj(4096);
  for (const char* owner : {"a", "b", "c"}) {
    ASSERT_TRUE(RegisterOwnRegion(registry, owner, "r", obj.key(), 0, 64).ok()) << owner;
  }
  const absl::Status s = RegisterOwnRegion(registry, "d", "r", obj.key(), 0, 64);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()), HasSubstr("(--max_shared_memory_regions)"));
  ASSERT_TRUE(registry.Unregister("b", "").ok());
  EXPECT_TRUE(RegisterOwnRegion(registry, "d", "r", obj.key(), 0, 64).ok());
  registry.Clear();
  EXPECT_TRUE(RegisterOwnRegion(registry, "e", "r", obj.key(), 0, 64).ok());
}

// Each region holds a descriptor: regions take at most an eighth of the descriptor limit, as it
// is when they are registered.
TEST(SharedMemoryRegistryTest, RegionsTakeAtMostAnEighthOfTheDescriptors) {
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  if (saved.rlim_cur != RLIM_INFINITY && saved.rlim_cur < 128) GTEST_SKIP() << "descriptor limit below 128";
  SharedMemoryRegistry registry(true);
  ShmObject obj(4096);
  rlimit low = saved;
  low.rlim_cur = 64;  // an eighth: 8 regions
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  absl::Status refused;
  for (int i = 0; i < 9 && refused.ok(); ++i) {
    refused = RegisterOwnRegion(registry, absl::StrCat("c", i), "r", obj.key(), 0, 64);
    if (i < 8) EXPECT_TRUE(refused.ok()) << i << ": " << refused;
  }
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("with 64 open descriptors allowed"));
  registry.Clear();
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  EXPECT_TRUE(RegisterOwnRegion(registry, "d", "r", obj.key(), 0, 64).ok());
}

}  // namespace
}  // namespace gpucompute
