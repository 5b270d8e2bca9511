"""The volume data plugins: ``msd-volumes``, ``nifti-volumes`` and ``dicom-series``.

One entry per case. :meth:`VolumeIngestion.encode_entry` returns
``(digits_core.Volume, D×H×W label)``: the image in canonical orientation
(:mod:`.geometry`), resampled to the dataset's target spacing and normalised
(:mod:`.preprocess`); the label on the same voxels. The core stores them as
slabbed volume records (``data_layout = "DHWC"``, see
:mod:`digits_core.datasets.volumes`).

Cases are split into train and validation by a seeded shuffle of their
names, so the same cases from any source split the same way. The target
spacing ("median" by default) is computed from the headers at itemize time
and saved in ``userdata["target_spacing_mm"]`` with the resolved
normalisation (``userdata["normalization_used"]``), so inference
preprocesses exactly as training did.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from digits_core import TEST, TRAIN, VAL, DataIngestion, DatasetError, DigitsError
from digits_core.errors import FormValidationError
from digits_core.paths import check_server_path
from digits_data_sunnybrook.ingestion import split_cases  # the same seeded split by case (patient)

from .forms import SERIES_PREFIX
from .geometry import (
    VolumeFormatError,
    dicom_files,
    is_nifti,
    nifti_spacing,
    nifti_stem,
    read_label_nifti,
    read_label_seg,
    read_nifti,
    read_series,
    read_series_files,
    read_slice_info,
    series_spacing,
)
from .preprocess import CT_WINDOW, normalize, parse_spacing, resample

#: Prefix of an inference input naming a series on the DICOMweb server (``dicomweb:<SeriesInstanceUID>``).
#: Colours of class ids 1.. (class 0, background, is black).
PALETTE = [[0, 0, 0], [255, 64, 64], [64, 200, 64], [64, 96, 255], [255, 200, 0], [200, 64, 255], [0, 200, 200]]


class Case(NamedTuple):
    """One case to encode (picklable; ``str()`` names its files for the errors report).

    Attributes:
        name: The case name (file stem or series folder name).
        image: A NIfTI file, or a DICOM series folder.
        label: A NIfTI label file, or ``""`` (inference).
        source: ``"nifti"`` or ``"dicom"``.
    """

    name: str
    image: str
    label: str
    source: str

    def __str__(self) -> str:
        return f"{self.image} (label {self.label})" if self.label else self.image


def read_case(case: Case) -> Any:
    """The canonical image of a case (a NIfTI file or a DICOM series)."""
    if case.source == "dicom":
        return read_series(case.image, name=case.name)[0]
    return read_nifti(case.image, name=case.name)


def case_spacing(case: Case) -> tuple:
    """A case's canonical spacing from its headers only."""
    return series_spacing(case.image) if case.source == "dicom" else nifti_spacing(case.image)


