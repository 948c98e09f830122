"""`debatekit report results/NAME` (a sweep) or `debatekit report NOTEBOOK.ipynb`: self-contained HTML."""

from __future__ import annotations

from pathlib import Path

from debatekit.cli.flags import out_path


def add(subparsers) -> dict:
    p = subparsers.add_parser("report", help="write a self-contained HTML report of a sweep folder or a notebook")
    p.add_argument("path", help="sweep folder (results/NAME) or an executed .ipynb")
    p.add_argument("--out", type=out_path, help="HTML file (default: PATH/report.html, or the notebook's name with .html)")
    p.add_argument("--png", metavar="DIR", help="also write each sweep figure as PNG into DIR (kaleido + chromium)")
    return {"report": run}


def run(args) -> int:
    from debatekit import sweep
    from debatekit._base.extras import need
    from debatekit.sweep import report

    path = Path(args.path)
    if args.png:
        need("kaleido", "notebooks", "--png")
    need(*(("nbconvert", "notebooks", "a notebook report") if path.suffix == ".ipynb"
           else ("pyarrow", "notebooks", "a sweep report")))
    if path.suffix == ".ipynb":
        if not path.exists():
            raise ValueError(f"notebook {path} does not exist")
        print(f"wrote {report.write_notebook_html(path, args.out)}")
        return 0
    written = report.write_report(path, args.out)
    print(f"wrote {written} ({written.stat().st_size / 1e6:.1f} MB, plotly.js embedded)")
    if args.png:
        folder = Path(args.png)
        folder.mkdir(parents=True, exist_ok=True)
        for name, fig in report.sweep_figures(sweep.load(path)).items():
            print(f"wrote {report.save_png(fig, folder / f'{name}.png')}")
    return 0
