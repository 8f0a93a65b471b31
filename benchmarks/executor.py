"""Executor overhead: thread vs Ray executor vs the ideal, over the stub LLM server of
agent_overhead.py (every answer takes a fixed latency; two LLM calls per question).

400 questions, the `react` agent, agentrag's OpenAI backend, at concurrency 16: the thread
executor runs 16 threads in this process; the Ray executor runs 2 worker processes x 8 threads
(a local Ray instance; the executor keeps its worker processes across runs, so as for the
threads a warm-up run starts them and builds their agent; that is not timed). Ideal = LLM calls x latency / concurrency. Targets: thread <= 1.2x, Ray <= 1.3x.
Both executors are measured in this process back to back, ``--repeat`` times (best run shown).

    .venv/bin/python benchmarks/executor.py [--questions 400] [--concurrency 16] [--latency 0.1]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from agent_overhead import LookupRetriever, StubProcess  # noqa: E402

from agentrag.eval.runner import evaluate, run_and_score  # noqa: E402
from agentrag.exec import ThreadExecutor, WorkerTask  # noqa: E402
from agentrag.records import Passage, QAItem  # noqa: E402


class AgentTask(WorkerTask):
    """Builds the OpenAI backend and the react agent once per worker process."""

    def __init__(self, base_url: str, concurrency: int) -> None:
        super().__init__()
        self.base_url, self.concurrency = base_url, concurrency

    def setup(self) -> Any:
        from agentrag.agents import build_agent
        from agentrag.llm import OpenAIBackend
        from agentrag.llm.config import LLMConfig

        cfg = LLMConfig(backend="openai", model="stub", base_url=self.base_url, api_key="x",
                        concurrency=self.concurrency, max_retries=0)
        passages = [Passage(id=f"p{i}", title=f"Item {i}", text=f"item {i} is described here") for i in range(400)]
        return build_agent("react", OpenAIBackend("stub", config=cfg), LookupRetriever(passages))

    def run(self, state: Any, item: QAItem) -> Any:
        return run_and_score(state, item)


def timed(task: AgentTask, items: list[QAItem], executor: Any, stub: StubProcess, run_dir: str) -> tuple[float, int]:
    before = stub.requests()
    t0 = time.perf_counter()
    results = evaluate(task, items, run_dir, executor=executor)
    wall = time.perf_counter() - t0
    assert len(results) == len(items), "items were lost"
    return wall, stub.requests() - before


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=400)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--ray-workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--no-ray", action="store_true", help="Measure the thread executor only.")
    args = ap.parse_args()
    items = [QAItem(id=f"q{i}", question=f"What is item {i}?", golden_answers=[f"item {i}"], hops=1)
             for i in range(args.questions)]
    ray_ex = None
    if not args.no_ray:
        from agentrag.exec.ray_executor import RayExecutor

        os.environ["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])
        threads = -(-args.concurrency // args.ray_workers)
        ray_ex = RayExecutor(workers=args.ray_workers, threads=threads)
    walls: dict[str, list[float]] = {}
    calls = 0
    with StubProcess(args.latency) as stub, tempfile.TemporaryDirectory() as tmp:
        task = AgentTask(stub.base_url, args.concurrency)
        threads_ex = ThreadExecutor(args.concurrency)
        evaluate(task, items[:args.concurrency], tmp + "/warm", executor=threads_ex)  # imports, connections
        if ray_ex is not None:
            ray_task = AgentTask(stub.base_url, -(-args.concurrency // args.ray_workers))
            # Ray startup and the worker processes' start are not timed (a warm-up run, as for threads)
            evaluate(ray_task, items[:args.concurrency], tmp + "/warm_ray", executor=ray_ex)
        for r in range(args.repeat):
            wall, calls = timed(task, items, threads_ex, stub, f"{tmp}/thread{r}")
            walls.setdefault("thread", []).append(wall)
            if ray_ex is not None:
                wall, _ = timed(ray_task, items, ray_ex, stub, f"{tmp}/ray{r}")
                walls.setdefault("ray", []).append(wall)
        if ray_ex is not None:
            ray_ex.close()
    ideal = calls * args.latency / args.concurrency
    print(f"questions={args.questions}  llm_calls={calls}  concurrency={args.concurrency}  "
          f"latency={args.latency * 1000:.0f}ms  ideal={ideal:.2f}s  CPUs={os.cpu_count()}")
    targets = {"thread": 1.2, "ray": 1.3}
    for name, ws in walls.items():
        best = min(ws)
        print(f"{name:<7} wall={best:6.2f}s  ratio={best / ideal:.3f}  (target <= {targets[name]})  "
              f"runs: {', '.join(f'{w / ideal:.3f}' for w in ws)}")


if __name__ == "__main__":
    main()
