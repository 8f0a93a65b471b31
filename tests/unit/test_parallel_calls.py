"""Independent calls of one item run at once (``agentrag.threads.parallel_calls``): the helper
gives what the sequential loop gives (order, early stop, the first exception it would meet), and
the two synthesizers that use it — ReasonRAG's SPRE rollouts of one node, EviPath's sub-questions
of one action — write the same records as the loop they replace, really overlap their calls, and
leave an item unfinished on an outage exactly as before."""

from __future__ import annotations

import json
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from test_reasonrag_pipeline import QUESTION, config, policy, retriever

from agentrag.errors import ContextLimitError, EndpointError, LLMError
from agentrag.records import Message, Provenance
from agentrag.synth.common import derive_seed
from agentrag.synth.evipath import EviPathRunConfig, run_evipath
from agentrag.synth.evipath.answering import QA_SYSTEM
from agentrag.synth.evipath.config import EviPathConfig
from agentrag.synth.evipath.planning import explore
from agentrag.synth.evipath.schema import EviItem, Fact, PlanRecord
from agentrag.synth.reasonrag import run_reasonrag
from agentrag.testing import GoldDecompositionLLM, OutageLLM, ScriptedLLM
from agentrag.threads import parallel_calls
from evipath_fakes import ContentWordEmbedder

pytestmark = pytest.mark.timeout(120)

sequential = partial(parallel_calls, max_workers=1)  # the loop the helper replaces


class Peak:
    """Counts the calls in flight; ``peak`` is the most at once."""

    def __init__(self) -> None:
        self.lock, self.now, self.peak = threading.Lock(), 0, 0

    def __enter__(self) -> Peak:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        return self

    def __exit__(self, *exc: Any) -> None:
        with self.lock:
            self.now -= 1


# --- the helper -------------------------------------------------------------------------------


def test_results_in_input_order_and_calls_overlap():
    together = threading.Barrier(4, timeout=2)  # passes only if the 4 calls are in flight at once

    def call(i: int) -> int:
        together.wait()
        time.sleep(0.01 * (4 - i))  # the last call finishes first
        return i * i

    assert parallel_calls([partial(call, i) for i in range(4)]) == [0, 1, 4, 9]
    with pytest.raises(threading.BrokenBarrierError):  # the loop itself never gets past the barrier
        sequential([partial(call, i) for i in range(4)])


def test_threads_are_bounded():
    peak = Peak()

    def call(i: int) -> int:
        with peak:
            time.sleep(0.02)
        return i

    assert parallel_calls([partial(call, i) for i in range(10)], max_workers=3) == list(range(10))
    assert 1 <= peak.peak <= 3


def test_one_call_runs_in_the_calling_thread():
    assert parallel_calls([threading.current_thread]) == [threading.current_thread()]
    assert parallel_calls([]) == []


def test_the_earliest_exception_is_raised_unchanged_after_the_calls_before_it():
    first, later = LLMError("HTTP 500 (call 1)", is_retryable=True), EndpointError("HTTP 401 (call 2)")
    finished: list[int] = []

    def call(i: int) -> int:
        if i == 1:
            time.sleep(0.05)  # call 2 fails first in time; the loop would meet call 1's failure first
            raise first
        if i == 2:
            raise later
        time.sleep(0.02)
        finished.append(i)
        return i

    with pytest.raises(LLMError) as got:
        parallel_calls([partial(call, i) for i in range(3)])
    assert got.value is first and 0 in finished
    with pytest.raises(LLMError) as got:
        sequential([partial(call, i) for i in range(3)])
    assert got.value is first


def test_stop_drops_later_results_and_later_exceptions():
    def call(i: int) -> tuple[int, str | None]:
        if i == 2:
            raise LLMError("HTTP 500", is_retryable=True)  # after the stop: the loop never made this call
        return i, ("empty answer" if i == 1 else None)

    calls = [partial(call, i) for i in range(4)]
    flagged = parallel_calls(calls, stop=lambda r: r[1] is not None)
    assert flagged == sequential(calls, stop=lambda r: r[1] is not None) == [(0, None), (1, "empty answer")]


