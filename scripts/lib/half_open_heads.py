#!/usr/bin/env python3
"""One hostile client against a running proxy: opens HEADS connections from this one process,
each sending the start of a request head and never finishing it, then times `GET /healthz`
and one small `POST /v1/chat/completions` while those heads are still open, and prints the
figures (one `key: value` per line, then a JSON line for scripts).

    python3 scripts/lib/half_open_heads.py --proxy 127.0.0.1:8787 --heads 300 [--wait 40]

Exits 1 when /healthz or the request does not answer within --wait seconds (the proxy is
offline for everyone while one client holds half-open heads), 0 otherwise.
"""

import argparse
import json
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"


def open_heads(address, count):
    """Up to `count` sockets that sent HEAD and nothing more. Stops at the first connection
    not accepted within 3 s (a SYN dropped from a full queue is sent again after 1 s): the
    proxy has stopped accepting, which is the outage itself, timed by the checks after."""
    held = []
    for _ in range(count):
        try:
            s = socket.create_connection(address, timeout=3)
            s.sendall(HEAD)
            held.append(s)
        except OSError:
            break
    return held


def exchange(address, request, wait):
    """Seconds until the proxy's answer to `request` arrives, and its status line (or the error)."""
    started = time.monotonic()
    try:
        with socket.create_connection(address, timeout=wait) as s:
            s.settimeout(max(0.1, wait - (time.monotonic() - started)))
            s.sendall(request)
            answer = s.recv(4096)
        status = answer.split(b"\r\n", 1)[0].decode("latin-1") or "connection closed"
    except OSError as e:
        status = f"no answer ({e.__class__.__name__})"
    return time.monotonic() - started, status


def closed_by_proxy(held):
    """How many of the held sockets the proxy has closed (a read returns EOF or an error)."""
    closed = 0
    for s in held:
        s.setblocking(False)
        try:
            if s.recv(1) == b"":
                closed += 1
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    return closed


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--proxy", required=True, help="HOST:PORT of the proxy")
    p.add_argument("--heads", type=int, default=300)
    p.add_argument("--wait", type=float, default=40.0, help="seconds to wait for each answer")
    args = p.parse_args()
    host, port = args.proxy.rsplit(":", 1)
    address = (host, int(port))

    started = time.monotonic()
    held = open_heads(address, args.heads)
    opened = time.monotonic() - started
    body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}).encode()
    requests = [
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body,
    ]
    # Both at once, from the moment every head is open: neither waits for the other.
    with ThreadPoolExecutor(2) as pool:
        health, chat = pool.map(lambda r: exchange(address, r, args.wait), requests)
    closed = closed_by_proxy(held)
    for s in held:
        s.close()

    figures = {
        "heads": args.heads,
        "heads_connected": len(held),
        "heads_not_accepted_within_3s": args.heads - len(held),
        "seconds_to_open_heads": round(opened, 3),
        "healthz_seconds": round(health[0], 3),
        "healthz_status": health[1],
        "request_seconds": round(chat[0], 3),
        "request_status": chat[1],
        "heads_closed_by_proxy_by_then": closed,
    }
    for key, value in figures.items():
        print(f"{key}: {value}")
    print(json.dumps(figures))
    answered = health[1].startswith("HTTP/1.1 200") and chat[1].startswith("HTTP/1.1 200")
    return 0 if answered else 1


if __name__ == "__main__":
    sys.exit(main())
