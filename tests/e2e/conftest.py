"""Fixtures for the end-to-end tests: a real llama-server (SmolLM2-135M) started with
scripts/local-llm.sh, and `cascade proxy` in front of it, both on free loopback ports.

A server that cannot start makes the tests that need it fail (never skip): the fixture
raises with the script's own message.
"""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from helpers import CASCADE, REPO, parse_timings

LOCAL_LLM = REPO / "scripts" / "local-llm.sh"
# The proxy prints this as its first stderr line.
LISTENING = "cascade proxy: listening on "


class LlamaServer:
    """One llama-server with a given n_ctx, started and stopped through local-llm.sh."""

    def __init__(self, ctx, workdir):
        self.ctx = ctx
        self.pid_file = workdir / f"llama-{ctx}.pid"
        done = subprocess.run(
            ["bash", str(LOCAL_LLM), "start", "--ctx", str(ctx), "--pid-file", str(self.pid_file)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0 or not done.stdout.strip().startswith("http://"):
            raise RuntimeError(
                f"could not start llama-server (--ctx {ctx}), exit {done.returncode}:\n"
                f"{done.stderr}\n(install it with: bash scripts/ci-local-llm.sh)"
            )
        self.url = done.stdout.strip().splitlines()[-1]
        # local-llm.sh writes the server's log beside its pid file.
        self.log = self.pid_file.with_suffix(".log")

    def log_size(self):
        return self.log.stat().st_size if self.log.exists() else 0

    def timings_since(self, offset):
        """The requests llama-server finished since `offset` in its log:
        [{"prompt_tokens", "prompt_ms", "generated_tokens", "generation_ms"}], in order."""
        with open(self.log, "rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
        return parse_timings(text)

    def stop(self):
        subprocess.run(
            ["bash", str(LOCAL_LLM), "stop", "--pid-file", str(self.pid_file)],
            capture_output=True,
            timeout=60,
        )


class Proxy:
    """`cascade proxy` on 127.0.0.1:0 with its own SQLite file."""

    def __init__(self, upstream, workdir, *args):
        if not CASCADE.is_file():
            raise RuntimeError(f"{CASCADE} is missing: run `cargo build -p cascade-cli` first")
        self.db = workdir / "cascade.db"
        self.log = workdir / "proxy.log"
        self._log_file = open(self.log, "w")
        self.process = subprocess.Popen(
            [str(CASCADE), "proxy", "--listen", "127.0.0.1:0", "--upstream", upstream,
             "--db", str(self.db), *map(str, args)],
            stdout=subprocess.DEVNULL,
            stderr=self._log_file,
            env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "info")},
        )
        # For scripts/ci-e2e-llm.sh's cleanup, should pytest itself be killed.
        (workdir / "proxy.pid").write_text(f"{self.process.pid}\n")
        self.url = self._wait_for_address()

    def _wait_for_address(self):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            first = self.log.read_text().split("\n", 1)[0]
            if first.startswith(LISTENING) and "," in first:
                return first[len(LISTENING):].split(",", 1)[0].strip()
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"cascade proxy did not start:\n{self.log.read_text()}")

    def log_text(self):
        return self.log.read_text()

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log_file.close()


@pytest.fixture(scope="session")
def servers(tmp_path_factory):
    """Started lazily, one per n_ctx, shared by the whole session (one slot each: requests
    queue, and the prompt cache carries over between tests)."""
    workdir = tmp_path_factory.mktemp("llama")
    started = {}

    def get(ctx):
        if ctx not in started:
            started[ctx] = LlamaServer(ctx, workdir)
        return started[ctx]

    yield get
    for server in started.values():
        server.stop()


@pytest.fixture
def llama_2048(servers):
    return servers(2048)


@pytest.fixture
def llama_4096(servers):
    return servers(4096)


@pytest.fixture
def start_proxy(tmp_path):
    """start_proxy(upstream_url, *flags) → Proxy; every proxy is stopped at teardown."""
    proxies = []

    def start(upstream, *args):
        workdir = tmp_path / f"proxy-{len(proxies)}"
        workdir.mkdir()
        proxy = Proxy(upstream, workdir, *args)
        proxies.append(proxy)
        return proxy

    yield start
    for proxy in proxies:
        proxy.stop()


# Figures the lead quotes in the closing note: each test adds its own.
FIGURES = {}


@pytest.fixture(scope="session")
def figures():
    return FIGURES


def pytest_sessionfinish(session, exitstatus):
    target = os.environ.get("CASCADE_E2E_FIGURES")
    if target:
        Path(target).write_text(json.dumps(FIGURES, indent=2, sort_keys=True))


def pytest_terminal_summary(terminalreporter):
    if FIGURES:
        terminalreporter.write_sep("-", "end-to-end figures (SmolLM2-135M, llama-server)")
        for key in sorted(FIGURES):
            terminalreporter.write_line(f"{key}: {json.dumps(FIGURES[key])}")