class VolumeIngestion(DataIngestion):
    """What the three volume plugins share: planning, preprocessing and encoding of cases."""

    category = "Volumes"
    data_layout = "DHWC"

    def __init__(self, is_inference_db: bool = False, **form_data: Any):
        super().__init__(is_inference_db=is_inference_db, **form_data)
        self._entries: dict[str, list[Case]] | None = None

    @staticmethod
    def get_dataset_template(form):
        """Return the Jinja2 source laying out the dataset form, and its context."""
        return DataIngestion.template_from_package("digits_data_volumes", "templates/dataset.html")

    @staticmethod
    def get_inference_form():
        """Return the inference form: a DICOMweb series (:class:`~.series_server.VolumeInferenceForm`; files need none)."""
        from .series_server import VolumeInferenceForm

        return VolumeInferenceForm

    @staticmethod
    def get_inference_template(form):
        """Return the Jinja2 source laying out the inference form, and its context."""
        return DataIngestion.template_from_package("digits_data_volumes", "templates/inference.html")

    # -- planning ------------------------------------------------------------

    def list_cases(self) -> tuple[list[Case], dict]:
        """The cases of the source and userdata to save (``class_labels`` at least). Subclasses write it."""
        raise NotImplementedError

    def itemize_entries(self, stage: str) -> list[Case]:
        """Return the cases of ``stage`` (train/val split by case; no test stage).

        Raises:
            DatasetError: At inference: a volume is inferred whole, not as entries of the 2-D runner.
        """
        if self.is_inference_db:
            raise DatasetError(
                f"{self.get_id()}: a volume model segments whole volumes: use its page's Test a "
                "volume, `digits infer --model ID FILE.nii.gz|SERIES_FOLDER` or `--dicomweb-series "
                "UID` (Python: digits_core.engine.volume_infer.infer_volume)"
            )
        if self._entries is None:
            self._entries = self._plan()
        return list(self._entries.get(stage, []))

    def _plan(self) -> dict[str, list[Case]]:
        cases, extra = self.list_cases()
        if not cases:
            raise DatasetError(f"{self.get_id()}: no cases found; check the folders in the form")
        names = [c.name for c in cases]
        if len(set(names)) != len(names):
            raise DatasetError(f"{self.get_id()}: two cases share a name; case names must be unique")
        try:
            target = parse_spacing(self.userdata.get("target_spacing"))
        except ValueError as exc:
            raise DatasetError(f"target_spacing: {exc}") from None
        if target is None:
            target = self._median_spacing(cases)
        train, val = split_cases(names, int(self.userdata.get("pct_val") or 0), int(self.userdata.get("seed") or 0))
        by_name = {c.name: c for c in cases}
        labels = extra.pop("class_labels", None) or ["background", "foreground"]
        self.userdata.update(
            class_labels=labels,
            color_palette=[PALETTE[i % len(PALETTE)] for i in range(len(labels))],
            split={TRAIN: train, VAL: val},
            target_spacing_mm=[round(t, 5) for t in target],
            normalization_used=self._normalization(extra.get("modality", "")),
            **extra,
        )
        return {TRAIN: [by_name[n] for n in train], VAL: [by_name[n] for n in val], TEST: []}

    def case_spacing(self, case: Any) -> tuple:
        """A case's canonical ``(D, H, W)`` spacing from its headers only."""
        return case_spacing(case)

    def _median_spacing(self, cases: list) -> tuple:
        """The cases' median spacing; a case whose headers fail (a missing slice) is left out of it and fails alone
        when it is encoded (the errors report names it), unless every case fails."""
        spacings, first_error = [], None
        for case in cases:
            try:
                spacings.append(self.case_spacing(case))
            except DatasetError as exc:
                first_error = first_error or exc
        if not spacings:
            raise first_error or DatasetError(f"{self.get_id()}: no case has a readable spacing")
        return tuple(float(v) for v in np.median(spacings, axis=0))

    def _normalization(self, modality: str) -> str:
        method = str(self.userdata.get("normalization") or "auto")
        if method == "auto":
            return "ct-window" if str(modality).strip().upper() == "CT" else "zscore"
        return method

    # -- encoding ------------------------------------------------------------

    def preprocess(self, volume: Any, label: np.ndarray | None) -> tuple[Any, np.ndarray | None]:
        """Resample and normalise one canonical volume (and label) as the dataset does."""
        target = self.userdata.get("target_spacing_mm")
        volume, label = resample(volume, label, tuple(target) if target else None)
        window = (self.userdata.get("window_low", CT_WINDOW[0]), self.userdata.get("window_high", CT_WINDOW[1]))
        volume = normalize(
            volume,
            str(self.userdata.get("normalization_used") or "none"),
            window=tuple(CT_WINDOW[i] if w is None else float(w) for i, w in enumerate(window)),
        )
        return volume, label

    def load_inference_volume(self, path: str, label: str | None = None) -> tuple[Any, dict]:
        """Read an inference source (NIfTI file or DICOM series folder) and preprocess it as the dataset was.

        Args:
            path: The source.
            label: Its ground truth (a NIfTI label on the source's voxels, or a DICOM-SEG drawn on a series),
                preprocessed with it into ``context["ground_truth"]`` (``D×H×W``, the returned volume's voxels).

        Returns:
            ``(Volume, context)``: the context is what :meth:`write_volume_result` needs to go back.

        Raises:
            VolumeFormatError: Not a volume (a 2-D picture, a one-slice file, an unreadable series).
            FormValidationError: On field ``label``: the label cannot be read or does not cover the source.
        """
        from .results import load_source

        if str(path).startswith(SERIES_PREFIX):  # a series on the DICOMweb server (see inference_inputs)
            volume, context = self._load_server_series(str(path)[len(SERIES_PREFIX) :])
        else:
            volume, context = load_source(path)
        truth = self._ground_truth(label, volume, context) if label else None
        volume, truth = self.preprocess(volume, truth)
        if truth is not None:
            context["ground_truth"] = truth
        return volume, context

    @staticmethod
    def _ground_truth(label: str, volume: Any, context: dict) -> np.ndarray:
        """The canonical label of an inference source, its errors on field ``label``."""
        try:
            path = check_server_path(label, "label")
            if context["kind"] == "dicom" and not is_nifti(path):
                if str(context["path"]).startswith(SERIES_PREFIX):
                    raise VolumeFormatError(f"{path}: ground truth for a DICOMweb series is not supported")
                return read_label_seg(path, context["path"])
            return read_label_nifti(path, volume, context["path"])
        except FormValidationError:
            raise
        except DigitsError as exc:
            raise FormValidationError({"label": [str(exc)]}, "volume inference") from None

    def inference_inputs(self) -> list[str]:
        """The inputs the inference form names: ``["dicomweb:<SeriesInstanceUID>"]``, or none."""
        series = str(self.userdata.get("dicomweb_series") or "").strip()
        return [SERIES_PREFIX + series] if series else []

    def _load_server_series(self, series_uid: str) -> tuple[Any, dict]:
        from .results import series_source
        from .series_server import fetch_inference_series

        source, files = fetch_inference_series(self.userdata, series_uid)
        volume, ordered = read_series_files(files, SERIES_PREFIX + series_uid, name=series_uid)
        volume, context = series_source(volume, ordered, SERIES_PREFIX + series_uid)
        context["dicomweb_source"] = source
        return volume, context

    def write_volume_result(
        self, label: np.ndarray, spacing: Any, context: dict, out_dir: str | None
    ) -> tuple[np.ndarray, list[str]]:
        """Map a predicted label back to the source's voxels; write NIfTI (and DICOM-SEG for a series) to ``out_dir``.

        Returns:
            ``(label in the source's i, j, k voxel order, files written)``.
        """
        from .results import to_source, volume_seg, write_results

        ijk = to_source(label, spacing, context)
        class_labels = list(self.userdata.get("class_labels") or [])
        files = write_results(ijk, context, out_dir, class_labels) if out_dir else []
        if self.userdata.get("store"):
            context["note"] = self._store(
                volume_seg(ijk, context, class_labels) if context["kind"] == "dicom" else None, context
            )
        return ijk, files

    def _store(self, seg: Any, context: dict) -> str:
        """Store a result's SEG on the server its series came from; the note for the user."""
        from .series_server import open_server, store_seg

        if seg is None:
            return f"Nothing stored for {context['path']}: only a DICOM series has a DICOM-SEG to store."
        try:
            source = context.get("dicomweb_source") or open_server(self.userdata)
            if source is None:
                return (
                    f"Nothing stored for {context['path']}: name the server to store to "
                    "(--dicomweb-url or --dicomweb-server)."
                )
            return store_seg(source, seg)
        except DigitsError as exc:
            raise VolumeFormatError(f"{context['path']}: {exc}") from None

    def encode_entry(self, entry: Case) -> tuple[Any, np.ndarray]:
        """Read, check, resample and normalise one case; return ``(Volume, label)``.

        Raises:
            VolumeFormatError: A file cannot be read, or the label does not cover the image's voxels.
        """
        volume = read_case(entry)
        if entry.source == "dicom" and not is_nifti(entry.label):  # a DICOM-SEG drawn on the series
            label = read_label_seg(entry.label, entry.image)
        else:
            label = read_label_nifti(entry.label, volume, entry.image)
        volume, label = self.preprocess(volume, label)
        return volume, label


