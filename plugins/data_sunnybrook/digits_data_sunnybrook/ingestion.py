"""The ``image-sunnybrook`` data plugin: Sunnybrook cardiac MRI -> left-ventricle segmentation dataset.

One entry per contour file of the chosen type (``i`` endocardium by default)
whose image exists: the feature is the DICOM image (``H x W x 1``, or ``x 3``
with RGB conversion) after rescale, kept 16-bit (``uint16``/``int16``) or
``float32``, never squashed to ``uint8``; the label is the ``H x W`` uint8
mask of the rasterized contour (0 background, 1 left ventricle; see
:mod:`digits_data_sunnybrook.contours` for the pixel convention).

Cases (patients) are split into train and validation with a seeded shuffle,
so no heart appears in both; the split is recorded in ``userdata["split"]``.

The image series of a case comes from, in order: the form's series
override, the shipped table (``data/series.json``, the 15 training cases),
then automatic detection (:func:`digits_data_sunnybrook.layout.detect_series`).
The sources are recorded in ``userdata["series"]`` and ``userdata["series_source"]``.

Before any entry is encoded, every image's transfer syntax is checked
(:func:`digits_data_sunnybrook.dicom.check_decoders`): a compressed syntax
without an installed decoder fails the job at once, naming the package to
install (``pip install "digits-data-sunnybrook[codecs]"``). Any other bad
file (unreadable, truncated, not DICOM, no pixels, multi-frame, missing,
malformed contour) fails only its entry, which goes to the dataset's errors
report with a message naming the file.

Importing this module imports neither pydicom nor Pillow.
"""

from __future__ import annotations

import logging
import random
import re
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from digits_core import TEST, TRAIN, VAL, DataIngestion, DatasetError

from .layout import (
    LayoutError,
    detect_series,
    find_contour_cases,
    find_image_case_folder,
    image_filename,
    list_contours,
    load_series_table,
    parse_series_override,
    unpad_case,
)

logger = logging.getLogger("digits_data_sunnybrook")

CLASS_LABELS = ["background", "left ventricle"]
COLOR_PALETTE = [[0, 0, 0], [255, 64, 64]]


class Entry(NamedTuple):
    """One image to encode (picklable; its ``str()`` names the files for the errors report).

    Attributes:
        case: Unpadded case id, or ``""`` for a free DICOM file.
        number: Image number, or ``0``.
        image: Path of the DICOM image.
        contour: Path of the contour file, or ``""`` when there is none (inference).
    """

    case: str
    number: int
    image: str
    contour: str

    def __str__(self) -> str:
        return f"{self.image} (contour {self.contour})" if self.contour else self.image


def split_cases(cases: list[str], pct_val: int, seed: int) -> tuple[list[str], list[str]]:
    """Split case ids into ``(train, val)`` by patient, reproducibly.

    ``round(pct_val% of the cases)`` go to validation, at least one when
    ``pct_val > 0`` and there are two or more cases, and at least one case
    always stays in training.

    Args:
        cases: Case ids (order does not matter: they are sorted first).
        pct_val: Percentage of cases for validation (0-90).
        seed: Seed of the shuffle.
    """
    ordered = sorted(cases)
    random.Random(seed).shuffle(ordered)
    n_val = int(round(len(ordered) * pct_val / 100.0))
    if pct_val > 0 and len(ordered) >= 2:
        n_val = max(1, n_val)
    n_val = min(n_val, max(0, len(ordered) - 1))
    return sorted(ordered[n_val:]), sorted(ordered[:n_val])


def convert_channels(image: np.ndarray, mode: str) -> np.ndarray:
    """Convert an ``H x W x C`` image to grayscale (``"L"``, weights 0.299/0.587/0.114) or RGB (gray repeated).

    Integer images keep their dtype (rounded and clipped); other modes return the image unchanged.
    """
    channels = image.shape[2]
    if mode == "RGB" and channels == 1:
        return np.ascontiguousarray(np.repeat(image, 3, axis=2))
    if mode == "L" and channels == 3:
        gray = image.astype(np.float64) @ np.array([0.299, 0.587, 0.114])
        if image.dtype.kind in "iu":
            info = np.iinfo(image.dtype)
            gray = np.clip(np.rint(gray), info.min, info.max)
        return np.ascontiguousarray(gray.astype(image.dtype)[..., np.newaxis])
    return image


