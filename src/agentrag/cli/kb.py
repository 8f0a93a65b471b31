"""``agentrag kb``: build, search, serve, inspect and evaluate knowledge bases."""

from __future__ import annotations

import contextlib
import json
import resource
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from agentrag.cli.checks import check_port_free, free_port
from agentrag.cli.common import (
    ConfigOpt,
    SetOpt,
    alias,
    console,
    err_console,
    is_tty,
    pick,
    styled,
    user_errors,
)
from agentrag.cli.progress import LogProgress, progress_output
from agentrag.errors import UserError
from agentrag.kb.retrieve_api import DEFAULT_MAX_WORK

kb_app = typer.Typer(help="Knowledge bases: build from corpus files, search, serve over HTTP "
                     "(Search-R1 API), show stats, evaluate retrieval recall.", no_args_is_help=True)

MethodOpt = Annotated[str | None, typer.Option("--method",
                      help="bm25 | dense | hybrid. Default: the KB's configured method.")]
#: ``-m`` is --llm in every command; the KB's old ``-m`` for --method keeps working, unlisted
MethodAlias = Annotated[str | None, alias("-m", of="--method")]
KBOpt = Annotated[str | None, typer.Option("--kb", help="KB directory (or http://host:port of a Search-R1-style "
                                           "server where the command takes one); required, given as --kb or, as "
                                           "in older releases, positionally.")]


def _kb_and_rest(kb: str | None, args: list[str], what: str) -> tuple[str, list[str]]:
    """``--kb KB ARGS...`` or the older positional ``KB ARGS...``."""
    if kb is None:
        if not args:
            raise UserError(f"no knowledge base: pass --kb DIR and the {what}")
        kb, args = args[0], args[1:]
    if not args:
        raise UserError(f"no {what} given")
    return kb, args


def _one_kb(kb: str | None, positional: Path | None) -> Path:
    if kb is not None and positional is not None and Path(kb) != positional:
        raise UserError(f"--kb {kb} and the positional KB {positional} disagree: give it once")
    if kb is None and positional is None:
        raise UserError("no knowledge base: pass --kb DIR")
    return Path(kb) if kb is not None else positional  # type: ignore[return-value]


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


@kb_app.command()
def build(
    inputs: Annotated[list[Path], typer.Argument(help="Corpus files: FlashRAG {id,contents} jsonl, {title,text} "
                                                 "json/jsonl, or raw HotpotQA/2Wiki/MuSiQue files (their context "
                                                 "paragraphs are pooled and deduplicated).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="KB directory to create.")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="auto | flashrag | title_text | hotpotqa | 2wiki | "
                                     "musique (auto detects per file).")] = "auto",
    name: Annotated[str | None, typer.Option(help="KB name recorded on every hit (default 'main').")] = None,
    backend: Annotated[str | None, typer.Option(help="Embedder backend: torch (fp32, default) or onnx-int8 "
                                               "(int8, faster, lower recall; see docs/kb.md).")] = None,
    embedder: Annotated[str | None, typer.Option(help="sentence-transformers model name or path "
                                                 "(default: the embedded all-MiniLM-L6-v2).")] = None,
    index_type: Annotated[str | None, typer.Option("--index-type", help="flat (default) | hnsw | ivfpq.")] = None,
    method: Annotated[str | None, typer.Option("--method", help="Default search method: hybrid, dense, or bm25 "
                                               "(builds no dense index: nothing is embedded). Default: hybrid.")]
    = None,
    method_alias: MethodAlias = None,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing KB directory.")] = False,
    config: ConfigOpt = None,
    set_: SetOpt = None,
) -> None:
    """Build a KB directory (BM25 + dense index) from corpus files.

    Example: agentrag kb build ../shared/data/hotpotqa/dev_distractor_200.jsonl --out runs/kb

    Passages of several files are deduplicated on (title, text). For raw multi-hop files the gold
    passage ids of every question are kept in gold.json (used by `kb eval-recall`). The build
    writes into DIR.partial and renames it when done; rerunning after an interruption resumes
    the ingestion and the embeddings; rerunning after it finished, with the same files and
    options, reuses the KB. Passages are streamed to disk, so memory stays bounded.
    """
    from agentrag.kb.build import build_kb

    with user_errors():
        t0 = time.perf_counter()
        method = pick(method, method_alias, "--method", "-m")
        with progress_output(unit="passages") as progress:
            kb = build_kb(inputs, out, config, fmt=fmt, name=name, method=method, embedder=embedder,
                          backend=backend, index_type=index_type, overrides=set_ or [], overwrite=overwrite,
                          progress=progress)
        total = time.perf_counter() - t0
        n_gold = len(kb.gold())
    if kb.reused:
        console.print(styled("reused ", (str(out), "bold"), f": {len(kb)} passages, {n_gold} questions with gold "
                             "ids (built from these files and options; --overwrite rebuilds it)"))
        return
    secs = kb.params["build_seconds"]
    console.print(styled("built ", (str(out), "bold"), f": {len(kb)} passages, {n_gold} questions with gold ids"))
    console.print("  " + ", ".join(f"{k} {v:.1f}s" for k, v in secs.items()) + f", total {total:.1f}s")
    e = kb.params["embedder"]
    dense = f"embedder {e['name']} ({e['backend']}), index {kb.params['index_type']}" if e else "no dense index"
    console.print(f"  peak memory {_peak_mb():.0f} MiB; {dense}")


