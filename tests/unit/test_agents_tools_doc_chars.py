"""``doc_chars``: documents cut at a word boundary, the same for the agents' tool and the teacher."""

from __future__ import annotations

from agentrag.agents.tools import clip_text, format_documents
from agentrag.records import Hit


def test_clip_text_cuts_at_a_word_and_marks_it() -> None:
    assert clip_text("short text", 50) == "short text" and clip_text("anything", None) == "anything"
    assert clip_text("alpha beta gamma delta", 12) == "alpha beta ..."
    assert clip_text("x" * 30, 10) == "x" * 10 + " ..."


def test_format_documents_cuts_each_document() -> None:
    hits = [Hit(id="1", title="A", text="one two three four five six", score=1.0),
            Hit(id="2", title="B", text="short", score=0.5)]
    assert format_documents(hits, doc_chars=9) == "Doc 1 (Title: A) one two ...\nDoc 2 (Title: B) short"
    assert format_documents(hits) == "Doc 1 (Title: A) one two three four five six\nDoc 2 (Title: B) short"
