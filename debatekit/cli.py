"""Command line: `debatekit run | protocols | datasets | models`.

Bad input ends with one line `debatekit: error: ...` naming the problem, and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from debatekit import __version__


def _parse_set(pairs: list[str]) -> dict[str, Any]:
    """`key=value` pairs; values are read as YAML scalars/lists (3, 0.5, true, [a, b], text)."""
    params = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set {pair!r} is not key=value")
        try:
            params[key.strip()] = yaml.safe_load(value) if value.strip() else ""
        except yaml.YAMLError as exc:
            raise ValueError(f"--set {pair!r}: the value is not readable ({exc.problem})") from exc
    return params


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse with the one-line error format of every other mistake (its subcommands inherit it)."""

    def error(self, message: str):
        print(f"debatekit: error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="debatekit", description="Multi-agent LLM debate protocols.")
    parser.add_argument("--version", action="version", version=f"debatekit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run one or more protocols over a dataset")
    run.add_argument("protocols", nargs="+", metavar="PROTOCOL", help="protocol name(s); several are compared")
    run.add_argument("--dataset", required=True, help="shipped dataset name or path to a .jsonl file")
    run.add_argument("--limit", type=_positive, help="use only the first N items")
    run.add_argument("--agents", type=_positive, help="number of agents (protocols that have agents)")
    run.add_argument("--rounds", type=_positive,
                     help="the protocol's `rounds` parameter, or `max_rounds` where it has no `rounds` (dynamics)")
    run.add_argument("--model", help="litellm model string (default: $DEBATEKIT_MODEL or the local model)")
    run.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                     help="protocol parameter, repeatable (e.g. --set temperature=0.2)")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--concurrency", type=_positive, default=4, help="debates run at once")
    run.add_argument("--token-budget", type=_positive, help="completion tokens per debate")
    run.add_argument("--timeout", type=float,
                     help="seconds per model call (default: 120 for a provider, 900 for a local/ model)")
    run.add_argument("--out", help="run folder (with several protocols: a parent folder)")
    run.add_argument("--no-cache", action="store_true", help="do not reuse cached replies")
    run.add_argument("--resume", action="store_true", help="continue the run in --out, skipping finished items")
    run.add_argument("--quiet", action="store_true", help="no progress bar")

    sub.add_parser("protocols", help="list protocols and their parameters")
    sub.add_parser("datasets", help="list shipped datasets")
    models = sub.add_parser("models", help="list models and their state; `models pull` assembles the local model")
    models.add_argument("action", nargs="?", choices=["list", "pull"], default="list")
    return parser


def command_modules():
    """Extra subcommands: each module in `debatekit/commands/` has `add(subparsers) -> {name: handler}`."""
    import importlib
    import pkgutil

    import debatekit.commands as package

    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        yield importlib.import_module(f"{package.__name__}.{info.name}")


def cmd_run(args) -> int:
    from debatekit import registry
    from debatekit.runner import run
    from debatekit.schemas import RunConfig

    sets = _parse_set(args.sets)
    if args.resume and not args.out:
        raise ValueError("--resume needs --out RUN_DIR: the folder of the run to continue")
    configs = []
    for name in args.protocols:
        spec = registry.get(name)
        params = {k: v for k, v in sets.items() if k in spec.params}
        for flag, key in ((args.agents, "agents"), (args.rounds, _rounds_param(spec))):
            if flag is not None and key in spec.params:
                params[key] = flag
        spec.validate(params)
        configs.append(RunConfig(protocol=name, dataset=args.dataset, limit=args.limit, model=args.model,
                                 params=params, seed=args.seed, concurrency=args.concurrency,
                                 token_budget=args.token_budget, call_timeout=args.timeout,
                                 cache=not args.no_cache))
    _check_all_used(args, sets, [registry.get(n) for n in args.protocols])
    results = []
    for config in configs:
        out = args.out and (Path(args.out) / config.protocol if len(configs) > 1 else Path(args.out))
        results.append(run(config, out, resume=args.resume, progress=not args.quiet))
    print(summary_table(results))
    return 0


def _check_all_used(args, sets: dict, specs) -> None:
    """A parameter no chosen protocol accepts is a mistake, not something to ignore."""
    accepted = set().union(*(s.params for s in specs))
    unknown = sorted(set(sets) - accepted)
    if unknown:
        raise ValueError(f"no chosen protocol has parameter {', '.join(map(repr, unknown))}")
    for flag, name, keys in ((args.agents, "agents", {"agents"}), (args.rounds, "rounds", {"rounds", "max_rounds"})):
        if flag is not None and not keys & accepted:
            raise ValueError(f"--{name} does not apply to {', '.join(args.protocols)}")


def _rounds_param(spec) -> str:
    """The parameter `--rounds` sets: `rounds`, or `max_rounds` for a protocol with only a ceiling."""
    return "rounds" if "rounds" in spec.params or "max_rounds" not in spec.params else "max_rounds"


