// libFuzzer target: shared-memory registration as sequences of SharedMemoryProof,
// RegisterSharedMemory and UnregisterSharedMemory calls by several callers (fuzz_input.proto's
// SharedMemorySteps) against a registry of its own over two real objects. A finding is a
// sanitizer report, a status no request should get (anything but OK, INVALID_ARGUMENT,
// NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED, RESOURCE_EXHAUSTED), or a registration that
// succeeded without the caller's own proof: one issued to this caller for this key and offset,
// found at the start of the region.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fuzz_input.pb.h"
#include "server/runtime/shared_memory.h"

namespace gpucompute::fuzz {
namespace {

constexpr int64_t kObjectBytes = 4096;

// The fuzzer's two objects, made on first use and unlinked when the process exits.
struct Objects {
  std::string keys[2];
  Objects() {
    for (int i = 0; i < 2; ++i) {
      keys[i] = absl::StrCat("/gpucompute-shm-fuzz-", getpid(), "-", i);
      const int fd = shm_open(keys[i].c_str(), O_CREAT | O_RDWR, 0600);
      if (fd < 0 || ftruncate(fd, kObjectBytes) != 0) std::abort();
      close(fd);
    }
  }
  ~Objects() {
    for (const std::string& k : keys) shm_unlink(k.c_str());
  }
};

const std::string& ObjectKey(int i) {
  static Objects objects;
  return objects.keys[i];
}

// "k0" and "k1" are the fuzzer's objects; any other key is one that does not exist (so that no
// input touches other objects of the machine), kept well-formed or not as it came.
std::string MapKey(const std::string& key) {
  if (key == "k0") return ObjectKey(0);
  if (key == "k1") return ObjectKey(1);
  if (key.rfind(kSharedMemoryKeyPrefix, 0) == 0) {
    return absl::StrCat("/gpucompute-shm-fuzz-missing-", getpid());
  }
  return key;
}

void Finding(const char* what, const SharedMemorySteps& steps) {
  std::string text = steps.ShortDebugString();
  if (text.size() > 4000) text.resize(4000);
  std::fprintf(stderr, "FINDING: %s\nfor %s\n", what, text.c_str());
  std::abort();
}

void CheckCode(const absl::Status& s, const SharedMemorySteps& steps) {
  static const bool verbose = std::getenv("GPUCOMPUTE_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "status: %s\n", s.ToString().c_str());
  switch (s.code()) {
    case absl::StatusCode::kOk:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kResourceExhausted:
      return;
    default:
      std::fprintf(stderr, "status %s\n", s.ToString().c_str());
      Finding("unexpected status", steps);
  }
}

// The object's bytes [offset, offset + n), or "" where it does not reach.
std::string ReadObject(const std::string& key, int64_t offset, size_t n) {
  std::string out(n, '\0');
  const int fd = shm_open(key.c_str(), O_RDONLY, 0);
  if (fd < 0) return "";
  const ssize_t got = offset >= 0 ? pread(fd, out.data(), n, offset) : -1;
  close(fd);
  return got == static_cast<ssize_t>(n) ? out : "";
}

}  // namespace
}  // namespace gpucompute::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpucompute;
  using namespace gpucompute::fuzz;
  SharedMemorySteps steps;
  if (!steps.ParseFromArray(data, static_cast<int>(size))) return -1;
  if (steps.steps_size() > 64) return -1;
  // A fixed secret: a finding replays.
  SharedMemoryRegistry registry(/*enabled=*/true, std::string(32, 'f'));
  // Proofs issued, by (owner, key, offset): the last one, and all of them (in order too).
  std::map<std::tuple<std::string, std::string, int64_t>, std::string> last;
  std::set<std::tuple<std::string, std::string, int64_t, std::string>> issued;
  std::vector<std::string> all_issued;
  for (const SharedMemoryStep& step : steps.steps()) {
    const std::string& owner = step.owner();
    switch (step.call_case()) {
      case SharedMemoryStep::kProof: {
        const std::string key = MapKey(step.proof().key());
        auto proof = registry.IssueProof(owner, key, step.proof().offset());
        CheckCode(proof.status(), steps);
        if (proof.ok()) {
          last[{owner, key, step.proof().offset()}] = *proof;
          issued.insert({owner, key, step.proof().offset(), *proof});
          all_issued.push_back(*proof);
        }
        break;
      }
      case SharedMemoryStep::kRegister: {
        const v1::RegisterSharedMemoryRequest& r = step.register_();
        const std::string key = MapKey(r.key());
        std::string proof = r.proof();
        // The proof the step uses and writes: its own last one, or any issued so far.
        const std::string* chosen = nullptr;
        if (step.any_proof()) {
          if (!all_issued.empty()) chosen = &all_issued[step.proof_choice() % all_issued.size()];
        } else if (auto it = last.find({owner, key, r.offset()}); it != last.end()) {
          chosen = &it->second;
        }
        if (chosen != nullptr) {
          if (step.use_issued_proof()) proof = *chosen;
          // Within the object only: a write past its end would grow it.
          if (step.write_proof() && r.offset() >= 0 &&
              r.offset() <= kObjectBytes - static_cast<int64_t>(chosen->size())) {
            const int fd = shm_open(key.c_str(), O_RDWR, 0);
            if (fd >= 0) {
              (void)!pwrite(fd, chosen->data(), chosen->size(), r.offset());
              close(fd);
            }
          }
        }
        const absl::Status s = registry.Register(owner, r.name(), key, r.offset(), r.byte_size(), proof);
        CheckCode(s, steps);
        if (s.ok()) {
          if (!issued.count({owner, key, r.offset(), proof})) {
            Finding("registered with a proof not issued to this caller for this key and offset", steps);
          }
          if (ReadObject(key, r.offset(), proof.size()) != proof) {
            Finding("registered a region that does not start with the proof", steps);
          }
        }
        break;
      }
      case SharedMemoryStep::kUnregister:
        CheckCode(registry.Unregister(owner, step.unregister().name()), steps);
        break;
      case SharedMemoryStep::CALL_NOT_SET:
        break;
    }
  }
  return 0;
}
