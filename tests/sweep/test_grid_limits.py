"""A grid file cannot exhaust memory before a guard runs: size, YAML aliases and points are counted
first, and each limit is one line with exit 2."""

from __future__ import annotations

import pytest

from debatekit.cli.app import main
from debatekit.sweep import SweepError, expand_grid
from debatekit.sweep.grid import MAX_GRID_NODES, load_grid
from tests.sweep_helpers import NOTEBOOK

BOMB = """parameters:
  a: &a [x, x, x, x, x, x, x, x, x, x]
  b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
  c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
  d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
  e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
  f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]
  g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]
  h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]
  i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]
grid: {agents: [1, 2]}
"""


def sweep_cli(tmp_path, grid_text: str) -> list[str]:
    grid = tmp_path / "grid.yaml"
    grid.write_text(grid_text)
    return ["sweep", str(NOTEBOOK), "--grid", str(grid), "--out", str(tmp_path / "out"), "--yes"]


def test_an_alias_bomb_is_measured_without_being_expanded_and_refused(tmp_path, capsys):
    with pytest.raises(SweepError, match="once its YAML aliases are expanded"):
        load_grid((tmp_path / "g.yaml", (tmp_path / "g.yaml").write_text(BOMB))[0])
    assert main(sweep_cli(tmp_path, BOMB)) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{MAX_GRID_NODES:,} at most" in err
    assert not (tmp_path / "out").exists()


def test_ten_axes_of_ten_values_are_counted_not_built(tmp_path, capsys):
    axes = {f"p{k}": list(range(10)) for k in range(10)}
    with pytest.raises(SweepError, match="grid expands to 10,000,000,000 points; 10,000 at most"):
        expand_grid({"parameters": {"protocol": "single"}, "grid": axes})
    text = "grid:\n" + "".join(f"  p{k}: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n" for k in range(10))
    assert main(sweep_cli(tmp_path, text)) == 2  # refused even with --yes
    assert "10,000,000,000 points" in capsys.readouterr().err


def test_a_grid_file_over_a_megabyte_is_not_read(tmp_path, capsys):
    text = "grid: {agents: [1, 2]}\n" + "# padding\n" * 120_000
    assert main(sweep_cli(tmp_path, text)) == 2
    err = capsys.readouterr().err.strip()
    assert "a grid file may be 1,000,000 at most" in err and err.count("\n") == 0


def test_a_grid_at_the_limits_still_expands():
    points = expand_grid({"parameters": {"protocol": "single"}, "grid": {"a": list(range(100)), "b": list(range(100))}})
    assert len(points) == 10_000
