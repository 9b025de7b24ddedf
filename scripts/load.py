#!/usr/bin/env python3
"""Memory of the proxy under many heavy clients (issue 23, item 3).

Starts a scripted upstream on loopback (answers at once, keeps nothing), starts
`cascade proxy` in front of it, and runs CLIENTS concurrent clients for SECONDS, each
sending the same real transcript (a Claude Code session from fixtures/, cut to about
BODY_KB) as its own conversation, again and again on one keep-alive connection. Samples
the proxy's /proc/PID/status (VmRSS, VmHWM) every 100 ms and prints: RSS at idle, the
peak, RSS 10 s after the load, and what the clients saw. Exits 1 when the peak passes
--max-peak-mb or the after-load RSS passes --max-after-ratio times the idle figure.

Standard library only (asyncio), so CI needs nothing but python3:

    python3 scripts/load.py --cascade target/release/cascade --clients 200 --seconds 20
    python3 scripts/load.py --cascade ... --route responses
"""

import argparse
import asyncio
import json
import os
import statistics
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures/transcripts/claude-code__spotter__4d5611e5-main.json"


# ---------------------------------------------------------------------------- the bodies

def chat_body(messages):
    return {"model": "gpt-4o", "messages": messages}


def responses_body(messages):
    """The same conversation as Responses API input items (what Codex sends)."""
    items = []
    for m in messages:
        role = m["role"]
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": m["tool_call_id"],
                          "output": m["content"] if isinstance(m["content"], str)
                          else json.dumps(m["content"])})
            continue
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if content and content.strip():
            items.append({"role": role, "content": content})
        for call in m.get("tool_calls") or []:
            items.append({"type": "function_call", "call_id": call["id"],
                          "name": call["function"]["name"],
                          "arguments": call["function"]["arguments"]})
    return {"model": "gpt-4o", "input": items}


def load_body(route, body_kb):
    """The fixture's first messages, as many as fit in about `body_kb` kB of JSON."""
    messages = json.loads(FIXTURE.read_text())["messages"]
    make = chat_body if route == "chat" else responses_body
    kept = []
    for m in messages:
        kept.append(m)
        if len(json.dumps(make(kept))) > body_kb * 1000:
            kept.pop()
            break
    # End on a user turn, as an agent's request does.
    kept.append({"role": "user", "content": "Continue with the next step."})
    return json.dumps(make(kept)).encode()


# ------------------------------------------------------------------------- HTTP plumbing

async def read_head(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return lines[0], headers


async def read_body(reader, headers):
    if headers.get("transfer-encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                return b"".join(chunks)
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)
    return await reader.readexactly(int(headers.get("content-length", "0")))


def answer(route, prompt_bytes):
    tokens = max(1, prompt_bytes // 4)
    if route == "responses":
        return {"id": "resp_load", "object": "response", "status": "completed",
                "model": "gpt-4o",
                "output": [{"type": "message", "id": "msg_load", "role": "assistant",
                            "status": "completed",
                            "content": [{"type": "output_text", "text": "ok",
                                         "annotations": []}]}],
                "usage": {"input_tokens": tokens, "output_tokens": 1,
                          "total_tokens": tokens + 1}}
    return {"id": "chatcmpl-load", "object": "chat.completion", "model": "gpt-4o",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "ok"}}],
            "usage": {"prompt_tokens": tokens, "completion_tokens": 1,
                      "total_tokens": tokens + 1}}


async def upstream_connection(reader, writer, route, seen):
    try:
        while True:
            request_line, headers = await read_head(reader)
            body = await read_body(reader, headers)
            path = request_line.split(" ")[1] if " " in request_line else "?"
            seen[path] = seen.get(path, 0) + 1
            if request_line.startswith("POST"):
                payload = json.dumps(answer(route, len(body))).encode()
                status = "200 OK"
            else:
                payload, status = b'{"error": "not found"}', "404 Not Found"
            writer.write(b"HTTP/1.1 " + status.encode() + b"\r\ncontent-type: application/json"
                         b"\r\ncontent-length: " + str(len(payload)).encode() + b"\r\n\r\n"
                         + payload)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


# ----------------------------------------------------------------------------- the proxy

def rss_kb(pid):
    """(VmRSS, VmHWM) of `pid` in kB."""
    fields = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                fields[name] = int(value.split()[0])
    return fields.get("VmRSS", 0), fields.get("VmHWM", 0)


def cpu_seconds(pid):
    """User and system CPU time `pid` has used, in seconds."""
    with open(f"/proc/{pid}/stat") as stat:
        # The fields after the command name (which may hold spaces), from the state on.
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def wait_healthy(port, deadline):
    while time.monotonic() < deadline:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            await writer.drain()
            line, headers = await read_head(reader)
            await read_body(reader, headers)
            writer.close()
            if " 200 " in line:
                return
        except OSError:
            pass
        await asyncio.sleep(0.1)
    raise SystemExit("load: the proxy did not answer /healthz within 30 s")


# --------------------------------------------------------------------------- the clients

