# Tessera inference server image.
#
#   CUDA (default):  docker build -t tessera:cuda .
#   CPU only:        docker build --build-arg VARIANT=cpu -t tessera:cpu .
#
# The variants differ only in their base images and in the TESSERA_CUDA CMake
# flag, both set in the four small stages below; every build and install step
# after them is shared. Base images can be overridden (a mirror, a pinned
# digest, a local image) with BUILDER_IMAGE / RUNTIME_IMAGE (CUDA) and
# CPU_IMAGE (CPU). deploy/test-image.sh builds the CPU variant with podman,
# from the host's Release binaries (BINARIES=context, see below) unless
# TESSERA_TEST_IMAGE_FROM_SOURCE=1.

ARG VARIANT=cuda
ARG BUILDER_IMAGE=nvidia/cuda:13.0.2-devel-ubuntu24.04
ARG RUNTIME_IMAGE=nvidia/cuda:13.0.2-runtime-ubuntu24.04
ARG CPU_IMAGE=debian:12-slim
# Where the binaries come from: source (compiled in the image build) or
# context (prebuilt, see the binaries-context stage).
ARG BINARIES=source

FROM ${BUILDER_IMAGE} AS builder-cuda
ENV TESSERA_CUDA=ON
FROM ${RUNTIME_IMAGE} AS runtime-cuda
LABEL io.tessera.variant=cuda
FROM ${CPU_IMAGE} AS builder-cpu
ENV TESSERA_CUDA=OFF
FROM ${CPU_IMAGE} AS runtime-cpu
# (Besides naming the variant, a runtime stage with an instruction of its own
# keeps podman/buildah 1.28 from deleting the base image after a
# --layers=false build.)
LABEL io.tessera.variant=cpu

# ---------------------------------------------------------------- build ----
# The build tools and libraries, the sources, and CMake's configure step.
FROM builder-${VARIANT} AS build-deps
COPY deploy/image/install-build-deps.sh deploy/image/runtime-packages.sh /usr/local/lib/tessera-image/
RUN /usr/local/lib/tessera-image/install-build-deps.sh

WORKDIR /src
# Only what the server and the client are built from, so that edits to tests,
# docs or deployment files do not invalidate the compile layer.
COPY CMakeLists.txt ./
COPY cmake cmake
COPY proto proto
COPY engine engine
COPY server server
COPY client client
COPY tools tools
COPY bench bench
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DTESSERA_BUILD_TESTS=OFF -DTESSERA_CUDA="${TESSERA_CUDA}"

# The binaries, compiled here (BINARIES=source, the default).
# The CUDA variant also builds libtessera_cuda.so, the backend module that
# tessera-server dlopens (the server itself never links CUDA); it goes to
# /usr/local/lib/tessera, which the server searches as ../lib/tessera.
FROM build-deps AS binaries-source
RUN targets="tessera-server tessera-cli" \
 && if [ "${TESSERA_CUDA}" = ON ]; then targets="$targets tessera_cuda"; fi \
 && cmake --build /build --target $targets \
 && install -D -s -m 0755 /build/server/tessera-server /out/bin/tessera-server \
 && install -D -s -m 0755 /build/client/tessera-cli /out/bin/tessera-cli \
 && mkdir -p /out/lib/tessera \
 && if [ "${TESSERA_CUDA}" = ON ]; then \
      install -s -m 0755 /build/server/libtessera_cuda.so /out/lib/tessera/; fi

# Or (BINARIES=context) the binaries of a Release build of these same sources
# on a Debian 12 host, staged as .image-binaries/{bin,lib} in the build
# context: deploy/test-image.sh does this, so that CI does not compile the
# server twice. The configure step above still runs. (Builders that skip
# unused stages, BuildKit and buildah, never read this folder otherwise.)
FROM build-deps AS binaries-context
COPY .image-binaries/ /out/

FROM binaries-${BINARIES} AS build
RUN /usr/local/lib/tessera-image/runtime-packages.sh $(find /out/bin /out/lib -type f) \
      > /out/runtime-packages.txt \
 && cat /out/runtime-packages.txt

# -------------------------------------------------------------- runtime ----
FROM runtime-${VARIANT} AS runtime
COPY --from=build /out/runtime-packages.txt /tmp/runtime-packages.txt
RUN export DEBIAN_FRONTEND=noninteractive \
 && apt-get update -qq \
 && xargs -a /tmp/runtime-packages.txt apt-get install -y -qq --no-install-recommends \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /tmp/runtime-packages.txt \
 && groupadd --system --gid 10001 tessera \
 && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin tessera

COPY --from=build /out/bin/ /usr/local/bin/
COPY --from=build /out/lib/ /usr/local/lib/
COPY models/stories260K.gguf models/README.md /opt/tessera/models/

# Every tessera-server flag is also read from TESSERA_<FLAG>; arguments given
# to the container (docker run IMAGE --threads 4 ...) win over these.
ENV TESSERA_MODEL=/opt/tessera/models/stories260K.gguf \
    TESSERA_HOST=0.0.0.0 \
    TESSERA_PORT=50051 \
    TESSERA_HTTP_PORT=8000 \
    TESSERA_METRICS_PORT=9090
# gRPC, the OpenAI-compatible HTTP API, Prometheus metrics.
EXPOSE 50051 8000 9090

# A numeric user, so that Kubernetes' runAsNonRoot can verify it.
USER 10001:10001
WORKDIR /opt/tessera

# grpc.health.v1 Check through the bundled client: exits 0 only on SERVING
# (NOT_SERVING while the model loads and once a drain has started).
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
  CMD tessera-cli --server "127.0.0.1:${TESSERA_PORT}" --timeout 3 info > /dev/null || exit 1

ENTRYPOINT ["/usr/local/bin/tessera-server"]
