"""RAGShaper's gates on the matching core and the verifier, both ways: the adversarial QA pairs and
distractor documents of the gates issue are rejected with a named reason, the correct ones kept;
through the whole pipeline a one-document question exports nothing and a correct 3-hop tree
exports; a KB that cannot serve the configuration stops the run before any LLM call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_ragshaper_support import ShaperRun, curator_reply, main_retriever, teacher_llm, verdict_reply

from agentrag.records import Message, Passage
from agentrag.synth.ragshaper.analysis import RunRecords, details, stage_counts
from agentrag.synth.ragshaper.components import RagShaperComponents
from agentrag.synth.ragshaper.config import DistractorConfig, QAConfig, RagShaperConfig
from agentrag.synth.ragshaper.distractors import check_distractor, write_distractors
from agentrag.synth.ragshaper.qa import check_qa
from agentrag.synth.ragshaper.schema import DocRef, InfoTree, TreeNode
from agentrag.testing import FakeRetriever, ScriptedLLM

DOCS = [DocRef(id="p2", title="Lysa", text="Lysa is a town founded in 1820 by the merchant Ott Brem."),
        DocRef(id="p3", title="Ott Brem", text="Ott Brem was a merchant whose company Brem & Sons opened in 1845."),
        DocRef(id="p4", title="Brem & Sons", text="Brem & Sons built the Orn bridge, finished in 1901. The bridge "
               "is 12 metres wide and its bell weighs 900 kilograms; its main purpose was trade."),
        DocRef(id="d1", title="Draft", text="In the 1900 draft, Brem & Sons built the Orn bridge, finished in 1899.",
               kb="distractor", distractor_type="doppelganger")]
STEPS = [{"hop": 1, "fact": "Lysa's founder", "evidence": "founded in 1820 by the merchant Ott Brem", "output": "Ott Brem"},
         {"hop": 2, "fact": "his company", "evidence": "Ott Brem was a merchant whose company Brem & Sons opened",
          "output": "Brem & Sons"},
         {"hop": 3, "fact": "their bridge", "evidence": "Brem & Sons built the Orn bridge, finished in 1901",
          "output": "1901"}]
CHAIN = "the bridge built by the company of the merchant who founded Lysa"


def verifier(keep: bool) -> ScriptedLLM:
    """A verifier that passes (``keep``) or fails every item on every question."""
    return ScriptedLLM(default=lambda messages, **kw: verdict_reply(messages[-1].content or "", keep))


def qa(question: str, answer: str, docs: list[DocRef] = DOCS, v: Any = None) -> str | None:
    obj = {"question": question, "answer": answer, "reasoning_steps": STEPS, "negative_aspect": []}
    return check_qa(obj, QAConfig(), docs, v)[0]


def stating(text: str) -> list[DocRef]:
    return [*DOCS, DocRef(id="p9", title="Registry", text=f"The registry of the region lists {text}.")]


# ------------------------------------------------------------------ QA: adversarial pairs rejected

@pytest.mark.parametrize("question,answer,docs,reason", [
    # an answer the path does not state: invented next to real quotes, or only in a distractor
    (f"Who designed {CHAIN}?", "Ida Lorn", DOCS, "not_stated"),
    (f"In which year was {CHAIN} finished?", "1899", DOCS, "distractor"),
    # one document answers the question alone (lexically: it states the answer and the question's words)
    ("In which year was the Orn bridge built by Brem & Sons finished?", "1901", DOCS, "single_document"),
    # the question names the answer: possessive, without diacritics, a part of the name
    (f"Which merchant, Ott Brem's rival, founded the town of {CHAIN}?", "Ott Brem", DOCS, "answer_in_question"),
    ("Which town did the merchant who founded Lysa's company come from?", "Lysá", stating("Lysá"),
     "answer_in_question"),
    ("Which merchant of the Brem family founded the town of the bridge?", "Ott Brem", DOCS, "answer_in_question"),
    # explanation questions
    (f"What caused the delay of {CHAIN}?", "floods", stating("floods"), "explanation_question"),
    (f"What led to the building of {CHAIN}?", "trade", stating("trade"), "explanation_question"),
    # "yes" for a question that asks for a value
    (f"In which year was {CHAIN} finished?", "yes", DOCS, "yes_no"),
])
def test_adversarial_pairs_are_rejected_lexically(question: str, answer: str, docs: list[DocRef], reason: str) -> None:
    got = qa(question, answer, docs)
    assert got is not None and got.startswith(reason), got


@pytest.mark.parametrize("question,answer,docs,reason", [
    # an invented number that could be computed: the verifier says the path does not give it
    (f"In which year was {CHAIN} finished?", "1950", DOCS, "verifier: supported"),
    # two entities joined as the answer (stated together by a document)
    (f"Who founded the town and the company of {CHAIN}?", "Ott Brem and Ada Varn", stating("Ott Brem and Ada Varn"),
     "verifier: role"),
    # a question one document answers, worded so strings cannot see it
    (f"Which year did {CHAIN} open?", "1901", DOCS, "verifier: role"),
])
def test_the_verifier_rejects_what_strings_cannot(question: str, answer: str, docs: list[DocRef], reason: str) -> None:
    if answer != "1950":  # strings cannot decide: kept lexically (a number the path does not state is not)
        assert qa(question, answer, docs) is None
    got = qa(question, answer, docs, verifier(keep=False))
    assert got is not None and got.startswith(reason), got


def test_each_verifier_question_decides_on_its_own() -> None:
    """With a verifier that fails only one kind of question, that question names the rejection."""
    def only(check: str) -> ScriptedLLM:
        from agentrag.synth.verifier import CHECKS

        head = CHECKS[check].statement.split("{")[0][:40]
        return ScriptedLLM(default=lambda m, **kw: verdict_reply(m[-1].content or "", head not in (m[-1].content or "")))

    q = f"In which year was {CHAIN} finished?"
    assert qa(q, "1901", DOCS, verifier(keep=True)) is None
    for check in ("role", "single_document", "needed"):
        got = qa(q, "1901", DOCS, only(check))
        assert got is not None and got.startswith(f"verifier: {check}"), (check, got)
    got = qa(f"Who founded the town and the company of {CHAIN}?", "Ott Brem and Ada Varn",
             stating("Ott Brem and Ada Varn"), only("one_answer"))
    assert got is not None and got.startswith("verifier: one_answer"), got


# ------------------------------------------------------------------ QA: correct pairs kept

@pytest.mark.parametrize("question,answer,docs", [
    (f"How wide is {CHAIN}?", "12 metres", DOCS),
    (f"How heavy is the bell of {CHAIN}?", "900 kilograms", DOCS),
    (f"What was the main purpose of {CHAIN}?", "trade", DOCS),
    ("Which novel is named after the dog of the merchant who founded Lysa?", "Because of Winn-Dixie",
     stating("Because of Winn-Dixie")),
    (f"Which song did the merchant who founded Lysa sing at {CHAIN}?", "Since U Been Gone",
     stating("Since U Been Gone")),
    ("Which saint is the bridge built by the company of Ott Brem named after?", "St. Lysa", stating("St. Lysa")),
    (f"Which duo played at the opening of {CHAIN}?", "Simon & Garfunkel", stating("Simon & Garfunkel")),
    (f"Was {CHAIN} finished before 1905?", "yes", DOCS),
    (f"How many years after Lysa's founding was {CHAIN} finished?", "81", DOCS),
    (f"In which year was {CHAIN} finished?", "1901", DOCS),
])
def test_correct_pairs_are_kept_with_and_without_the_verifier(question: str, answer: str,
                                                              docs: list[DocRef]) -> None:
    if answer != "81":  # a computed number is kept only when the verifier computes it
        assert qa(question, answer, docs) is None
    assert qa(question, answer, docs, verifier(keep=True)) is None


def test_a_verifier_without_a_verdict_leaves_the_pair_unfinished() -> None:
    from agentrag.synth.verifier import VerifierUnanswered

    with pytest.raises(VerifierUnanswered):
        qa(f"In which year was {CHAIN} finished?", "1901", DOCS, ScriptedLLM(default="no idea"))


def test_a_title_snippet_grounds_no_hop() -> None:
    steps = [{**STEPS[0]}, {**STEPS[1], "evidence": "Ott Brem merchant"}, {**STEPS[2]}]
    obj = {"question": f"In which year was {CHAIN} finished?", "answer": "1901", "reasoning_steps": steps}
    reason, grounding = check_qa(obj, QAConfig(), DOCS)
    assert reason is not None and reason.startswith("too_few_hops") and grounding[1]["doc_id"] is None


# ------------------------------------------------------------------ distractors

SOURCE = "Lysa: Lysa is a town founded in 1820 by the merchant Ott Brem, on the river Orn."
GOOD = "The 1822 town charter of Lysa, a later edition, names the merchant Ott Brem's brother as founder."


@pytest.mark.parametrize("text,reason", [
    (SOURCE.replace(",", ";").replace(".", "!"), "copy"),
    (SOURCE + " It is often discussed in local histories.", "copy"),
    ("This document provides general information about many topics. " * 4, "filler"),
    ("The weather was pleasant that year and many people travelled to the coast for holidays.", "no_cue"),
    ("", "empty"),
])
def test_distractors_that_are_not_distractors_are_rejected(text: str, reason: str) -> None:
    got = check_distractor(text, SOURCE, "doppelganger")
    assert got is not None and got.startswith(reason), got


def test_the_verifier_checks_the_type_and_the_restated_fact() -> None:
    assert check_distractor(GOOD, SOURCE, "doppelganger") is None
    assert check_distractor(GOOD, SOURCE, "doppelganger", verifier=verifier(keep=True)) is None
    got = check_distractor(GOOD, SOURCE, "doppelganger", verifier=verifier(keep=False))
    assert got is not None and got.startswith("restates: verifier: restates"), got
    v = ScriptedLLM(default=lambda m, **kw: json.dumps({"holds": False, "reason": "no"}))  # "restates" fails -> kept
    got = check_distractor(GOOD, SOURCE, "subjective_fallacy", verifier=v)
    assert got is not None and got.startswith("verifier: distractor_type"), got
    asked = [json.dumps(r["messages"][-1].content) for r in v.requests]
    assert "subjective fallacy" in asked[-1] and "opinion" in asked[-1]


def test_rejected_distractors_are_counted_per_type_and_reason() -> None:
    docs_json = json.dumps({"documents": [{"title": "A", "text": SOURCE + " Also a fair."},
                                          {"title": "B", "text": GOOD}, {"title": "C", "text": GOOD + " "}]})
    rejected: list[str] = []
    docs, _, err = write_distractors(ScriptedLLM([docs_json]), original_fact=SOURCE, seed="Lysa",
                                     distractor_type="doppelganger", guideline="", seed_id="s1", node_id="n2",
                                     source_passage_id="p2", cfg=DistractorConfig(docs_per_call=3),
                                     verifier=verifier(keep=True), rejected=rejected)
    assert err is None and [d.title for d in docs] == ["B"]
    assert [r.split(": ")[:2] for r in rejected] == [["doppelganger", "copy"], ["doppelganger", "duplicate"]]
    tree = InfoTree(id="s1", seed="Lysa", nodes=[TreeNode(id="n2", rejected=[
        *rejected, "subjective_fallacy: restates: verifier: restates: it says 1820",
        "subjective_fallacy: verifier: distractor_type: no opinion"])])
    recs = RunRecords(seeds=1, trees=[tree], distractors=docs, paths=[], qas=[], trajs=[], filters=[], tags=None)
    counts, notes = stage_counts(recs, {})
    block = details(recs, RagShaperConfig(), notes, "given")["distractors"]
    assert block["created"] == {"doppelganger": 1}
    assert block["rejected"] == {"doppelganger": {"copy": 1, "duplicate": 1},
                                 "subjective_fallacy": {"verifier: restates": 1, "verifier: distractor_type": 1}}


# ------------------------------------------------------------------ through the whole pipeline

def _components(curator: Any) -> RagShaperComponents:
    def kb_tilde(passages: list[Passage]) -> FakeRetriever:
        return FakeRetriever(passages, kb="distractor")

    return RagShaperComponents(curator=ScriptedLLM(default=curator, model="fake-curator"), teacher=teacher_llm(),
                               main_kb=main_retriever(), distractor_kb=kb_tilde,
                               tagger=ScriptedLLM(default=curator_reply))


def _cfg() -> RagShaperConfig:
    cfg = RagShaperConfig()
    cfg.curator.max_depth = 4
    return cfg


def _exported(out: Path) -> int:
    f = out / "sft" / "trl_sft.jsonl"
    return len(f.read_text().splitlines()) if f.exists() else 0


def test_a_one_document_question_exports_nothing(tmp_path: Path) -> None:
    """The QA writer asks what one document answers (quoting three documents, so the hop count
    alone would pass); the verifier says one document answers it: nothing is exported."""
    def curator(messages: list[Message], **kw: Any) -> str:
        name = (kw.get("response_format") or {}).get("json_schema", {}).get("name")
        user = messages[-1].content or ""
        if name == "qa_pair":
            out = json.loads(curator_reply(messages, **kw))
            out["question"] = "Which year did the Orn crossing of the Brem firm open?"
            return json.dumps(out)
        if name == "verdict":
            single = "The document alone is enough" in user
            return json.dumps({"holds": True if single else json.loads(verdict_reply(user))["holds"]})
        return curator_reply(messages, **kw)

    m = ShaperRun(tmp_path / "one", _cfg(), _components(curator)).run(["Ada Varn", "Ott Brem"])
    qa_row = next(r for r in m["funnel"] if r["stage"] == "qa")
    assert qa_row["out"] == 0 and qa_row["rejected"].get("verifier: single_document", 0) > 0, qa_row
    assert _exported(tmp_path / "one") == 0


def test_a_lexically_single_document_question_pays_no_verifier_call() -> None:
    def never(messages: list[Message], **kw: Any) -> str:
        raise AssertionError("the verifier was asked")

    got = qa("In which year was the Orn bridge built by Brem & Sons finished?", "1901", DOCS, ScriptedLLM(default=never))
    assert got is not None and got.startswith("single_document: p4"), got


def test_a_correct_three_hop_tree_exports(tmp_path: Path) -> None:
    comps = _components(curator_reply)
    m = ShaperRun(tmp_path / "ok", _cfg(), comps).run(["Ada Varn", "Ott Brem"])
    qa_row = next(r for r in m["funnel"] if r["stage"] == "qa")
    assert qa_row["out"] > 0 and _exported(tmp_path / "ok") == m["export"]["exported"] > 0
    accepted = [json.loads(x) for x in (tmp_path / "ok" / "qa.jsonl").read_text().splitlines()]
    for rec in (r for r in accepted if r["status"] == "accepted"):
        assert len({g["doc_id"] for g in rec["grounding"] if g["doc_id"]}) >= 3
    asked = " ".join(r["messages"][-1].content for r in comps.curator.requests  # type: ignore[attr-defined]
                     if "verdict" in json.dumps(r.get("response_format") or {}))
    for statement in ("is needed to answer", "alone is enough", "is what the question", "distractor for the fact",
                      "states the true fact"):
        assert statement in asked, statement


# ------------------------------------------------------------------ pre-flight

def test_a_bm25_only_kb_stops_the_run_before_any_llm_call(tmp_path: Path, monkeypatch) -> None:
    from test_ragshaper_support import PASSAGES, curator_llm
    from typer.testing import CliRunner

    import agentrag.llm
    from agentrag.cli.main import app
    from agentrag.kb import KBConfig, KnowledgeBase
    from agentrag.llm.cache import CachedLLM
    from agentrag.testing import HashEmbedder

    kb = tmp_path / "kb"
    KnowledgeBase.build(PASSAGES, kb, KBConfig(name="main", method="bm25"), embedder=HashEmbedder(32), progress=False)
    load = KnowledgeBase.load.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(KnowledgeBase, "load", classmethod(lambda cls, d, **kw: load(cls, d, embedder=HashEmbedder(32),
                                                                                     **kw)))
    made: list[ScriptedLLM] = []

    def resolve_llm(ref: str = "embedded", *, cache: Any = None, **overrides: Any) -> Any:
        inner = teacher_llm() if ref == "teacher" else curator_llm()
        made.append(inner)
        return CachedLLM(inner, cache)

    monkeypatch.setattr(agentrag.llm, "resolve_llm", resolve_llm)
    monkeypatch.setattr("agentrag.llm.resolve.check_llm_ref", lambda ref, **kw: None)
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("Ada Varn\n")
    argv = ["synth", "ragshaper", "--kb", str(kb), "--seeds", str(seeds), "--llm", "curator", "--teacher", "teacher",
            "--set", "curator.max_depth=2"]
    res = CliRunner().invoke(app, [*argv, "--out", str(tmp_path / "r1")])
    assert res.exit_code == 2, res.output
    assert "--set curator.method=bm25 --set elicit.method=bm25" in " ".join(res.output.split())
    assert sum(llm.calls for llm in made) == 0 and not (tmp_path / "r1" / "trees.jsonl").exists()
    res = CliRunner().invoke(app, [*argv, "--out", str(tmp_path / "r2"), "--set", "curator.method=bm25",
                                   "--set", "elicit.method=bm25"])
    assert res.exit_code == 0, res.output
    assert sum(llm.calls for llm in made) > 0


def test_an_unknown_method_names_its_key() -> None:
    from agentrag.errors import UserError
    from agentrag.synth.ragshaper.config import check_kb_methods

    cfg = RagShaperConfig()
    cfg.elicit.method = "sparse"
    with pytest.raises(UserError, match=r"elicit.method='sparse'.*--set elicit.method=bm25\|dense\|hybrid"):
        check_kb_methods(cfg, object())


# ------------------------------------------------------------------ filter and hygiene

def test_a_no_answer_prediction_is_never_kept() -> None:
    from agentrag.records import Step, Trajectory
    from agentrag.synth.ragshaper.filter import filter_trajectory

    def answered(pred: str) -> Trajectory:
        return Trajectory(id="t", question="q", answer=pred, steps=[Step(thought=f"<answer>{pred}</answer>")])

    rec = filter_trajectory(answered("Unknown"), "unknown", 0.9)  # F1 1.0, but it says there is no answer
    assert not rec.kept and (rec.reason or "").startswith("no_answer")
    assert filter_trajectory(answered("Unknown Pleasures"), "Unknown Pleasures", 0.9).kept


def test_the_gate_modules_keep_no_private_matcher() -> None:
    """RAGShaper's gate modules compare strings only through agentrag.match / agentrag.synth.gates:
    no regular expressions, no normalizer or word list of their own."""
    import ast
    import inspect

    from agentrag.synth.ragshaper import distractors, filter, grounding, qa

    for mod in (qa, grounding, filter, distractors):
        tree = ast.parse(inspect.getsource(mod))
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not imported & {"re", "regex", "string", "unicodedata", "difflib"}, (mod.__name__, imported)
        names = {n.name.lower() for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        names |= {t.id.lower() for n in ast.walk(tree) if isinstance(n, ast.Assign) for t in n.targets
                  if isinstance(t, ast.Name)}
        assert not names & {"normalize", "tokens", "_phrases", "_words", "function_words", "_explain_q",
                            "_explain_a", "_sentence_end", "_punct"}, (mod.__name__, names)


def test_a_separate_verifier_answers_the_gates_and_is_counted(tmp_path: Path) -> None:
    from agentrag.synth.ragshaper import RagShaperRunConfig, run_ragshaper

    def kb_tilde(passages: list[Passage]) -> FakeRetriever:
        return FakeRetriever(passages, kb="distractor")

    def curator(messages: list[Message], **kw: Any) -> str:
        if (kw.get("response_format") or {}).get("json_schema", {}).get("name") == "verdict":
            raise AssertionError("the curator was asked a verifier question")
        return curator_reply(messages, **kw)

    v = verifier(keep=True)
    cfg = RagShaperRunConfig()
    cfg.curator.max_depth = 4
    m = run_ragshaper(cfg, tmp_path / "r", curator=ScriptedLLM(default=curator), teacher=teacher_llm(),
                      tagger=ScriptedLLM(default=curator_reply), verifier=v, main_kb=main_retriever(),
                      distractor_kb=kb_tilde, seeds=["Ada Varn"])
    assert v.calls > 0 and m["llm"]["verifier"]["calls"] == v.calls
    assert m["export"]["exported"] > 0


def test_an_answer_after_what_the_writer_was_shown_is_rejected() -> None:
    filler = " ".join(["The town keeps records of its markets, fairs and guilds."] * 12)  # > 500 characters
    long = DocRef(id="p4", title="Brem & Sons", text=f"Brem & Sons built the Orn bridge. {filler} It was finished "
                  "in 1901.")
    got = qa(f"In which year was {CHAIN} finished?", "1901", [*DOCS[:2], long])
    assert got is not None and got.startswith("beyond_cut"), got
