"""A loopback OpenAI-compatible chat server with a fixed latency, for benchmarks and tests.

It binds 127.0.0.1 only, answers `POST /v1/chat/completions` after `latency` seconds with a
deterministic JSON object valid for the request's `response_format` schema (or a short text),
logs every request body, and stops by itself after `lifetime` seconds or `idle` seconds
without a request (counted once requests began). It runs in its own process so that its CPU is not counted as the client's.

    with FakeServer(latency=0.3) as server:
        server.base_url            # http://127.0.0.1:PORT/v1
        server.requests()          # the logged request bodies
        server.stats()             # {"requests": n, "max_in_flight": m}

A request whose model name contains `echo-auth` gets a 401 whose message repeats the
Authorization header it received (a worst-case provider, for the secrets test); one whose
name contains `echo-key` gets a normal reply with that header written into its text.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path


def answer_for(body: dict) -> str:
    """A deterministic reply: schema-valid JSON for structured requests, else short text."""
    from debatekit.models.scripted import schema_instance

    key = json.dumps([body.get("messages"), body.get("seed")], sort_keys=True)
    seed = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") if isinstance(fmt, dict) else None
    if not schema:
        return f"fake reply {seed % 1000}"
    return json.dumps(schema_instance(schema, random.Random(seed)))


def _with_header(text: str, auth: str) -> str:
    """`text` with `auth` in its first string field (and before it), still valid for the schema."""
    try:
        data = json.loads(text)
    except ValueError:
        return f"{text} {auth}"
    for key, value in data.items():
        if isinstance(value, str):
            data[key] = f"{value} {auth}"
            break
    return f"(sent with {auth}) {json.dumps(data)}"


async def serve(latency: float, lifetime: float, idle: float, log: Path, port_file: Path) -> None:
    from aiohttp import web

    state = {"requests": 0, "in_flight": 0, "max_in_flight": 0, "last": time.monotonic()}
    log_f = open(log, "a", encoding="utf-8")

    async def chat(request: web.Request) -> web.Response:
        state["requests"] += 1
        state["in_flight"] += 1
        state["max_in_flight"] = max(state["max_in_flight"], state["in_flight"])
        state["last"] = time.monotonic()
        try:
            body = await request.json()
            log_f.write(json.dumps(body) + "\n")
            log_f.flush()
            if "echo-auth" in str(body.get("model", "")):
                auth = request.headers.get("Authorization", "")
                return web.json_response({"error": {"message": f"Incorrect API key provided: {auth}",
                                                    "type": "invalid_request_error", "code": "invalid_api_key"}},
                                         status=401)
            await asyncio.sleep(latency)
            text = answer_for(body)
            if "echo-key" in str(body.get("model", "")):  # a proxy that puts the header into a good reply
                text = _with_header(text, request.headers.get("Authorization", ""))
            words = [len(str(m.get("content", "")).split()) for m in body.get("messages", [])]
            prompt, completion = sum(words), len(text.split())
            cached = prompt - words[-1] if len(words) > 2 else 0  # a prompt cache: all but the new turn
            return web.json_response({
                "id": f"chatcmpl-{state['requests']}", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model", "fake"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion, "prompt_tokens_details": {"cached_tokens": cached}},
            })
        finally:
            state["in_flight"] -= 1
            state["last"] = time.monotonic()

    async def stats(request: web.Request) -> web.Response:
        return web.json_response({k: state[k] for k in ("requests", "max_in_flight", "in_flight")})

    async def reset(request: web.Request) -> web.Response:
        state["requests"] = state["max_in_flight"] = 0
        return web.json_response({"ok": True})

    app = web.Application(client_max_size=16 * 2**20)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/chat/completions", chat)
    app.router.add_get("/stats", stats)
    app.router.add_post("/reset", reset)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
    await site.start()
    port = runner.addresses[0][1]
    port_file.write_text(str(port))
    started = time.monotonic()
    try:
        while True:
            await asyncio.sleep(0.2)
            now = time.monotonic()
            idle_for = now - state["last"] if state["requests"] else 0.0  # idle counts from the first request
            if now - started > lifetime or (state["in_flight"] == 0 and idle_for > idle):
                break
    finally:
        await runner.cleanup()
        log_f.close()


class FakeServer:
    """The server in a child process; a context manager that always stops it."""

    def __init__(self, latency: float = 0.3, lifetime: float = 900.0, idle: float = 120.0, folder: Path | None = None):
        import tempfile

        self.owned = folder is None  # a folder it made itself is removed when it stops
        self.folder = Path(folder or tempfile.mkdtemp(prefix="dk-fakeserver-"))
        self.log = self.folder / "requests.jsonl"
        self.port_file = self.folder / "port"
        self.args = [sys.executable, "-m", "benchmarks.fakeserver", "--latency", str(latency),
                     "--lifetime", str(lifetime), "--idle", str(idle), "--log", str(self.log),
                     "--port-file", str(self.port_file)]
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None

    def __enter__(self) -> "FakeServer":
        self.port_file.unlink(missing_ok=True)
        root = Path(__file__).resolve().parent.parent
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
        self.proc = subprocess.Popen(self.args, env=env, cwd=root)
        deadline = time.monotonic() + 30
        while not (self.port_file.exists() and self.port_file.read_text().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the fake server did not start")
            time.sleep(0.05)
        self.port = int(self.port_file.read_text())
        return self

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _get(self, path: str, method: str = "GET") -> dict:
        import urllib.request

        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method,
                                     data=b"" if method == "POST" else None)
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def stats(self) -> dict:
        return self._get("/stats")

    def reset(self) -> None:
        self._get("/reset", "POST")

    def requests(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines() if line.strip()]

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __exit__(self, *exc) -> None:
        self.stop()
        if self.owned:
            shutil.rmtree(self.folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fakeserver")
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--lifetime", type=float, default=900.0, help="stop after this many seconds")
    parser.add_argument("--idle", type=float, default=120.0, help="stop after this many seconds without requests")
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--port-file", type=Path, required=True)
    args = parser.parse_args(argv)
    asyncio.run(serve(args.latency, args.lifetime, args.idle, args.log, args.port_file))
    return 0


if __name__ == "__main__":
    sys.exit(main())
