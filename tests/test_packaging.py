"""The wheel a researcher installs without the repository (`pip install debatekit`, not `-e`)."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # build isolation fetches setuptools from the package registry, as `pip install` itself does
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(ROOT), "-w", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (path,) = out.glob("debatekit-*.whl")
    return path


def test_wheel_ships_every_module_and_every_dataset_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "debatekit").rglob("*.py")
               if "__pycache__" not in p.parts}
    data = {"debatekit/_datasets/" + p.relative_to(ROOT / "datasets").as_posix()
            for p in (ROOT / "datasets").rglob("*") if p.is_file()}
    assert modules - names == set(), "modules missing from the wheel: add their package to pyproject.toml"
    assert data - names == set(), "dataset files missing from the wheel: widen package-data in pyproject.toml"
    notebooks = {f"debatekit/_notebooks/{p.name}" for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert notebooks and notebooks - names == set(), "notebooks missing from the wheel"
    assets = {p.relative_to(ROOT).as_posix() for p in (ROOT / "debatekit" / "sweep" / "assets").iterdir()}
    assert assets and assets - names == set(), "report assets (plotly.js's basic bundle) missing from the wheel"


def test_an_installed_wheel_finds_its_shipped_datasets(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = ("import json, debatekit, debatekit.datasets as d;"
            "row = json.loads(d.resolve('decisions').read_text(encoding='utf-8').splitlines()[0]);"
            "print(json.dumps([debatekit.__file__, str(d.datasets_dir()), d.available(), row['knowledge']]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    module, folder, names, knowledge = json.loads(done.stdout.strip().splitlines()[-1])
    assert module == str(site / "debatekit" / "__init__.py")  # the wheel's copy, not the checkout
    assert folder == str(site / "debatekit" / "_datasets")
    assert names == sorted(p.stem for p in (ROOT / "datasets").glob("*.jsonl"))
    assert (site / "debatekit" / "_datasets" / "knowledge" / knowledge).is_dir()


def test_pyproject_lists_every_package_folder():
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "debatekit").rglob("__init__.py")
               if "__pycache__" not in p.parts}
    assert folders - listed == set(), "package folders missing from pyproject's package list"
    assert listed - folders == {"debatekit._datasets", "debatekit._notebooks"}, "pyproject lists packages that do not exist"


def test_wheel_carries_the_public_benchmarks_with_their_licenses(wheel):
    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())
    assert {f"debatekit/_datasets/{n}.jsonl" for n in ("gsm8k", "strategyqa", "commonsenseqa")} <= names
    readme = archive.read("debatekit/_datasets/README.md").decode("utf-8")
    assert all(s in readme for s in ("Cobbe", "Geva", "Talmor", "Aggarwal", "CDLA-Sharing-1.0", "MIT License"))
    catalog = json.loads(archive.read("debatekit/_datasets/catalog.json"))
    assert catalog["commonsenseqa"]["answer"].startswith("choice") and catalog["gsm8k"]["license"] == "MIT"


def test_no_command_imports_the_cli_above_it():
    import ast

    for path in (ROOT / "debatekit" / "commands").glob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert "debatekit.cli" not in imported, f"{path.name} imports debatekit.cli"
        assert not any(isinstance(n, ast.ImportFrom) and n.module == "debatekit" and
                       any(a.name == "cli" for a in n.names) for n in ast.walk(tree)), path.name


def test_an_installed_wheel_runs_a_sweep_and_a_study_with_its_own_notebooks(wheel, tmp_path):
    """The wheel in a fresh venv (its dependencies from the environment running the tests, nothing
    downloaded; the checkout nowhere on the path): run, sweep, study and report on a scripted model."""
    import os
    import textwrap

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    (site,) = (venv / "lib").glob("python3.*/site-packages")
    zipfile.ZipFile(wheel).extractall(site)
    deps = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (site / "zz_dependencies.pth").write_text("\n".join(deps) + "\n")  # after the wheel's own files
    work = tmp_path / "work"
    work.mkdir()
    (work / "grid.yaml").write_text(textwrap.dedent("""\
        parameters: {dataset: arithmetic, limit: 2, model: scripted/schema}
        points:
          - {protocol: single}
          - {protocol: self_consistency, samples: 3}
        primary: {config: self_consistency, against: single, margin: 0.1}
        """))
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path), "DEBATEKIT_CACHE_DIR": str(tmp_path / "c"),
           "NO_COLOR": "1", "JUPYTER_PATH": str(Path(sys.prefix) / "share" / "jupyter"),  # nbconvert's templates
           **{k: v for k, v in os.environ.items() if k in ("LANG", "TMPDIR")}}

    def debatekit(*argv: str) -> str:
        done = subprocess.run([str(venv / "bin" / "python"), "-m", "debatekit.cli", *argv], cwd=work, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (argv, done.stdout[-1500:], done.stderr[-2500:])
        return done.stdout

    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import debatekit; print(debatekit.__file__)"],
                           cwd=work, env=env, capture_output=True, text=True, timeout=120).stdout.strip()
    assert where == str(site / "debatekit" / "__init__.py")
    assert "single" in debatekit("run", "single", "--dataset", "arithmetic", "--limit", "2", "--model",
                                 "scripted/schema", "--out", "run", "--quiet")
    assert (site / "debatekit" / "_notebooks" / "run_debate.ipynb").is_file()
    debatekit("sweep", "notebooks/run_debate.ipynb", "--grid", "grid.yaml", "--out", "swept", "--quiet")
    debatekit("report", "swept")
    out = debatekit("study", "grid.yaml", "--out", "studied", "--quiet")
    assert "report" in out and (work / "studied" / "report.html").stat().st_size > 10_000
    assert {p.parent.name.split("-")[0] for p in (work / "studied").glob("*/run.json")} == {"single", "self_consistency"}
