// LargeTensors (see large_tensors.h).
#include "client/cpp/large_tensors.h"

#include <algorithm>
#include <utility>

#include "client/cpp/tensor_util.h"
#include "gpucompute/v1/dtype.h"
#include "common/status_macros.h"

namespace gpucompute::client {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

constexpr int kStreams = 16;                          // connections a call spreads over
constexpr int64_t kMinSliceBytes = int64_t{2} << 20;  // smaller slices are not worth one

}  // namespace

void ForEachTensor(Message& message, const std::function<void(v1::Tensor&)>& fn) {
  if (message.GetDescriptor() == v1::Tensor::descriptor()) {
    fn(static_cast<v1::Tensor&>(message));
    return;
  }
  const google::protobuf::Reflection* reflection = message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);  // the fields that are set
  for (const FieldDescriptor* f : fields) {
    if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (f->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(message, f); ++i) {
        ForEachTensor(*reflection->MutableRepeatedMessage(&message, f, i), fn);
      }
    } else {
      ForEachTensor(*reflection->MutableMessage(&message, f), fn);
    }
  }
}

std::vector<int> StreamsBySize(const std::vector<int64_t>& sizes, int streams, int64_t min_slice) {
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  std::vector<int> out;
  out.reserve(sizes.size());
  for (int64_t s : sizes) {
    const int64_t share = total > 0 ? streams * s / total : 1;
    out.push_back(static_cast<int>(std::max<int64_t>(1, std::min(share, s / min_slice))));
  }
  return out;
}

LargeTensors::LargeTensors(Client& client, int64_t threshold, CallOptions options)
    : client_(client), threshold_(threshold), options_(std::move(options)) {}

LargeTensors::~LargeTensors() {
  std::vector<std::string> left = std::move(inputs_);
  left.insert(left.end(), outputs_.begin(), outputs_.end());
  Delete(std::move(left));
  for (auto& f : deleting_) f.wait();  // an error: gone already (expired, server restarted)
}

absl::Status LargeTensors::Send(Message& request) {
  if (threshold_ <= 0) return absl::OkStatus();
  std::vector<v1::Tensor*> large;
  ForEachTensor(request, [&](v1::Tensor& t) {
    if (t.payload_case() == v1::Tensor::kData &&
        static_cast<int64_t>(t.data().size()) >= threshold_) {
      large.push_back(&t);
    }
  });
  const FieldDescriptor* placement = request.GetDescriptor()->FindFieldByName("output_placement");
  if (placement != nullptr && !request.GetReflection()->HasField(request, placement)) {
    auto& p = static_cast<v1::OutputPlacement&>(
        *request.GetReflection()->MutableMessage(&request, placement));
    p.set_keep_above_bytes(threshold_);
    p.set_idle_expiry_ms(absl::ToInt64Milliseconds(kIdleExpiry));
    auto_placement_ = true;
  }
  std::vector<int64_t> sizes;
  for (const v1::Tensor* t : large) sizes.push_back(static_cast<int64_t>(t->data().size()));
  const std::vector<int> streams = StreamsBySize(sizes, kStreams, kMinSliceBytes);
  std::vector<std::future<absl::StatusOr<PutTensorResult>>> uploads;
  int first = 0;
  for (size_t i = 0; i < large.size(); ++i) {
    const v1::Tensor& t = *large[i];
    const std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
    ASSIGN_OR_RETURN(v1::TensorInfo reserved,
                     client_.CreateTensor(t.dtype(), shape, options_, kIdleExpiry));
    inputs_.push_back(reserved.handle());
    PutTensorOptions put;
    put.streams = streams[i];
    put.first_stream = first;
    put.handle = reserved.handle();
    first += streams[i];
    uploads.push_back(client_.PutTensorAsync(t.dtype(), shape, t.data(), put, options_));
  }
  absl::Status status;
  for (auto& u : uploads) {
    absl::StatusOr<PutTensorResult> done = u.get();  // every one, even after an error
    if (!done.ok() && status.ok()) status = done.status();
  }
  if (!status.ok()) return status;
  for (size_t i = 0; i < large.size(); ++i) large[i]->set_handle(inputs_[i]);  // frees the data
  return absl::OkStatus();
}

void LargeTensors::ReleaseInputs() {
  Delete(std::move(inputs_));
  inputs_.clear();
}

absl::Status LargeTensors::Receive(Message& response) {
  if (!auto_placement_) return absl::OkStatus();
  std::vector<v1::Tensor*> kept;
  ForEachTensor(response, [&](v1::Tensor& t) {
    if (t.payload_case() == v1::Tensor::kHandle) kept.push_back(&t);
  });
  std::vector<int64_t> sizes;
  for (const v1::Tensor* t : kept) {
    outputs_.push_back(t->handle());
    ASSIGN_OR_RETURN(const int64_t count,
                     NumElements(absl::MakeConstSpan(t->shape().data(), t->shape().size())));
    sizes.push_back(count * DTypeSize(t->dtype()));
  }
  const std::vector<int> streams = StreamsBySize(sizes, kStreams, kMinSliceBytes);
  std::vector<std::future<absl::StatusOr<GetTensorResult>>> downloads;
  int first = 0;
  for (size_t i = 0; i < kept.size(); ++i) {
    GetTensorOptions get;
    get.length = sizes[i];
    get.streams = streams[i];
    get.first_stream = first;
    first += streams[i];
    downloads.push_back(client_.GetTensorAsync(kept[i]->handle(), get, options_));
  }
  absl::Status status;
  for (size_t i = 0; i < kept.size(); ++i) {
    absl::StatusOr<GetTensorResult> got = downloads[i].get();
    if (!got.ok()) {
      if (status.ok()) status = got.status();
      continue;
    }
    kept[i]->set_data(std::move(got->data));  // replaces the handle
  }
  Delete(std::move(outputs_));
  outputs_.clear();
  return status;
}

void LargeTensors::Delete(std::vector<std::string> handles) {
  for (std::string& h : handles) deleting_.push_back(client_.DeleteTensorAsync(std::move(h), options_));
}

}  // namespace gpucompute::client
