from __future__ import annotations

import importlib

import agentrag


def test_all_names_importable():
    for name in agentrag.__all__:
        assert getattr(agentrag, name) is not None, name


def test_all_is_complete():
    missing = []
    for modname in agentrag.PUBLIC_MODULES:
        mod = importlib.import_module(modname)
        for name in getattr(mod, "__all__", []):
            if name not in agentrag.__all__:
                missing.append(f"{modname}.{name}")
    assert not missing, f"add these to agentrag._EXPORTS: {missing}"


def test_exports_point_at_public_modules():
    for name, modname in agentrag._EXPORTS.items():
        assert modname in agentrag.PUBLIC_MODULES, f"{name} comes from {modname}, not in PUBLIC_MODULES"