@kb_app.command("import")
def import_cmd(
    corpus: Annotated[Path, typer.Option("--corpus", help="FlashRAG/Search-R1 {id, contents} jsonl (e.g. "
                                         "wiki-18.jsonl); line i must be row i of the indexes.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="KB directory to create.")],
    faiss_index: Annotated[Path | None, typer.Option("--faiss", help="Prebuilt FAISS inner-product index over "
                                                     "the corpus (e.g. e5_Flat.index). Default: none (BM25 only).")] = None,
    embedder: Annotated[str | None, typer.Option(help="The model that embedded the FAISS index (name or path, "
                                                 "e.g. intfloat/e5-base-v2); queries are embedded with it. "
                                                 "Default: the embedded all-MiniLM-L6-v2.")] = None,
    pooling: Annotated[str | None, typer.Option(help="mean | cls: how the index was pooled (FlashRAG: e5 mean, "
                                                "bge cls; default: the model's own).")] = None,
    query_prefix: Annotated[str | None, typer.Option(help="Prefix of queries (default by family: e5 'query: ', "
                                                     "bge its instruction).")] = None,
    backend: Annotated[str, typer.Option(help="Embedder backend for queries: torch or onnx-int8.")] = "torch",
    bm25: Annotated[Path | None, typer.Option("--bm25", help="Prebuilt bm25s index directory (default: index "
                                              "BM25 here).")] = None,
    name: Annotated[str | None, typer.Option(help="KB name recorded on every hit (default 'main').")] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing KB directory.")] = False,
) -> None:
    """Make a KB from a corpus and prebuilt indexes, without re-embedding anything.

    With --faiss the KB searches dense/hybrid with the given embedder's query vectors; without it
    the KB is BM25 only. Example: agentrag kb import --corpus wiki-18.jsonl --faiss e5_Flat.index
    --embedder intfloat/e5-base-v2 --pooling mean --query-prefix "query: " --out kb/wiki18
    """
    from agentrag.kb.config import KBConfig
    from agentrag.kb.importer import import_kb

    with user_errors():
        emb: dict[str, Any] = {"backend": backend}
        if embedder:
            emb["model"] = embedder
        if pooling:
            emb["pooling"] = pooling
        if query_prefix is not None:
            emb["query_prefix"] = query_prefix
        cfg = KBConfig.model_validate({"name": name or "main", "embedder": emb,
                                       "method": "hybrid" if faiss_index else "bm25"})
        t0 = time.perf_counter()
        kb = import_kb(corpus, out, cfg, faiss_index=faiss_index, bm25_dir=bm25, overwrite=overwrite)
    console.print(f"imported {out}: {len(kb)} passages in {time.perf_counter() - t0:.1f}s, "
                  f"index {kb.params['index_type'] if faiss_index else 'none (BM25 only)'}; "
                  f"peak memory {_peak_mb():.0f} MiB")


@kb_app.command()
def search(
    args: Annotated[list[str] | None, typer.Argument(metavar="[KB] QUERY...", help="One or more queries (after "
                                                     "the KB directory when --kb is not given).")] = None,
    kb_opt: KBOpt = None,
    top_k: Annotated[int | None, typer.Option("--top-k", "-k", help="Hits per query. Default: 5.")] = None,
    topk_alias: Annotated[int | None, alias("--topk", "--k", of="--top-k")] = None,
    method: MethodOpt = None,
    method_alias: MethodAlias = None,
    threshold: Annotated[float | None, typer.Option(help="Keep only hits with score > threshold (Eq. 4). "
                                                    "Default: keep all.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print hits as JSON lines.")] = False,
    set_: SetOpt = None,
) -> None:
    """Search a KB (or a retrieval server) and print the hits.

    Example: agentrag kb search --kb runs/kb "who wrote Hamlet" --top-k 3
    """
    from agentrag.kb.reference import is_kb_url, resolve_retriever

    with user_errors():
        kb, queries = _kb_and_rest(kb_opt, args or [], "queries")
        k = pick(top_k, topk_alias, "--top-k", "--topk") or 5
        method = pick(method, method_alias, "--method", "-m")
        if set_ and not is_kb_url(kb):
            from agentrag.kb.store import KnowledgeBase

            r: Any = KnowledgeBase.load(kb, overrides=set_)
        else:
            r = resolve_retriever(kb)
        if method is not None and is_kb_url(kb):
            raise UserError("--method does not apply to a retrieval server (the server chooses it: "
                            "`agentrag kb serve DIR --method ...`)")
        # into a log: a heartbeat while the first dense search loads the embedder (seconds to a minute)
        with contextlib.nullcontext() if is_tty() else LogProgress(unit="queries").running() as beat:
            if beat is not None:
                beat("search", 0, len(queries))
            if method is not None:
                hits = r.search(queries, k, threshold, method=method)  # type: ignore[call-arg]
            else:
                hits = r.search(queries, k, threshold)
            if beat is not None:
                beat("search", len(queries), len(queries))
    for q, per_q in zip(queries, hits, strict=True):
        if as_json:
            for h in per_q:
                # JSONL: one compact object per line, never wrapped (jq, pandas.read_json(lines=True))
                sys.stdout.write(json.dumps({"query": q, **h.model_dump(exclude={"schema_version"})},
                                            ensure_ascii=False) + "\n")
            continue
        console.print(styled((q, "bold")))
        for i, h in enumerate(per_q, 1):
            console.print(styled(f"  {i:>2}. {h.score:8.4f}  ", (h.title, "cyan"),
                                 f"  {h.text[:100]}  ({h.method}, {h.id})"), highlight=False)


@kb_app.command()
def serve(
    kb_pos: Annotated[Path | None, typer.Argument(metavar="[KB]", help="KB directory to serve (or --kb).")] = None,
    kb_opt: KBOpt = None,
    host: Annotated[str, typer.Option(help="Interface to bind (127.0.0.1 = this machine only).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port; 0 picks a free one (printed with the URL).")] = 8000,
    token: Annotated[str | None, typer.Option(envvar="AGENTRAG_KB_TOKEN",
                                              help="Require 'Authorization: Bearer TOKEN' on every route "
                                              "(/retrieve, /health, ...). Default: no token.")] = None,
    method: MethodOpt = None,
    method_alias: MethodAlias = None,
    top_k: Annotated[int | None, typer.Option("--top-k", "-k", help="Hits per query when a request gives no "
                                              "topk. Default: 3.")] = None,
    topk_alias: Annotated[int | None, alias("--topk", of="--top-k")] = None,
    navigation: Annotated[str, typer.Option(help="plain (every query reads KB) or constrained (RAGShaper Eq. 8: "
                                            "queries are steps of trajectories named by the request's "
                                            "trajectory_id / trajectory_ids; needs --distractors).")] = "plain",
    distractors: Annotated[Path | None, typer.Option(help="Distractor KB K~ for --navigation constrained (e.g. "
                                                     "the distractor_kb/ of a `synth ragshaper` run). Default: none.")] = None,
    p_e: Annotated[float, typer.Option("--p-e", help="Eq. 8 probability of mixing in K~ documents.")] = 0.5,
    k_distractor: Annotated[int, typer.Option(help="K~ documents per mixed step (Eq. 8: 2).")] = 2,
    seed: Annotated[int, typer.Option(help="Seed of the Eq. 8 draws.")] = 0,
    tau: Annotated[float | None, typer.Option("--tau", help="Eq. 4 threshold of constrained navigation: "
                                              "hits of K and K~ scoring at or below tau are dropped (the "
                                              "paper: 0.8 with its dense retriever; default: keep all).")] = None,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Server processes on the port, each "
                                         "loading the KB directory read-only (one server per node at RL "
                                         "scale: docs/scale.md). Plain navigation only.")] = 1,
    max_work: Annotated[int, typer.Option("--max-work", min=1, help="Most hits one request may ask "
                                          "(queries x topk); larger requests get a 413 saying how to split "
                                          "them.")] = DEFAULT_MAX_WORK,
    docs: Annotated[bool, typer.Option("--docs", help="Serve the OpenAPI docs (/docs, /openapi.json); off by "
                                       "default.")] = False,
    set_: SetOpt = None,
) -> None:
    """Serve a KB over HTTP with the Search-R1 API: POST /retrieve, GET /health.

    POST /retrieve takes a batch {"queries": [...], "topk": k, "return_scores": true} (answered
    {"result": [[...], ...]}) or one {"query": "...", "topk": k} (answered {"results": [...]});
    top_k is an alias of topk. See docs/kb.md.

    With --navigation constrained --distractors K~_DIR, RL rollouts meet distractors as
    RAGShaper's teacher does: add "trajectory_id" to each /retrieve request (one process keeps
    the per-trajectory state, so serve it from a single worker).
    """
    from agentrag.kb.server import serve as run_server
    from agentrag.kb.server import serve_workers
    from agentrag.kb.serving import NAVIGATION_METHOD, open_kb, serve_navigation

    with user_errors():
        kb = _one_kb(kb_opt, kb_pos)
        topk = pick(top_k, topk_alias, "--top-k", "--topk") or 3
        method = pick(method, method_alias, "--method", "-m")
        if navigation not in ("plain", "constrained"):
            raise UserError(f"--navigation {navigation!r}: use 'plain' or 'constrained'")
        if (navigation == "constrained") != (distractors is not None):
            raise UserError("--navigation constrained and --distractors K~_DIR go together")
        if tau is not None and navigation != "constrained":
            raise UserError("--tau is the threshold of --navigation constrained (RAGShaper Eq. 4); plain "
                            "navigation serves every hit")
        if workers > 1 and navigation == "constrained":
            raise UserError(f"--workers {workers} with --navigation constrained: the per-trajectory state "
                            "lives in one process; serve constrained navigation with --workers 1")
        if port == 0:  # a free port, chosen now so that the URL printed below is the one served
            port = free_port(host)
        check_port_free(host, port)
        # one search now: a method the KB cannot serve (dense on a BM25-only KB) fails here, not per request
        probe = method or (NAVIGATION_METHOD if distractors is not None else None)
        store = open_kb(kb, method=probe, overrides=set_ or [])
        if workers > 1:
            err_console.print(f"serving {kb} ({len(store)} passages) on http://{host}:{port} "
                              f"with {workers} worker processes")
            del store
            serve_workers(str(kb), workers, host=host, port=port, token=token, method=method, default_topk=topk,
                          overrides=set_, max_work=max_work, docs=docs)
            return
        if distractors is not None:
            tilde = open_kb(distractors, method=probe)
            err_console.print(f"constrained navigation (Eq. 8, p_e={p_e}, tau={tau}) with K~ {distractors} "
                              f"({len(tilde)} passages)")
            err_console.print(f"serving {kb} ({len(store)} passages) on http://{host}:{port}")
            serve_navigation(store, tilde, host=host, port=port, token=token, method=method, default_topk=topk,
                             p_e=p_e, k_distractor=k_distractor, seed=seed, max_work=max_work, docs=docs,
                             threshold=tau)
            return
        err_console.print(f"serving {kb} ({len(store)} passages) on http://{host}:{port}")
        run_server(store, host=host, port=port, token=token, method=method, default_topk=topk,
                   max_work=max_work, docs=docs)


