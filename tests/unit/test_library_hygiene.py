"""The library changes no process-wide state: no HF_HUB_OFFLINE, no logging.disable.

Offline behaviour is a default of the CLI entry point (and the Makefile), not of the library.
"""

from __future__ import annotations

import logging
import os
import sys
import types
from pathlib import Path

import numpy as np

import agentrag.cli.main as cli_main
from agentrag.kb.embedders import SentenceTransformerEmbedder, quiet_root_logging_from

SRC = Path(__file__).resolve().parents[2] / "src" / "agentrag"


class _FakeST:
    def __init__(self, name: str, device: str = "cpu") -> None:
        self.name = name
        self.max_seq_length = 128

    def get_sentence_embedding_dimension(self) -> int:
        return 3

    def encode(self, texts, **kwargs):
        return np.ones((len(texts), 3), dtype=np.float32)


def test_embedder_takes_any_name_and_leaves_the_environment_alone(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setitem(sys.modules, "sentence_transformers", types.SimpleNamespace(SentenceTransformer=_FakeST))
    emb = SentenceTransformerEmbedder("intfloat/e5-small-v2")
    assert emb.model.name == "intfloat/e5-small-v2"  # handed to sentence-transformers as given
    assert emb.query_prefix == "query: " and emb.embed(["x"]).shape == (1, 3)
    assert "HF_HUB_OFFLINE" not in os.environ


def test_cli_entry_point_defaults_to_offline_but_respects_the_user(monkeypatch):
    seen = []
    monkeypatch.setattr(cli_main, "app", lambda: seen.append(os.environ.get("HF_HUB_OFFLINE")))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    cli_main.main()
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    cli_main.main()
    assert seen == ["1", "0"]


def test_quiet_quantizer_logging_touches_nothing_else(tmp_path, caplog):
    pkg = tmp_path / "noisy"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    noisy = types.ModuleType("noisy")
    noisy.__file__ = str(pkg / "__init__.py")
    root = logging.getLogger()

    def record(path: str, level: int, name: str = "root") -> logging.LogRecord:
        return logging.LogRecord(name, level, path, 1, "msg", None, None)

    inside = str(pkg / "quantizer.py")
    with caplog.at_level(logging.INFO):
        with quiet_root_logging_from(noisy):
            assert logging.root.manager.disable == 0  # nothing disabled process-wide
            assert root.getEffectiveLevel() == logging.INFO
            assert not root.filter(record(inside, logging.INFO))  # the quantizer's chatter is dropped
            assert root.filter(record(inside, logging.WARNING))  # its warnings are not
            assert root.filter(record(__file__, logging.INFO))  # other root-logger INFO is not
            logging.getLogger("agentrag.test").info("still logged")
        assert root.filter(record(inside, logging.INFO))  # the filter is gone afterwards
    assert "still logged" in caplog.text


def test_library_code_sets_no_process_wide_state():
    offenders = []
    for path in SRC.rglob("*.py"):
        if "cli" in path.relative_to(SRC).parts:
            continue
        text = path.read_text(encoding="utf-8").split('if __name__ == "__main__":')[0]  # programs may
        for needle in ("logging.disable(", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "logging.basicConfig("):
            if needle in text:
                offenders.append(f"{path.relative_to(SRC)}: {needle}")
    assert offenders == []


# ---- layering (issue 20): the import graph of src/agentrag runs only downwards, without cycles ----

#: areas of src/agentrag (a top-level module or package) from the ground floor up; an area may
#: import areas of its own layer or below, never above
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"errors", "_version"}),
    frozenset({"_extras", "config", "records", "paths", "threads", "render", "match", "protocol", "progress",
               "convert"}),
    frozenset({"exec", "llm", "protocols", "runs"}),
    frozenset({"kb", "agents"}),  # agents must not import kb (FORBIDDEN): both read the seams in protocols
    frozenset({"export", "eval", "train", "doctor"}),
    frozenset({"synth"}),
    frozenset({"report"}),
    frozenset({"cli", "testing", "__main__", "__init__"}),
)
#: imports between areas of one layer that are not allowed
FORBIDDEN: frozenset[tuple[str, str]] = frozenset({("agents", "kb")})

# Known exceptions to the layering (importer module, imported module) and module cycles: none.
# A new one must be justified here, in review.
ALLOWED_UPWARD: frozenset[tuple[str, str]] = frozenset()
ALLOWED_CYCLES: frozenset[frozenset[str]] = frozenset()


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of src/agentrag (a package by its __init__)."""
    out = {}
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the agentrag modules it imports, at any depth of its code (top level, inside
    functions, under TYPE_CHECKING). ``from pkg import name`` counts as an import of the module
    ``pkg.name`` when there is one, else of ``pkg``."""
    import ast

    mods = _modules()

    def known(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        targets: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets |= {known(a.name) for a in node.names if a.name.split(".")[0] == "agentrag"}
            elif isinstance(node, ast.ImportFrom):
                base = package
                for _ in range(max(node.level - 1, 0)):
                    base = base.rpartition(".")[0]
                source = (base + ("." + node.module if node.module else "")) if node.level else (node.module or "")
                if source.split(".")[0] == "agentrag":
                    targets |= {f"{source}.{a.name}" if f"{source}.{a.name}" in mods else known(source)
                                for a in node.names}
        graph[mod] = {t for t in targets if t is not None and t != mod}
    return graph


def _area(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _layer(area: str) -> int:
    for i, areas in enumerate(LAYERS):
        if area in areas:
            return i
    raise AssertionError(f"area {area!r} of src/agentrag has no layer: add it to LAYERS in {__file__}")


def test_imports_run_only_downwards() -> None:
    graph = import_graph()
    upward = sorted((a, b) for a, targets in graph.items() for b in targets
                    if _area(a) != _area(b) and (_layer(_area(b)) > _layer(_area(a))
                                                  or (_area(a), _area(b)) in FORBIDDEN))
    assert [e for e in upward if e not in ALLOWED_UPWARD] == []
    assert [e for e in ALLOWED_UPWARD if e not in upward] == [], "gone: take it out of ALLOWED_UPWARD"


def test_agents_do_not_import_kb() -> None:
    graph = import_graph()
    assert sorted((a, b) for a, ts in graph.items() for b in ts if _area(a) == "agents" and _area(b) == "kb") == []


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[frozenset[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(frozenset(component))
    return out


def test_no_import_cycles() -> None:
    cycles = _cycles(import_graph())
    assert [sorted(c) for c in cycles if c not in ALLOWED_CYCLES] == []
    assert [sorted(c) for c in ALLOWED_CYCLES if c not in cycles] == [], "gone: take it out of ALLOWED_CYCLES"


def test_the_cycle_finder_finds_cycles() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset({"a", "b", "c"})]
    assert _cycles({"a": {"b"}, "b": set()}) == []


#: the one module outside cli/ that may import it: ``python -m agentrag`` starts the CLI
CLI_ENTRY = frozenset({"agentrag.__main__"})


def test_no_module_outside_cli_imports_the_cli() -> None:
    """The library never imports (or calls back into) the CLI: pre-flights, reference parsing and
    backend defaults live in the library, and the CLI reads them."""
    graph = import_graph()
    offenders = sorted((a, b) for a, targets in graph.items() for b in targets
                       if _area(b) == "cli" and _area(a) != "cli" and a not in CLI_ENTRY)
    assert offenders == []
    assert graph["agentrag.__main__"] <= {"agentrag.cli.main"}
