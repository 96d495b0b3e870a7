#!/usr/bin/env bash
# Writes the Python client's generated code for proto/gpucompute/v1/*.proto: messages
# (*_pb2.py), their type stubs (*_pb2.pyi) and the gRPC stubs (*_pb2_grpc.py), with Debian's
# protoc and grpc_python_plugin (protobuf-compiler, protobuf-compiler-grpc).
#
#   scripts/generate-python-stubs.sh [PACKAGE_ROOT]     (default: client/python)
#
# They are committed under client/python/gpucompute/v1/ so that `pip install ./client/python`
# needs no build; the test `python_packaging` fails when they differ from what this writes
# (run it after changing a .proto). The code needs protobuf >= 3.20 at run time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/client/python}
mkdir -p "$out/gpucompute/v1"
protoc --proto_path="$root/proto" --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" \
  --plugin=protoc-gen-grpc_python="$(command -v grpc_python_plugin)" \
  "$root/proto/gpucompute/v1/tensor.proto" "$root/proto/gpucompute/v1/compute.proto"
printf '"""Generated from proto/gpucompute/v1/ by scripts/generate-python-stubs.sh."""\n' \
  > "$out/gpucompute/v1/__init__.py"
