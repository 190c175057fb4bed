# syntax=docker/dockerfile:1
#
# gatehouse container image.
#   docker build -t gatehouse .
#   docker run --read-only -v gatehouse-data:/data \
#     -v "$PWD/gatehouse.yaml:/etc/gatehouse/gatehouse.yaml:ro" \
#     -e GATEHOUSE_CLIENT_SECRET -e GATEHOUSE_SESSION_KEY -p 8080:8080 gatehouse
# See docs/deploy.md. test/deploy/image.test.ts reproduces this file without a
# Docker engine: it reads the COPY, WORKDIR, ENV, USER and ENTRYPOINT lines of
# the final stage and the npm commands of the deps stage, so keep them literal.

# Node.js 24 LTS, the newest supported major (README, "Supported Node.js
# versions"; test/deploy/runtime.test.ts keeps this line, package.json
# "engines" and .ci/run in step).
ARG NODE_IMAGE=node:24-bookworm-slim

# Compiles TypeScript. Install scripts are skipped: tsc needs no native module,
# the dev tree never ships, and the peers of the helm package used by the
# chart tests (aws-cdk-lib) are not needed to compile.
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
RUN npm ci --ignore-scripts --omit=peer --no-audit --no-fund
COPY src ./src
RUN npm run build

# Production dependencies only. sqlite3 is a native module: its install script
# fetches a prebuilt binary or compiles it, so the toolchain lives here, never
# in the final image. Same base image as the final stage, so the same glibc.
FROM ${NODE_IMAGE} AS deps
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

FROM ${NODE_IMAGE}
ENV NODE_ENV=production
# The one place a config is looked for; mount a file (or a ConfigMap) there,
# or pass --config FILE.
ENV GATEHOUSE_CONFIG=/etc/gatehouse/gatehouse.yaml
# A numeric user, so Kubernetes' runAsNonRoot can verify it. /data is its only
# writable directory (besides /tmp): the image runs with a read-only root.
RUN groupadd --system --gid 10001 gatehouse \
 && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin gatehouse \
 && mkdir -p /data /etc/gatehouse \
 && chown 10001:10001 /data
WORKDIR /app
# package.json is needed at run time: its "type": "module" makes dist/*.js ES modules.
COPY package.json ./
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY config ./config
USER 10001:10001
# Relative paths in the config (the default store sqlite://./data/gatehouse.sqlite)
# resolve here, on the volume; prefer the explicit sqlite:///data/gatehouse.sqlite.
WORKDIR /data
VOLUME ["/data"]
# 8080: the public listener (server.port). 9091: the admin listener (admin.port:
# /healthz, /readyz, /metrics), reachable from outside the container only with
# admin.host: 0.0.0.0 in the config; never publish it to the internet.
EXPOSE 8080 9091
# Exec form: node is PID 1 and receives SIGTERM itself; the CLI handles it
# (readiness false, drain for server.shutdownGrace, close the store, exit 0).
# No shell in between, and no init needed: the gateway starts no child process.
# No V8 heap flag, as in `npm start` (test/deploy/node-flags.test.ts keeps
# them in step): NODE_OPTIONS=--max-semi-space-size=2 trades hot-path
# throughput for memory under load (README "Memory").
ENTRYPOINT ["node", "/app/dist/cli.js"]
