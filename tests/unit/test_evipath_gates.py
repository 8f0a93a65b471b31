"""Issue 22's probes through the real pipeline (run_evipath) with the gold-data fake: each bad path
is rejected with its named reason and exports nothing; the correct ones (MuSiQue chains, 2Wiki
yes/no comparisons) are kept."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from agentrag.records import Message
from agentrag.synth.evipath import EviPathRunConfig, run_evipath
from agentrag.synth.evipath.answering import QA_SYSTEM
from agentrag.synth.evipath.planning import STEP_SYSTEM
from evipath_fakes import CleanGoldLLM, ContentWordEmbedder, twowiki_as_gold

MUSIQUE_2HOP = 0  # line of musique/train_100.jsonl: a 2-hop chain


@pytest.fixture(scope="module")
def musique(data_dir: Path) -> Path:
    return data_dir / "musique" / "train_100.jsonl"


@pytest.fixture(scope="module")
def twowiki(data_dir: Path) -> Path:
    return data_dir / "2wikimultihopqa" / "train_600.jsonl"


def _records(path: Path, n: int) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()[:n]]


def _run(out: Path, dataset: Path, llm: Any, limit: int = 1, **kw: Any) -> dict[str, Any]:
    cfg = EviPathRunConfig(datasets=[str(dataset)], limit=limit, concurrency=1, **kw)
    return run_evipath(cfg, out, planner=llm, embedder=ContentWordEmbedder())


def _gates(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "gates.jsonl").read_text().splitlines()]


def _rejected(out: Path, m: dict[str, Any], gate: str) -> None:
    g = _gates(out)[0]
    assert not g["passed"] and not g["checks"][gate], g["reasons"]
    assert any(r.startswith(f"{gate}:") for r in g["reasons"])
    assert gate in m["gate_failures"] and m["export"].get("exported", 0) == 0


class InventingLLM(CleanGoldLLM):
    """f_QA invents the first sub-answer (a name in no evidence); everything else is gold."""

    def _reply(self, messages: list[Message]) -> str:
        text = super()._reply(messages)
        if messages[0].content == QA_SYSTEM and not getattr(self, "_invented", False):
            self._invented = True
            return re.sub(r" is .*\.$", " is Zed Zorro.", text)
        return text


class UnsupportedFinalLLM(CleanGoldLLM):
    """f_QA never states the last sub-answer, yet the planner answers it (the gold answer)."""

    def _reply(self, messages: list[Message]) -> str:
        text = super()._reply(messages)
        if messages[0].content == QA_SYSTEM:
            return text if "Who was in charge" not in text else re.sub(r" is .*\.$", " is not stated.", text)
        return text


class LeakingLLM(CleanGoldLLM):
    """The first thought names the gold answer glued to other words (hyphen or possessive)."""

    glue = "{}-born"

    def _reply(self, messages: list[Message]) -> str:
        text = super()._reply(messages)
        if messages[0].content == STEP_SYSTEM and "Start with the first facts." in text:
            item = self._item("\n".join(m.content or "" for m in messages if m.role == "user"))
            text = text.replace("Start with the first facts.", f"The {self.glue.format(item['answer'])} link.")
        return text


class PronounLLM(CleanGoldLLM):
    """The second search is "Where was he born?" (no name for "he" to refer to)."""

    def _step(self, item: dict[str, Any], n_done: int) -> str:
        text = super()._step(item, n_done)
        if n_done == 1:
            text = re.sub(r'Search\("[^"]*"\)', 'Search("Where was he born?")', text, count=1)
        return text


class RecordingLLM(CleanGoldLLM):
    qa_requests: list[str]

    def _reply(self, messages: list[Message]) -> str:
        if messages[0].content == QA_SYSTEM:
            self.__dict__.setdefault("qa_requests", []).append(messages[-1].content or "")
        return super()._reply(messages)


def test_invented_sub_answer_is_rejected_and_nothing_exported(tmp_path: Path, musique: Path):
    m = _run(tmp_path / "r", musique, InventingLLM(_records(musique, 1)))
    _rejected(tmp_path / "r", m, "sub_answer_support")
    assert "zed" in json.dumps(_gates(tmp_path / "r")[0]["reasons"]).lower()


def test_final_answer_in_no_observation_is_rejected(tmp_path: Path, musique: Path):
    line = next(i for i, r in enumerate(_records(musique, 100)) if r["id"] == "3hop1__404363_705261_126049")
    records = _records(musique, 100)[line:line + 1]
    ds = tmp_path / "one.jsonl"
    ds.write_text(json.dumps(records[0]) + "\n")
    m = _run(tmp_path / "r", ds, UnsupportedFinalLLM(records))
    _rejected(tmp_path / "r", m, "final_support")


@pytest.mark.parametrize("glue", ["{}-born", "{}'s"])
def test_answer_glued_to_a_word_in_an_early_thought_is_leakage(tmp_path: Path, musique: Path, glue: str):
    llm = LeakingLLM(_records(musique, 1))
    llm.glue = glue
    m = _run(tmp_path / "r", musique, llm)
    _rejected(tmp_path / "r", m, "no_leakage")


def test_sub_question_with_an_unresolved_pronoun_is_rejected(tmp_path: Path, musique: Path):
    m = _run(tmp_path / "r", musique, PronounLLM(_records(musique, 1)))
    _rejected(tmp_path / "r", m, "self_contained")


def test_correct_musique_chain_is_kept_with_clean_targets(tmp_path: Path, musique: Path):
    m = _run(tmp_path / "r", musique, CleanGoldLLM(_records(musique, 4)), limit=4)
    assert all(g["passed"] for g in _gates(tmp_path / "r")), [g["reasons"] for g in _gates(tmp_path / "r")]
    assert m["export"]["exported"] > 4


def test_2wiki_yes_no_comparison_is_kept_and_triples_reach_f_qa_and_eq6(tmp_path: Path, twowiki: Path):
    records = [twowiki_as_gold(r) for r in _records(twowiki, 3)]
    assert records[1]["answer"] == "no"  # "Are Tabu Ley Rochereau and Sheldon Rampton of the same nationality?"
    llm = RecordingLLM(records)
    m = _run(tmp_path / "r", twowiki, llm, limit=3)
    gates = {g["id"]: g for g in _gates(tmp_path / "r")}
    assert all(g["passed"] for g in gates.values()), [g["reasons"] for g in gates.values()]
    assert m["export"]["exported"] >= 3
    assert any("Nayla Moawad — spouse — René Moawad" in q for q in llm.qa_requests)  # f_QA saw the triples
    sels = [json.loads(x) for x in (tmp_path / "r" / "selections.jsonl").read_text().splitlines()]
    assert any(any(" — " in v for v in s["supporting"]) for s in sels)  # Eq. 6's F̂_i carries its triples


def test_limit_counts_valid_items_only(tmp_path: Path, musique: Path):
    rows = _records(musique, 3)
    bad = {**rows[0], "id": "bad", "paragraphs": [{**p, "is_supporting": False} for p in rows[0]["paragraphs"]]}
    ds = tmp_path / "mixed.jsonl"
    ds.write_text("\n".join(json.dumps(r) for r in [bad, rows[1], rows[2]]) + "\n")
    m = _run(tmp_path / "r", ds, CleanGoldLLM(rows), limit=2, skip_invalid=True)
    items = m["funnel"][0]
    assert items["in"] == 3 and items["out"] == 2 and "invalid_input" in json.dumps(items["rejected"])


def test_planner_and_executor_exports_are_separate_with_their_own_entries(tmp_path: Path, musique: Path):
    m = _run(tmp_path / "r", musique, CleanGoldLLM(_records(musique, 2)), limit=2)
    n = {}
    for role in ("planner", "executor"):
        d = tmp_path / "r" / f"sft_{role}"
        info = json.loads((d / "dataset_info.json").read_text())
        assert list(info) == [f"agentrag_evipath_{role}"]
        rows = [json.loads(x) for x in (d / "trl_sft.jsonl").read_text().splitlines()]
        assert rows and all((len(r["messages"]) == 3) is (role == "executor") for r in rows)
        n[role] = len(rows)
    assert m["export"]["exported"] == n["planner"] + n["executor"] == m["export"]["roles"]["planner"]["exported"] \
        + m["export"]["roles"]["executor"]["exported"]


def test_no_exported_target_has_synthesis_only_wording(tmp_path: Path, musique: Path):
    from agentrag.synth.evipath.answering import THINK_SYSTEM

    class GoldenWording(CleanGoldLLM):  # an executor thought in synthesis-only wording
        def _reply(self, messages: list[Any]) -> str:
            text = super()._reply(messages)
            if messages and messages[0].content == THINK_SYSTEM:
                text = text.replace("<think>", "<think>The golden evidence states it. ", 1)
            return text

    m = _run(tmp_path / "r", musique, GoldenWording(_records(musique, 2)), limit=2)
    assert m["gate_failures"].get("no_synthesis_wording") == 2 and m["export"].get("exported", 0) == 0
    # and the export check itself, for a target that reached a kept conversation anyway
    from agentrag.synth.evipath.schema import ConversationRecord

    out = tmp_path / "r2"
    _run(out, musique, CleanGoldLLM(_records(musique, 1)))
    convs = [ConversationRecord.model_validate_json(x) for x in (out / "conversations.jsonl").read_text().splitlines()]
    bad = convs[-1].model_copy(deep=True)
    bad.messages[-1].content = "<think>I already know the answer.</think>" + (bad.messages[-1].content or "")
    assert bad.kept
    (out / "conversations.jsonl").write_text("\n".join(c.model_dump_json() for c in [*convs, bad.model_copy(
        update={"id": "x-executor"})]) + "\n")
    m2 = _run(out, musique, CleanGoldLLM(_records(musique, 1)))  # resume: only the export runs again
    assert m2["export"]["synthesis_wording"] == 1
    for f in out.glob("sft*/trl_sft.jsonl"):
        assert "know the answer" not in f.read_text()
