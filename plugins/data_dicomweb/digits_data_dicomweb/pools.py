"""Active-learning pools on a PACS (issue 46): the unlabelled image instances a pool source names, and proposals.

The core reaches these through the ``dicomweb-segmentation`` plugin class
(:meth:`~.ingestion.DicomWebSegmentationIngestion.pool_candidates`, ``pool_image`` and
``pool_store_proposal``, plugin API 1.3), never by importing this package. A pool's ``source`` names the server
as a dataset form does (:func:`.review.pool_userdata`) and the filters: ``studies`` and ``series`` (UIDs; empty:
all), ``modality`` (e.g. ``MR``).

An image series that a DICOM-SEG made by DIGITS Core references (its Series Description starts with
:data:`OUR_MARK`: predictions, proposals, reviewed labels) is left out. A QIDO-RS search does not say which
series a SEG references, so the WADO-RS metadata of each such SEG series (headers, no pixel data) is read for
its ReferencedSeriesSequence, at most ``seg_reads`` (default :data:`MAX_SEG_READS`) series per listing; past
the cap, a study holding an unread SEG of DIGITS Core is left out whole, and the listing says so. Series that
are not images (SEG, SR, presentation states, ...) are skipped and named; a series named in ``series`` that is
not an image is refused.

:func:`label_rank` tells a proposal from an accepted label by its Series Description: the datasets read only
labels (a reviewer's newest version first), never a proposal or a model's prediction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from digits_core import DatasetError

from .source import DicomWebError, DicomWebSource, InstanceRef, StudyQuery, public_url

_REFERENCED_SERIES, _SERIES_UID = "00081115", "0020000E"

#: How the Series Description of a SEG made by DIGITS Core starts.
OUR_MARK = "DIGITS"
#: Modalities of series that hold no image to label.
NOT_IMAGES = frozenset({"SEG", "SR", "PR", "KO", "RTSTRUCT", "RTPLAN", "RTRECORD", "REG", "DOC", "FID", "PLAN"})
#: Series Number of a proposal SEG series.
PROPOSAL_SERIES_NUMBER = 9050
#: The most candidates one pool lists.
MAX_CANDIDATES = 1_000_000
#: The most SEG series of DIGITS Core whose WADO-RS metadata one listing reads (which series each references).
MAX_SEG_READS = 200
#: How the Series Description of a proposal SEG starts (a model's, not yet reviewed).
PROPOSAL_MARK = f"{OUR_MARK} proposal"
#: How the Series Description of a reviewed label SEG starts (``DIGITS label vN by USER``).
LABEL_MARK = f"{OUR_MARK} label v"


def label_rank(series_description: str) -> int | None:
    """Whether a SEG series is an accepted label, and how it ranks among the labels of one image.

    Returns:
        ``None`` for a SEG of DIGITS Core that is not a reviewed label (a proposal, a model's prediction);
        ``1 + N`` for a reviewed label ``DIGITS label vN by USER`` (the newest version ranks first); ``0`` for
        any other SEG (ground truth made elsewhere).
    """
    description = str(series_description or "")
    if description.startswith(LABEL_MARK):
        digits = description[len(LABEL_MARK) :].split(" ", 1)[0]
        return 1 + int(digits) if digits.isdigit() else None
    return None if description.startswith(OUR_MARK) else 0


def _uids(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    return tuple(str(v).strip() for v in (value or ()) if str(v).strip())


def list_candidates(source: DicomWebSource, pool_source: Mapping[str, Any], *, volumes: bool = False) -> dict[str, Any]:
    """The image instances (or with ``volumes``, series) ``pool_source`` names that DIGITS has not segmented yet.

    Returns:
        ``{"candidates": [{"study", "series", "sop"}, ...], "modality": str or None, "skipped": [reason, ...],
        "seg_reads": int, "dimensions": 2}``; with ``volumes``, one candidate ``{"study", "series"}`` per image
        series and ``"dimensions": 3``.

    Raises:
        DatasetError: The server is unreachable or refuses (named), a named series is missing or not an image.
    """
    where = public_url(source.url)
    studies, wanted = _uids(pool_source.get("studies")), set(_uids(pool_source.get("series")))
    modality = str(pool_source.get("modality") or "").strip().upper()
    try:
        series_list = source.find_series(StudyQuery(modality=modality, study_uids=studies))
    except DicomWebError as exc:
        raise DatasetError(f"The pool's DICOMweb server {where} cannot be listed: {exc}") from None
    missing = sorted(wanted - {s.series for s in series_list})
    if missing:
        raise DatasetError(f"The DICOMweb server {where} has no series {missing[0]} in the studies the pool names.")
    segmented, unread, reads, notes = segmented_series(
        source, series_list, int(pool_source.get("seg_reads") or MAX_SEG_READS)
    )
    candidates: list[dict[str, str]] = []
    skipped: list[str] = []
    modalities: set[str] = set()
    for series in series_list:
        if wanted and series.series not in wanted:
            continue
        named = f"series {series.series} ({series.modality or 'no modality'}, {series.series_description!r})"
        if series.modality.upper() in NOT_IMAGES:
            if wanted:
                raise DatasetError(f"{named} on {where} is not an image series; name a series of images.")
            if not (series.modality == "SEG" and series.series_description.startswith(OUR_MARK)):
                skipped.append(f"{named}: not an image series")
            continue
        if modality and series.modality.upper() != modality:
            continue  # another modality of a study that also holds the wanted one
        if series.series in segmented:
            skipped.append(f"{named}: a DICOM-SEG of DIGITS Core ({segmented[series.series]}) references it")
            continue
        if series.study in unread:
            skipped.append(f"{named}: study {series.study} has a DICOM-SEG of DIGITS Core not read (cap reached)")
            continue
        if volumes:  # the series is one candidate: its slices are listed when it is read
            candidates.append({"study": series.study, "series": series.series})
            modalities.add(series.modality.upper())
            continue
        try:
            instances = source.series_instances(series)
        except DicomWebError as exc:
            raise DatasetError(f"The pool's DICOMweb server {where}: {exc}") from None
        for ref in instances:
            candidates.append({"study": ref.study, "series": ref.series, "sop": ref.sop})
        modalities.add(series.modality.upper())
        if len(candidates) > MAX_CANDIDATES:
            raise DatasetError(f"The pool's filters name more than {MAX_CANDIDATES} images on {where}; narrow them.")
    found = modality or (next(iter(modalities)) if len(modalities) == 1 else None)
    return {
        "candidates": candidates,
        "modality": found,
        "skipped": notes + skipped,
        "seg_reads": reads,
        "dimensions": 3 if volumes else 2,
    }


def segmented_series(
    source: DicomWebSource, series_list: Sequence[InstanceRef], cap: int = MAX_SEG_READS
) -> tuple[dict[str, str], set[str], int, list[str]]:
    """Which image series the SEG series of DIGITS Core among ``series_list`` reference (WADO-RS metadata).

    Reads the metadata (headers only) of at most ``cap`` SEG series, one request each.

    Returns:
        ``(segmented, unread, reads, notes)``: ``{image series UID: the SEG series' description}``; the studies
        holding a SEG of DIGITS Core that the cap left unread (left out whole); the metadata reads made; a line
        for the listing when the cap was reached.

    Raises:
        DatasetError: The server refuses a metadata read (named).
    """
    ours = sorted(s for s in series_list if s.modality == "SEG" and s.series_description.startswith(OUR_MARK))
    segmented: dict[str, str] = {}
    unread: set[str] = set()
    reads = 0
    for seg in ours:
        if reads >= max(0, int(cap)):
            unread.add(seg.study)
            continue
        try:
            items = source._call(
                f"read the metadata of SEG series {seg.series}",
                source.client.retrieve_series_metadata,
                study_instance_uid=seg.study,
                series_instance_uid=seg.series,
            )
        except DicomWebError as exc:
            raise DatasetError(f"The pool's DICOMweb server {public_url(source.url)}: {exc}") from None
        reads += 1
        for item in items:
            for ref in (item.get(_REFERENCED_SERIES) or {}).get("Value") or []:
                for uid in (ref.get(_SERIES_UID) or {}).get("Value") or []:
                    segmented.setdefault(str(uid), seg.series_description)
    notes = []
    if unread:
        notes.append(
            f"{len(ours) - reads} SEG series of DIGITS Core not read (at most {cap} metadata reads per listing): "
            f"{len(unread)} stud{'y' if len(unread) == 1 else 'ies'} left out whole"
        )
    return segmented, unread, reads, notes


def store_proposal(
    source: DicomWebSource,
    cand_source: Mapping[str, Any],
    mask: np.ndarray,
    class_labels: Sequence[str],
    *,
    model_id: str,
) -> dict[str, str]:
    """Store a model's proposal as a new DICOM-SEG series (``AUTOMATIC``) referencing the candidate's image.

    Its Series Description is ``"DIGITS proposal by model MODEL_ID"``.

    Returns:
        ``{"study", "series", "sop"}`` of the stored SEG.

    Raises:
        DatasetError: The server refused it, or the mask does not fit the image (named).
    """
    from .review import store_seg

    return store_seg(
        source,
        cand_source,
        mask,
        class_labels,
        what="proposal",
        manual=False,
        series_number=PROPOSAL_SERIES_NUMBER,
        series_description=f"{OUR_MARK} proposal by model {model_id}",
    )


__all__ = [
    "LABEL_MARK",
    "MAX_CANDIDATES",
    "MAX_SEG_READS",
    "NOT_IMAGES",
    "OUR_MARK",
    "PROPOSAL_MARK",
    "PROPOSAL_SERIES_NUMBER",
    "label_rank",
    "list_candidates",
    "segmented_series",
    "store_proposal",
]