# --- ReasonRAG: the k SPRE rollouts of one node -------------------------------------------------


def _node_ids(depth: int = 6, children: int = 2) -> list[str]:
    ids, level = [], ["r"]
    for _ in range(depth):
        level = [f"{p}.{j}" for p in level for j in range(children)]
        ids += level
    return ids


def _rollout_seeds(cfg: Any, *, i: int | None = None, first_round: bool = False, node: str | None = None) -> set[int]:
    """The seeds SPRE draws (for rollout ``i``, only the first round of each rollout, only ``node``)."""
    k = cfg.value.rollouts
    return {derive_seed(cfg.seed, QUESTION.id, nid, "rollout", j, d)
            for nid in ([node] if node else _node_ids()) for j in ([i] if i is not None else range(k))
            for d in ([nid.count(".")] if first_round else range(12))}


def _reasonrag(tmp: Path, llm: Any, cfg: Any) -> tuple[dict[str, Any], dict[str, str]]:
    metrics = run_reasonrag(cfg, tmp, llm=llm, retriever=retriever(), questions=[QUESTION])
    files = {p.name: p.read_text() for p in sorted(tmp.glob("*.jsonl"))}
    return metrics, files


def _strip_times(text: str) -> list[Any]:
    def clean(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items() if k not in ("elapsed", "wall_s", "created", "time")}
        if isinstance(x, list):
            return [clean(v) for v in x]
        return x
    return [clean(json.loads(line)) for line in text.splitlines() if line.strip()]


def test_spre_rollouts_run_at_once_with_the_records_of_the_loop(tmp_path, monkeypatch):
    cfg = config(greedy_baseline=False, value=config().value.model_copy(update={"rollouts": 4}))
    first_rounds = _rollout_seeds(cfg, first_round=True)
    together = threading.Barrier(4, timeout=10)  # the 4 rollouts of a node must be in flight together
    peak = Peak()

    def model(seeds: list[int], barrier: bool):
        lock = threading.Lock()

        def reply(messages: list[Message], **kw: Any) -> str:
            with lock:
                seeds.append(int(kw.get("seed") or 0))
            with peak:
                if barrier and kw.get("seed") in first_rounds:
                    together.wait()
                return policy(messages, **kw)
        return ScriptedLLM(default=reply)

    par_seeds: list[int] = []
    m_par, par = _reasonrag(tmp_path / "par", model(par_seeds, barrier=True), cfg)
    assert peak.peak == 4 and m_par["unfinished"] == 0
    monkeypatch.setattr("agentrag.synth.reasonrag.values.parallel_calls", sequential)
    seq_seeds: list[int] = []
    m_seq, seq = _reasonrag(tmp_path / "seq", model(seq_seeds, barrier=False), cfg)
    assert sorted(par_seeds) == sorted(seq_seeds)  # the same calls with the same derived seeds
    assert set(par_seeds) & first_rounds
    assert set(par) == set(seq) and "trees.jsonl" in par
    for name in par:  # events, trees, pairs: estimates, their order and flags, usage sums
        assert _strip_times(par[name]) == _strip_times(seq[name]), name
    tree = json.loads(par["trees.jsonl"].splitlines()[0])
    valued = [n for n in tree["nodes"] if any("/rollout" in (e.get("origin") or "") for e in n.get("estimates") or [])]
    assert valued and all([e["origin"].rsplit("rollout", 1)[1] for e in n["estimates"]] == ["0", "1", "2", "3"]
                          for n in valued)
    assert all(n["value_usage"]["calls"] >= 4 for n in valued)
    assert m_par["pairs"] == m_seq["pairs"] > 0


