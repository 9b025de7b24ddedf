#!/usr/bin/env python3
"""Writes the seeds of the fuzz targets that start from the fixtures' bodies:
fuzz/seeds/parse_responses (the Responses request bodies as recorded), the Responses
bodies in fuzz/seeds/prepare (at two windows) and fuzz/seeds/admission (requests to the proxy: Chat bodies cut from the transcripts, the
Anthropic seeds, the Responses bodies, each under a few upstream behaviours and windows).

    python3 scripts/fuzz-seeds.py

The admission input layout is documented in fuzz/admission.rs. Seeds stay small (a few kB)
so that the fuzzer runs fast; the mutations make them longer where it pays.
"""
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
SEEDS = ROOT / "fuzz" / "seeds"
HEAD = b"authorization: Bearer sk-fuzz\nx-cascade-session: fuzz-1\n\n"
# (route byte, upstream byte, window byte) per body; see fuzz/admission.rs.
OK, OVERFLOW_SMALL, OVERFLOW_LARGE, FAILING = 0, 1 | (1 << 2), 1 | (6 << 2), 2


def chat_body(transcript, messages, chars):
    """The first `messages` messages of a transcript, each text cut to `chars`."""
    data = json.loads((ROOT / "fixtures" / "transcripts" / transcript).read_text())
    cut = []
    for message in data["messages"][:messages]:
        message = dict(message)
        if isinstance(message.get("content"), str):
            message["content"] = message["content"][:chars]
        cut.append(message)
    return json.dumps({"model": "gpt-4o", "messages": cut}, separators=(",", ":")).encode()


def write(folder, name, data):
    path = SEEDS / folder
    path.mkdir(parents=True, exist_ok=True)
    (path / name).write_bytes(data)


def main():
    responses = sorted((ROOT / "fixtures" / "responses").glob("*.json"))
    for path in responses:
        write("parse_responses", path.name, path.read_bytes())
        # [window low, window high]: 256 + 0x0100 and 256 + 0x0800 tokens.
        for window in (1, 8):
            write("prepare", f"responses-{path.stem}-{window}.bin", bytes([0, window]) + path.read_bytes())
    chats = [
        chat_body("swe-agent-demo__marshmallow-1867.json", 9, 600),
        chat_body("openhands__llama-4-maverick__ponyc-4593.json", 7, 500),
        chat_body("claude-code__spotter__fa812bfe-subagent-aa84377.json", 12, 400),
    ]
    anthropic = [p.read_bytes() for p in sorted((SEEDS / "parse_anthropic").glob("*.json"))]
    bodies = [(0, b) for b in chats] + [(1, b) for b in anthropic]
    bodies += [(2, json.dumps(json.loads(p.read_bytes())).encode()) for p in responses]
    n = 0
    for route, body in bodies:
        for upstream, window in [(OK, 0), (OK, 40), (OVERFLOW_SMALL, 8), (OVERFLOW_LARGE, 2)]:
            write("admission", f"a{n:03}.bin", bytes([route, upstream, window]) + HEAD + body)
            n += 1
    streamed = chats[0].replace(b'"model":"gpt-4o"', b'"model":"gpt-4o","stream":true')
    extra = [
        bytes([0, OK, 0]) + HEAD + streamed,
        bytes([1 | 8, FAILING, 4]) + HEAD + anthropic[0],
        bytes([0, 3, 4]) + HEAD + chats[1],  # an upstream 200 that is not JSON
        bytes([3, OK, 0]) + HEAD + b'{"input":"hello","model":"text-embedding-3-small"}',
        bytes([4, OK, 0]) + HEAD,  # GET on a cascade path: forwarded
        bytes([0, OK, 0]) + HEAD + b'{"model":"gpt-4o","messages":[{"role":"user"',
        bytes([0, OK, 0]) + b"\n\n" + b'{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}',
    ]
    for data in extra:
        write("admission", f"a{n:03}.bin", data)
        n += 1
    print(f"{len(responses)} parse_responses seeds (and twice that in prepare), {n} admission seeds")


if __name__ == "__main__":
    main()
