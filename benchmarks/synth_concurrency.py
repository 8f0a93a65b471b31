"""Eval and each synthesizer against a remote-like endpoint: ``agentrag.testing.StubOpenAIServer``
answering every request after ``--latency`` s (0.2), with ``--faults`` (5%) of the requests drawn
from the stub's fault kinds (500, a 1 s stall, malformed / garbage / null-choice / bad-message
200 bodies), at ``--concurrency`` (64) items in flight. The replies are the scripted worlds of the
unit tests (tests/), served over HTTP, so items pass the gates.

The stub runs in a child process forked after the case's scripted world is built (it answers
with the same replies), so the measured process holds only the client side, as with a real server
elsewhere; ``--same-process`` serves it from a thread of this process instead (the old setup).

For each: backend requests (faults and their retries included), faults injected, items finished
and unfinished, wall time, ideal = requests x latency / concurrency, wall / ideal (goal <= 1.3;
a run also has sequential chains inside items and a tail, which ideal ignores), the client
process's CPU seconds, per stage its wall time / its own ideal (the requests the server got
while the stage ran; stages that overlap, ``SynthRun.flow``, are one row joined by ``+``), and
the share of the request slots busy in each tenth of the run (idle slots mid-run: items doing
something else than a request; a low last tenth: the tail).

The LLM backend runs with its default settings (retries, backoff from 0.5 s, timeout), as a
user's run does (``--backoff-initial`` to change the first backoff), and each case runs on the
executor its command builds (``--fixed-width``: exactly ``--concurrency`` workers, the old setup).

    PYTHONPATH=src AGENTRAG_SHARED=../shared python benchmarks/synth_concurrency.py \
        [--only backend,eval,ragshaper,reasonrag,evipath,tracer] [--scale 1.0] [--latency 0.2] [--concurrency 64]

The Tracer case searches ``benchmarks/_shared.py``'s ``IndexedRetriever`` (the test
FakeRetriever's hits, over an inverted index); ``--fake-kb`` searches the FakeRetriever itself,
whose per-search cost (every passage tokenized) grows with ``--scale``.

``--scale`` multiplies every case's item count (the default sizes take a few minutes in all on a
2-core machine; ``--scale 3`` about three times that, with the stage tails weighing a third as
much; see docs/scale.md "Remote endpoints").
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "tests"), str(Path(__file__).resolve().parents[1] / "tests" / "unit")]

from _shared import IndexedRetriever  # noqa: E402

from agentrag.exec import ThreadExecutor  # noqa: E402
from agentrag.llm import resolve_llm  # noqa: E402
from agentrag.records import Message, ToolCall  # noqa: E402
from agentrag.testing import FakeRetriever, StubOpenAIServer  # noqa: E402

DATA = Path(os.environ.get("AGENTRAG_SHARED", Path(__file__).resolve().parents[2] / "shared")) / "data"
#: the backend's settings: its defaults (retries, backoff from 0.5 s, timeout), as a user's run gets them;
#: ``--backoff-initial`` overrides the first backoff (earlier runs of this benchmark used 0.1 s)
LLM_SETTINGS: dict[str, Any] = {}


def to_message(m: dict[str, Any]) -> Message:
    calls = [ToolCall(id=tc.get("id") or "", name=tc["function"]["name"],
                      arguments=json.loads(tc["function"].get("arguments") or "{}")) for tc in m.get("tool_calls") or []]
    return Message(role=m["role"], content=m.get("content"), tool_calls=calls, tool_call_id=m.get("tool_call_id"),
                   name=m.get("name"))


def served(llm: Any, rewrite: Callable[[str], str] | None = None) -> Callable[[dict[str, Any]], Any]:
    """A StubOpenAIServer reply function answering as the in-process fake ``llm`` would."""
    def reply(body: dict[str, Any]) -> Any:
        msgs = [to_message(m) for m in body["messages"]]
        if rewrite is not None:
            msgs = [m.model_copy(update={"content": rewrite(m.content)}) if m.content else m for m in msgs]
        kw = {k: body[k] for k in ("tools", "response_format", "temperature", "seed", "max_tokens") if k in body}
        got = llm.chat(msgs, **kw)[0]
        if got.tool_calls:
            return {"content": got.text, "tool_calls": [
                {"id": tc.id or f"c{i}", "type": "function",
                 "function": {"name": tc.name, "arguments": json.dumps(tc.arguments)}}
                for i, tc in enumerate(got.tool_calls)]}
        return got.text or ""
    return reply


def case_backend(n: int, conc: int, out: Path) -> tuple[Any, dict[str, Any]]:
    """The floor: ``n`` bare chat calls from ``conc`` threads (no pipeline), the same stub and faults."""
    from concurrent.futures import ThreadPoolExecutor

    def run(llm: Any) -> dict[str, Any]:
        with ThreadPoolExecutor(conc) as pool:
            got = list(pool.map(lambda i: llm.chat([Message(role="user", content=f"hi {i}")])[0].text, range(n)))
        return {"items": n, "finished": sum(t == "ok" for t in got), "unfinished": n - len(got)}
    return "ok", {"run": run}


def case_eval(n: int, conc: int, out: Path) -> tuple[Any, dict[str, Any]]:
    from test_eval_outages import PASSAGES, plan_step_policy

    from agentrag.eval.run import run_eval
    from agentrag.testing import ScriptedLLM

    data = out.parent / "qa.jsonl"
    # every question its own text (" (case i)"): the run's response cache must not serve one question's
    # requests to another (identical questions made 1,000 items cost ~200 requests)
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": f"What is the capital of country {i % 8}? (case {i})",
                                        "golden_answers": [f"City {i % 8}"]}) + "\n" for i in range(n)))

    def run(llm: Any) -> dict[str, Any]:
        m = run_eval(out=out, dataset=str(data), agent="plan_step", concurrency=conc, llm=llm,
                     retriever=FakeRetriever(PASSAGES), executor=_executor(conc))
        return {"items": n, "finished": m["n"], "unfinished": m["unfinished"]}
    return served(ScriptedLLM(default=plan_step_policy, record=False)), {"run": run}


def case_ragshaper(n: int, conc: int, out: Path) -> tuple[Any, dict[str, Any]]:
    from ragshaper_stub import build_kb, world_reply

    from agentrag.kb import KnowledgeBase
    from agentrag.synth.ragshaper import RagShaperRunConfig, run_ragshaper
    from agentrag.testing import HashEmbedder

    kb = build_kb(out.parent / "kb")
    load = KnowledgeBase.load.__func__  # type: ignore[attr-defined]
    KnowledgeBase.load = classmethod(lambda cls, d, **kw: load(cls, d, embedder=HashEmbedder(32), **kw))  # type: ignore[method-assign]
    names = ["Ada Varn", "Ott Brem", "Lysa", "Orn bridge"]

    def run(llm: Any) -> dict[str, Any]:
        cfg = RagShaperRunConfig(kb=str(kb), concurrency=conc)
        cfg.curator.max_depth = 3
        m = run_ragshaper(cfg, out, llm=llm, seeds=[f"{names[i % 4]} {i}" for i in range(n)],
                          executor=_executor(conc))
        return {"items": n, "finished": m["funnel"][0]["out"], "unfinished": m["unfinished"]}
    return world_reply, {"run": run}


def case_reasonrag(n: int, conc: int, out: Path) -> tuple[Any, dict[str, Any]]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from reasonrag_stub import reply

    from agentrag.records import Passage, QAItem
    from agentrag.synth.reasonrag import ReasonRagRunConfig, run_reasonrag

    qs = [QAItem(id=f"q{i}", question=f"Who directed Film Alpha (case {i})?", golden_answers=["John Smith"])
          for i in range(n)]
    docs = FakeRetriever([Passage(id="p1", title="Film Alpha", text="Film Alpha director was John Smith."),
                          Passage(id="p2", title="Beta river", text="The Beta river length is 40 km.")])

    def run(llm: Any) -> dict[str, Any]:
        cfg = ReasonRagRunConfig.model_validate({"concurrency": conc, "mcts": {"top_k": 1, "iterations": 8}})
        m = run_reasonrag(cfg, out, llm=llm, retriever=docs, questions=qs, executor=_executor(conc))
        return {"items": n, "finished": n - m["unfinished"], "unfinished": m["unfinished"]}
    return reply, {"run": run}


def case_evipath(n: int, conc: int, out: Path) -> tuple[Any, dict[str, Any]]:
    from agentrag.synth.evipath import EviPathRunConfig, run_evipath
    from evipath_fakes import CleanGoldLLM, ContentWordEmbedder

    records = [json.loads(x) for x in (DATA / "musique" / "train_397.jsonl").read_text().splitlines()]
    # beyond the 397 items (--scale > 1): copies under new ids (the gold fake answers by question text)
    data = out.parent / "musique.jsonl"
    data.write_text("".join(json.dumps({**r, "id": r["id"] if i < len(records) else f"{r['id']}~{i // len(records)}"})
                            + "\n" for i, r in ((i, records[i % len(records)]) for i in range(n))))

    def run(llm: Any) -> dict[str, Any]:
        cfg = EviPathRunConfig(datasets=[str(data)], concurrency=conc, limit=n)
        m = run_evipath(cfg, out, planner=llm, embedder=ContentWordEmbedder(), executor=_executor(conc))
        return {"items": n, "finished": m["funnel"][0]["out"], "unfinished": m["unfinished"]}
    return served(CleanGoldLLM(records)), {"run": run}


COPY = re.compile(r" §\d+")
#: the Tracer case's KB: FakeRetriever's ranking, indexed (benchmarks/_shared.py; the fake itself
#: tokenizes every passage per search: 10.8 ms at 320 passages, 31.6 ms at 960, the benchmark's own
#: cost, not the pipeline's); ``--fake-kb`` for the unindexed fake
KB: dict[str, Any] = {"cls": IndexedRetriever}


#: ``--fixed-width``: every case runs a ThreadExecutor of exactly ``--concurrency`` workers (items in
#: flight = request slots, as before); default: the executor the command builds
EXEC: dict[str, bool] = {"fixed": False}


def _executor(conc: int) -> Any:
    return ThreadExecutor(conc) if EXEC["fixed"] else None


def kb(passages: list[Any]) -> Any:
    return KB["cls"](passages)


def case_tracer(n: int, conc: int, out: Path) -> tuple[Any, dict[str, Any]]:
    from tracer_support import PASSAGES, stub_reply

    from agentrag.synth.tracer import TracerRunConfig, run_tracer

    copies = max(1, n // len(PASSAGES))  # the scripted world, copied (titles "T §k"; the replies ignore the copy)
    passages = [p.model_copy(update={"id": f"{p.id}-{k}", "title": f"{p.title} §{k}"})
                for k in range(copies) for p in PASSAGES]

    def reply(body: dict[str, Any]) -> Any:
        for m in body["messages"]:
            if m.get("content"):
                m["content"] = COPY.sub("", m["content"])
        return stub_reply(body)

    def run(llm: Any) -> dict[str, Any]:
        cfg = TracerRunConfig(docs=len(passages), max_hops=4, concurrency=conc)
        cfg.sampling.min_chars = 0
        m = run_tracer(cfg, out, llm=llm, judge=llm, kb=kb(passages), passages=passages,
                       executor=_executor(conc))
        return {"items": len(passages), "finished": m["funnel"][0]["out"], "unfinished": m["unfinished"]}
    return reply, {"run": run}


#: case -> (builder, default items)
#: about 5 x the default concurrency of items each, so that an item's own chain of sequential calls
#: and the run's tail are small beside the ideal (fewer items than that cannot reach the ideal)
CASES: dict[str, tuple[Any, int]] = {"backend": (case_backend, 3000), "eval": (case_eval, 1000), "ragshaper": (case_ragshaper, 320),
                                     "reasonrag": (case_reasonrag, 320), "evipath": (case_evipath, 397),
                                     "tracer": (case_tracer, 320)}


def _serve(conn: Any, reply: Any, kw: dict[str, Any]) -> None:
    """The stub server's process: serve until told to stop; answer request counts on the way, and
    at the end the monotonic times at which answered requests finished their latency (the reply)."""
    logging.disable(logging.CRITICAL)
    done: list[float] = []

    def timed(body: dict[str, Any]) -> Any:
        done.append(time.monotonic())  # after the stub's latency sleep: the request ran [t - latency, t]
        return reply(body) if callable(reply) else reply  # the backend case's reply is a fixed text

    with StubOpenAIServer(reply=timed, **kw) as srv:
        conn.send(srv.base_url)
        while (msg := conn.recv()) != "stop":
            conn.send((srv.requests, len(srv.injected)) if msg == "count" else None)
        conn.send((srv.requests, len(srv.injected), done))


class ServerProcess:
    """``StubOpenAIServer`` in a child process forked after the case's scripted world is built (the
    child answers with the same ``reply``), so the measured process holds only the client side, as
    with a real server elsewhere. ``count()``: (requests, faults injected) so far."""

    def __init__(self, reply: Any, **kw: Any) -> None:
        import multiprocessing

        self.mp = multiprocessing.get_context("fork")
        self.reply, self.kw = reply, kw
        self.requests = self.faults = 0
        self.done: list[float] = []

    def __enter__(self) -> ServerProcess:
        self.conn, child = self.mp.Pipe()
        self.proc = self.mp.Process(target=_serve, args=(child, self.reply, self.kw), daemon=True)
        self.proc.start()
        self.base_url: str = self.conn.recv()
        return self

    def count(self) -> tuple[int, int]:
        self.conn.send("count")
        got: tuple[int, int] = self.conn.recv()
        return got

    def __exit__(self, *exc: object) -> None:
        self.conn.send("stop")
        self.requests, self.faults, self.done = self.conn.recv()
        self.proc.join(10)


class StageClock:
    """Wall time and server requests of each stage (``SynthRun.stage``, ``SynthRun.flow``), patched
    in for one run; a flow (stages that overlap) is one row named by its stages joined by ``+``."""

    def __init__(self, srv: Any) -> None:
        self.srv, self.rows, self.saved = srv, [], []  # type: ignore[var-annotated]

    def _wrap(self, owner: Any, attr: str, name_of: Callable[..., str]) -> None:
        fn = getattr(owner, attr, None)
        if fn is None:  # an older driver (no SynthRun.flow)
            return
        self.saved.append((owner, attr, fn))

        def timed(*a: Any, **kw: Any) -> Any:
            r0, t0 = self.srv.count()[0], time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                self.rows.append((name_of(*a, **kw), time.perf_counter() - t0, self.srv.count()[0] - r0))
        setattr(owner, attr, timed)

    def __enter__(self) -> StageClock:
        from agentrag.synth import driver

        self._wrap(driver.SynthRun, "stage", lambda self, name, *a, **kw: name)
        self._wrap(driver.SynthRun, "flow", lambda self, steps, *a, **kw: "+".join(steps))
        return self

    def __exit__(self, *exc: object) -> None:
        for owner, attr, fn in reversed(self.saved):
            setattr(owner, attr, fn)


def bench(name: str, n: int, args: argparse.Namespace) -> dict[str, Any]:
    build, _ = CASES[name]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        reply, parts = build(n, args.concurrency, out)
        kinds = args.fault_kinds.split(",") if args.fault_kinds else StubOpenAIServer.FAULT_KINDS
        kw = {"latency": args.latency, "fault_rate": args.faults, "stall_s": 1.0, "fault_kinds": kinds, "seed": 1}
        server: Any = StubOpenAIServer(reply=reply, **kw) if args.same_process else ServerProcess(reply, **kw)
        with server as srv:
            llm = resolve_llm(f"openai:stub@{srv.base_url}", **LLM_SETTINGS)
            clock = StageClock(srv if not args.same_process else _Counts(srv))
            cpu0 = time.process_time()
            t_start = time.monotonic()
            t0 = time.perf_counter()
            with clock:
                got = parts["run"](llm)
            wall = time.perf_counter() - t0
            cpu = time.process_time() - cpu0
        requests, faults = srv.requests, (srv.faults if not args.same_process else len(srv.injected))
    ideal = requests * args.latency / args.concurrency
    lim = getattr(llm, "limit", None)
    util = utilization(getattr(srv, "done", []), t_start, t_start + wall, args.latency, args.concurrency)
    stages = [f"{s} {w:.1f}/{r * args.latency / args.concurrency:.1f}" for s, w, r in clock.rows if r or w > 0.5]
    return {"case": name, **got, "requests": requests, "faults": faults, "wall_s": round(wall, 1),
            "ideal_s": round(ideal, 1), "wall/ideal": round(wall / ideal, 2) if ideal else None,
            "client_cpu_s": round(cpu, 1), "stages wall/ideal s": ", ".join(stages) or "-",
            "busy by tenth": util,
            "backend_limit": getattr(lim, "maximum", getattr(getattr(llm, "config", None), "concurrency", "?")),
            "lowest_limit": getattr(lim, "lowest", "-")}


def utilization(done: list[float], start: float, end: float, latency: float, slots: int) -> str:
    """Mean share of the ``slots`` request slots busy with an answered request in each tenth of the
    run (a request answered at t ran [t - latency, t]); low tenths in the middle: slots idle while
    items do other things (backoff, client CPU); low last tenths: the tail. "-" when not recorded."""
    if not done or end <= start:
        return "-"
    step = (end - start) / 10
    busy = [0.0] * 10
    for t in done:
        a, b = max(start, t - latency), min(end, t)
        for i in range(10):
            lo, hi = start + i * step, start + (i + 1) * step
            busy[i] += max(0.0, min(b, hi) - max(a, lo))
    return " ".join(f"{x / (step * slots):.2f}" for x in busy)


class _Counts:
    """``count()`` of an in-process stub (``--same-process``)."""

    def __init__(self, srv: StubOpenAIServer) -> None:
        self.srv = srv

    def count(self) -> tuple[int, int]:
        return self.srv.requests, len(self.srv.injected)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(CASES))
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--faults", type=float, default=0.05)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--fault-kinds", default="", help="comma-separated stub faults (default: the stub's FAULT_KINDS; "
                    "add 429 to see the adaptive limit back off)")
    ap.add_argument("--same-process", action="store_true",
                    help="serve the stub from a thread of this process (the old setup: its CPU competes with the client's)")
    ap.add_argument("--fake-kb", action="store_true",
                    help="the Tracer case searches the test FakeRetriever (every passage tokenized per search)")
    ap.add_argument("--fixed-width", action="store_true",
                    help="run every case on a ThreadExecutor of exactly --concurrency workers (items in flight = "
                         "request slots) instead of the executor the command builds")
    ap.add_argument("--backoff-initial", type=float, default=None,
                    help="the backend's first backoff wait (default: the backend's own, 0.5 s)")
    args = ap.parse_args()
    EXEC["fixed"] = args.fixed_width
    if args.backoff_initial is not None:
        LLM_SETTINGS["backoff_initial"] = args.backoff_initial
    if args.fake_kb:
        KB["cls"] = FakeRetriever
    logging.basicConfig(level=logging.ERROR)  # the failed attempts (5% of requests) would flood the table
    print(f"latency {args.latency} s, faults {args.faults:.0%} ({args.fault_kinds or 'stub defaults'}), concurrency {args.concurrency}, cpus {os.cpu_count()}, "
          f"load {os.getloadavg()[0]:.1f}")
    import agentrag

    print(f"stub server: {'in this process' if args.same_process else 'a separate (forked) process'}, "
          f"scale {args.scale}; backend settings {LLM_SETTINGS or 'the defaults'}; executor "
          f"{'fixed at --concurrency' if args.fixed_width else 'the command default'}; "
          f"agentrag from {Path(agentrag.__file__).parent}")
    cols = ["case", "items", "finished", "unfinished", "requests", "faults", "wall_s", "ideal_s", "wall/ideal",
            "client_cpu_s", "stages wall/ideal s", "busy by tenth", "backend_limit", "lowest_limit"]
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols), flush=True)
    for name in args.only.split(","):
        row = bench(name, max(1, round(CASES[name][1] * args.scale)), args)
        print("| " + " | ".join(str(row[c]) for c in cols) + " |", flush=True)
    print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
