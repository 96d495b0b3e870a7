# gpucompute image: built by CI's own scripts (scripts/install-deps.sh, scripts/build.sh) on the
# CUDA devel image, run on the matching runtime image as a non-root user. The runtime image
# carries the CUDA libraries the server links (cudart, NVRTC, cuBLAS, cuBLASLt, cuSOLVER); the
# other shared libraries come from the build stage. tests/deploy/ checks this file offline.
#   docker build -t gpucompute .
#   docker run --gpus all -p 50051:50051 -p 8002:8002 gpucompute
ARG CUDA_VERSION=13.0.2
ARG BASE_OS=ubuntu24.04

FROM nvidia/cuda:${CUDA_VERSION}-devel-${BASE_OS} AS build
WORKDIR /src
# Packages in a layer of their own, so that source edits do not reinstall them.
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN scripts/build.sh -DBUILD_TESTING=OFF && cmake --install build --prefix /opt/gpucompute
# The non-CUDA libraries the binaries load (gRPC, Protobuf, Abseil, spdlog, OpenBLAS, ...),
# as ldd resolves them here: the runtime image has glibc, libstdc++ and CUDA (libcuda comes from
# the host's driver), and the same Ubuntu, so these copies match what the build linked.
RUN mkdir -p /opt/gpucompute/lib && \
    cd /opt/gpucompute/bin && ldd gpucompute-server gpucompute gpucompute-load | \
    awk '$2 == "=>" && $3 ~ /^\// && $3 !~ /cuda/ {print $1, $3}' | \
    grep -Ev '^(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s)\.so' | cut -d' ' -f2 | \
    sort -u | xargs -r cp -L -t /opt/gpucompute/lib/

# `docker build --target load -t gpucompute-load .`: the load tester alone, for the in-cluster
# load test of deploy/README.md. A client, so no CUDA: the plain OS of the build image.
FROM ubuntu:24.04 AS load
COPY --from=build /opt/gpucompute/lib/ /usr/local/lib/gpucompute/
RUN echo /usr/local/lib/gpucompute > /etc/ld.so.conf.d/gpucompute.conf && ldconfig
COPY --from=build /opt/gpucompute/bin/gpucompute-load /usr/local/bin/
USER 10001:10001
ENTRYPOINT ["gpucompute-load"]

# The server image (the default target).
FROM nvidia/cuda:${CUDA_VERSION}-runtime-${BASE_OS}
COPY --from=build /opt/gpucompute/lib/ /usr/local/lib/gpucompute/
# A numeric user, so that Kubernetes' runAsNonRoot can verify it (deploy/k8s uses the same uid).
RUN echo /usr/local/lib/gpucompute > /etc/ld.so.conf.d/gpucompute.conf && ldconfig && \
    groupadd --system --gid 10001 gpucompute && \
    useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin gpucompute && \
    mkdir -p /var/cache/gpucompute && chown 10001:10001 /var/cache/gpucompute
COPY --from=build /opt/gpucompute/bin/gpucompute-server /opt/gpucompute/bin/gpucompute \
     /usr/local/bin/
USER 10001:10001
# NVRTC cubins (and the driver's JIT cache) outlive the container when a volume is mounted here.
ENV CUDA_CACHE_PATH=/var/cache/gpucompute/cuda-jit
VOLUME ["/var/cache/gpucompute"]
# 50051 gRPC API, 50052 plaintext grpc.health.v1 only, 8002 Prometheus /metrics.
EXPOSE 50051 50052 8002
# Through the health port, which stays plaintext when the API port uses TLS or tokens.
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
  CMD ["gpucompute", "health", "--address", "127.0.0.1:50052"]
# Flags in CMD, so that `docker run IMAGE --flag...` and Kubernetes' args replace them whole.
ENTRYPOINT ["gpucompute-server"]
CMD ["--address=0.0.0.0:50051", "--health_port=50052", "--metrics_port=8002", \
     "--kernel_cache_dir=/var/cache/gpucompute"]