def _class_labels(labels: Any) -> list[str] | None:
    """Decathlon ``labels`` (``{"0": "background", "1": "left atrium"}``) as a list, index = class id."""
    if not isinstance(labels, dict) or not labels:
        return None
    try:
        ids = {int(k): str(v) for k, v in labels.items()}
    except (TypeError, ValueError):
        return None
    return [ids.get(i, str(i)) for i in range(max(ids) + 1)]


class MsdVolumesIngestion(VolumeIngestion):
    """Medical Segmentation Decathlon task folder (``dataset.json``, ``imagesTr/``, ``labelsTr/``)."""

    plugin_id = "msd-volumes"
    title = "Medical Segmentation Decathlon (NIfTI volumes)"

    @staticmethod
    def get_dataset_form():
        """Return the dataset form class (:class:`~digits_data_volumes.forms.MsdDatasetForm`)."""
        from .forms import MsdDatasetForm

        return MsdDatasetForm

    def list_cases(self) -> tuple[list[Case], dict]:
        from digits_core.paths import check_server_path

        folder = check_server_path(str(self.userdata.get("data_folder") or ""), "data_folder")
        manifest = folder / "dataset.json"
        try:
            info = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise DatasetError(f"{manifest}: not a readable Decathlon dataset.json ({type(exc).__name__})") from None
        training = info.get("training") if isinstance(info, dict) else None
        if not isinstance(training, list):
            raise DatasetError(f'{manifest}: no "training" list of {{"image": ..., "label": ...}}')
        cases = []
        for number, item in enumerate(training):
            if (
                not isinstance(item, dict)
                or not isinstance(item.get("image"), str)
                or not isinstance(item.get("label"), str)
            ):
                raise DatasetError(f'{manifest}: training item {number} needs "image" and "label" paths')
            # The gate first: nothing is looked at outside the data roots (no "is not a file" oracle).
            image = check_server_path(folder / item["image"], "data_folder")
            label = check_server_path(folder / item["label"], "data_folder")
            for path in (image, label):
                if not is_nifti(path) or not path.is_file():
                    raise DatasetError(f"{manifest}: training item {number}: {path} is not a NIfTI file")
            cases.append(Case(nifti_stem(image), str(image), str(label), "nifti"))
        modality = info.get("modality") if isinstance(info.get("modality"), dict) else {}
        extra = {
            "class_labels": _class_labels(info.get("labels")),
            "modality": str(modality.get("0", "")),
            "modalities": [str(v) for v in modality.values()],
            "task_name": str(info.get("name", "")),
        }
        return cases, extra


