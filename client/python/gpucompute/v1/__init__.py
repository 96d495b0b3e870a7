"""Generated from proto/gpucompute/v1/ by scripts/generate-python-stubs.sh."""
