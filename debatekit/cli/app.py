"""Command line: `debatekit run | protocols | datasets | models`.

Bad input ends with one line `debatekit: error: ...` naming the problem, and exit status 2; a
model that cannot be reached as configured (key, name, server, file) ends the same way with exit 1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import yaml

from debatekit import __version__
from debatekit.cli.flags import add_config_flags, config_settings, out_path, positive
from debatekit.cli.tables import TABLE_WIDTH, paired_block, summary_table


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
    add_config_flags(run)  # --dataset, --limit, --model, --seed, --timeout, --no-cache, ...: RunConfig's fields
    run.add_argument("--agents", type=positive, help="number of agents (protocols that have agents)")
    run.add_argument("--rounds", type=positive,
                     help="the most rounds a debate may run (the parameter `debatekit protocols NAME` marks)")
    run.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                     help="protocol parameter, repeatable (e.g. --set temperature=0.2)")
    run.add_argument("--out", type=out_path, help="run folder (with several protocols: a parent folder)")
    run.add_argument("--resume", action="store_true", help="continue the run in --out, skipping finished items (a higher --limit grows it)")
    run.add_argument("--allow-protocol-change", action="store_true",
                     help="with --resume: continue although the protocol's file changed since the run began "
                          "(run.json records both versions)")
    run.add_argument("--retry-degraded", action="store_true",
                     help="with --resume: also run again the debates that answered although some of their calls "
                          "failed (status degraded); with the response cache on, every call whose prompt is unchanged comes "
                          "from it, and a debate whose retry gets no answer keeps its old record")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument("--wide", action="store_true",
                     help="every column of the run table (cached, cut off, looped, echoes, escalated, ...); "
                          f"by default it fits {TABLE_WIDTH} columns")

    sub.add_parser("datasets", help="list shipped datasets")
    models = sub.add_parser("models", help="list models and their state; `models pull [NAME]` assembles a local model")
    models.add_argument("action", nargs="?", choices=["list", "pull"], default="list")
    models.add_argument("name", nargs="?", metavar="NAME",
                        help="the local model to pull (default: the default one), e.g. qwen2.5-coder-0.5b-instruct")
    return parser


COMMANDS = ("protocols", "compare", "drain", "fork", "new", "pack", "report", "rerecord", "rescore", "review", "serve",
            "show", "study", "sweep")
"""Subcommands beyond the core ones: each a module of `debatekit.cli` with `add(subparsers) -> {name: handler}`."""


def command_modules():
    import importlib

    for name in COMMANDS:
        yield importlib.import_module(f"debatekit.cli.{name}")


def cmd_run(args) -> int:
    from debatekit import registry
    from debatekit._base.terminal import visible
    from debatekit.records.schemas import RunConfig

    sets, settings = _parse_set(args.sets), config_settings(args)
    if args.resume and not args.out:
        raise ValueError("--resume needs --out RUN_DIR: the folder of the run to continue")
    if args.allow_protocol_change and not args.resume:
        raise ValueError("--allow-protocol-change needs --resume --out RUN_DIR: it continues an existing run")
    if args.retry_degraded and not args.resume:
        raise ValueError("--retry-degraded needs --resume --out RUN_DIR: it runs again debates of an existing run")
    configs = []
    for name in args.protocols:
        spec = registry.get(name)
        params = spec.map_flags({k: v for k, v in sets.items() if spec.accepts(k)},
                                agents=args.agents, rounds=args.rounds)
        spec.validate(params)
        configs.append(RunConfig(protocol=name, params=params, **settings))
    _check_all_used(args, sets, [registry.get(n) for n in args.protocols])
    outs = [args.out and (Path(args.out) / c.protocol if len(configs) > 1 else Path(args.out)) for c in configs]
    resume = [args.resume] * len(outs)
    if args.resume:
        resume = _resumable(outs, args.out)
    else:
        _unused(outs)
    results = together([(config, out, again) for config, out, again in zip(configs, outs, resume)],
                       retry_degraded=args.retry_degraded, progress=not args.quiet,
                       allow_protocol_change=args.allow_protocol_change)
    # a protocol's report and an error may quote a model or a dataset
    print(visible(summary_table(results, wide=args.wide)))
    if len(results) > 1:
        print("\n" + visible(paired_block(results)))
    failed = [r for r in results if r.record.status == "failed"]
    for r in failed:
        print(visible(f"debatekit: error: {r.record.config.protocol}: {r.record.reason}; finished items are kept "
                      "(fix it, then --resume)"), file=sys.stderr)
    for r in results:
        s = r.summary
        if s.failed and r not in failed:
            print(visible(f"debatekit: warning: {r.record.config.protocol}: {s.failed} of {s.debates} debates "
                          f"have no answer (left out of accuracy; --resume retries them); first error: "
                          f"{s.first_error}"), file=sys.stderr)
        if s.degraded:
            print(f"debatekit: note: {r.record.config.protocol}: {s.degraded} of {s.debates} debates answered "
                  f"although some of their calls failed (degraded: scored); --resume --retry-degraded runs them "
                  f"again", file=sys.stderr)
    return 1 if failed else 0


def together(runs: list[tuple], **kwargs) -> list:
    """Run every (config, out, resume) at once on one event loop and return their results in order.

    Their calls share the model's engine (on the local model, one batch), and with the response
    cache on, a call that another run is asking at that moment is asked once: `single`'s answers
    are the debate's agent 1's round-1 answers, as when the runs went one after the other and the
    later one found them in the cache. A run that fails does not stop the others; once all have
    ended, the first failure is raised (what each finished is kept in its folder)."""
    from debatekit.runner import arun, run

    if len(runs) == 1:
        config, out, again = runs[0]
        return [run(config, out, resume=again, **kwargs)]

    async def all_of() -> list:
        return await asyncio.gather(*(arun(config, out, resume=again, **kwargs) for config, out, again in runs),
                                    return_exceptions=True)

    outcomes = asyncio.run(all_of())
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return outcomes


def _resumable(outs: list[Path], parent: str) -> list[bool]:
    """Which runs `--resume` continues. One protocol: its run must exist. Several (a comparison cut off
    part-way): the ones begun are continued and the ones never begun are started, if any was begun."""
    from debatekit.records.trace import RunFolder, RunFolderError

    begun = [RunFolder(out).exists for out in outs]
    if not any(begun):
        where = outs[0] if len(outs) == 1 else f"{parent} (none of {', '.join(o.name for o in outs)})"
        raise RunFolderError(f"cannot resume {where}: no run there (no run.json); drop --resume to start one")
    for out, was in zip(outs, begun):
        if not was:
            print(f"debatekit: {out} was never begun; starting it", file=sys.stderr)
    return begun


def _unused(outs: list[Path | None]) -> None:
    """Refuse, before any run starts, a run folder that already holds a run (each run would find out
    only when it starts: `run A B` would spend A's hours before B's folder says no). One run finds
    out at once by itself, and says first whether another process is writing there."""
    from debatekit.records.resume import refuse_used
    from debatekit.records.trace import RunFolder

    for out in outs if len(outs) > 1 else []:
        if out is not None:
            refuse_used(RunFolder(out))


def _check_all_used(args, sets: dict, specs) -> None:
    """A parameter no chosen protocol accepts is a mistake, not something to ignore."""
    unknown = sorted(k for k in sets if not any(s.accepts(k) for s in specs))
    if unknown:
        from debatekit._base.validation import did_you_mean

        known = {name for s in specs for name in s.params}
        raise ValueError(f"no chosen protocol has parameter {', '.join(map(repr, unknown))}"
                         f"{did_you_mean(unknown[0], known)}")
    for flag, name in ((args.agents, "agents"), (args.rounds, "rounds")):
        if flag is not None and not any(s.flag(name) for s in specs):
            raise ValueError(f"--{name} does not apply to {', '.join(args.protocols)}")


def cmd_datasets(args) -> int:
    from debatekit import datasets

    about = datasets.catalog()
    print(f"{'name':20} {'items':>5}  {'answer':16} license")
    for name in datasets.available():
        path = datasets.datasets_dir() / f"{name}.jsonl"
        count = sum(1 for line in path.read_text(encoding="utf-8").split("\n") if line.strip())
        entry = about.get(name, {})
        print(f"{name:20} {count:5d}  {entry.get('answer', '-'):16} {entry.get('license', '-')}")
    print(f"folder: {datasets.datasets_dir()}; sources and citations: datasets/README.md")
    return 0


def cmd_models(args) -> int:
    from debatekit.models.local import weights
    from debatekit.models.model import resolve

    if args.action == "pull":
        weights.pull(args.name.removeprefix("local/") if args.name else weights.DEFAULT_LOCAL)
        return 0
    if args.name:
        raise ValueError("a model NAME goes with `debatekit models pull NAME`")
    print(f"default: {resolve(None).name}")
    for row in weights.status():
        print(f"{row['model']:36} {row['state']:10}  {row['path']}")
    print("any litellm model string also works: openai/gpt-4o-mini, ollama/llama3, hosted_vllm/..., "
          "local/path/to/file.gguf")
    print(engine_line())
    return 0


def engine_line() -> str:
    """The machine's shared local engine in one line: running or not, who started it, its models, clients, load."""
    from debatekit.models.local import shared as shared_engine

    return shared_engine.describe(shared_engine.status())


