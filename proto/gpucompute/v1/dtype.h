// Element sizes and names of gpucompute.v1.DType, shared by the server and the C++ client.
#pragma once

#include "gpucompute/v1/tensor.pb.h"

namespace gpucompute::v1 {

// Bytes per element; 0 for DTYPE_UNSPECIFIED or an unknown value.
inline int DTypeSize(DType dtype) {
  switch (dtype) {
    case FLOAT32: return 4;
    case FLOAT64: return 8;
    case FLOAT16: return 2;
    case BFLOAT16: return 2;
    case INT32: return 4;
    case INT64: return 8;
    case UINT8: return 1;
    default: return 0;
  }
}

inline const char* DTypeName(DType dtype) {
  switch (dtype) {
    case FLOAT32: return "float32";
    case FLOAT64: return "float64";
    case FLOAT16: return "float16";
    case BFLOAT16: return "bfloat16";
    case INT32: return "int32";
    case INT64: return "int64";
    case UINT8: return "uint8";
    case DTYPE_UNSPECIFIED: return "unspecified";
    default: return "unknown";
  }
}

}  // namespace gpucompute::v1
