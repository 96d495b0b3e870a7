// Request inspection for the front (see request_route.h).
#include "server/front/request_route.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "gpucompute/v1/compute.pb.h"

namespace gpucompute::front {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::io::CodedInputStream;
using google::protobuf::internal::WireFormatLite;

constexpr char kComputePrefix[] = "/gpucompute.v1.Compute/";
// Handles and model names longer than this are not routing keys (the worker rejects them).
constexpr uint32_t kLongestKey = 4096;
// Nesting the walk follows at most (the API nests four deep).
constexpr int kDeepest = 16;
// Handles kept in RequestFacts: a request may repeat a handle field millions of times.
constexpr size_t kMostHandles = 64;

void AddHandle(RequestFacts* facts, std::string handle) {
  const int worker = WorkerOfHandle(handle);
  // Two workers already decide (a request's tensors must come from one).
  if (worker >= 0 && facts->handle_workers.size() < 2 &&
      std::find(facts->handle_workers.begin(), facts->handle_workers.end(), worker) ==
          facts->handle_workers.end()) {
    facts->handle_workers.push_back(worker);
  }
  if (facts->handles.size() < kMostHandles) facts->handles.push_back(std::move(handle));
}

struct MethodEntry {
  const char* name;
  Method method;
  const char* label;
  Fanout fanout;
};

constexpr MethodEntry kMethods[] = {
    {"Periodogram", Method::kPeriodogram, "periodogram", Fanout::kOne},
    {"LoadModel", Method::kLoadModel, "load_model", Fanout::kAll},
    {"UnloadModel", Method::kUnloadModel, "unload_model", Fanout::kAll},
    {"ListModels", Method::kListModels, "list_models", Fanout::kMerge},
    {"Dense", Method::kDense, "dense", Fanout::kOne},
    {"Assimilate", Method::kAssimilate, "assimilate", Fanout::kOne},
    {"ServerInfo", Method::kServerInfo, "server_info", Fanout::kMerge},
    {"Submit", Method::kSubmit, "submit", Fanout::kOne},
    {"Echo", Method::kEcho, "echo", Fanout::kOne},
    {"CreateTensor", Method::kCreateTensor, "create_tensor", Fanout::kOne},
    {"PutTensor", Method::kPutTensor, "put_tensor", Fanout::kOne},
    {"GetTensor", Method::kGetTensor, "get_tensor", Fanout::kOne},
    {"DeleteTensor", Method::kDeleteTensor, "delete_tensor", Fanout::kOne},
    {"ListTensors", Method::kListTensors, "list_tensors", Fanout::kMerge},
    // Any worker issues the proof: they share the secret that checks it.
    {"SharedMemoryProof", Method::kSharedMemoryProof, "shared_memory_proof", Fanout::kOne},
    {"RegisterSharedMemory", Method::kRegisterSharedMemory, "register_shared_memory", Fanout::kAll},
    {"UnregisterSharedMemory", Method::kUnregisterSharedMemory, "unregister_shared_memory",
     Fanout::kAll},
};

const MethodEntry* EntryOf(Method method) {
  for (const MethodEntry& e : kMethods) {
    if (e.method == method) return &e;
  }
  return nullptr;
}

// Reads a length-delimited string field's value when it is short enough to be a key; longer
// ones are skipped. False when the message ends inside it.
bool ReadKey(CodedInputStream* in, std::string* out) {
  uint32_t length = 0;
  if (!in->ReadVarint32(&length)) return false;
  if (length > kLongestKey) return in->Skip(static_cast<int>(length));
  return in->ReadString(out, static_cast<int>(length));
}

// Walks one message of type `type` up to the end of the current limit, recording what
// RequestFacts holds; bytes fields (tensor data, chunks) are skipped without a copy.
bool Walk(CodedInputStream* in, const Descriptor* type, int depth, RequestFacts* facts) {
  if (depth > kDeepest) return false;
  const bool is_tensor = type == v1::Tensor::descriptor();
  const bool is_placement = type == v1::OutputPlacement::descriptor();
  const bool is_put_header = type == v1::PutTensorHeader::descriptor();
  const bool has_model = type == v1::DenseRequest::descriptor();
  const bool has_job_id = type == v1::SubmitRequest::descriptor();
  const bool names_handle = type == v1::GetTensorRequest::descriptor() ||
                            type == v1::DeleteTensorRequest::descriptor();
  while (true) {
    const uint32_t tag = in->ReadTag();
    if (tag == 0) return true;  // the end of this message (or of the input)
    const int number = WireFormatLite::GetTagFieldNumber(tag);
    const auto wire_type = WireFormatLite::GetTagWireType(tag);
    const FieldDescriptor* field = type->FindFieldByNumber(number);
    if (field != nullptr && wire_type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (field->type() == FieldDescriptor::TYPE_MESSAGE) {
        uint32_t length = 0;
        if (!in->ReadVarint32(&length)) return false;
        if (length > static_cast<uint32_t>(std::numeric_limits<int>::max())) return false;
        const CodedInputStream::Limit limit = in->PushLimit(static_cast<int>(length));
        if (!Walk(in, field->message_type(), depth + 1, facts)) return false;
        if (!in->ConsumedEntireMessage()) return false;
        in->PopLimit(limit);
        continue;
      }
      std::string* key = nullptr;
      std::string handle;
      if ((is_tensor && number == v1::Tensor::kHandleFieldNumber) ||
          (is_put_header && number == v1::PutTensorHeader::kHandleFieldNumber) ||
          (names_handle && number == 1)) {
        key = &handle;
      } else if (has_model && number == v1::DenseRequest::kModelFieldNumber) {
        key = &facts->model;
      } else if (has_job_id && number == v1::SubmitRequest::kIdFieldNumber) {
        key = &facts->job_id;
      }
      if (key != nullptr) {
        if (!ReadKey(in, key)) return false;
        if (!handle.empty()) AddHandle(facts, std::move(handle));
        continue;
      }
    }
    if (is_placement && number == v1::OutputPlacement::kKeepFieldNumber &&
        wire_type == WireFormatLite::WIRETYPE_VARINT) {
      uint64_t keep = 0;
      if (!in->ReadVarint64(&keep)) return false;
      if (keep != 0) facts->keeps_output = true;
      continue;
    }
    // keep_above_bytes does not pin the caller to a worker: the clients fetch and delete such
    // outputs at once (their handles name the worker), and every large call carries it.
    if (!WireFormatLite::SkipField(in, tag)) return false;
  }
}

const Descriptor* RequestType(Method method) {
  switch (method) {
    case Method::kPeriodogram: return v1::PeriodogramRequest::descriptor();
    case Method::kDense: return v1::DenseRequest::descriptor();
    case Method::kAssimilate: return v1::AssimilateRequest::descriptor();
    case Method::kSubmit: return v1::SubmitRequest::descriptor();
    case Method::kEcho: return v1::EchoRequest::descriptor();
    case Method::kPutTensor: return v1::PutTensorChunk::descriptor();
    case Method::kGetTensor: return v1::GetTensorRequest::descriptor();
    case Method::kDeleteTensor: return v1::DeleteTensorRequest::descriptor();
    default: return nullptr;
  }
}

}  // namespace

