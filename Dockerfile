# tasktable's server in a container (docs/install.md). Build: docker build -t tasktable .
# Run (tokens are required off loopback):
#   docker run -p 8080:8080 -v tasktable-data:/data -e TASKTABLE_TOKENS=admin:CHANGE-ME tasktable

# Build stage: the release binary, by the script .ci/run runs too.
FROM rust:1.95-slim-bookworm AS build
# The source's revision for `tasktable --version` (the build context has no .git):
#   docker build --build-arg TASKTABLE_BUILD_REV=$(git rev-parse --short=12 HEAD) .
ARG TASKTABLE_BUILD_REV=""
WORKDIR /src
COPY . .
RUN deploy/build-release /out

# Run stage: the binary alone (SQLite is built in; TLS is rustls), as an unprivileged user.
FROM debian:bookworm-slim
RUN groupadd --system --gid 10001 tasktable \
    && useradd --system --uid 10001 --gid tasktable --home-dir /data --shell /usr/sbin/nologin tasktable \
    && mkdir -p /data \
    && chown tasktable:tasktable /data
COPY --from=build /out/tasktable /usr/local/bin/tasktable
USER 10001:10001
WORKDIR /data
# The SQLite database lives here by default; mount a volume to keep it.
VOLUME ["/data"]
ENV DATABASE_URL=sqlite:///data/tasktable.db \
    TASKTABLE_LISTEN=0.0.0.0:8080
EXPOSE 8080
# serve applies migrations at start, answers /healthz, and on SIGTERM drains its worker.
ENTRYPOINT ["tasktable"]
CMD ["serve"]