def test_an_outage_in_one_rollout_leaves_the_question_unfinished_as_before(tmp_path, monkeypatch):
    cfg = config(greedy_baseline=False, value=config().value.model_copy(update={"rollouts": 4}))
    down = _rollout_seeds(cfg, i=2, node="r.1")  # rollout 2 of the root's second child

    def llm() -> OutageLLM:
        return OutageLLM(ScriptedLLM(default=policy), fails=lambda msgs, kw: kw.get("seed") in down)

    m_par, par = _reasonrag(tmp_path / "par", llm(), cfg)
    monkeypatch.setattr("agentrag.synth.reasonrag.values.parallel_calls", sequential)
    m_seq, seq = _reasonrag(tmp_path / "seq", llm(), cfg)
    assert m_par["unfinished"] == m_seq["unfinished"] == 1
    assert not par.get("trees.jsonl") and not seq.get("trees.jsonl")
    assert set(par) == set(seq)
    for name in par:  # the events before the outage are kept, the same ones
        assert _strip_times(par[name]) == _strip_times(seq[name]), name
    # a healthy rerun finishes the question
    m_again, _ = _reasonrag(tmp_path / "par", ScriptedLLM(default=policy), cfg)
    assert m_again["unfinished"] == 0


# --- EviPath: the sub-questions of one action --------------------------------------------------


def _item() -> EviItem:
    facts = [Fact(idx=0, title="Film A", text="Film A was directed by Ann Lee."),
             Fact(idx=1, title="Film B", text="Film B was directed by Bob Ray."),
             Fact(idx=2, title="Film C", text="Film C was directed by Cy Oh.")]
    return EviItem(id="q1", question="Which of Film A, Film B and Film C has the oldest director?", answer="Film A",
                   answers=["Film A"], facts=facts, gold=[0, 1, 2], hops=2)


ACTION = ('<think>Find the three directors.</think>\n<action>\nSearch("Who directed Film A?")\n'
          'Search("Who directed Film B?")\nSearch("Who directed Film C?")\n</action>')
FINAL = "<think>Ann Lee is the oldest.</think>\n<answer>Film A</answer>"
PLAN = PlanRecord(id="q1", plan=["Who directed Film A?", "Who directed Film B?", "Who directed Film C?"],
                  provenance=Provenance(stage="plans"))


def _executor(replies: dict[str, Any], barrier: threading.Barrier | None = None, peak: Peak | None = None):
    def answer(messages: list[Message], **kw: Any) -> Any:
        q = (messages[1].content or "").rsplit("Question: ", 1)[1]
        with peak or Peak():
            if barrier is not None:
                barrier.wait()
            return replies[q]
    return ScriptedLLM(default=answer)


def _dump(records: list[Any]) -> list[dict[str, Any]]:
    return [r.model_dump(exclude={"elapsed"}) for r in records]


@pytest.mark.parametrize("replies", [
    {"Who directed Film A?": "Film A was directed by Ann Lee.", "Who directed Film B?": "Film B was directed by Bob Ray.",
     "Who directed Film C?": "Film C was directed by Cy Oh."},
    # a data failure (over the context window) on the second ends the action; the third is dropped
    {"Who directed Film A?": "Film A was directed by Ann Lee.",
     "Who directed Film B?": ContextLimitError("9098 > 8192 tokens"),
     "Who directed Film C?": LLMError("HTTP 500", is_retryable=True)},  # never reached by the loop
], ids=["all_answered", "data_failure_stops"])
def test_sub_questions_of_one_action_run_at_once_with_the_records_of_the_loop(replies, monkeypatch):
    peak = Peak()
    par = explore(ScriptedLLM([ACTION, FINAL]), _executor(replies, threading.Barrier(3, timeout=10), peak),
                  _item(), PLAN, EviPathConfig())
    assert peak.peak == 3
    monkeypatch.setattr("agentrag.synth.evipath.planning.parallel_calls", sequential)
    seq = explore(ScriptedLLM([ACTION, FINAL]), _executor(replies), _item(), PLAN, EviPathConfig())
    assert _dump(par[0]) == _dump(seq[0]) and _dump(par[1]) == _dump(seq[1])
    its, subs = par
    if isinstance(replies["Who directed Film B?"], str):
        assert [s.id for s in subs] == ["q1-i1-q1", "q1-i1-q2", "q1-i1-q3"] and its[-1].answer == "Film A"
        assert its[0].observations == ["Film A was directed by Ann Lee.", "Film B was directed by Bob Ray.",
                                       "Film C was directed by Cy Oh."]
    else:
        assert [s.status for s in subs] == ["ok", "failed"] and its[-1].last
        assert its[-1].reason.startswith("sub_answer_failed: context_limit")


