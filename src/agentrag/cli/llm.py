"""``agentrag llm``: serve the embedded model over HTTP, chat with a backend, measure throughput."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from agentrag.cli.checks import check_port_free, free_port
from agentrag.cli.common import (
    SetOpt,
    console,
    err_console,
    styled,
    user_errors,
)
from agentrag.config import parse_override
from agentrag.errors import UserError
from agentrag.paths import check_input_file

llm_app = typer.Typer(help="LLM backends: serve the embedded model as an OpenAI-compatible endpoint, "
                      "chat with any backend, benchmark throughput.", no_args_is_help=True)

LLMOpt = Annotated[str, typer.Option("--llm", "-m", help="Backend: 'embedded' (SmolLM2 on llama.cpp), "
                                     "'openai:MODEL', 'openai:MODEL@http://host:port/v1', or a YAML file.")]


def _overrides(sets: list[str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in sets or []:
        parts, value = parse_override(item)
        if len(parts) != 1:
            raise UserError(f"--set {item!r}: LLM settings are flat keys, e.g. --set n_ctx=8192")
        out[parts[0]] = value
    return out


def _read_json(path: Path, what: str) -> Any:
    check_input_file(path, f"--{what}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{exc.lineno}: {what} is not valid JSON: {exc.msg}") from None


@llm_app.command()
def serve(
    llm: LLMOpt = "embedded",
    host: Annotated[str, typer.Option(help="Interface to bind (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port; 0 picks a free one (printed with the URL).")] = 8000,
    sets: SetOpt = None,
) -> None:
    """Serve a backend (by default the embedded SmolLM2) at http://HOST:PORT/v1 (OpenAI chat API).

    Tool calls and json_schema response formats go through the same grammar-constrained path as
    in process. Point any OpenAI client at it: --llm openai:SmolLM2-135M-Instruct@http://127.0.0.1:8000/v1
    """
    with user_errors():
        from agentrag.llm.resolve import resolve_llm
        from agentrag.llm.server import serve as run_server

        if port == 0:  # a free port, chosen now so that the URL printed below is the one served
            port = free_port(host)
        check_port_free(host, port)
        backend = resolve_llm(llm, **_overrides(sets))
        err_console.print(f"serving {backend.model!r} on http://{host}:{port}/v1 (Ctrl-C to stop)")
        run_server(backend, host=host, port=port)


@llm_app.command()
def chat(
    prompt: Annotated[str, typer.Argument(help="The user message.")],
    llm: LLMOpt = "embedded",
    system: Annotated[str | None, typer.Option(help="System message. Default: none.")] = None,
    schema: Annotated[Path | None, typer.Option(help="JSON schema file: constrain the answer to it. Default: "
                                                "free text.")] = None,
    tools: Annotated[Path | None, typer.Option(help="JSON file with a list of OpenAI function tools. Default: "
                                               "none.")] = None,
    n: Annotated[int, typer.Option("--n", help="Number of samples.")] = 1,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature. Default: the backend's.")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Max new tokens. Default: the backend's.")] = None,
    seed: Annotated[int | None, typer.Option(help="Sampling seed. Default: the backend's.")] = None,
    cache: Annotated[Path | None, typer.Option(help="sqlite response cache file. Default: no cache.")] = None,
    sets: SetOpt = None,
) -> None:
    """Send one message to a backend and print its completions (text, tool calls, tokens, latency)."""
    with user_errors():
        from agentrag.llm.resolve import resolve_llm
        from agentrag.records import Message

        backend = resolve_llm(llm, cache=cache, **_overrides(sets))
        messages = ([Message(role="system", content=system)] if system else []) + [
            Message(role="user", content=prompt)]
        fmt = None
        if schema is not None:
            fmt = {"type": "json_schema", "json_schema": {"name": schema.stem, "schema": _read_json(schema, "schema")}}
        tool_list = _read_json(tools, "tools") if tools is not None else None
        if tool_list is not None and not isinstance(tool_list, list):
            raise UserError(f"{tools}: expected a JSON list of tools")
        out = backend.chat(messages, tools=tool_list, response_format=fmt, n=n, temperature=temperature,
                           max_tokens=max_tokens, seed=seed)
        for i, c in enumerate(out):
            head = f"[{i}] " if n > 1 else ""
            if c.text:
                console.print(f"{head}{c.text}", markup=False, highlight=False)
            for tc in c.tool_calls:
                console.print(f"{head}tool call: {tc.name}({json.dumps(tc.arguments)})", markup=False)
            err_console.print(styled((f"{c.finish_reason}; {c.usage.prompt_tokens}+{c.usage.completion_tokens} "
                                      f"tokens; {c.latency:.2f}s", "dim")))


@llm_app.command()
def bench(
    llm: LLMOpt = "embedded",
    max_tokens: Annotated[int, typer.Option(help="New tokens per request.")] = 64,
    rounds: Annotated[int, typer.Option(help="Times to repeat the prompt set.")] = 1,
    concurrency: Annotated[int, typer.Option(help="Requests in flight.")] = 1,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write the numbers to this JSON file. Default: "
                                             "print only.")] = None,
    sets: SetOpt = None,
) -> None:
    """Measure a backend's generation throughput (tokens/s) and latency on a fixed prompt set."""
    with user_errors():
        from agentrag.llm.bench import measure
        from agentrag.llm.resolve import resolve_llm

        backend = resolve_llm(llm, **_overrides(sets))
        measure(backend, max_tokens=4, rounds=1, prompts=["warm up"])
        result = measure(backend, max_tokens=max_tokens, rounds=rounds, concurrency=concurrency)
        for k, v in result.items():
            console.print(f"{k:<18} {v}")
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


def register(app: typer.Typer) -> None:
    app.add_typer(llm_app, name="llm")
