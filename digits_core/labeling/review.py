"""What a review page (or a script) needs of one candidate: its image, proposal and newest label; saving a label.

:func:`load_candidate` returns the arrays a reviewer sees, with the label version the edit starts from;
:func:`save_label` stores the corrected mask as the next version (the pool's optimistic check: a stale
``base_version`` raises :class:`~digits_core.labeling.pool.StaleLabelError` and nothing is stored).
:func:`import_label` stores a label file made elsewhere (``digits label accept``).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .masks import MaskError, read_mask
from .pool import Pool, PoolError
from .scoring import read_candidate


def load_candidate(pool: Pool, cid: str) -> dict[str, Any]:
    """One candidate for review.

    Returns:
        ``{"candidate": entry, "image": H×W×C array as stored, "proposal": H×W uint8 or None,
        "label": newest label H×W uint8 or None, "version": int, "class_labels": [...]}``.

    Raises:
        PoolError: No such candidate, or a pool whose images are not in a folder.
        DigitsError: The image cannot be read (named).
    """
    record = pool.record()
    cand = pool.candidate(cid)
    image = read_candidate(record["source"], cand)
    proposal = None
    if cand.get("proposal") and cand["proposal"].get("file"):
        proposal = read_mask(pool.file(cand["proposal"]["file"]))
    label_path = pool.label_file(cid)
    return {
        "candidate": cand,
        "image": image,
        "proposal": proposal,
        "label": read_mask(label_path) if label_path is not None else None,
        "version": int(cand["version"]),
        "class_labels": list(record.get("class_labels") or []),
    }


def save_label(pool: Pool, cid: str, mask: Any, *, user: str | None, base_version: int) -> dict[str, Any]:
    """Store ``mask`` (class indices at the source image's size) as the candidate's next label version.

    Raises:
        StaleLabelError: Someone saved a newer version since ``base_version`` (nothing stored).
        ClaimedError: Another reviewer holds the candidate.
        MaskError: The mask is not the image's size or not class indices.
    """
    record = pool.record()
    cand = pool.candidate(cid)
    mask = np.asarray(mask)
    image = read_candidate(record["source"], cand)
    if mask.shape != image.shape[:2]:
        raise MaskError(
            f"The label of candidate {cid} is {mask.shape[1]}×{mask.shape[0]} pixels; its image is "
            f"{image.shape[1]}×{image.shape[0]}. Draw it on the image's own size."
        )
    classes = len(record.get("class_labels") or []) or 256
    if mask.size and int(mask.max()) >= classes:
        raise MaskError(f"The label of candidate {cid} uses class {int(mask.max())}; the pool has {classes} classes.")
    return pool.store_label(cid, mask.astype(np.uint8), user=user, base_version=base_version)


def import_label(
    pool: Pool, cid: str, path: str | os.PathLike, *, user: str | None, base_version: int | None = None
) -> dict[str, Any]:
    """Store a label image file (grayscale PNG of class indices) as the candidate's next version.

    ``base_version`` defaults to the newest version now (a command-line import is not a stale editor).

    Raises:
        PoolError: The file cannot be read as a label image (named).
    """
    try:
        mask = read_mask(path)
    except (OSError, ValueError) as exc:
        raise PoolError(f"Cannot read the label image {path}: {exc}") from None
    version = int(pool.candidate(cid)["version"]) if base_version is None else int(base_version)
    return save_label(pool, cid, mask, user=user, base_version=version)
