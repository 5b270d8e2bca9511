"""Volumes from a PACS over DICOMweb: the ``dicomweb-volumes`` data plugin, and DICOMweb series at inference.

``dicomweb-volumes`` is the DICOMweb plugin's volume mode: **one case per
image series**. Itemizing (parent process, once) finds the studies with
QIDO-RS (the ``dicomweb-segmentation`` form's filters), reads every DICOM-SEG
object of those studies that is a label (not a DIGITS proposal or prediction;
a reviewer's newest label version first), and makes each image series a SEG references a
case, labelled by that SEG; a series without one is skipped and listed in
``userdata["skipped_series"]``. Every slice and SEG is fetched with WADO-RS
into the DICOMweb cache (:class:`digits_data_dicomweb.DicomWebSource`: bounded
parallel requests, resumable, outbound guard on typed URLs). Encoding
(workers) reads the cached files with the ``dicom-series`` code
(:func:`~.geometry.read_series_files`: slices ordered by
``ImagePositionPatient`` on the normal, missing slices and mixed
orientations named as errors; :func:`~.geometry.seg_label_volume`), so a
series from the PACS gives the record a ``dicom-series`` folder of the same
files gives. Cases are named by patient (``PATIENT`` or ``PATIENT-N`` for a
patient's N-th series) and split by patient.

Every volume plugin also takes a DICOMweb series at inference
(:class:`VolumeInferenceForm`: ``--dicomweb-series UID``, the server of a
``dicomweb-volumes`` dataset or ``--dicomweb-url``); with ``store`` the
multi-frame DICOM-SEG of the result goes back to that server (STOW-RS).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from digits_core import DatasetError, DigitsError
from digits_data_dicomweb.forms import DicomWebDatasetForm, split_list
from digits_data_dicomweb.source import DicomWebError, InstanceRef, StudyQuery, public_url

from .forms import VolumePreprocessingForm
from .geometry import read_series_files, seg_label_volume, series_spacing
from .ingestion import VolumeIngestion
from .series_server import SERIES_PREFIX, VolumeInferenceForm, _source, fetch_inference_series, open_server, store_seg

logger = logging.getLogger("digits_data_volumes")


class SeriesCase(NamedTuple):
    """One case on the server: an image series and the SEG that labels it (picklable; ``str()`` names it).

    Attributes:
        name: The case name (the patient, ``PATIENT-N`` for a patient's further series).
        series: The series (``sop`` empty).
        instances: Its slices.
        seg: The DICOM-SEG instance labelling it.
        error: Why it cannot be read (a failed fetch), or ``""``.
    """

    name: str
    series: InstanceRef
    instances: tuple
    seg: InstanceRef
    error: str = ""

    def __str__(self) -> str:
        return f"series {self.series.series} (case {self.name})"


class DicomWebVolumesForm(VolumePreprocessingForm, DicomWebDatasetForm):
    """``dicomweb-volumes``: the server and study filters of ``dicomweb-segmentation``, the volume preprocessing."""

    channel_conversion = None  # volumes keep their one channel


def _query(userdata: dict) -> StudyQuery:
    text = {
        k: str(userdata.get(k) or "").strip()
        for k in ("modality", "study_description", "series_description", "date_from", "date_to")
    }
    return StudyQuery(
        **text, patient_ids=split_list(userdata.get("patient_ids")), study_uids=split_list(userdata.get("study_uids"))
    )


def plan_series_cases(source, query: StudyQuery) -> tuple[list[SeriesCase], dict]:
    """The labelled series of the studies ``query`` finds, fetched into the cache; and userdata to save.

    Raises:
        DatasetError: Nothing matches, or no series has a SEG.
    """
    from digits_data_dicomweb.ingestion import accepted_labels
    from digits_data_dicomweb.seg import SegmentationLabels

    series_list = source.find_series(query)
    if not series_list:
        raise DatasetError(f"No study on {public_url(source.url)} matches the query; widen the filters.")
    seg_refs, left_out = accepted_labels(source.find_instances(query, modality="SEG"))  # no proposal; newest first
    failures = source.fetch_all(seg_refs)
    labelled: dict[str, InstanceRef] = {}
    skipped, class_labels = list(left_out), None
    for ref in seg_refs:
        try:
            if ref.sop in failures:
                raise DicomWebError(failures[ref.sop])
            seg = SegmentationLabels(source.retrieve(ref), name=str(ref))
        except DigitsError as exc:
            skipped.append(str(exc))
            continue
        if class_labels is not None and seg.class_labels != class_labels:
            skipped.append(f"{ref}: segments {seg.class_labels[1:]} differ from {class_labels[1:]}")
            continue
        class_labels = seg.class_labels
        for _study, series_uid, _sop in seg.source_images:
            labelled.setdefault(series_uid, ref)
    cases, per_patient = [], defaultdict(int)
    for series in (s for s in series_list if s.modality != "SEG"):
        if series.series not in labelled:
            skipped.append(f"series {series.series} (patient {series.patient}) has no DICOM-SEG")
            continue
        instances = tuple(source.series_instances(series))
        errors = source.fetch_all(instances)
        per_patient[series.patient] += 1
        count = per_patient[series.patient]
        name = series.patient if count == 1 else f"{series.patient}-{count}"
        cases.append(SeriesCase(name, series, instances, labelled[series.series], next(iter(errors.values()), "")))
    if not cases:
        detail = "; ".join(skipped[:3]) if skipped else "no DICOM-SEG objects"
        raise DatasetError(f"No labelled series on {public_url(source.url)}: {detail}")
    for message in skipped:
        logger.warning("dicomweb-volumes: skipped %s", message)
    return cases, {
        "class_labels": class_labels,
        "skipped_series": skipped,
        "server": public_url(source.url),
        "modality": sorted({c.series.modality for c in cases})[0]
        if len({c.series.modality for c in cases}) == 1
        else "",
    }


def _case_files(source, case: SeriesCase) -> list:
    if case.error:
        raise DicomWebError(case.error)
    return [source.fetch(ref) for ref in case.instances]


class DicomWebVolumesIngestion(VolumeIngestion):
    """Volume datasets from a DICOMweb server: one case per image series, labelled by a DICOM-SEG on it."""

    plugin_id = "dicomweb-volumes"
    title = "DICOMweb (PACS) volumes (one case per series)"

    dataset_form = DicomWebVolumesForm

    def source(self):
        """The server this dataset reads (:func:`digits_data_dicomweb.ingestion.open_source`)."""
        source = getattr(self, "_source", None)
        if source is None:
            source = self._source = _source(self.userdata)
        return source

    def list_cases(self) -> tuple[list, dict]:
        try:
            return plan_series_cases(self.source(), _query(self.userdata))
        except DicomWebError as exc:
            raise DatasetError(str(exc)) from None

    def case_spacing(self, case: Any) -> tuple:
        if not isinstance(case, SeriesCase):
            return super().case_spacing(case)
        try:
            return series_spacing(str(case.series.series), _case_files(self.source(), case))
        except DicomWebError as exc:
            raise DatasetError(str(exc)) from None

    # -- active-learning pools of volumes (issue 46, plugin API 1.3): the core calls these on the class ----------

    @staticmethod
    def pool_candidates(pool_source: Mapping[str, Any]) -> dict[str, Any]:
        """The image series a pool source names that DIGITS has not segmented (one volume each, ``dimensions: 3``)."""
        from digits_data_dicomweb.pools import list_candidates

        from .pool_volumes import _server

        return list_candidates(_server(pool_source), pool_source, volumes=True)

    @staticmethod
    def pool_image(pool_source: Mapping[str, Any], candidate: Mapping[str, Any]) -> np.ndarray:
        """The candidate series as a ``D×H×W`` slice stack: :func:`.pool_volumes.candidate_volume`."""
        from .pool_volumes import candidate_volume

        return candidate_volume(pool_source, candidate)

    @staticmethod
    def pool_store_proposal(
        pool_source: Mapping[str, Any], candidate: Mapping[str, Any], mask: np.ndarray, class_labels: list[str], *,
        model_id: str,
    ) -> dict[str, str]:  # fmt: skip
        """Store a proposal as a multi-frame DICOM-SEG series referencing the candidate series (STOW-RS)."""
        from digits_data_dicomweb.pools import PROPOSAL_MARK

        from .pool_volumes import PROPOSAL_SERIES_NUMBER, store_volume_seg

        return store_volume_seg(pool_source, candidate, mask, class_labels, what="proposal", manual=False,
                                series_number=PROPOSAL_SERIES_NUMBER,
                                series_description=f"{PROPOSAL_MARK} by model {model_id}")  # fmt: skip

    review_image = pool_image

    @staticmethod
    def review_label(
        pool_source: Mapping[str, Any], candidate: Mapping[str, Any], seg: Mapping[str, Any]
    ) -> np.ndarray:
        """The ``D×H×W`` label a proposal or label SEG holds for the series: :func:`.pool_volumes.volume_label`."""
        from .pool_volumes import volume_label

        return volume_label(pool_source, candidate, seg)

    @staticmethod
    def review_store(
        pool_source: Mapping[str, Any], candidate: Mapping[str, Any], mask: np.ndarray, class_labels: list[str], *,
        version: int, user: str | None,
    ) -> dict[str, str]:  # fmt: skip
        """Store a reviewed label as a new multi-frame SEG series (``DIGITS label vN by USER``), every version kept."""
        from digits_data_dicomweb.pools import LABEL_MARK

        from .pool_volumes import LABEL_SERIES_NUMBER, store_volume_seg

        return store_volume_seg(pool_source, candidate, mask, class_labels, what="label", manual=True,
                                series_number=LABEL_SERIES_NUMBER,
                                series_description=f"{LABEL_MARK}{int(version)} by {user or 'local'}")  # fmt: skip

    def encode_entry(self, entry: Any) -> tuple[Any, np.ndarray]:
        """Read one series and its SEG from the cache; return ``(Volume, label)`` as ``dicom-series`` does.

        Raises:
            DicomWebError: A slice could not be fetched. VolumeFormatError: The series is not one volume.
        """
        case = SeriesCase(*entry)
        files = _case_files(self.source(), case)
        where = f"series {case.series.series}"
        volume, _ = read_series_files(files, where, name=case.name)
        label = seg_label_volume(self.source().fetch(case.seg), files, where)
        return self.preprocess(volume, label)


__all__ = [
    "DicomWebVolumesIngestion",
    "DicomWebVolumesForm",
    "VolumeInferenceForm",
    "SeriesCase",
    "SERIES_PREFIX",
    "fetch_inference_series",
    "open_server",
    "plan_series_cases",
    "store_seg",
]