async def client(index, port, path, body, stop_at, stats):
    head = (f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            f"authorization: Bearer sk-load-{index}\r\nx-cascade-session: load-{index}\r\n"
            f"content-length: {len(body)}\r\n\r\n").encode()
    reader = writer = None
    while time.monotonic() < stop_at:
        started = time.monotonic()
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(head)
            writer.write(body)
            await writer.drain()
            line, headers = await read_head(reader)
            await read_body(reader, headers)
            status = line.split(" ")[1]
            stats["status"][status] = stats["status"].get(status, 0) + 1
            stats["latency"].append(time.monotonic() - started)
            if headers.get("connection", "").lower() == "close":
                writer.close()
                writer = None
        except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as e:
            stats["errors"][type(e).__name__] = stats["errors"].get(type(e).__name__, 0) + 1
            if writer is not None:
                writer.close()
            writer = None
            await asyncio.sleep(0.05)
    if writer is not None:
        writer.close()


async def sample(pid, samples, done):
    while not done.is_set():
        samples.append((time.monotonic(), *rss_kb(pid)))
        await asyncio.sleep(0.1)


async def run(args):
    body = load_body(args.route, args.body_kb)
    path = "/v1/responses" if args.route == "responses" else "/v1/chat/completions"
    seen = {}
    server = await asyncio.start_server(
        lambda r, w: upstream_connection(r, w, args.route, seen), "127.0.0.1", 0, limit=1 << 20)
    upstream_port = server.sockets[0].getsockname()[1]
    probe = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    workdir = tempfile.mkdtemp(prefix="cascade-load-")
    env = dict(os.environ, **dict(e.split("=", 1) for e in args.env))
    env.setdefault("RUST_LOG", "warn")
    proxy = subprocess.Popen(
        [args.cascade, "proxy", "--upstream", f"http://127.0.0.1:{upstream_port}",
         "--listen", f"127.0.0.1:{port}", "--db", f"{workdir}/cascade.db"],
        env=env, stdout=subprocess.DEVNULL, stderr=open(f"{workdir}/proxy.log", "wb"))
    try:
        await wait_healthy(port, time.monotonic() + 30)
        await asyncio.sleep(1)
        idle = rss_kb(proxy.pid)[0]
        samples, done = [], asyncio.Event()
        sampler = asyncio.create_task(sample(proxy.pid, samples, done))
        stats = {"status": {}, "errors": {}, "latency": []}
        started = time.monotonic()
        cpu_before = cpu_seconds(proxy.pid)
        stop_at = started + args.seconds
        await asyncio.gather(*(client(i, port, path, body, stop_at, stats)
                               for i in range(args.clients)))
        ended = time.monotonic()
        cpu = cpu_seconds(proxy.pid) - cpu_before
        await asyncio.sleep(args.after)
        done.set()
        await sampler
        during = [s for s in samples if s[0] <= ended]
        after = rss_kb(proxy.pid)[0]
        peak = max(s[2] for s in samples)
    finally:
        proxy.terminate()
        proxy.wait(timeout=20)
        server.close()
    latency = sorted(stats["latency"])
    done_requests = len(latency)
    report = {
        "route": args.route, "clients": args.clients, "seconds": args.seconds,
        "body_bytes": len(body), "requests": done_requests,
        "upstream": seen, "status": stats["status"],
        "errors": stats["errors"],
        "idle_rss_mb": round(idle / 1024, 1),
        "peak_rss_mb": round(peak / 1024, 1),
        "mean_rss_during_mb": round(statistics.mean(s[1] for s in during) / 1024, 1),
        f"rss_{args.after:g}s_after_mb": round(after / 1024, 1),
        "after_over_idle": round(after / idle, 2),
        "cpu_s": round(cpu, 2),
        "cpu_ms_per_request": round(1000 * cpu / done_requests, 1) if done_requests else None,
        "median_latency_s": round(latency[done_requests // 2], 3) if latency else None,
        "p95_latency_s": round(latency[int(done_requests * 0.95)], 3) if latency else None,
        "env": args.env,
    }
    print(json.dumps(report))
    failed = []
    if args.max_peak_mb and peak / 1024 > args.max_peak_mb:
        failed.append(f"peak RSS {peak / 1024:.0f} MB > {args.max_peak_mb} MB")
    if args.max_after_ratio and after / idle > args.max_after_ratio:
        failed.append(f"RSS after the load {after / idle:.2f}x idle > {args.max_after_ratio}x")
    ok = stats["status"].get("200", 0)
    if ok == 0 or ok < done_requests * 0.99:
        failed.append(f"only {ok} of {done_requests} requests answered 200: {stats}")
    for why in failed:
        print(f"load: {why} (proxy log: {workdir}/proxy.log)", file=sys.stderr)
    if not failed:
        # Kept only when a check failed: the proxy's log is what to read then.
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cascade", default=str(ROOT / "target/release/cascade"))
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--after", type=float, default=10, help="seconds to wait after the load")
    parser.add_argument("--route", choices=["chat", "responses"], default="chat")
    parser.add_argument("--body-kb", type=int, default=430)
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="set in the proxy's environment (e.g. an allocator's knobs)")
    parser.add_argument("--max-peak-mb", type=float)
    parser.add_argument("--max-after-ratio", type=float)
    sys.exit(asyncio.run(run(parser.parse_args())))


if __name__ == "__main__":
    main()
