"""Loading a script of bench/ as a module in the tests (bench/ is not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def load_script(name: str, filename: str):
    """bench/`filename` as module `name` (registered in sys.modules before it runs, as its
    dataclasses and its own imports of sibling scripts need)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / filename)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
