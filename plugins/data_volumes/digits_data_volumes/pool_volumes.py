"""Active-learning pools of volumes on a PACS (issue 46): one candidate per image series, labels as DICOM-SEG.

The core reaches these through the ``dicomweb-volumes`` plugin class (plugin API 1.3: ``pool_candidates``,
``pool_image``, ``pool_store_proposal``; the review page's ``review_image``, ``review_label``, ``review_store``),
never by importing this package; a pool's ``source`` names the server as the ``dicomweb-segmentation`` pools do
(:func:`digits_data_dicomweb.review.pool_userdata`).

A candidate is an image series ``{"study", "series"}``. Its volume is assembled by the ``dicom-series`` code
(:func:`~.geometry.read_series_files`: slices fetched into the DICOMweb cache, ordered by position on the normal,
missing slices and mixed orientations named) and handed out as a **slice stack** ``D×H×W``: slice ``k`` is the
series' ``k``-th slice along the normal, as stored (rows × columns). Proposals and labels use the same order, so
each slice is one frame of a multi-frame DICOM-SEG referencing that slice (highdicom): a proposal's series
description is ``DIGITS proposal by model M``, a reviewed label's ``DIGITS label vN by USER`` (a new SEG series per
version: nothing is overwritten). Memory holds one series.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from digits_core import DatasetError, DigitsError
from digits_data_dicomweb.source import DicomWebError, DicomWebSource, InstanceRef, public_url

#: Series Numbers of the proposal and label SEG series of a volume.
PROPOSAL_SERIES_NUMBER, LABEL_SERIES_NUMBER = 9060, 9110


def _server(pool_source: Mapping[str, Any]) -> DicomWebSource:
    from digits_data_dicomweb.ingestion import open_source
    from digits_data_dicomweb.review import pool_userdata

    try:
        return open_source(pool_userdata(pool_source))
    except DicomWebError as exc:
        raise DatasetError(str(exc)) from None


def _series(cand: Mapping[str, Any]) -> InstanceRef:
    study, series = str(cand.get("study") or ""), str(cand.get("series") or "")
    if not (study and series):
        raise DatasetError(f"The candidate names no DICOM series (study and series UIDs): {dict(cand)}")
    return InstanceRef("", study, series, "", "", 0, "")


def series_files(source: DicomWebSource, cand: Mapping[str, Any]) -> tuple[dict[str, str], str]:
    """The cached files of the candidate series' instances (fetched over WADO-RS) with their SOP Instance UIDs
    (``{path: sop}``), and how to name the series.

    Raises:
        DatasetError: The server is unreachable, or the series has no instance or one cannot be fetched (named).
    """
    ref = _series(cand)
    where = f"series {ref.series} on {public_url(source.url)}"
    try:
        instances = source.series_instances(ref)
        if not instances:
            raise DicomWebError(f"{where} has no instances")
        errors = source.fetch_all(instances)
        if errors:
            raise DicomWebError(next(iter(errors.values())))
    except DicomWebError as exc:
        raise DatasetError(f"{where}: {exc}") from None
    return {str(source.cache_path(r.sop)): r.sop for r in instances}, where


def slice_stack(source: DicomWebSource, cand: Mapping[str, Any]) -> tuple[np.ndarray, list]:
    """The candidate series as a ``D×H×W`` slice stack (see the module docstring), and its ordered slices.

    Raises:
        DatasetError: The series cannot be fetched, or it is not one volume (a SEG, an SR, slices missing,
            mixed orientations: named).
    """
    from .geometry import order_series, read_series_files, series_affine, to_source_array

    files, where = series_files(source, cand)
    try:
        volume, ordered = read_series_files(list(files), where, name=str(cand.get("series")))
    except DigitsError as exc:
        raise DatasetError(f"The candidate {where} is not an image volume: {exc}") from None
    _, spacing = order_series(ordered, where)
    ijk = to_source_array(volume.array[..., 0], series_affine(ordered, spacing))
    return np.ascontiguousarray(np.transpose(ijk, (2, 1, 0))), ordered


def candidate_volume(pool_source: Mapping[str, Any], cand: Mapping[str, Any]) -> np.ndarray:
    """The candidate's slice stack ``D×H×W`` (its values as stored, rescale applied)."""
    return slice_stack(_server(pool_source), cand)[0]


def store_volume_seg(
    pool_source: Mapping[str, Any],
    cand: Mapping[str, Any],
    mask: np.ndarray,
    class_labels: Sequence[str],
    *,
    what: str,
    manual: bool,
    series_number: int,
    series_description: str,
) -> dict[str, str]:
    """Store a ``D×H×W`` slice-stack mask as a new multi-frame DICOM-SEG series referencing the candidate series.

    Returns:
        ``{"study", "series", "sop"}`` of the stored SEG.

    Raises:
        DatasetError: The mask is not the series' shape, or the server refused the SEG (named, as the ``what``).
    """
    import pydicom

    from digits_data_dicomweb.seg import SegmentationError, build_segmentations

    from .geometry import order_series, read_slice_info

    source = _server(pool_source)
    files, where = series_files(source, cand)
    try:
        ordered, _ = order_series([read_slice_info(p) for p in files], where)
    except DigitsError as exc:
        raise DatasetError(f"The candidate {where} is not an image volume: {exc}") from None
    headers = [pydicom.dcmread(s.path, stop_before_pixels=True) for s in ordered]
    mask = np.asarray(mask, np.uint8)
    shape = (len(headers), int(headers[0].Rows), int(headers[0].Columns))
    if mask.shape != shape:
        raise DatasetError(f"The {what} is {mask.shape}; {where} is {shape} (slices × rows × columns).")
    try:
        segs = build_segmentations(
            headers,
            mask,
            list(class_labels),
            manual=manual,
            series_number=series_number,
            series_description=series_description,
        )
    except SegmentationError as exc:
        raise DatasetError(f"The {what} of {where}: {exc}") from None
    try:
        source.store(segs)
    except DicomWebError as exc:
        raise DatasetError(f"The {what} SEG of {where} was not stored: {exc}") from None
    seg = segs[0]
    return {"study": str(seg.StudyInstanceUID), "series": str(seg.SeriesInstanceUID), "sop": str(seg.SOPInstanceUID)}


def volume_label(pool_source: Mapping[str, Any], cand: Mapping[str, Any], seg: Mapping[str, Any]) -> np.ndarray:
    """The ``D×H×W`` slice-stack label a proposal or label SEG (``{"study", "series", "sop"}``) holds.

    Raises:
        DatasetError: The SEG cannot be fetched or read, or a slice of the series has no frame in it (named).
    """
    from digits_data_dicomweb.seg import SegmentationError, SegmentationLabels

    from .geometry import order_series, read_slice_info

    source = _server(pool_source)
    study, series, sop = (str(seg.get(k) or "") for k in ("study", "series", "sop"))
    if not (study and series and sop):
        raise DatasetError(f"The label names no DICOM instance (study, series and sop UIDs): {dict(seg)}")
    files, where = series_files(source, cand)
    try:
        labels = SegmentationLabels(source.retrieve(InstanceRef("", study, series, sop, "SEG", 0, "")), sop)
        ordered, _ = order_series([read_slice_info(p) for p in files], where)
        return np.stack([labels.label_map(files[s.path]) for s in ordered])
    except (DicomWebError, SegmentationError) as exc:
        raise DatasetError(f"{where}: {exc}") from None


__all__ = [
    "LABEL_SERIES_NUMBER",
    "PROPOSAL_SERIES_NUMBER",
    "candidate_volume",
    "series_files",
    "slice_stack",
    "store_volume_seg",
    "volume_label",
]
