#!/usr/bin/env bash
# The proxy's Redis state store against a real redis-server: the store contract, time to
# live and size cap, Redis going away and coming back, and two proxy replicas sharing one
# Redis while a long session alternates between them, and recall across replicas and
# credentials with nothing readable in Redis (crates/proxy/tests/store_redis.rs,
# replicas.rs, recall_redis.rs). Installs Debian's redis-server when it is missing (we run as root); the
# tests start their own servers on free loopback ports and kill them at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v "${REDIS_SERVER:-redis-server}" >/dev/null 2>&1; then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server
fi
# Debian's package starts a service on 6379: the tests need none and use their own ports.
"${REDIS_SERVER:-redis-server}" --version
cargo test -p cascade-proxy --features redis-tests --test store_redis --test replicas --test recall_redis -- --nocapture
