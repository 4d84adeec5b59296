# syntax=docker/dockerfile:1
# sluice: compiled JavaScript on Node 26, production dependencies only, non-root.
#
#   docker build --build-arg SLUICE_COMMIT=$(git rev-parse HEAD) -t ghcr.io/example/sluice:0.2.0 .
#
# Node 26 is an LTS line: Active LTS from 2026-10-28, maintenance from 2027-10-20, end of life
# 2029-04-30 (github.com/nodejs/Release). .ci/run proves the suite on Node 26 (the exact 26.x it
# pins) and on the CI machine's own Node. Pin the base images by digest in your registry
# (node:26-slim@sha256:...) for reproducible builds, and rebuild for each Node 26 security release.

# ---- build: all dependencies, compile TypeScript to dist/ ----
FROM node:26-slim AS build
WORKDIR /app
# A C++ toolchain for the one native addon, better-sqlite3 (reading a relay's SQLite file).
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 make g++ \
    && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json .npmrc ./
# Install scripts stay off for every package; the one addon sluice needs (approved in package.json's
# allowScripts, the others denied there) is built explicitly, from source.
RUN npm ci --ignore-scripts --no-audit --no-fund \
    && npm rebuild better-sqlite3 --build-from-source
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# tsc, then the Lua scripts copied beside the compiled store (tsc copies only what it compiles).
COPY scripts/copy-lua.ts ./scripts/
RUN npm run build

# ---- runtime: production dependencies and the compiled output only ----
FROM node:26-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
    && npm cache clean --force \
    && rm -rf /root/.npm /tmp/*
COPY --from=build /app/dist ./dist
# The addon built in the build stage (same base image, so the same glibc and Node ABI).
COPY --from=build /app/node_modules/better-sqlite3/build ./node_modules/better-sqlite3/build
COPY bin ./bin
# The commit built from, for `sluice --version`, the start-up line and sluice_build_info (the image
# has no .git); without the build argument they say "unknown". Last, so a new commit reuses the
# layers above.
ARG SLUICE_COMMIT=unknown
ENV SLUICE_COMMIT=${SLUICE_COMMIT}
LABEL org.opencontainers.image.revision=${SLUICE_COMMIT}
# Files stay owned by root and read-only to the process; the Pod runs with a read-only root filesystem.
USER 10001:10001
# 8080: public (clients). 9090: admin (probes, /metrics, admin API), keep it cluster-internal.
EXPOSE 8080 9090
# node is PID 1 and handles SIGTERM itself (drain, then exit 0); no shell in between.
CMD ["node", "--no-memory-reducer", "--expose-gc", "--max-semi-space-size=16", "dist/main.js"]
