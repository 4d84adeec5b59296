# syntax=docker/dockerfile:1
# sluice: compiled JavaScript on Node 20, production dependencies only, non-root.
#
#   docker build -t ghcr.io/example/sluice:0.1.0 .
#
# Pin the base images by digest in your registry (node:20-slim@sha256:...) for reproducible builds.

# ---- build: all dependencies, compile TypeScript to dist/ ----
FROM node:20-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
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
COPY bin ./bin
# Files stay owned by root and read-only to the process; the Pod runs with a read-only root filesystem.
USER 10001:10001
# 8080: public (clients). 9090: admin (probes, /metrics, admin API), keep it cluster-internal.
EXPOSE 8080 9090
# node is PID 1 and handles SIGTERM itself (drain, then exit 0); no shell in between.
CMD ["node", "--no-memory-reducer", "--expose-gc", "dist/main.js"]