Method MethodOf(absl::string_view path) {
  if (!absl::ConsumePrefix(&path, kComputePrefix)) return Method::kOther;
  for (const MethodEntry& e : kMethods) {
    if (path == e.name) return e.method;
  }
  return Method::kOther;
}

const char* MethodLabel(Method method) {
  const MethodEntry* e = EntryOf(method);
  return e != nullptr ? e->label : "other";
}

Fanout FanoutOf(Method method) {
  const MethodEntry* e = EntryOf(method);
  return e != nullptr ? e->fanout : Fanout::kOne;
}

RequestFacts InspectRequest(Method method, const grpc::ByteBuffer& message) {
  RequestFacts facts;
  if (method == Method::kCreateTensor) facts.creates_tensor = true;
  const Descriptor* type = RequestType(method);
  if (type == nullptr || !message.Valid()) return facts;
  grpc::ByteBuffer copy(message);  // shares the slices; the reader needs a mutable buffer
  grpc::ProtoBufferReader reader(&copy);
  CodedInputStream in(&reader);
  in.SetTotalBytesLimit(std::numeric_limits<int>::max());
  (void)Walk(&in, type, 0, &facts);
  if (method == Method::kPutTensor && facts.handles.empty()) facts.creates_tensor = true;
  return facts;
}

std::string HandlePrefix(int worker) { return absl::StrCat("w", worker, "-"); }

int WorkerOfHandle(absl::string_view handle) {
  if (!absl::ConsumePrefix(&handle, "w")) return -1;
  const size_t dash = handle.find('-');
  if (dash == absl::string_view::npos || dash == 0 || dash > 6) return -1;
  int worker = -1;
  if (!absl::SimpleAtoi(handle.substr(0, dash), &worker) || worker < 0) return -1;
  return worker;
}

}  // namespace gpucompute::front
