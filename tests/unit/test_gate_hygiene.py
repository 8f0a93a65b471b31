"""Every gate of every synthesizer compares strings through the one matching core
(agentrag.match) and the shared checks (agentrag.synth.gates), and parses model turns through the
one protocol parser (agentrag.protocol): no gate module keeps a private normalizer, a regex of its
own, a prefix or raw-substring rule over answers, or a tag pattern. This test walks the gate
modules and fails on any of them."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "agentrag"

#: the modules that decide whether an item is kept (gates), per synthesizer
GATE_MODULES = [
    "synth/annotated/gates.py", "synth/annotated/teacher.py",
    "synth/evipath/gates.py", "synth/evipath/support.py", "synth/evipath/deductive.py",
    "synth/ragshaper/qa.py", "synth/ragshaper/grounding.py", "synth/ragshaper/filter.py",
    "synth/ragshaper/distractors.py",
    "synth/reasonrag/pairs.py", "synth/reasonrag/step.py", "synth/reasonrag/mcts.py",
    "synth/tracer/verify.py", "synth/tracer/atomic.py", "synth/tracer/compose.py", "synth/tracer/oracle.py",
    "synth/tracer/export.py",
]
#: names that betray a private text normalizer or tokenizer
NORMALIZER_NAMES = {"normalize", "_normalize", "_norm", "norm", "normalise", "_canon", "canonical_text", "_tokens",
                    "_words", "tokenize", "_tokenize"}
#: imports that only a matching core needs
MATCHING_IMPORTS = {"difflib", "unicodedata", "string"}
#: the regexes gate modules may keep: shape rules over the synthesizers' own notation, never a
#: comparison of an answer with a text (module -> the patterns, each with its reason)
ALLOWED_REGEXES = {
    "synth/annotated/teacher.py": {r"#(\d+)"},  # MuSiQue's "#k" references to earlier hop answers
    "synth/evipath/gates.py": {r"\s*\([^)]*\)\s*$"},  # a Wikipedia title's "(film)" disambiguation
    "synth/evipath/support.py": {r"#\d+|\[[^\]]*\]|<[^>]*>|\{[^}]*\}|_{2,}"},  # placeholders left in a sub-question
}


def _problems(path: Path, allowed: set[str] | None = None) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "re"):
            pattern = node.args[0] if node.args else None
            literal = pattern.value if isinstance(pattern, ast.Constant) else None
            if node.func.attr != "escape" and literal not in (allowed or set()):
                out.append(f"regex re.{node.func.attr}({literal!r:.40})")
        if isinstance(node, ast.Import):
            out += [f"import {a.name}" for a in node.names if a.name in MATCHING_IMPORTS]
        elif isinstance(node, ast.ImportFrom):
            if node.module in MATCHING_IMPORTS:
                out.append(f"from {node.module} import ...")
            if node.module == "agentrag.eval.metrics" and any(a.name == "normalize_answer" for a in node.names):
                out.append("eval's normalize_answer")
        elif isinstance(node, ast.FunctionDef) and node.name in NORMALIZER_NAMES:
            out.append(f"def {node.name}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            v = node.value
            if any(t in v for t in ("<answer>", "</answer>", "<query>", "</query>", "<tool_call>")) and "\\" in v:
                out.append(f"tag pattern {v[:40]!r}")
    return out


def test_the_gate_modules_exist():
    missing = [m for m in GATE_MODULES if not (SRC / m).exists()]
    assert missing == []


def test_no_gate_module_keeps_a_private_normalizer_regex_or_tag_pattern():
    found = {m: p for m in GATE_MODULES if (p := _problems(SRC / m, ALLOWED_REGEXES.get(m)))}
    assert found == {}


def test_the_walker_finds_what_it_looks_for(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import re\nfrom agentrag.eval.metrics import normalize_answer\n"
                   "def _norm(t):\n    return t.lower()\nTAG = r'<answer>(.*?)</answer>\\s'\n", encoding="utf-8")
    assert len(_problems(bad)) == 3
    bad.write_text("import re\nWORD = re.compile(r'\\bparis\\b')\n", encoding="utf-8")
    assert _problems(bad) == ["regex re.compile('\\\\bparis\\\\b')"]
