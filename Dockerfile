# syntax=docker/dockerfile:1
#
# kustomize-controller image.
#   docker build -t kustomize-controller:latest .
# Needs BuildKit (the default builder of Docker 23+) for the cache mounts.

# ---- build -----------------------------------------------------------------------------------
FROM rust:1-bookworm AS builder
WORKDIR /src
COPY . .
# The registry, git and target caches persist across builds; target/ lives only in the cache
# mount, so the binary is copied out of it before the step ends.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin kustomize-controller \
 && install -D -m 0755 target/release/kustomize-controller /out/kustomize-controller

# ---- runtime ---------------------------------------------------------------------------------
# distroless cc: glibc and libgcc (the binary is dynamically linked against them, built on the
# same Debian 12 release) and CA certificates; no shell, no package manager.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /out/kustomize-controller /usr/local/bin/kustomize-controller
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/kustomize-controller"]