def test_an_outage_in_one_sub_answer_raises_as_before(monkeypatch):
    replies: dict[str, Any] = {"Who directed Film A?": "Film A was directed by Ann Lee.",
                               "Who directed Film B?": LLMError("HTTP 500 (B)", is_retryable=True),
                               "Who directed Film C?": EndpointError("HTTP 401 (C)")}
    with pytest.raises(LLMError, match=r"\(B\)"):  # the loop meets B's outage before C's 401
        explore(ScriptedLLM([ACTION, FINAL]), _executor(replies), _item(), PLAN, EviPathConfig())
    monkeypatch.setattr("agentrag.synth.evipath.planning.parallel_calls", sequential)
    with pytest.raises(LLMError, match=r"\(B\)"):
        explore(ScriptedLLM([ACTION, FINAL]), _executor(replies), _item(), PLAN, EviPathConfig())


def test_evipath_pipeline_outage_in_a_parallel_sub_answer_leaves_the_item_unfinished(tmp_path, data_dir, monkeypatch):
    lines = (data_dir / "musique" / "train_100.jsonl").read_text().splitlines()
    records = [json.loads(lines[0]), json.loads(lines[14])]  # item 14 asks two sub-questions in one action
    data = tmp_path / "musique.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    gold = GoldDecompositionLLM(records)
    second = "What is the located in the administrative territorial entity of McRae?"
    assert [len(r) for r in gold._batches(gold.items[1])] == [2, 1] and gold.items[1]["subs"][1][0] == second

    def fails(msgs: list[Message], kw: dict[str, Any]) -> bool:
        return msgs[0].content == QA_SYSTEM and (msgs[1].content or "").endswith(f"Question: {second}")

    def run(out: Path, llm: Any) -> tuple[dict[str, Any], dict[str, list[Any]]]:
        cfg = EviPathRunConfig(datasets=[str(data)], limit=2, concurrency=1)
        m = run_evipath(cfg, out, planner=llm, embedder=ContentWordEmbedder())
        files = {p.name: _strip_times(p.read_text()) for p in sorted(out.glob("*.jsonl"))}
        return m, files

    m_par, par = run(tmp_path / "par", OutageLLM(gold, fails=fails))
    monkeypatch.setattr("agentrag.synth.evipath.planning.parallel_calls", sequential)
    m_seq, seq = run(tmp_path / "seq", OutageLLM(gold, fails=fails))
    assert m_par["unfinished"] == m_seq["unfinished"] == 1
    assert par == seq  # the same records: item 0 finished, nothing of item 14's path written
    assert {r["item_id"] for r in par["iterations.jsonl"]} == {par["items.jsonl"][0]["id"]}
    assert not [r for r in par.get("sub_answers.jsonl", []) if r["item_id"] == par["items.jsonl"][1]["id"]]
    monkeypatch.undo()
    m_again, again = run(tmp_path / "par", gold)  # a healthy rerun finishes it
    assert m_again["unfinished"] == 0 and len({r["item_id"] for r in again["iterations.jsonl"]}) == 2


# --- the backend's request limit with many more threads than slots ----------------------------


def test_request_limit_with_many_more_threads_than_slots_loses_no_waiter():
    """Items in flight x parallel calls can far exceed the limit; a release wakes as many waiters
    as there are free slots (not all), and every waiter still gets its turn, also when the limit
    climbs back (one free slot more) or shrinks on overload."""
    from agentrag.llm.adaptive import AdaptiveLimit

    lim, peak = AdaptiveLimit(3, name="stub"), Peak()
    done: list[int] = []

    def request(i: int) -> None:
        with lim.slot() as slot, peak:
            time.sleep(0.002)
            if i < 24:
                slot.overload()  # the first windows overload: the limit halves; later ones add slots back
        done.append(i)

    threads = [threading.Thread(target=request, args=(i,)) for i in range(120)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(done) == list(range(120)) and lim.in_flight == 0
    assert peak.peak <= 3 and lim.lowest == 1 and lim.limit == 3 and lim.changes >= 3