@kb_app.command()
def stats(kb_pos: Annotated[Path | None, typer.Argument(metavar="[KB]", help="KB directory (or --kb).")] = None,
          kb_opt: KBOpt = None) -> None:
    """Show a KB's passages count, embedder, index type, versions and build timings."""
    from agentrag.kb.store import KnowledgeBase

    with user_errors():
        kb = _one_kb(kb_opt, kb_pos)
        store = KnowledgeBase.load(kb)
    p = store.params
    console.print(styled((str(kb), "bold"), f"  name={store.name}  passages={len(store)}  method={store.config.method}"))
    e = p["embedder"]
    console.print(f"  embedder {e['name']} ({e['backend']}, dim {e['dim']}), index {p['index_type']}" if e
                  else "  BM25 only (no dense index)")
    console.print(f"  questions with gold ids: {len(store.gold())}")
    console.print(f"  build seconds: {p.get('build_seconds', {})}")
    console.print(f"  versions: {p.get('versions', {})}", highlight=False)


@kb_app.command("eval-recall")
def eval_recall_cmd(
    args: Annotated[list[str] | None, typer.Argument(metavar="[KB] FILE...", help="Raw HotpotQA / 2Wiki / "
                                                     "MuSiQue files (after the KB directory when --kb is not "
                                                     "given).")] = None,
    kb_opt: KBOpt = None,
    ks: Annotated[str, typer.Option("--ks", help="Comma-separated cut-offs.")] = "2,5,10,20",
    methods: Annotated[str, typer.Option(help="Comma-separated methods.")] = "bm25,dense,hybrid",
    limit: Annotated[int | None, typer.Option("--limit", "-n", help="Evaluate only the first N questions of each "
                                              "file. Default: all.")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Also write the table as JSON here. Default: "
                                             "print only.")] = None,
    set_: SetOpt = None,
) -> None:
    """Retrieval recall with each question as the query: all@k (every gold passage in the top k)
    and passage recall@k (fraction of gold passages in the top k), per method."""
    from agentrag.kb.recall import eval_recall
    from agentrag.kb.store import KnowledgeBase

    with user_errors():
        kb_ref, names = _kb_and_rest(kb_opt, args or [], "dataset files")
        kb, files = Path(kb_ref), [Path(f) for f in names]
        if out is not None and out.is_dir():
            raise UserError(f"--out {out}: is a directory; expected a file name for the JSON table")
        store = KnowledgeBase.load(kb, overrides=set_ or [])
        cut = tuple(int(x) for x in ks.split(",") if x.strip())
        meths = tuple(m.strip() for m in methods.split(",") if m.strip())
        tables = [eval_recall(store, f, methods=meths, ks=cut, limit=limit) for f in files]
    for t in tables:
        console.print(styled((str(t["file"]), "bold"), f"  questions={t['questions']}  gold passages missing "
                             f"from KB={t['missing_gold']}"))
        console.print("| method | " + " | ".join(f"all@{k}" for k in cut) + " | "
                      + " | ".join(f"psg@{k}" for k in cut) + " |", highlight=False)
        console.print("|---" * (1 + 2 * len(cut)) + "|")
        for m, per_k in t["methods"].items():
            console.print(f"| {m} | " + " | ".join(f"{per_k[k]['all']:.3f}" for k in cut) + " | "
                          + " | ".join(f"{per_k[k]['passage']:.3f}" for k in cut) + " |", highlight=False)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(tables, indent=2))


def register(app: typer.Typer) -> None:
    app.add_typer(kb_app, name="kb")
