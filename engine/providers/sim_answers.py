"""Deterministic answers of the provider simulator: the same prompt always gets the same answer."""

from __future__ import annotations

import hashlib
import re

_LABEL_QUESTION = re.compile(r"\bas\s+([\w-]+(?:\s*,\s*[\w-]+)*\s*(?:,\s*)?(?:or|and)\s+[\w-]+)\s*:(.*)", re.I | re.S)
_KEYWORDS: dict[str, tuple[str, ...]] = {
    "refund": ("refund", "money back", "charged twice", "reimburse"),
    "bug": ("bug", "error", "crash", "broken", "fails", "exception"),
    "question": ("how do", "how can", "what is", "?"),
}


def label_choices(prompt: str) -> tuple[list[str], str] | None:
    """(labels, text to label) when the prompt reads 'label this as a, b or c: text'."""
    match = _LABEL_QUESTION.search(prompt)
    if not match:
        return None
    labels = [part.strip().lower() for part in re.split(r",|\bor\b|\band\b", match.group(1)) if part.strip()]
    return labels, match.group(2)


def choose_label(labels: list[str], text: str) -> str:
    """The first label the text names or hints at by keyword; else the last label (the catch-all)."""
    lowered = text.lower()
    for label in labels:
        if re.search(rf"\b{re.escape(label)}\b", lowered):
            return label
    for label in labels:
        if any(word in lowered for word in _KEYWORDS.get(label, ())):
            return label
    return labels[-1]


def answer_for(prompt: str) -> str:
    """The simulator's answer: a label for labelling prompts, else a stable sentence keyed by the prompt's hash."""
    choices = label_choices(prompt)
    if choices is not None:
        return choose_label(*choices)
    digest = hashlib.sha256(prompt.encode()).hexdigest()[:8]
    return f"Simulated answer {digest}: acknowledged."
