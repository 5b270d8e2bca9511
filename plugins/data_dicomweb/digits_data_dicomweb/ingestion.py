"""The ``dicomweb-segmentation`` data plugin: a segmentation dataset from a PACS over DICOMweb.

Itemizing (parent process, once):

1. QIDO-RS finds the studies the form asks for (modality, descriptions, dates, patients, study UIDs).
2. Each study's DICOM-SEG objects are fetched; every source image a SEG frame references becomes an
   entry (the image is the feature, the SEG's label map on it the label). A study without SEG is
   skipped with a warning (recorded in ``userdata["skipped_studies"]``).
3. Patients are split into train and validation with the same seeded split as ``image-sunnybrook``
   (:func:`digits_data_sunnybrook.ingestion.split_cases`): no patient is in both.
4. Every image is fetched with WADO-RS into the local cache (:class:`~.source.DicomWebSource`), at most
   ``max_parallel`` requests at a time; instances already cached are not asked for again, so a second
   build, or one resumed after a failure, reads from disk. An instance the server refuses stays an
   entry that fails on its own, so the errors report names it.

Encoding (worker processes) reads the cached file with the Sunnybrook plugin's DICOM reader (rescale,
MONOCHROME1, 16-bit kept, compressed syntaxes with a clear message when a decoder is missing).

Inference takes a series on the server (``dicomweb_series``); with ``store`` on, the predicted masks
go back to the server as a DICOM-SEG series that references the source images
(:meth:`DicomWebSegmentationIngestion.finish_inference`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections import defaultdict
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from digits_core import TEST, TRAIN, VAL, DataIngestion, DatasetError, DigitsError

from .forms import split_list
from .servers import pick_server
from .source import DicomWebError, DicomWebSource, InstanceRef, StudyQuery, public_url

logger = logging.getLogger("digits_data_dicomweb")

#: Environment variables read when the form's secret fields are empty (secrets are never stored).
PASSWORD_ENV, TOKEN_ENV = "DIGITS_DICOMWEB_PASSWORD", "DIGITS_DICOMWEB_TOKEN"
_MASKED = "********"


class Entry(NamedTuple):
    """One image to encode (picklable; its ``str()`` names it in the errors report).

    Attributes:
        image: The source image on the server.
        frame: Frame index for multi-frame images (``None``: single-frame).
        seg: The SEG instance holding its label (``None`` at inference).
        error: Why it could not be fetched, or ``""``.
    """

    image: InstanceRef
    frame: int | None = None
    seg: InstanceRef | None = None
    error: str = ""

    def __str__(self) -> str:
        return str(self.image) + (f" frame {self.frame}" if self.frame is not None else "")


def _secret(userdata: Mapping[str, Any], name: str, env: str | None) -> str:
    """A secret from the inference form (``dicomweb_<name>``), the dataset form, or (``env``) the environment."""
    for key in (f"dicomweb_{name}", name):
        value = str(userdata.get(key) or "")
        if value not in ("", _MASKED):
            return value
    return os.environ.get(env, "") if env else ""


def open_source(userdata: Mapping[str, Any]) -> DicomWebSource:
    """The :class:`~.source.DicomWebSource` a dataset's (or an inference form's) values name.

    The server is ``named_server`` / ``server_url`` with ``username`` (the dataset form's fields), unless an
    inference form names another one with ``dicomweb_server`` / ``dicomweb_url`` / ``dicomweb_username``.
    The operator's credentials from the environment go only to the operator's servers
    (:func:`~.servers.pick_server`); a URL a web user typed gets only what was typed with it, and the
    outbound-URL guard.

    Raises:
        DicomWebError: An unknown named server, or a URL the guard refuses.
    """
    other = bool(userdata.get("dicomweb_server") or userdata.get("dicomweb_url"))
    prefix = "dicomweb_" if other else ""
    try:
        url, operators = pick_server(
            str(userdata.get(f"{prefix}server" if other else "named_server") or ""),
            str(userdata.get(f"{prefix}url" if other else "server_url") or ""),
        )
    except ValueError as exc:
        raise DicomWebError(str(exc)) from None
    return DicomWebSource(
        url,
        username=str(userdata.get(f"{prefix}username") or ""),
        password=_secret(userdata, "password", PASSWORD_ENV if operators else None),
        token=_secret(userdata, "token", TOKEN_ENV if operators else None),
        cache_dir=str(userdata.get("cache_folder") or "") or None,
        max_parallel=int(userdata.get("max_parallel") or 4),
        guarded=not operators,
    )


def _palette(count: int) -> list[list[int]]:
    colors = [[0, 0, 0], [255, 64, 64], [64, 160, 255], [64, 200, 64], [255, 200, 0], [200, 64, 255]]
    return [
        colors[k % len(colors)] if k < len(colors) else [(53 * k) % 256, (97 * k) % 256, (191 * k) % 256]
        for k in range(count)
    ]


class DicomWebSegmentationIngestion(DataIngestion):
    """Segmentation datasets from a DICOMweb server (images + DICOM-SEG labels), split by patient."""

    plugin_id = "dicomweb-segmentation"
    label_kind = "mask"
    title = "DICOMweb (PACS) segmentation"
    category = "Images"

    def __init__(self, is_inference_db: bool = False, **form_data: Any):
        super().__init__(is_inference_db=is_inference_db, **form_data)
        self.channel_conversion = form_data.get("channel_conversion") or "L"
        self._entries: dict[str, list[Entry]] | None = None
        self._segs: dict[str, Any] = {}
        self._inference: dict[str, Entry] = {}

    # -- forms -------------------------------------------------------------------

    @staticmethod
    def get_dataset_form():
        """Return the dataset form class (:class:`~digits_data_dicomweb.forms.DicomWebDatasetForm`)."""
        from .forms import DicomWebDatasetForm

        return DicomWebDatasetForm

    @staticmethod
    def get_dataset_template(form):
        """Return the Jinja2 source laying out the dataset form, and its context."""
        return DataIngestion.template_from_package("digits_data_dicomweb", "templates/dataset.html")

    @staticmethod
    def get_inference_form():
        """Return the inference form class: a series UID on the server, and whether to store the result."""
        from .forms import DicomWebInferenceForm

        return DicomWebInferenceForm

    @staticmethod
    def get_inference_template(form):
        """Return the Jinja2 source laying out the inference form, and its context."""
        return DataIngestion.template_from_package("digits_data_dicomweb", "templates/inference.html")

    # -- the server ----------------------------------------------------------------

    def source(self) -> DicomWebSource:
        """The :class:`~.source.DicomWebSource` this dataset reads (see :func:`open_source`)."""
        source = getattr(self, "_source", None)
        if source is None:
            source = self._source = open_source(self.userdata)
        return source

    def _query(self) -> StudyQuery:
        u = self.userdata
        return StudyQuery(
            modality=str(u.get("modality") or "").strip(),
            study_description=str(u.get("study_description") or "").strip(),
            series_description=str(u.get("series_description") or "").strip(),
            date_from=str(u.get("date_from") or "").strip(),
            date_to=str(u.get("date_to") or "").strip(),
            patient_ids=split_list(u.get("patient_ids")),
            study_uids=split_list(u.get("study_uids")),
        )

    def _seg_labels(self, ref: InstanceRef):
        """The parsed SEG (cached per process)."""
        from .seg import SegmentationLabels

        labels = self._segs.get(ref.sop)
        if labels is None:
            labels = SegmentationLabels(self.source().retrieve(ref), name=str(ref))
            self._segs[ref.sop] = labels
        return labels

    # -- itemizing -------------------------------------------------------------------

    def itemize_entries(self, stage: str) -> list[Entry]:
        """Return the entries of ``stage`` (see the module docstring).

        Raises:
            DatasetError: The server cannot be used, or no study has a usable SEG.
        """
        if self.is_inference_db:
            return self._inference_entries() if stage == TEST else []
        if self._entries is None:
            try:
                self._entries = self._plan()
            except DicomWebError as exc:
                raise DatasetError(str(exc)) from None
        return list(self._entries.get(stage, []))

    def _plan(self) -> dict[str, list[Entry]]:
        from digits_data_sunnybrook.ingestion import split_cases

        source = self.source()
        series_list = source.find_series(self._query())
        if not series_list:
            raise DatasetError(f"No study on {public_url(source.url)} matches the query; widen the filters.")
        image_series = {s.series: s for s in series_list if s.modality != "SEG"}
        seg_refs, left_out = accepted_labels(source.find_instances(self._query(), modality="SEG"))
        failures = source.fetch_all(seg_refs)
        segs_by_study: dict[str, list[InstanceRef]] = defaultdict(list)
        for ref in seg_refs:
            segs_by_study[ref.study].append(ref)
        by_patient: dict[str, list[Entry]] = defaultdict(list)
        skipped: list[str] = list(left_out)
        class_labels: list[str] | None = None
        for study in sorted({s.study for s in series_list}):
            patient = next(s.patient for s in series_list if s.study == study)
            if not segs_by_study.get(study):
                skipped.append(f"study {study} (patient {patient}) has no DICOM-SEG")
                continue
            labelled: set[str] = set()
            for seg_ref in segs_by_study[study]:  # a reviewer's newest label first
                if seg_ref.sop in failures:
                    skipped.append(f"{seg_ref}: {failures[seg_ref.sop]}")
                    continue
                try:
                    seg = self._seg_labels(seg_ref)
                except DigitsError as exc:
                    skipped.append(str(exc))
                    continue
                if class_labels is None:
                    class_labels = seg.class_labels
                elif seg.class_labels != class_labels:
                    skipped.append(f"{seg_ref}: segments {seg.class_labels[1:]} differ from {class_labels[1:]}")
                    continue
                for _study, series_uid, sop in seg.source_images:
                    series = image_series.get(series_uid)
                    if sop in labelled or series is None:  # a series the query's description filter left out
                        continue
                    labelled.add(sop)
                    image = InstanceRef(patient, study, series_uid, sop, series.modality, 0, series.series_description)
                    by_patient[patient].append(Entry(image, None, seg_ref))
        if not by_patient:
            detail = "; ".join(skipped[:3]) if skipped else "no DICOM-SEG objects"
            raise DatasetError(f"No labelled image on {public_url(source.url)}: {detail}")
        for message in skipped:
            logger.warning("dicomweb-segmentation: skipped %s", message)
        train, val = split_cases(
            list(by_patient), int(self.userdata.get("pct_val") or 0), int(self.userdata.get("seed") or 0)
        )
        fetch_errors = source.fetch_all([e.image for entries in by_patient.values() for e in entries])
        ordered = {
            p: sorted(
                (self._numbered(e, fetch_errors) for e in entries),
                key=lambda e: (e.image.series, e.image.number, e.image.sop),
            )
            for p, entries in by_patient.items()
        }
        class_labels = class_labels or ["background", "foreground"]
        self.userdata.update(
            class_labels=list(class_labels),
            color_palette=_palette(len(class_labels)),
            split={TRAIN: train, VAL: val},
            server=public_url(source.url),
            image_counts={p: len(entries) for p, entries in ordered.items()},
            skipped_studies=skipped,
        )
        return {TRAIN: [e for p in train for e in ordered[p]], VAL: [e for p in val for e in ordered[p]], TEST: []}

    def _numbered(self, entry: Entry, fetch_errors: dict[str, str]) -> Entry:
        """The entry with its image's InstanceNumber (read from the cached header) or its fetch error."""
        if entry.image.sop in fetch_errors:
            return entry._replace(error=fetch_errors[entry.image.sop])
        import pydicom

        header = pydicom.dcmread(self.source().cache_path(entry.image.sop), stop_before_pixels=True)
        return entry._replace(
            image=dataclasses.replace(entry.image, number=int(getattr(header, "InstanceNumber", 0) or 0))
        )

    def _inference_entries(self) -> list[Entry]:
        source = self.source()
        series_uid = str(self.userdata.get("dicomweb_series") or "").strip()
        study_uid = str(self.userdata.get("dicomweb_study") or "").strip()
        try:
            if not study_uid:
                found = source._call(
                    f"find series {series_uid}",
                    source.client.search_for_series,
                    search_filters={"SeriesInstanceUID": series_uid},
                )
                if not found:
                    raise DatasetError(f"dicomweb_series: no series {series_uid} on {public_url(source.url)}")
                study_uid = str((found[0].get("0020000D") or {}).get("Value", [""])[0])
            instances = source._call(
                f"list the instances of series {series_uid}",
                source.client.search_for_instances,
                study_instance_uid=study_uid,
                series_instance_uid=series_uid,
                fields=["InstanceNumber", "NumberOfFrames"],
            )
        except DicomWebError as exc:
            raise DatasetError(str(exc)) from None
        refs = []
        for item in instances:
            sop = str((item.get("00080018") or {}).get("Value", [""])[0])
            number = int(((item.get("00200013") or {}).get("Value") or [0])[0] or 0)
            frames = int(((item.get("00280008") or {}).get("Value") or [1])[0] or 1)
            refs.append((InstanceRef("", study_uid, series_uid, sop, "", number), frames))
        refs.sort(key=lambda r: (r[0].number, r[0].sop))
        errors = source.fetch_all([ref for ref, _ in refs])
        entries = []
        for ref, frames in refs:
            for frame in range(frames) if frames > 1 else [None]:
                entries.append(Entry(ref, frame, None, errors.get(ref.sop, "")))
        self._inference = {str(e): e for e in entries}
        return entries

    # -- encoding -------------------------------------------------------------------

    def encode_entry(self, entry: Entry):
        """Return ``(image H x W x C, label map H x W uint8)``; the label is ``None`` at inference.

        Raises:
            DicomWebError: The image could not be fetched (the message names the instance).
            DicomReadError: The image cannot be decoded.
        """
        from digits_data_sunnybrook.dicom import dataset_to_image
        from digits_data_sunnybrook.ingestion import convert_channels

        entry = Entry(*entry)
        if entry.error:
            raise DicomWebError(entry.error)
        image = convert_channels(
            dataset_to_image(self.source().retrieve(entry.image), frame=entry.frame, name=str(entry)),
            self.channel_conversion,
        )
        if entry.seg is None:
            return image, None
        return image, self._seg_labels(entry.seg).label_map(entry.image.sop)

    # -- results back to the PACS -----------------------------------------------------

    def finish_inference(self, samples) -> str | None:
        """With ``store`` on, write the predicted masks back to the server as one DICOM-SEG series.

        Args:
            samples: The inference samples (``input_id`` = ``str(entry)``, ``output`` = ``H x W x K`` scores).

        Returns:
            A one-line message for the user, or ``None`` when nothing was stored.

        Raises:
            DicomWebError: The server refused the SEG.
        """
        if not self.userdata.get("store"):
            return None
        from .seg import build_segmentations

        pairs = [(self._inference[s.input_id], s.output) for s in samples if s.input_id in self._inference]
        pairs = [(entry, output) for entry, output in pairs if entry.frame is None]
        if not pairs:
            return "Nothing stored: DICOM-SEG output is written for single-frame images only."
        source = self.source()
        sources = [source.retrieve(entry.image) for entry, _ in pairs]
        masks = np.stack([_mask_for(output, int(ds.Rows), int(ds.Columns)) for (_, output), ds in zip(pairs, sources)])
        class_labels = list(self.userdata.get("class_labels") or ["background", "foreground"])
        segs = build_segmentations(sources, masks, class_labels, manual=False)
        source.store(segs)
        return (
            f"Stored {len(segs)} DICOM-SEG instance(s) of {len(pairs)} image(s) in series "
            f"{segs[0].SeriesInstanceUID} on {public_url(source.url)}"
        )

    # -- active-learning review (issue 46): the core's review page calls these on the class ----------------------

    @staticmethod
    def review_image(pool_source: Mapping[str, Any], candidate: Mapping[str, Any]) -> np.ndarray:
        """A DICOMweb pool candidate's image (``H x W x C``): :func:`.review.candidate_image`."""
        from .review import candidate_image

        return candidate_image(_pool_server(pool_source), candidate)

    @staticmethod
    def review_label(
        pool_source: Mapping[str, Any], candidate: Mapping[str, Any], seg: Mapping[str, Any]
    ) -> np.ndarray:
        """The label map a proposal or label SEG holds for the candidate: :func:`.review.candidate_label`."""
        from .review import candidate_label

        return candidate_label(_pool_server(pool_source), candidate, seg)

    @staticmethod
    def review_store(
        pool_source: Mapping[str, Any],
        candidate: Mapping[str, Any],
        mask: np.ndarray,
        class_labels: list[str],
        *,
        version: int,
        user: str | None,
    ) -> dict[str, str]:
        """Store a reviewed label as a new SEG series in the PACS (STOW-RS): :func:`.review.store_label`."""
        from .review import store_label

        return store_label(_pool_server(pool_source), candidate, mask, class_labels, version=version, user=user)

    # -- active-learning pools (issue 46, plugin API 1.3): the core's pool sources call these on the class ------

    @staticmethod
    def pool_candidates(pool_source: Mapping[str, Any]) -> dict[str, Any]:
        """The unlabelled image instances a DICOMweb pool source names: :func:`.pools.list_candidates`."""
        from .pools import list_candidates

        return list_candidates(_pool_server(pool_source), pool_source)

    @staticmethod
    def pool_image(pool_source: Mapping[str, Any], candidate: Mapping[str, Any]) -> np.ndarray:
        """A candidate's image (``H x W x C``) over WADO-RS: :func:`.review.candidate_image`."""
        from .review import candidate_image

        return candidate_image(_pool_server(pool_source), candidate)

    @staticmethod
    def pool_store_proposal(
        pool_source: Mapping[str, Any],
        candidate: Mapping[str, Any],
        mask: np.ndarray,
        class_labels: list[str],
        *,
        model_id: str,
    ) -> dict[str, str]:
        """Store a model's proposal as a DICOM-SEG series (STOW-RS): :func:`.pools.store_proposal`."""
        from .pools import store_proposal

        return store_proposal(_pool_server(pool_source), candidate, mask, class_labels, model_id=model_id)


def accepted_labels(seg_refs: list[InstanceRef]) -> tuple[list[InstanceRef], list[str]]:
    """The SEG instances that are labels, best first, and a line per SEG series left out as not a label.

    A proposal or a model's prediction of DIGITS Core is not a label (:func:`.pools.label_rank`); among the
    labels, a reviewer's newest version (``DIGITS label vN``) comes first, then other SEGs (ground truth).
    """
    from .pools import label_rank

    ranked = [(label_rank(ref.series_description), ref) for ref in seg_refs]
    left_out = sorted(
        {
            f"SEG series {ref.series} ({ref.series_description!r}): not an accepted label"
            for r, ref in ranked
            if r is None
        }
    )
    labels = sorted(
        (ref for r, ref in ranked if r is not None), key=lambda ref: (-(label_rank(ref.series_description) or 0), ref)
    )
    return labels, left_out


def _pool_server(pool_source: Mapping[str, Any]) -> DicomWebSource:
    """The server a DICOMweb pool's ``source`` names (credentials of named servers from the environment)."""
    from .review import pool_userdata

    try:
        return open_source(pool_userdata(pool_source))
    except DicomWebError as exc:
        raise DatasetError(str(exc)) from None


def _mask_for(output, rows: int, columns: int) -> np.ndarray:
    """Label map of a network output (``H x W x K`` scores, or ``H x W x 1`` foreground probability) at the source size."""
    output = np.asarray(output)
    if output.ndim == 3 and output.shape[-1] > 1:
        mask = np.argmax(output, axis=-1).astype(np.uint8)
    else:
        mask = (output.reshape(output.shape[:2]) > 0.5).astype(np.uint8)
    if mask.shape != (rows, columns):
        from PIL import Image

        mask = np.asarray(Image.fromarray(mask).resize((columns, rows), Image.NEAREST))
    return mask


__all__ = ["DicomWebSegmentationIngestion", "Entry", "PASSWORD_ENV", "TOKEN_ENV", "accepted_labels", "open_source"]
