"""The agents' prompts, written for agentrag (they follow the protocols' requirements, not their text).

react: RAGShaper's rollout/evaluation requirements (figures 13-14): the retrieval tool is
mandatory, queries are self-contained descriptions, multi-hop questions are split, results are
checked, a missing answer is admitted, the short final answer goes inside answer tags with the
reasoning outside. plan_step: AgenticRAGTracer §4. reason_ground: ReasonRAG Algorithm 1 and its
Reasoning / Grounding roles. search_r1: the Search-R1 tag protocol.
"""

from __future__ import annotations

REACT_SYSTEM = """\
You answer questions with the help of a knowledge base. Search it with the `{tool}` tool, a \
semantic search that matches the meaning of a query rather than its exact words. Always search \
before answering, and use the documents to check your answer.

Searching:
- Make every query a complete, self-contained description of what you need: the search engine \
sees the query alone, never this conversation.
- Split a question that needs several facts into simple sub-questions and search them one at a \
time, using what earlier results told you.
- If the results are off-topic, rephrase with other words; if they are too broad, add details.
- Make sure a document really is about what the question asks before you rely on it.
- If you say you are going to search, call the tool in that same reply.

Answering:
- When you know the answer, write your brief reasoning, then the answer itself inside \
<answer> and </answer>, for example <answer>Marie Curie</answer>.
- The answer is a few words only: a name, place, date, number or yes/no. Keep the reasoning \
outside the tags.
- If several searches show the knowledge base lacks the answer, say that you could not find it, \
inside the tags."""

REACT_NO_TAGS = (
    "Your reply has neither a tool call nor an answer in <answer></answer> tags. Either call the "
    "`{tool}` tool, or give the final answer as <answer>...</answer>."
)
REACT_FORCE_ANSWER = (
    "You have no searches left. Using what you found, give your final answer now inside "
    "<answer></answer>."
)
EMPTY_REPLY = "Your reply was empty. Either search, or give the final answer."

PLAN_SYSTEM = """\
You are an expert at answering questions by planning searches over a knowledge base with the \
RAG_search tool (arguments: query, topk). You finish by calling Final_Answer(answer) with a \
short answer: a name, place, date, number or yes/no."""

PLAN_USER = """\
Question: {question}

Before searching, write a numbered plan: the searches you will run, in order, each one building on \
what the previous ones find. Do not search yet and do not answer yet; only write the plan."""

STEP_USER = (
    "Following your plan and the search results so far, first say what you have learned and what "
    "is still missing, then take exactly one more step: call RAG_search with one query and the "
    "number of documents (topk) you want, or, if you can answer, call Final_Answer with the short answer."
)

REASONING_SYSTEM = """\
You answer a question step by step, retrieving documents when you need more information.

At each turn:
1. If an earlier thought or query was wrong, say so and correct it.
2. Decide whether what you have gathered is enough to answer the question fully and correctly.
3. If it is not enough, break the question down and ask the next query, short and different \
from earlier ones, ending with: So the next query is <query>your query</query>
4. If it is enough, or no useful new query is left, end with: So the answer is \
<answer>short answer</answer>
Keep queries and answers short: nouns or brief phrases."""

REASONING_USER = "Question: {question}\n\n{history}"

FORCE_ANSWER = (
    "No more retrieval is possible. Give your best answer now, ending with: So the answer is "
    "<answer>short answer</answer>"
)

GROUNDING_SYSTEM = """\
You pick out evidence. Given a question, the latest search query and some retrieved documents, \
find the passages that answer the query.
- Identify the key terms of the query.
- Look for sentences in the documents that support an answer to it.
- If you find some, reply: Based on the query, the relevant evidence is <evidence>the sentences\
</evidence>
- If none of the documents helps, reply: <evidence>None</evidence>"""

GROUNDING_USER = "Question: {question}\n\nReasoning so far:\n{history}\n\nLatest query: {query}\n\nDocuments:\n{documents}"

#: search_r1's default user turn: the structure and format requirements of Search-R1's released
#: template in our own words (docs/agents.md, "search_r1's prompt"): one line of instructions in the
#: release's order (<think> on new information, <search> query </search> with results between
#: <information> and </information>, search as often as needed, the answer in <answer> </answer>
#: without explanation, with a spaced example), then " Question: {question}" and a newline
SEARCH_R1_USER = (
    "Answer the question given below. Each time you receive new information, first reason about it "
    "inside <think> and </think>. If that reasoning shows you are missing some knowledge, call the "
    "search engine by writing <search> query </search>, and its top results will be returned "
    "between <information> and </information>. You may search as often as you need. Once you need "
    "no further outside knowledge, give the answer directly inside <answer> and </answer>, with no "
    "detailed explanation, for example <answer> Marie Curie </answer>. Question: {question}\n"
)

SEARCH_R1_INVALID = (
    "My last action was not valid. A search needs its query between <search> and </search>, and a "
    "final answer needs to sit between <answer> and </answer>. I will try again."
)

__all__ = [
    "REACT_SYSTEM", "REACT_NO_TAGS", "REACT_FORCE_ANSWER", "EMPTY_REPLY", "PLAN_SYSTEM", "PLAN_USER", "STEP_USER",
    "REASONING_SYSTEM", "REASONING_USER", "FORCE_ANSWER", "GROUNDING_SYSTEM",
    "GROUNDING_USER", "SEARCH_R1_USER", "SEARCH_R1_INVALID", "read_prompt_template",
]


def read_prompt_template(path: str) -> str:
    """The prompt template in the text file ``path`` (one ``{question}`` field, filled by plain
    replacement, so other braces need no escaping). A ValueError names what is wrong."""
    from pathlib import Path

    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read the prompt template {path!r} ({exc}); give a UTF-8 text file") from None
    if "{question}" not in text:
        raise ValueError(f"the prompt template {path!r} has no {{question}} field; write {{question}} where the "
                         "question goes")
    return text
