"""``require_module``: the one way a test depends on an optional extra (no silent skips in CI)."""

from __future__ import annotations

import importlib
import importlib.util
import os
from types import ModuleType

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def require_module(name: str, extra: str, *, import_it: bool = True) -> ModuleType | None:
    """The module ``name`` of the extra ``extra``. If it is missing the test fails under CI
    (``CI=true``: every extra is installed there, so a missing one is a broken environment) and
    is skipped, with the reason, elsewhere. ``import_it=False`` only checks that it is installed
    (for llama_cpp, whose import must come after OMP_WAIT_POLICY is set)."""
    try:
        if importlib.util.find_spec(name) is None:
            raise ModuleNotFoundError(f"No module named {name!r}")
        return importlib.import_module(name) if import_it else None
    except ImportError as exc:
        reason = f"{name} is not installed ({exc}); pip install 'agentrag[{extra}]'"
        if in_ci():
            pytest.fail(f"CI=true and a test dependency is missing: {reason}", pytrace=False)
        pytest.skip(reason, allow_module_level=True)


#: where Debian's chromium package puts the browser (`make test` installs it when missing)
CHROMIUM = "/usr/bin/chromium"


def require_browser() -> str:
    """The path of the system Chromium the browser tests drive through Playwright. Missing: a
    failure under CI (``make test`` installs it there), a skip with the fix elsewhere."""
    import shutil

    path = os.environ.get("AGENTRAG_CHROMIUM") or shutil.which("chromium") or CHROMIUM
    if not os.path.exists(path):
        reason = "chromium is not installed; run `make test` as root or: apt-get install -y chromium"
        if in_ci():
            pytest.fail(f"CI=true and a test dependency is missing: {reason}", pytrace=False)
        pytest.skip(reason, allow_module_level=True)
    return path
