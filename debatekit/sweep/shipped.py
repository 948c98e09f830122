"""The notebooks debatekit ships: `notebooks/` in a checkout, `debatekit/_notebooks` in a wheel."""

from __future__ import annotations

from pathlib import Path


def notebooks_dir() -> Path:
    """Folder of the shipped notebooks: the checkout's `notebooks/` (an editable install), else the
    copy a wheel installs as `debatekit/_notebooks`."""
    package = Path(__file__).resolve().parent.parent  # debatekit/
    checkout = package.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "notebooks" / "run_debate.ipynb").is_file():
        return checkout / "notebooks"
    return package / "_notebooks"


def shipped(notebook: str) -> str:
    """`notebook` if it exists, else the shipped notebook of that name (`run_debate.ipynb` or
    `notebooks/run_debate.ipynb` from any folder, a wheel's copy included)."""
    own = notebooks_dir() / Path(notebook).name
    return str(own) if not Path(notebook).exists() and own.is_file() else notebook