class SunnybrookIngestion(DataIngestion):
    """Sunnybrook Cardiac Data (DICOM cine MR + expert contours) for left-ventricle segmentation."""

    plugin_id = "image-sunnybrook"
    label_kind = "mask"
    title = "Sunnybrook cardiac MRI (LV segmentation)"
    category = "Images"

    def __init__(self, is_inference_db: bool = False, **form_data: Any):
        super().__init__(is_inference_db=is_inference_db, **form_data)
        self.channel_conversion = form_data.get("channel_conversion") or "L"
        self.contour_type = form_data.get("contour_type") or "i"
        self._entries: dict[str, list[Entry]] | None = None

    # -- forms -----------------------------------------------------------------

    @staticmethod
    def get_dataset_form():
        """Return the dataset form class (:class:`~digits_data_sunnybrook.forms.SunnybrookDatasetForm`)."""
        from .forms import SunnybrookDatasetForm

        return SunnybrookDatasetForm

    @staticmethod
    def get_dataset_template(form):
        """Return the Jinja2 source laying out the dataset form, and its context."""
        return DataIngestion.template_from_package("digits_data_sunnybrook", "templates/dataset.html")

    @staticmethod
    def get_inference_form():
        """Return the inference form class: a DICOM file path or a validation record."""
        from .forms import SunnybrookInferenceForm

        return SunnybrookInferenceForm

    @staticmethod
    def get_inference_template(form):
        """Return the Jinja2 source laying out the inference form, and its context."""
        return DataIngestion.template_from_package("digits_data_sunnybrook", "templates/inference.html")

    # -- itemizing ---------------------------------------------------------------

    def itemize_entries(self, stage: str) -> list[Entry]:
        """Return the entries of ``stage`` (see the module docstring).

        Raises:
            DatasetError: Nothing usable was found, or a needed decoder is missing.
        """
        if self.is_inference_db:
            return self._inference_entries() if stage == TEST else []
        if self._entries is None:
            self._entries = self._plan()
        return list(self._entries.get(stage, []))

    def _series_table(self) -> tuple[dict[str, str], dict[str, str]]:
        try:
            override = parse_series_override(self.userdata.get("series_override"))
        except ValueError as exc:
            raise DatasetError(f"series_override: {exc}") from None
        return load_series_table(), override

    def _plan(self) -> dict[str, list[Entry]]:
        from .dicom import check_decoders

        image_folder = Path(str(self.userdata.get("image_folder") or "")).expanduser()
        contour_folder = Path(str(self.userdata.get("contour_folder") or "")).expanduser()
        if not image_folder.is_dir():
            raise DatasetError(f"image_folder: {image_folder} is not a folder")
        contour_cases = find_contour_cases(contour_folder)
        if not contour_cases:
            raise DatasetError(f"contour_folder: no contour case folders found under {contour_folder}")
        table, override = self._series_table()
        kind = self.contour_type
        by_case: dict[str, list[Entry]] = {}
        series_used: dict[str, str] = {}
        sources: dict[str, str] = {}
        warnings: list[str] = []
        for case, expert in contour_cases.items():
            contours = list_contours(expert, kind)
            if not contours:
                warnings.append(f"{case}: no {kind}-contours in {expert}")
                continue
            case_folder = find_image_case_folder(image_folder, case)
            if case_folder is None:
                warnings.append(f"{case}: no image folder {image_folder / unpad_case(case)}")
                continue
            if case in override:
                series, source = override[case], "override"
            elif case in table and any(case_folder.glob(f"IM-{table[case]}-*.dcm")):
                series, source = table[case], "table"
            else:
                try:
                    series, source = detect_series(case_folder, list(contours)), "detected"
                except LayoutError as exc:
                    warnings.append(str(exc))
                    continue
            series_used[case], sources[case] = series, source
            by_case[case] = [
                Entry(case, number, str(case_folder / image_filename(series, number)), str(path))
                for number, path in sorted(contours.items())
            ]
        for message in warnings:
            logger.warning("image-sunnybrook: skipped %s", message)
        if not by_case:
            detail = "; ".join(warnings[:3]) if warnings else "no contour files"
            raise DatasetError(f"No usable case in {contour_folder} and {image_folder}: {detail}")
        train, val = split_cases(
            list(by_case), int(self.userdata.get("pct_val") or 0), int(self.userdata.get("seed") or 0)
        )
        entries = {TRAIN: [e for c in train for e in by_case[c]], VAL: [e for c in val for e in by_case[c]], TEST: []}
        check_decoders(e.image for stage in (TRAIN, VAL) for e in entries[stage] if Path(e.image).is_file())
        self.userdata.update(
            class_labels=list(CLASS_LABELS),
            color_palette=[list(c) for c in COLOR_PALETTE],
            split={TRAIN: train, VAL: val},
            series=series_used,
            series_source=sources,
            contour_counts={case: len(items) for case, items in by_case.items()},
            skipped_cases=warnings,
        )
        return entries

    def _inference_entries(self) -> list[Entry]:
        dicom_file = str(self.userdata.get("dicom_file") or "").strip() or self._saved_upload()
        record = str(self.userdata.get("validation_record") or "").strip()
        if dicom_file and record:
            raise DatasetError("Give a DICOM file or a validation record, not both")
        if dicom_file:
            from .dicom import check_decoders

            path = Path(dicom_file).expanduser()
            check_decoders([path])
            return [Entry("", 0, str(path), "")]
        if not record:
            raise DatasetError("Give a DICOM file (dicom_file) or a validation record (validation_record)")
        return [self._validation_entry(record)]

    def _saved_upload(self) -> str:
        """The path of an uploaded DICOM file (``dicom_upload``), or ``""``.

        The web UI saves uploads and passes their path; an API caller may
        pass a file object, which is written to a temporary file here.
        """
        upload = self.userdata.get("dicom_upload")
        if isinstance(upload, str):
            return upload.strip()
        if upload is None or not hasattr(upload, "read"):
            return ""
        import tempfile

        handle, path = tempfile.mkstemp(prefix="digits-upload-", suffix=".dcm")
        with open(handle, "wb") as out:
            out.write(upload.read())
        self.userdata["dicom_upload"] = path
        return path

    def _validation_entry(self, record: str) -> Entry:
        """Resolve ``"3"`` (index) or ``"SC-HF-I-1/0021"`` against the dataset's validation split.

        Needs the dataset's userdata (image/contour folders, split, series),
        which the core merges into the inference form data, as DIGITS did.
        """
        split = self.userdata.get("split") or {}
        if not self.userdata.get("image_folder") or not isinstance(split, dict):
            raise DatasetError(
                "validation_record needs the dataset's userdata (image_folder, contour_folder, split); "
                "give a dicom_file instead"
            )
        val_cases = list(split.get(VAL) or [])
        if not val_cases:
            raise DatasetError("The dataset has no validation cases; give a dicom_file instead")
        image_folder = Path(str(self.userdata["image_folder"])).expanduser()
        contour_cases = find_contour_cases(Path(str(self.userdata.get("contour_folder") or "")).expanduser())
        series = dict(self.userdata.get("series") or {})
        records = []
        for case in sorted(val_cases):
            case_folder = find_image_case_folder(image_folder, case)
            if case not in contour_cases or case_folder is None or case not in series:
                continue
            for number, path in sorted(list_contours(contour_cases[case], self.contour_type).items()):
                records.append(Entry(case, number, str(case_folder / image_filename(series[case], number)), str(path)))
        if re.fullmatch(r"\d+", record):
            index = int(record)
            if index >= len(records):
                raise DatasetError(
                    f"validation_record {index} is out of range: the validation set has {len(records)} records"
                )
            return records[index]
        match = re.fullmatch(r"\s*([A-Za-z0-9-]+)\s*[/\\:]\s*(?:IM-\d{4}-)?(\d{1,4})(?:\.dcm)?\s*", record)
        if not match:
            raise DatasetError(
                f"validation_record {record!r}: expected an index (0, 1, ...) or CASE/NUMBER (e.g. SC-HF-I-1/0021)"
            )
        try:
            case = unpad_case(match.group(1))
        except ValueError:
            raise DatasetError(
                f"validation_record {record!r}: {match.group(1)!r} is not a Sunnybrook case id"
            ) from None
        number = int(match.group(2))
        for entry in records:
            if entry.case == case and entry.number == number:
                return entry
        raise DatasetError(
            f"validation_record {record!r}: no {self.contour_type}-contoured image {number} of case {case} "
            f"in the validation set (validation cases: {', '.join(sorted(val_cases))})"
        )

    # -- encoding ---------------------------------------------------------------

    def encode_entry(self, entry: Entry):
        """Return ``(image H x W x C, mask H x W uint8)``; the mask is ``None`` for a free DICOM file.

        Raises:
            DicomReadError: The image cannot be used (the message names the file).
            ContourError: The contour file is malformed (the message names the file).
        """
        from .contours import contour_mask
        from .dicom import DicomReadError, read_dicom_image

        entry = Entry(*entry)
        if not Path(entry.image).is_file():
            reason = "image file not found"
            if entry.contour:
                reason += f" (contour {Path(entry.contour).name} refers to image {entry.number} of this series)"
            raise DicomReadError(entry.image, reason)
        image = convert_channels(read_dicom_image(entry.image), self.channel_conversion)
        if not entry.contour:
            return image, None
        return image, contour_mask(entry.contour, image.shape[:2])


__all__ = ["SunnybrookIngestion", "Entry", "split_cases", "convert_channels", "CLASS_LABELS", "COLOR_PALETTE"]
