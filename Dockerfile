# syntax=docker/dockerfile:1
# sluice: compiled JavaScript on Node 20, production dependencies only, non-root.
#
#   docker build -t ghcr.io/example/sluice:0.1.0 .
#
# Pin the base images by digest in your registry (node:20-slim@sha256:...) for reproducible builds.

# ---- build: all dependencies, compile TypeScript to dist/ ----
FROM node:20-slim AS build
WORKDIR /app
# A C++ toolchain for the one native addon, better-sqlite3 (reading a relay's SQLite file).
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 make g++ \
    && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
# Install scripts stay off for every package; the one addon sluice needs is built explicitly.
RUN npm ci --ignore-scripts --no-audit --no-fund \
    && npm rebuild better-sqlite3 --build-from-source
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# ---- runtime: production dependencies and the compiled output only ----
FROM node:20-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
    && npm cache clean --force \
    && rm -rf /root/.npm /tmp/*
COPY --from=build /app/dist ./dist
# The addon built in the build stage (same base image, so the same glibc and Node ABI).
COPY --from=build /app/node_modules/better-sqlite3/build ./node_modules/better-sqlite3/build
COPY bin ./bin
# Files stay owned by root and read-only to the process; the Pod runs with a read-only root filesystem.
USER 10001:10001
# 8080: public (clients). 9090: admin (probes, /metrics, admin API), keep it cluster-internal.
EXPOSE 8080 9090
# node is PID 1 and handles SIGTERM itself (drain, then exit 0); no shell in between.
CMD ["node", "--no-memory-reducer", "--expose-gc", "dist/main.js"]
