"""LoCoMo (Maharana et al., ACL 2024) as memories and questions, and recall of its evidence.

A helper of benchmarks/retrieval.py, not a benchmark. The data is not in this
repository: it is read from a LoCoMo-format file (the development half lies in
`../shared/data/locomo/`; its README gives the format and licence).

Two ways to turn a conversation into memories, as the paper measures retrieval:
- dialog: every turn is a memory, "Speaker: text [shares <caption>]": who said
  it, and the description of the photo shared with it (a fifth of the turns
  share one; an agent that saw the photo would store what it showed). This is
  the construction the retrieval checks' targets were set on: it reproduces their
  dense baseline exactly (R@5 0.408, R@10 0.510 on the development half);
- observations: every extracted observation is a memory, keyed to its turn.
`TURN_FORMATS` also offers "dated": LoCoMo's own retrieval evaluation
(snap-research/locomo, task_eval/dpr_qa.py) puts the session's date before
each turn, `(date) Speaker said, "text"`, then the photo; its dates match
questions such as "What did Gina find on 1 February, 2023?".
A question's evidence names turns ("D1:3"); recall@k is the share of them found
among the top k memories (an observation counts for the turn it comes from).
"""

from __future__ import annotations

import json
import re
import statistics
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

KS = (1, 5, 10, 20, 50)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
HEADLINE = (1, 2, 3, 4)  # category 5 is unanswerable by design; reported apart
MODES = ("dialog", "observations")
TURN_FORMATS = ("speaker", "dated")
_TURN = re.compile(r"D\d+:\d+")
_SESSION = re.compile(r"session_\d+")
_IDS = uuid.UUID("0b8f6a3e-6c1d-4e2f-9a7b-5c4d3e2f1a0b")


@dataclass(frozen=True)
class Question:
    text: str
    evidence: frozenset[str]
    category: int


@dataclass
class Conversation:
    sample_id: str
    # mode -> [(memory id, turn id, content)]
    memories: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    questions: list[Question] = field(default_factory=list)

    def namespace(self, mode: str) -> str:
        return f"workspace:locomo-{self.sample_id}-{mode}"

    def turn_of(self, mode: str) -> dict[str, str]:
        return {memory_id: turn for memory_id, turn, _ in self.memories[mode]}


def _memory_id(sample_id: str, mode: str, index: int) -> str:
    return str(uuid.uuid5(_IDS, f"{sample_id}/{mode}/{index}"))


def turn_content(turn: dict[str, Any], date: str, turn_format: str = "speaker") -> str:
    """A dialog turn as the memory an agent would commit (module docstring)."""
    shared = f" [shares {turn['blip_caption']}]" if turn.get("blip_caption") else ""
    if turn_format == "dated":
        return f'({date}) {turn["speaker"]} said, "{turn["text"]}"{shared}'
    return f"{turn['speaker']}: {turn['text']}{shared}"


def load(path: Path, turn_format: str = "speaker") -> list[Conversation]:
    """Every conversation of a LoCoMo-format file, with both memory modes and its questions."""
    conversations = []
    for item in json.loads(path.read_text(encoding="utf-8")):
        conversation = Conversation(item["sample_id"])
        sessions = item["conversation"]
        turns = [
            (turn["dia_id"], turn_content(turn, sessions.get(f"{key}_date_time", ""), turn_format))
            for key, session in sessions.items()
            if _SESSION.fullmatch(key)
            for turn in session
        ]
        observations = [
            (str(turn), fact)
            for session in item["observation"].values()
            for facts in session.values()
            for fact, turn in facts
        ]
        for mode, rows in (("dialog", turns), ("observations", observations)):
            conversation.memories[mode] = [
                (_memory_id(conversation.sample_id, mode, i), turn, text)
                for i, (turn, text) in enumerate(rows)
            ]
        for qa in item["qa"]:
            # A few evidence strings are malformed ("D8:6; D9:17"): take every turn id.
            evidence = frozenset(_TURN.findall(" ".join(str(e) for e in qa["evidence"])))
            if evidence:
                conversation.questions.append(Question(qa["question"], evidence, qa["category"]))
        conversations.append(conversation)
    return conversations


def recall_at(found_turns: Sequence[str], evidence: frozenset[str]) -> list[float]:
    """Recall at each of KS: the share of the evidence turns among the first k found."""
    return [len(evidence & set(found_turns[:k])) / len(evidence) for k in KS]


@dataclass
class RecallTable:
    """Recall@k per category, accumulated question by question."""

    rows: dict[int, list[list[float]]] = field(default_factory=dict)

    def add(self, category: int, recalls: list[float]) -> None:
        self.rows.setdefault(category, []).append(recalls)

    def mean(self, categories: Sequence[int]) -> list[float]:
        picked = [row for category in categories for row in self.rows.get(category, [])]
        return [statistics.fmean(column) for column in zip(*picked, strict=True)]

    def count(self, categories: Sequence[int]) -> int:
        return sum(len(self.rows.get(category, [])) for category in categories)