def summary_table(results) -> str:
    """The comparison table printed at the end of `debatekit run`."""
    head = ("protocol", "params", "items", "failed", "accuracy [95% CI]", "rounds", "calls",
            "tokens", "cached", "parse fail", "escalated", "wall s")
    rows = [head]
    for r in results:
        s, cfg = r.summary, r.record.config
        if s["accuracy"] is not None:
            acc = f"{s['accuracy']:.2f} [{s['accuracy_ci'][0]:.2f}, {s['accuracy_ci'][1]:.2f}]"
        elif s.get("score") is not None:  # no ground truth: the protocol's own score (judge, F1, ...)
            acc = f"score {s['score']:.2f} [{s['score_ci'][0]:.2f}, {s['score_ci'][1]:.2f}]"
        else:
            acc = "n/a"
        params = " ".join(f"{k}={v}" for k, v in cfg.params.items()) or "-"
        rows.append((cfg.protocol, params, str(s["items"]), str(s["failed"]), acc,
                     f"{s['mean_rounds']:.1f}" if s["mean_rounds"] is not None else "-", str(s["calls"]),
                     str(s["prompt_tokens"] + s["completion_tokens"]), str(s["cache_hits"]),
                     str(s["parse_failures"]),
                     " ".join(f"{n} {to}" for to, n in s.get("escalated_to", {}).items()) or "0",
                     f"{s['wall_s']:.0f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    where = "\n".join(f"trace: {r.path}" for r in results)
    return "\n".join(lines) + "\n" + "".join(round_table(r) + protocol_report(r) for r in results) + where


def protocol_report(result) -> str:
    """The protocol's own summary of the run (stage F1 of patch_debate, resolution accuracy of arbitration)."""
    from debatekit import registry

    report = registry.get(result.record.config.protocol).report
    text = report(result.path) if report else ""
    return f"\n{result.record.config.protocol}: {text.rstrip()}\n\n" if text else ""


def round_table(result) -> str:
    """Per-round dynamics of a multi-round run (empty for single-round runs)."""
    from debatekit.analysis import load_runs, round_metrics

    metrics = round_metrics(load_runs([result.path]))
    if metrics.empty or metrics["round"].max() < 2 or metrics["agent_accuracy"].isna().all():
        return ""  # single round, or no ground truth to score rounds against (free-text answers)
    lines = [f"\n{result.record.config.protocol} by round (debates still running at that round):",
             "round  debates  agent acc  majority acc  agreement  wrong->right  right->wrong"]
    for row in metrics.itertuples():
        lines.append(f"{row.round:<5}  {row.debates:<7}  {row.agent_accuracy:<9.2f}  {row.majority_accuracy:<12.2f}  "
                     f"{row.agreement:<9.2f}  {row.wrong_to_right:<12}  {row.right_to_wrong}")
    return "\n".join(lines) + "\n\n"


def cmd_protocols(args) -> int:
    from debatekit import registry

    for name, spec in registry.available().items():
        params = ", ".join(f"{k}={v!r}" for k, v in spec.defaults().items())
        print(f"{name:20} {spec.description}\n{'':20} {params}")
    return 0


def cmd_datasets(args) -> int:
    from debatekit import datasets

    for name in datasets.available():
        path = datasets.datasets_dir() / f"{name}.jsonl"
        count = sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
        print(f"{name:24} {count:5d} items  {path}")
    return 0


def cmd_models(args) -> int:
    from debatekit import local
    from debatekit.gateway import default_model

    if args.action == "pull":
        local.pull()
        return 0
    print(f"default: {default_model()}")
    for row in local.status():
        print(f"{row['model']:40} {row['state']:10} {row['path']}")
    print("any litellm model string also works: openai/gpt-4o-mini, ollama/llama3, hosted_vllm/..., "
          "local/path/to/file.gguf")
    return 0


def main(argv: list[str] | None = None) -> int:
    from pydantic import ValidationError

    from debatekit.datasets import DatasetError
    from debatekit.local import LocalModelError
    from debatekit.registry import ProtocolError
    from debatekit.schemas import first_error
    from debatekit.trace import RunFolderError

    parser = build_parser()
    handler = {"run": cmd_run, "protocols": cmd_protocols, "datasets": cmd_datasets, "models": cmd_models}
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for module in command_modules():
        handler.update(module.add(sub))
    args = parser.parse_args(argv)
    try:
        return handler[args.command](args)
    except ValidationError as exc:
        field, message = first_error(exc)
        print(f"debatekit: error: {exc.title} field {field!r}: {message}", file=sys.stderr)
        return 2
    except (ValueError, DatasetError, ProtocolError, RunFolderError, LocalModelError) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"debatekit: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("debatekit: interrupted; finished items are kept (resume with --resume)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
