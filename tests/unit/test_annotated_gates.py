"""The annotated teacher's gates on the shared core: a hop is supported only by what the agent is
shown; sub-questions read as natural questions; its planner_executor conversations pass EviPath's
own gates."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from agentrag.agents.pe_protocol import EXECUTOR_SYSTEM, PLANNER_SYSTEM, parse_planner
from agentrag.eval.datasets import load_dataset
from agentrag.records import Hit, Passage
from agentrag.synth.annotated import AnnotatedRunConfig, run_annotated
from agentrag.synth.annotated.gates import first_failure, support_gate
from agentrag.synth.annotated.pe import evipath_records
from agentrag.synth.annotated.questions import is_natural, natural_question, relation_question
from agentrag.synth.annotated.teacher import Hop, SearchedHop, item_hops
from agentrag.synth.evipath.config import GateConfig
from agentrag.synth.evipath.gates import check_path
from agentrag.synth.evipath.schema import EviItem, Fact
from agentrag.testing import FakeRetriever


def _sh(answer: str, hits: list[tuple[str, str]], support: str = "Bruno Kess") -> SearchedHop:
    hs = [Hit(id=str(i), title=t, text=x, score=1.0) for i, (t, x) in enumerate(hits)]
    return SearchedHop(Hop("Where was Bruno Kess born?", answer, [support]), "obs", hs)


def test_a_hop_answer_beyond_doc_chars_is_not_supported():
    text = "Bruno Kess was a painter who worked in many cities of Europe for decades. He was born in Vienna in 1901."
    sh = _sh("Vienna", [("Bruno Kess", text)])
    assert support_gate([sh]) is None  # whole documents: stated
    reason = support_gate([sh], doc_chars=40)
    assert reason is not None and "beyond_cut" in reason
    assert support_gate([sh], doc_chars=200) is None


def test_a_page_of_the_same_title_that_does_not_state_the_answer_does_not_support():
    sh = _sh("Vienna", [("Bruno Kess", "Bruno Kess painted rivers."), ("Other", "Vienna is a city.")])
    assert "stated by no retrieved page" in support_gate([sh])
    sh = _sh("Vienna", [("Bruno Kess", "Bruno Kess, a painter from Wien, was born in Vienna.")])
    assert support_gate([sh]) is None


@pytest.mark.parametrize("answer,text,ok", [
    ("France", "She was French.", True), ("1901", "born 5 March 1901", True),
    ("Vienna", "born in Viennese hospital", False), ("Ann Lee", "directed by Ann Leeds", False),
])
def test_support_in_any_written_form_never_by_letters(answer, text, ok):
    assert (support_gate([_sh(answer, [("Bruno Kess", text)])]) is None) is ok


def test_repeated_hops_and_one_sided_comparisons_are_rejected():
    a = SearchedHop(Hop("When was Film A released?", "1990", ["Film A"]), "Film A came out in 1990.",
                    [Hit(id="a", title="Film A", text="Film A came out in 1990.", score=1.0)])
    again = SearchedHop(Hop("When was the Film A released?", "1990", ["Film A"]), a.observation, a.hits)
    q = "Which film came out first, Film A or Film B?"
    assert first_failure(q, "Film A", [a.hop, again.hop], [a, again], 4).startswith("distinct_hops")
    b_hop = Hop("When was Film B released?", "1995", ["Film B"])
    b = SearchedHop(b_hop, "Film B came out in 1995.", [Hit(id="b", title="Film B", text="Film B came out in 1995.",
                                                              score=1.0)])
    assert first_failure(q, "Film A", [a.hop, b.hop], [a, b], 4) is None
    one_side = SearchedHop(Hop("When was Film A first shown?", "1990", ["Film A", "Film B"]), a.observation, a.hits)
    assert "one_sided" in (first_failure(q, "Film A", [a.hop, one_side.hop], [a, one_side], 4) or "")


@pytest.mark.parametrize("relation,answer,question", [
    ("founded by", "Ann Lee", "Who founded Acme?"),
    ("located in the administrative territorial entity", "Ohio", "Where is Acme located?"),
    ("director", "Ann Lee", "Who directed Acme?"),
    ("date of birth", "5 March 1950", "When was Acme born?"),
    ("number of seats", "12", "What is the number of seats of Acme?"),
    ("inspired by", "Ann Lee", "What is Acme inspired by?"),
    ("applies to jurisdiction", "Ohio", "Which jurisdiction does Acme apply to?"),
    ("original language of film or TV show", "Hindi", "What is the original language of Acme?"),
])
def test_relation_table_and_answer_types(relation, answer, question):
    assert relation_question("Acme", relation, answer) == question


@pytest.mark.parametrize("raw,clean", [
    ("who is the the leader of Oslo ", "Who is the leader of Oslo?"),
    ("When was Oslo colonized by Danes ?", "When was Oslo colonized by Danes?"),
    ("The mountain range that separates Europe from asia is", "What is the mountain range that separates Europe from asia?"),
    ("Who directed Liar Liar??", "Who directed Liar Liar?"),
    ("What nickname did John 's policy earn him", "What nickname did John's policy earn him?"),
    ("Which country is .dm in", "Which country is .dm in?"),
    ("who founded Royal Academy of Music answers.com", "Who founded Royal Academy of Music?"),
    ("who was president of the united states immediately following World War I i",
     "Who was president of the united states immediately following World War I?"),
    ("who was president immediately following World War i", "Who was president immediately following World War I?"),
    ("where can i find the show", "Where can I find the show?"),
    ("What is the flag of the The Bahamas", "What is the flag of The Bahamas?"),
    ("The The Last Sleep of Arthur in Avalon was made by whom", "The Last Sleep of Arthur in Avalon was made by whom?"),
])
def test_web_search_forms_become_questions(raw, clean):
    assert natural_question(raw) == clean and is_natural(clean) is None


def test_rewritten_sub_questions_of_the_training_files_are_natural(data_dir: Path):
    items = load_dataset(data_dir / "musique" / "train_397.jsonl", "musique") + \
        load_dataset(data_dir / "2wikimultihopqa" / "train_600.jsonl", "2wiki")
    queries = [h.query for it in items for h in item_hops(it, {})]
    sample = random.Random(0).sample(queries, 100)
    bad = [(q, why) for q in sample if (why := is_natural(q))]
    assert len(bad) <= 5, bad
    for bad_q in ("what is the founded by of Acme?", "Who directed Acme", "Where is is Acme?", "Acme >> country?",
                  "What forest is by Warsaw 's border?", "Who founded Acme answers.com?", "Where is the The Acme?",
                  "What is the applies to jurisdiction of Acme?"):
        assert is_natural(bad_q) is not None




def test_planner_executor_conversations_pass_evipaths_gates(data_dir: Path, tmp_path: Path):
    path = data_dir / "musique" / "train_100.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()[:12]]
    passages = [Passage(id=f"{r['id']}-{p['idx']}", title=p["title"], text=p["paragraph_text"])
                for r in rows for p in r["paragraphs"] if p["is_supporting"]]  # a small KB the fake retriever finds
    src = tmp_path / "mus_train.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    m = run_annotated(AnnotatedRunConfig(datasets=[str(src)], top_k=5, doc_chars=400), tmp_path / "out",
                      retriever=FakeRetriever(passages))
    chats = [json.loads(x)["messages"] for x in
             (tmp_path / "out" / "sft_planner_executor" / "trl_sft.jsonl").read_text().splitlines()]
    planners = [c for c in chats if c[0]["content"] == PLANNER_SYSTEM]
    assert len(planners) >= 6 and m["export"]["planner_executor"]["planner_conversations"] == len(planners)
    execs = [c for c in chats if c[0]["content"] == EXECUTOR_SYSTEM]
    by_question = {r["question"]: r for r in rows}
    for chat in planners:
        rec = by_question[chat[1]["content"].removeprefix("Question: ")]
        searches = [s for m_ in chat if m_["role"] == "assistant" for s in parse_planner(m_["content"]).searches]
        mine = [next(e for e in execs if e[1]["content"].startswith(f"Question: {q}\n")) for q in searches]
        plan, its, sels = evipath_records(chat, mine, rec["id"])
        facts = [Fact(idx=i, title=p["title"], text=p["paragraph_text"]) for i, p in enumerate(rec["paragraphs"])]
        item = EviItem(id=rec["id"], question=rec["question"], answer=rec["answer"],
                       answers=[rec["answer"], *rec.get("answer_aliases", [])], facts=facts,
                       gold=[i for i, p in enumerate(rec["paragraphs"]) if p["is_supporting"]],
                       hops=len(rec["question_decomposition"]))
        g = check_path(item, plan, its, sels, GateConfig())
        assert g.passed, (rec["id"], g.reasons)


def test_an_executor_chat_evipaths_gates_would_reject_is_found_before_export():
    """A hop the teacher's support gate accepts by nationality ("French" for France) gives an
    executor answer sentence EviPath's sub_answer_support does not find stated: the
    planner_executor export leaves that path out (counted) instead of exporting a failing chat."""
    from agentrag.synth.annotated.pe import executor_problem

    hop = Hop("Which country approved the name?", "France", ["Neptune"])
    french = SearchedHop(hop, "obs", [Hit(id="0", title="Neptune", text="The French bureau approved the name.",
                                          score=1.0)])
    assert support_gate([french]) is None and executor_problem(french) is not None
    stated = SearchedHop(hop, "obs", [Hit(id="0", title="Neptune", text="The bureau in France approved the name.",
                                          score=1.0)])
    assert executor_problem(stated) is None
