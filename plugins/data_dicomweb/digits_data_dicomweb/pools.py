"""Active-learning pools on a PACS (issue 46): the unlabelled image instances a pool source names, and proposals.

The core reaches these through the ``dicomweb-segmentation`` plugin class
(:meth:`~.ingestion.DicomWebSegmentationIngestion.pool_candidates`, ``pool_image`` and
``pool_store_proposal``, plugin API 1.3), never by importing this package. A pool's ``source`` names the server
as a dataset form does (:func:`.review.pool_userdata`) and the filters: ``studies`` and ``series`` (UIDs; empty:
all), ``modality`` (e.g. ``MR``).

A study that holds a DICOM-SEG series made by DIGITS Core (its Series Description starts with
:data:`OUR_MARK`: predictions, proposals, reviewed labels) is left out: a QIDO-RS search does not say which
series a SEG references, so the mark is read per study. Series that are not images (SEG, SR, presentation
states, ...) are skipped and named; a series named in ``series`` that is not an image is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from digits_core import DatasetError

from .source import DicomWebError, DicomWebSource, StudyQuery, public_url

#: How the Series Description of a SEG made by DIGITS Core starts.
OUR_MARK = "DIGITS"
#: Modalities of series that hold no image to label.
NOT_IMAGES = frozenset({"SEG", "SR", "PR", "KO", "RTSTRUCT", "RTPLAN", "RTRECORD", "REG", "DOC", "FID", "PLAN"})
#: Series Number of a proposal SEG series.
PROPOSAL_SERIES_NUMBER = 9050
#: The most candidates one pool lists.
MAX_CANDIDATES = 1_000_000


def _uids(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    return tuple(str(v).strip() for v in (value or ()) if str(v).strip())


def list_candidates(source: DicomWebSource, pool_source: Mapping[str, Any]) -> dict[str, Any]:
    """The image instances of the studies and series ``pool_source`` names that DIGITS has not segmented yet.

    Returns:
        ``{"candidates": [{"study", "series", "sop"}, ...], "modality": str or None, "skipped": [reason, ...]}``.

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
    ours = {s.study for s in series_list if s.modality == "SEG" and s.series_description.startswith(OUR_MARK)}
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
            if not (series.modality == "SEG" and series.study in ours):
                skipped.append(f"{named}: not an image series")
            continue
        if modality and series.modality.upper() != modality:
            continue  # another modality of a study that also holds the wanted one
        if series.study in ours:
            skipped.append(f"{named}: study {series.study} has a DICOM-SEG of DIGITS Core already")
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
    return {"candidates": candidates, "modality": found, "skipped": skipped}


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


__all__ = ["MAX_CANDIDATES", "NOT_IMAGES", "OUR_MARK", "PROPOSAL_SERIES_NUMBER", "list_candidates", "store_proposal"]
