"""Few-shot demonstrations for the EviPath synthesis prompts (§4.3: "with few-shot
demonstrations"). Written by us from one item of the shared HotpotQA *training* file
(train_distractor_499.jsonl, line 205: Kim Roberts / "The Strain" / FX), never from a dev set. Each
demonstration shows one call's input and the output we want, in the prompt's own format; they
are appended to the system prompts, so the request formats stay as they are."""

from __future__ import annotations

_ROLES = ('Kim Roberts (actress): Kim Roberts is a Canadian actress best known for her roles as Christine in '
          '"The Handmaids Tale" (2017), Marnie in "Schitt\'s Creek" (2015), Neeva in "The Strain" (2014) and '
          'Gloria in "Lucky Seven" (2013).')
_STRAIN = ("The Strain (TV series): The Strain is an American horror drama television series that premiered on FX "
           "on July 13, 2014.")
_QUESTION = "What network did the show on which Kim Roberts played Neeva air on?"

PLAN_DEMO = f"""

Example.
Input:
Question: {_QUESTION}
Answer: FX
Supporting evidence:
- {_ROLES}
- {_STRAIN}
Output:
1. In which show did Kim Roberts play Neeva?
2. On which network did #1 air?"""

STEP_DEMO = f"""

Example (step 2 of that question; the first search found the show).
Input:
Question: {_QUESTION}
Correct answer: FX
...
Plan:
1. In which show did Kim Roberts play Neeva?
2. On which network did #1 air?
Step 1 thought: Nothing is known yet; first find the show in which Kim Roberts played Neeva.
Search: In which show did Kim Roberts play Neeva?
Result: Kim Roberts played Neeva in the television series The Strain.
Write step 2.
Output:
<think>The show (#1) is The Strain. Sub-question 2 can be asked now, with the show's full name.</think>
<action>
Search("On which network did The Strain air?")
</action>"""

QA_DEMO = f"""

Example.
Evidence:
- {_ROLES}
- {_STRAIN}
Question: In which show did Kim Roberts play Neeva?
Output: Kim Roberts played Neeva in the television series The Strain."""

THINK_DEMO = """

Example.
Question: In which show did Kim Roberts play Neeva?
Supporting evidence: (a numbered list; [2] is the one below, the others are about other actresses and shows)
Answer: Kim Roberts played Neeva in the television series The Strain.
Golden evidence:
[2] """ + _ROLES + """
Output:
<think>The question asks for the show in which Kim Roberts played Neeva. Evidence [2] lists her roles and
says she played Neeva in "The Strain" (2014).</think>
<select>[2]</select>
<answer>Kim Roberts played Neeva in the television series The Strain.</answer>"""

__all__ = ["PLAN_DEMO", "STEP_DEMO", "QA_DEMO", "THINK_DEMO"]
