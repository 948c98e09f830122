"""`debatekit serve [MODEL] [--port N]`: the embedded model as one shared OpenAI-compatible server.

Several processes (sweep workers, notebooks, other tools) then share one loaded engine through
litellm instead of loading one each:

    debatekit serve --port 8765
    # model  openai/qwen2.5-coder-1.5b-instruct
    # api_base  http://127.0.0.1:8765/v1

and in a grid: `parameters: {model: openai/qwen2.5-coder-1.5b-instruct, api_base: http://127.0.0.1:8765/v1}`.
It listens on 127.0.0.1 unless `--host` says otherwise; it has no authentication.
"""

from __future__ import annotations

import sys
import threading


def add(subparsers) -> dict:
    p = subparsers.add_parser("serve", help="serve the embedded model over loopback HTTP (OpenAI-compatible)")
    p.add_argument("model", nargs="?", default=None,
                   help="local model name or .gguf path (default: the embedded model)")
    p.add_argument("--port", type=int, default=8765, help="TCP port (0: any free port); default 8765")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on; default 127.0.0.1 (loopback only: the server has no authentication)")
    p.add_argument("--slots", type=int, help="parallel sequences (default: $DEBATEKIT_LOCAL_SLOTS or 4)")
    p.add_argument("--ctx-per-slot", type=int, default=4096, help="context tokens per slot")
    return {"serve": run}


def start(name: str | None = None, *, port: int = 0, host: str = "127.0.0.1", slots: int | None = None,
          ctx_per_slot: int = 4096):
    """Load a local model serving HTTP; returns `(engine, model_string, api_base)`.

    The engine lives as long as the returned object (and the process): keep a reference.
    """
    from debatekit import local

    name = name or local.DEFAULT_LOCAL
    path = local.model_path(name)
    if name in local.KNOWN:
        local.pull(name, say=lambda msg: print(f"[debatekit] {msg}", file=sys.stderr))
    elif not path.exists():
        raise local.LocalModelError(f"local model file not found: {path}")
    alias = name if name in local.KNOWN else path.stem
    engine = local.Engine(path, slots or local.slots(), ctx_per_slot, port=port, host=host, alias=alias)
    return engine, f"openai/{alias}", f"{engine.address.rstrip('/')}/v1"


def run(args) -> int:
    if args.port < 0 or args.port > 65535:
        raise ValueError(f"--port must be in 0..65535, got {args.port}")
    if args.slots is not None and args.slots < 1:
        raise ValueError(f"--slots must be at least 1, got {args.slots}")
    engine, model, api_base = start(args.model, port=args.port, host=args.host, slots=args.slots,
                                    ctx_per_slot=args.ctx_per_slot)
    print(f"serving {engine.path.name} with {engine.slots} slots\n"
          f"  model     {model}\n"
          f"  api_base  {api_base}\n"
          f"sweep grid: parameters: {{model: {model}, api_base: {api_base}}}\n"
          f"stop with Ctrl-C", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    return 0
