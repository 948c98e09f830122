"""`debatekit serve [MODEL] [--port N]`: the embedded model as one shared OpenAI-compatible server.

Several processes (sweep workers, notebooks, other tools) then share one loaded engine through
litellm instead of loading one each:

    debatekit serve --port 8765
    # model  openai/qwen2.5-coder-1.5b-instruct
    # api_base  http://127.0.0.1:8765/v1

and in a grid: `parameters: {model: openai/qwen2.5-coder-1.5b-instruct, api_base: http://127.0.0.1:8765/v1}`.
It listens on 127.0.0.1 unless `--host` says otherwise; it has no authentication, so a host other
than a loopback address gets a warning that any machine that reaches the port can use it.
`--cache-ram` and `--prefix-reuse` (default: $DEBATEKIT_LOCAL_CACHE_RAM, $DEBATEKIT_LOCAL_PREFIX_REUSE)
keep each conversation's prefix across requests exactly as the in-process engine does
(`debatekit.models.local.prefix_cache.PrefixCache`), so workers sharing the server pay only for new tokens.
The HTTP server is llama.cpp's (through xllamacpp); `GET /` answers with a page that says what it
serves and its routes (`front_page`), in place of llama.cpp's web UI.
"""

from __future__ import annotations

import dataclasses
import html
import ipaddress
import shutil
import sys
import tempfile
import threading
import weakref
from pathlib import Path


def add(subparsers) -> dict:
    p = subparsers.add_parser("serve", help="serve the embedded model over loopback HTTP (OpenAI-compatible)")
    p.add_argument("model", nargs="?", default=None,
                   help="local model name or .gguf path (default: the embedded model)")
    p.add_argument("--port", type=int, default=8765, help="TCP port (0: any free port); default 8765")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on; default 127.0.0.1 (loopback only: the server has no authentication)")
    p.add_argument("--slots", type=int, help="parallel sequences (default: $DEBATEKIT_LOCAL_SLOTS, else 8 where memory allows, else 4)")
    p.add_argument("--ctx-per-slot", type=int, default=4096, help="context tokens per slot")
    p.add_argument("--cache-ram", type=int, metavar="MIB",
                   help="host memory for parked conversation prefixes, MiB (0 off, -1 no limit; "
                        "default $DEBATEKIT_LOCAL_CACHE_RAM or a quarter of the free memory, at most 8192)")
    p.add_argument("--prefix-reuse", choices=["on", "off"],
                   help="restore each request's own cached prefix (on) or keep llama.cpp's slot choice by "
                        "prompt similarity (off); default $DEBATEKIT_LOCAL_PREFIX_REUSE or on")
    return {"serve": run}


def start(name: str | None = None, *, port: int = 0, host: str = "127.0.0.1", slots: int | None = None,
          ctx_per_slot: int = 4096, cache_ram: int | None = None, prefix_reuse: bool | None = None):
    """Load a local model serving HTTP; returns `(engine, model_string, api_base)`.

    `cache_ram` (MiB) and `prefix_reuse` override the environment's prefix-cache settings.
    The engine lives as long as the returned object (and the process): keep a reference.
    """
    from debatekit.models.local import engine as local
    from debatekit.models.local import settings, weights

    name = name or weights.DEFAULT_LOCAL
    path = weights.model_path(name)
    if name in weights.KNOWN:
        weights.pull(name, say=lambda msg: print(f"[debatekit] {msg}", file=sys.stderr))
    elif not path.exists():
        raise local.LocalModelError(f"local model file not found: {path}")
    alias = name if name in weights.KNOWN else path.stem
    cache = local.prefix_cache(settings.mem_available())
    cache = dataclasses.replace(cache, ram_mib=cache.ram_mib if cache_ram is None else cache_ram,
                                reuse=cache.reuse if prefix_reuse is None else prefix_reuse)
    front = Path(tempfile.mkdtemp(prefix="debatekit-serve-"))
    engine = local.Engine(path, slots or settings.slots(), ctx_per_slot, port=port, host=host, alias=alias,
                          cache=cache, front=front)
    weakref.finalize(engine, shutil.rmtree, front, ignore_errors=True)
    model, api_base = f"openai/{alias}", f"{engine.address.rstrip('/')}/v1"
    (front / "index.html").write_text(front_page(engine.path.name, model, api_base), encoding="utf-8")
    return engine, model, api_base


ROUTES = ("GET /v1/models", "POST /v1/chat/completions", "POST /v1/completions", "GET /health")


def front_page(file: str, model: str, api_base: str) -> str:
    """What `GET /` answers: the server, the model string and api_base to give litellm, the routes
    (an HTML page that reads as plain text, for a browser and for curl alike)."""
    lines = [f"debatekit serve: {file} on llama.cpp, an OpenAI-compatible server (no web UI)",
             f"  model     {model}   (a litellm model string)", f"  api_base  {api_base}",
             f"  routes    {', '.join(ROUTES)}"]
    return ("<!doctype html>\n<meta charset=\"utf-8\"><title>debatekit serve</title>\n<pre>\n"
            + html.escape("\n".join(lines)) + "\n</pre>\n")


def run(args) -> int:
    if args.port < 0 or args.port > 65535:
        raise ValueError(f"--port must be in 0..65535, got {args.port}")
    if args.slots is not None and args.slots < 1:
        raise ValueError(f"--slots must be at least 1, got {args.slots}")
    if args.cache_ram is not None and args.cache_ram < -1:
        raise ValueError(f"--cache-ram must be MiB of host memory (0 off, -1 no limit), got {args.cache_ram}")
    if not _loopback(args.host):
        print(f"debatekit: warning: --host {args.host} makes the server reachable from other machines, and it has no "
              f"authentication: anyone who can reach port {args.port} can use it", file=sys.stderr, flush=True)
    reuse = None if args.prefix_reuse is None else args.prefix_reuse == "on"
    engine, model, api_base = start(args.model, port=args.port, host=args.host, slots=args.slots,
                                    ctx_per_slot=args.ctx_per_slot, cache_ram=args.cache_ram, prefix_reuse=reuse)
    cache = engine.cache
    print(f"serving {engine.path.name} with {engine.slots} slots\n"
          f"  prefix cache  {cache.ram_mib} MiB, reuse {'on' if cache.reuse else 'off'}\n"
          f"  model     {model}\n"
          f"  api_base  {api_base}\n"
          f"sweep grid: parameters: {{model: {model}, api_base: {api_base}}}\n"
          f"stop with Ctrl-C", flush=True)
    from debatekit.models.local import engine as local
    from debatekit.models.local import daemon, shared as shared_engine, weights

    name = args.model or weights.DEFAULT_LOCAL
    try:
        # local runs on this machine use this engine too, instead of loading a second one
        hosted = daemon.host(lambda m: engine if m == name else local.engine(m), idle=None)
        if not hosted:
            print(f"note: the machine's shared engine (pid {shared_engine.owner()}) serves local/ runs; this server "
                  f"is a second engine with {engine.threads} thread(s)", file=sys.stderr, flush=True)
            threading.Event().wait()
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    return 0


def _loopback(host: str) -> bool:
    """Whether `host` is reachable from this machine only (localhost, 127.x, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to any address
        return False
