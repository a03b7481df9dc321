# machine-config-server: the image OpenShift would ship. The OpenSSL build (cargo feature
# `openssl`, without ring): every TLS connection's crypto is the platform's OpenSSL, linked
# dynamically (libcrypto.so.3), so OpenShift's payload scanner accepts it and, on a host in FIPS
# mode, the server runs on RHEL's FIPS-validated OpenSSL provider (docs/security.md, "TLS crypto
# and FIPS").
#
# Both stages are UBI 9: the binary is built against the OpenSSL and glibc it runs with.
FROM registry.access.redhat.com/ubi9/ubi:latest AS build
RUN dnf install -y --setopt=install_weak_deps=False gcc openssl-devel pkgconf-pkg-config \
    && dnf clean all
# The Rust toolchain the project builds with (rust-version in Cargo.toml is the minimum).
ARG RUST_VERSION=1.95.0
RUN curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs \
    | sh -s -- -y --profile minimal --default-toolchain "${RUST_VERSION}"
ENV PATH=/root/.cargo/bin:${PATH}
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
# Build settings (jemalloc's options, compiled in).
COPY .cargo ./.cargo
COPY src ./src
COPY benches ./benches
# The workspace's other members (Cargo.toml `[workspace] members`: the test support crates and
# the fuzz targets' properties, also the root package's dev-dependencies): cargo loads their
# manifests to resolve the workspace against Cargo.lock, though the release binary depends on
# none of them. Copied whole, so that `--locked` holds with the lock file as committed.
# tests/image_context.rs builds this stage from exactly what it copies.
COPY tests/support ./tests/support
COPY tests/fuzz-checks ./tests/fuzz-checks
RUN cargo build --release --locked --no-default-features --features openssl \
        --bin machine-config-server \
    && ldd target/release/machine-config-server | grep -q 'libcrypto\.so\.3 => /'

# ubi-minimal carries the platform's OpenSSL (openssl-libs: libcrypto.so.3, and the FIPS
# provider RHEL 9 validates).
FROM registry.access.redhat.com/ubi9/ubi-minimal:latest
COPY --from=build /src/target/release/machine-config-server /usr/bin/machine-config-server
# 22623: TLS (Ignition), 22624: plain HTTP, 22625: metrics/readiness (loopback by default).
EXPOSE 22623 22624
# Non-root (any UID works; OpenShift assigns its own).
USER 65532:65532
ENTRYPOINT ["/usr/bin/machine-config-server"]
CMD ["--help"]
