# gpucompute-server image (first draft; a later issue hardens it: non-root user, slimmer
# runtime layer, pinned digests). Build: docker build -t gpucompute .
# Run:   docker run --gpus all -p 50051:50051 gpucompute
FROM nvidia/cuda:13.0.0-devel-ubuntu24.04 AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN ./scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN ./scripts/build.sh -DBUILD_TESTING=OFF && \
    cmake --install build --prefix /opt/gpucompute

# Runtime: the CUDA runtime image carries cudart, NVRTC and the math libraries the server loads.
FROM nvidia/cuda:13.0.0-runtime-ubuntu24.04
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      libgrpc++1.51t64 libprotobuf32t64 libspdlog1.12 libopenblas0 liblapacke && \
    rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/gpucompute/bin/gpucompute-server /usr/local/bin/
EXPOSE 50051
ENTRYPOINT ["gpucompute-server", "--address=0.0.0.0:50051", "--kernel_cache_dir=/var/cache/gpucompute"]
