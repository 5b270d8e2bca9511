"""A candidate's states and the shape every ``pool.json`` must have before anything reads it."""

from __future__ import annotations

from typing import Any

UNLABELLED = "unlabelled"
PROPOSED = "proposed"
IN_REVIEW = "in review"
ACCEPTED = "accepted"
REJECTED = "rejected"
#: A candidate's states, in the order of the loop.
STATES = (UNLABELLED, PROPOSED, IN_REVIEW, ACCEPTED, REJECTED)

#: The keys and types every candidate entry must have (what the readers index).
_CANDIDATE_TYPES = {"id": str, "source": dict, "state": str, "version": int, "labels": list, "history": list}


def record_problem(record: Any) -> str | None:
    """Why a parsed ``pool.json`` cannot be used (a file is possibly hostile input), or ``None``."""
    if not isinstance(record.get("source"), dict) or not isinstance(record.get("candidates"), dict):
        return '"source" and "candidates" must be objects'
    for key, cand in record["candidates"].items():
        if not isinstance(cand, dict) or cand.get("id") != key:
            return f'candidate "{str(key)[:40]}" is not an entry of its own id'
        for field, kind in _CANDIDATE_TYPES.items():
            if not isinstance(cand.get(field), kind) or (kind is int and isinstance(cand.get(field), bool)):
                return f'candidate "{key[:40]}" has no valid "{field}"'
        if cand["state"] not in STATES or not all(isinstance(e, dict) for e in cand["labels"]):
            return f'candidate "{key[:40]}" has an unknown state or label entry'
    return None