def _label_file(labels: Path, stem: str, what: Path, suffixes: tuple = (".nii.gz", ".nii")) -> Path:
    """``labels/STEM.nii.gz`` (or another of ``suffixes``); a :class:`DatasetError` naming ``what`` when there is none."""
    for suffix in suffixes:
        if (labels / f"{stem}{suffix}").is_file():
            return labels / f"{stem}{suffix}"
    raise DatasetError(f"{what}: no label {' or '.join(stem + s for s in suffixes)} in {labels}")


def _pairs(images: Path, labels: Path) -> list[tuple[str, Path, Path]]:
    paths = sorted(p for p in images.iterdir() if p.is_file() and is_nifti(p))
    return [(nifti_stem(p), p, _label_file(labels, nifti_stem(p), p)) for p in paths]


def _csv_pairs(csv_path: Path) -> list[tuple[str, Path, Path]]:
    """The ``image,label`` rows of a CSV of pairs (``nifti-volumes``' ``pairs_file``), each path through the gate.

    Paths are absolute or relative to the CSV's folder; blank lines and ``#`` lines are skipped, and a first
    line ``image,label`` is a header. The case is named after the image file.

    Raises:
        DatasetError: A bad row, naming the CSV and its line (never quoting the row).
        OutsideDataRootsError: In a server context, a path outside the data roots (the line named).
    """
    import csv

    from digits_core.paths import open_in_roots, resolve_in_roots

    pairs: list[tuple[str, Path, Path]] = []
    seen: dict[str, int] = {}
    try:
        with open_in_roots(csv_path, "r", where=f"{csv_path}", encoding="utf-8", newline="") as handle:
            rows = list(csv.reader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DatasetError(f"{csv_path}: not a readable CSV of image,label pairs ({type(exc).__name__})") from None
    for number, row in enumerate(rows, 1):
        cells = [cell.strip() for cell in row]
        if not any(cells) or cells[0].startswith("#"):
            continue
        if number == 1 and [c.lower() for c in cells] == ["image", "label"]:
            continue
        where = f"{csv_path} line {number}"
        if len(cells) != 2 or not all(cells):
            raise DatasetError(
                f"{where}: give two columns, the image and the label NIfTI path "
                f"(found {len([c for c in cells if c])} non-empty of {len(cells)})"
            )
        # Each column through the gate on its own, before any look at either file.
        image = resolve_in_roots(cells[0], base=csv_path.parent, where=f"{where}, image column")
        label = resolve_in_roots(cells[1], base=csv_path.parent, where=f"{where}, label column")
        for what, path in (("image", image), ("label", label)):
            if not is_nifti(path) or not path.is_file():
                raise DatasetError(f"{where}: the {what} {path} is not a NIfTI file (.nii, .nii.gz)")
        name = nifti_stem(image)
        if name in seen:
            raise DatasetError(
                f"{where}: the case {name} is already on line {seen[name]} (cases are named after "
                "their image files; the names must be unique)"
            )
        seen[name] = number
        pairs.append((name, image, label))
    if not pairs:
        raise DatasetError(f"{csv_path}: no image,label rows")
    return pairs


class NiftiVolumesIngestion(VolumeIngestion):
    """Two folders of NIfTI files, images and labels matched by file name, or a CSV of ``image,label`` pairs."""

    plugin_id = "nifti-volumes"
    title = "NIfTI volumes (image and label folders)"

    @staticmethod
    def get_dataset_form():
        """Return the dataset form class (:class:`~digits_data_volumes.forms.NiftiDatasetForm`)."""
        from .forms import NiftiDatasetForm

        return NiftiDatasetForm

    def list_cases(self) -> tuple[list[Case], dict]:
        from digits_core.paths import check_server_path

        pairs_file = str(self.userdata.get("pairs_file") or "").strip()
        if pairs_file:
            pairs = _csv_pairs(check_server_path(pairs_file, "pairs_file"))
        else:
            images = check_server_path(str(self.userdata.get("image_folder") or ""), "image_folder")
            labels = check_server_path(str(self.userdata.get("label_folder") or ""), "label_folder")
            pairs = _pairs(images, labels)
        cases = [Case(stem, str(image), str(label), "nifti") for stem, image, label in pairs]
        return cases, {"modality": str(self.userdata.get("modality") or "")}


#: Files of a DICOM export that are not slices of a series (the media's index).
NOT_SLICES = ("DICOMDIR",)
_LABEL_SUFFIXES = (".nii.gz", ".nii", ".dcm")


def series_folders(root: Path) -> list[tuple[Path, list[Path]]]:
    """Every folder of the tree under ``root`` (``root`` included) that holds files: one DICOM series each.

    One level (``root/SERIES/``) or deeper, as PACS exports lay them out (``root/PATIENT/STUDY/SERIES/``); a
    ``DICOMDIR`` index is not a slice, and ``root`` is a series only when no folder under it is. Folders are
    walked in sorted order, each folder once (symlink loops end); a folder or slice that is a symlink out of
    the data roots (on the web server) is left out before anything looks at its target
    (:func:`.geometry.dicom_files`).
    """
    import os

    from digits_core.paths import server_path_allowed

    found, seen = [], set()
    stack = [root]
    while stack:
        folder = stack.pop()
        real = os.path.realpath(folder)
        if real in seen:  # a symlink loop, or a folder linked twice
            continue
        seen.add(real)
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            continue
        files = [f for f in dicom_files(folder) if f.name.upper() not in NOT_SLICES]
        if files:
            found.append((folder, files))
        stack.extend(
            reversed([e for e in entries if not e.name.startswith(".") and server_path_allowed(e) and e.is_dir()])
        )
    if len(found) > 1:  # files beside series folders at the top (a README, an index) are not a series of their own
        found = [item for item in found if item[0] != root]
    return sorted(found, key=lambda item: item[0].relative_to(root).parts)


def _series_label(labels: Path, parts: tuple, folder: Path) -> Path:
    """A series' label: the same relative path under ``labels`` (``PATIENT/STUDY/SERIES.nii.gz``), or the case
    name (the parts joined by ``_``) at the top of ``labels``; for one level of series both are ``SERIES.nii.gz``."""
    mirrored = labels.joinpath(*parts[:-1])
    for base, stem in ((mirrored, parts[-1]), (labels, "_".join(parts))):
        for suffix in _LABEL_SUFFIXES:
            if (base / f"{stem}{suffix}").is_file():
                return base / f"{stem}{suffix}"
    tried = [str(Path(*parts[:-1], parts[-1] + ".nii.gz"))] + (["_".join(parts) + ".nii.gz"] if len(parts) > 1 else [])
    raise DatasetError(f"{folder}: no label {' or '.join(tried)} (or .nii / .dcm) in {labels}")


class DicomSeriesIngestion(VolumeIngestion):
    """DICOM series folders (slices ordered by position); labels as NIfTI files or DICOM-SEGs named after the series."""

    plugin_id = "dicom-series"
    title = "DICOM series (one folder per series)"

    @staticmethod
    def get_dataset_form():
        """Return the dataset form class (:class:`~digits_data_volumes.forms.DicomSeriesDatasetForm`)."""
        from .forms import DicomSeriesDatasetForm

        return DicomSeriesDatasetForm

    def list_cases(self) -> tuple[list[Case], dict]:
        from digits_core.paths import check_server_path

        root = check_server_path(str(self.userdata.get("series_folder") or ""), "series_folder")
        labels = check_server_path(str(self.userdata.get("label_folder") or ""), "label_folder")
        cases, modalities = [], set()
        for folder, files in series_folders(root):
            parts = folder.relative_to(root).parts or (root.name,)
            name = "_".join(parts)
            label = _series_label(labels, parts, folder)
            try:
                modalities.add(read_slice_info(files[0]).modality)
            except VolumeFormatError as exc:
                raise DatasetError(str(exc)) from None
            cases.append(Case(name, str(folder), str(label), "dicom"))
        return cases, {"modality": sorted(modalities)[0] if len(modalities) == 1 else ""}
