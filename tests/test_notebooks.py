"""The committed notebooks stay reviewable: no outputs, a `parameters` cell, the sweep's parameters declared."""

from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_the_three_notebooks_exist():
    assert {p.name for p in NOTEBOOKS} >= {"run_debate.ipynb", "explore.ipynb", "sweep_report.ipynb"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert not dirty, (f"{path.name}: cells {dirty} have outputs; strip them: "
                       f"jupyter nbconvert --clear-output --inplace {path.relative_to(ROOT)}")
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{path.name}: exactly one cell tagged `parameters`"


def test_run_debate_declares_what_the_sweep_sets():
    import papermill

    declared = papermill.inspect_notebook(str(ROOT / "notebooks" / "run_debate.ipynb"))
    assert set(declared) == {"config", "out_dir", "summary_path", "retry_degraded"}


def test_run_debates_config_is_a_run_config():
    """The notebook's one run parameter is a `RunConfig` as a dict: its default runs as it reads."""
    from debatekit.records.schemas import RunConfig

    nb = nbformat.read(ROOT / "notebooks" / "run_debate.ipynb", as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    names: dict = {}
    exec(cell.source, names)
    config = RunConfig(**names["config"])
    assert config.protocol == "society_of_mind" and config.limit == 3
