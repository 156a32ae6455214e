"""torch_tpu.__version__: the installed distribution's version (PEP 566 metadata), or for a
source tree that was never installed, the version pyproject.toml declares."""
from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "torchtpu-backend"  # the PyPI name `torch-tpu` belongs to another project


def _from_source_tree() -> str | None:
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    try:
        text = pyproject.read_text()
    except OSError:
        return None
    project = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    if not project or not re.search(rf'^name\s*=\s*"{DISTRIBUTION}"', project.group(1), re.M):
        return None
    m = re.search(r'^version\s*=\s*"([^"]+)"', project.group(1), re.M)
    return m.group(1) if m else None


def get_version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return _from_source_tree() or "0+unknown"
