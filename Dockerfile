# machine-config-server: multi-stage build, small non-root runtime image.
FROM docker.io/library/rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY benches ./benches
RUN cargo build --release --locked --bin machine-config-server

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/machine-config-server /usr/bin/machine-config-server
# 22623: TLS (Ignition), 22624: plain HTTP, 22625: metrics/readiness (loopback by default).
EXPOSE 22623 22624
USER nonroot:nonroot
ENTRYPOINT ["/usr/bin/machine-config-server"]
CMD ["--help"]
