// The element types of tensors: the project's one dtype vocabulary, shared by the service
// (which maps the proto's DType onto it in one place), the ops, the kernels and the clients'
// references. The codes are fixed (kernels switch on them at run time); a periodogram computes
// in kFloat32 or kFloat64 only (its decoder refuses the others).
#pragma once

namespace gpucompute {

enum class ElementType : int { kFloat32 = 0, kFloat64 = 1, kFloat16 = 2, kBFloat16 = 3 };

// Bytes per element.
constexpr int ElementSize(ElementType type) {
  return type == ElementType::kFloat64 ? 8 : type == ElementType::kFloat32 ? 4 : 2;
}

}  // namespace gpucompute
