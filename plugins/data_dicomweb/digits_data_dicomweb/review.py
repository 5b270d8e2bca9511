"""Active-learning review on a PACS (issue 46): a pool candidate's image, a proposal or label SEG, a corrected label.

The core's review page reaches these through the ``dicomweb-segmentation`` plugin class
(:meth:`~.ingestion.DicomWebSegmentationIngestion.review_image`, ``review_label`` and ``review_store``,
which open the pool's server), never by importing this package. A DICOMweb pool's ``source`` holds the server as the dataset form names one
(``named_server``, or ``url``/``server_url`` with ``username``; ``cache_folder``): the password or token
of an operator's named server comes from its environment, never from the pool record. A candidate is one
image instance (``{"study", "series", "sop"}``); a proposal or a label version is a DICOM-SEG instance
(``{"study", "series", "sop"}``) referencing it.

A corrected label goes back as a new SEG series (``MANUAL``, series description
``"DIGITS label vN by USER"``) referencing the candidate's image, stored with STOW-RS; every version is a
series of its own, so nothing is overwritten.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from digits_core import DatasetError
from digits_core.limits import check_image_size

from .source import DicomWebError, DicomWebSource, InstanceRef, public_url

#: Series Number of the label SEG series the review page stores.
LABEL_SERIES_NUMBER = 9100


def pool_userdata(pool_source: Mapping[str, Any]) -> dict[str, Any]:
    """The dataset-form values (:func:`~.ingestion.open_source`) a pool's ``source`` names; never a secret."""
    keys = ("named_server", "server_url", "username", "cache_folder", "max_parallel")
    values = {k: pool_source[k] for k in keys if pool_source.get(k)}
    if not values.get("server_url") and pool_source.get("url"):
        values["server_url"] = pool_source["url"]
    return values


def _ref(where: Mapping[str, Any], what: str) -> InstanceRef:
    study, series, sop = (str(where.get(k) or "") for k in ("study", "series", "sop"))
    if not (study and series and sop):
        raise DatasetError(f"{what} names no DICOM instance (study, series and sop UIDs): {dict(where)}")
    return InstanceRef("", study, series, sop, "", 0, "")


def _retrieve(source: DicomWebSource, ref: InstanceRef, what: str):
    try:
        return source.retrieve(ref)
    except DicomWebError as exc:
        raise DatasetError(f"{what}: {exc}") from None


def candidate_image(source: DicomWebSource, cand_source: Mapping[str, Any]) -> np.ndarray:
    """The candidate's image (``H x W x C``, values as stored, rescale applied) from the PACS.

    Its Rows × Columns are checked against the image limit before the pixels are decoded.

    Raises:
        DatasetError: The server is unreachable, has no such instance, or it is not an image (named).
        InputTooLargeError: The header declares more pixels than the limit.
    """
    from digits_data_sunnybrook.dicom import DicomReadError, dataset_to_image

    ref = _ref(cand_source, "The candidate")
    dataset = _retrieve(source, ref, f"candidate image {ref.sop} on {public_url(source.url)}")
    check_image_size(int(dataset.get("Columns", 0) or 0), int(dataset.get("Rows", 0) or 0), f"instance {ref.sop}")
    try:
        return dataset_to_image(dataset, name=f"instance {ref.sop}")
    except DicomReadError as exc:
        raise DatasetError(f"Instance {ref.sop} on {public_url(source.url)} is not an image: {exc}") from None


def candidate_label(source: DicomWebSource, cand_source: Mapping[str, Any], seg: Mapping[str, Any]) -> np.ndarray:
    """The ``H x W`` uint8 label map a proposal or label SEG (``{"study", "series", "sop"}``) holds for the candidate.

    Raises:
        DatasetError: The SEG cannot be fetched or read, or has no frame for the candidate's image.
    """
    from .seg import SegmentationError, SegmentationLabels

    ref = _ref(seg, "The label")
    try:
        labels = SegmentationLabels(_retrieve(source, ref, f"DICOM-SEG {ref.sop}"), ref.sop)
        return labels.label_map(str(cand_source.get("sop") or ""))
    except SegmentationError as exc:
        raise DatasetError(str(exc)) from None


def store_label(
    source: DicomWebSource,
    cand_source: Mapping[str, Any],
    mask: np.ndarray,
    class_labels: Sequence[str],
    *,
    version: int,
    user: str | None,
) -> dict[str, str]:
    """Store a corrected label as a new DICOM-SEG series referencing the candidate's image (STOW-RS).

    Returns:
        ``{"study", "series", "sop"}`` of the stored SEG.

    Raises:
        DatasetError: The server refused it, or the mask does not fit the image (named).
    """
    return store_seg(
        source,
        cand_source,
        mask,
        class_labels,
        what="label",
        manual=True,
        series_number=LABEL_SERIES_NUMBER,
        series_description=f"DIGITS label v{int(version)} by {user or 'local'}",
    )


def store_seg(
    source: DicomWebSource,
    cand_source: Mapping[str, Any],
    mask: np.ndarray,
    class_labels: Sequence[str],
    *,
    what: str,
    manual: bool,
    series_number: int,
    series_description: str,
) -> dict[str, str]:
    """Store ``mask`` as a new DICOM-SEG series referencing the candidate's image (STOW-RS): a label or a proposal.

    Returns:
        ``{"study", "series", "sop"}`` of the stored SEG.

    Raises:
        DatasetError: The server refused it, or the mask does not fit the image (named, as the ``what``).
    """
    from .seg import SegmentationError, build_segmentations

    ref = _ref(cand_source, "The candidate")
    image = _retrieve(source, ref, f"candidate image {ref.sop}")
    mask = np.asarray(mask, np.uint8)
    if mask.shape != (int(image.Rows), int(image.Columns)):
        raise DatasetError(f"The {what} is {mask.shape}; instance {ref.sop} is {int(image.Rows)}x{int(image.Columns)}.")
    try:
        (seg,) = build_segmentations(
            [image],
            mask[None],
            list(class_labels),
            manual=manual,
            series_number=series_number,
            series_description=series_description,
        )
    except SegmentationError as exc:
        raise DatasetError(f"Candidate {ref.sop}: {exc}") from None
    try:
        source.store([seg])
    except DicomWebError as exc:
        raise DatasetError(f"The {what} SEG of {ref.sop} was not stored: {exc}") from None
    return {"study": str(seg.StudyInstanceUID), "series": str(seg.SeriesInstanceUID), "sop": str(seg.SOPInstanceUID)}


__all__ = ["LABEL_SERIES_NUMBER", "candidate_image", "candidate_label", "pool_userdata", "store_label", "store_seg"]