def main(argv: list[str] | None = None) -> int:
    from pydantic import ValidationError

    from debatekit._base import signals
    from debatekit._base.terminal import visible
    from debatekit._base.validation import first_error
    from debatekit.datasets import DatasetError
    from debatekit.models.errors import LocalModelError, ModelSetupError
    from debatekit.records.storage import TraceWriteError
    from debatekit.records.trace import RunFolderError
    from debatekit.registry import ProtocolError

    parser = build_parser()
    handler = {"run": cmd_run, "datasets": cmd_datasets, "models": cmd_models}
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for module in command_modules():
        handler.update(module.add(sub))
    args = parser.parse_args(argv)
    signals.install()
    try:
        return handler[args.command](args)
    except ValidationError as exc:
        field, message = first_error(exc)
        print(visible(f"debatekit: error: {exc.title} field {field!r}: {message}"), file=sys.stderr)
        return 2
    except (ValueError, DatasetError, ProtocolError, RunFolderError, LocalModelError) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(visible(f"debatekit: error: {message}"), file=sys.stderr)  # it may quote a row or a file
        return 2
    except ModelSetupError as exc:
        print(visible(f"debatekit: error: {exc}; finished items are kept (fix it, then --resume)"), file=sys.stderr)
        return 1
    except TraceWriteError as exc:
        print(f"debatekit: error: {exc}; the run is marked interrupted: free space, then --resume", file=sys.stderr)
        return 1
    except signals.Drained as exc:  # asked for (`debatekit drain`): not an error, but not finished either
        print(f"debatekit: {exc} (the same command with --resume continues)", file=sys.stderr)
        return 3
    except BrokenPipeError:  # `debatekit show RUN | head`: the reader has what it wanted; end quietly, as
        # a tool killed by SIGPIPE does, with stdout pointed elsewhere so that its flush at exit cannot fail
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except OSError as exc:  # the machine, not the input: a full disk before the run began, a vanished folder
        print(f"debatekit: error: {exc.filename}: {exc.strerror}" if exc.filename else f"debatekit: error: {exc}",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        print("debatekit: interrupted; finished items are kept (resume with --resume)", file=sys.stderr)
        status = signals.exit_status(exc)
        from debatekit.models.local import engine as local

        if local.busy():  # the run folder is written; do not wait minutes for generations nobody reads
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
        return status


if __name__ == "__main__":
    sys.exit(main())
