"""``numpy-arrays``: a dataset from arrays one already has (DIGITS's "Other"/prebuilt dataset).

Features are an ``N×H×W×C`` (or ``N×H×W``) array in a ``.npy`` file or a
member of a ``.npz`` archive; labels (optional file, else the archive's
``labels_key`` member) have one row per feature and any label kind the data
contract supports:

* ``N`` integers → class ids (``class_labels_file`` names them);
* ``N`` or ``N×K`` floats → regression targets (float32);
* ``N×H×W`` integers → segmentation masks.

Both are memory-mapped (:mod:`.arrays`): entries are row indexes, and each
worker process reads only its rows, so a dataset larger than RAM streams.
Feature dtypes ``uint8``, ``uint16``, ``int16`` and ``float32`` are stored
as they are (``float64`` becomes float32, ``bool``/``int8`` uint8; others are
refused); features are stored raw (``encoding`` none) or as PNG (8-bit
1/3-channel and 16-bit 1-channel only).

Validation/test rows come from separate files (``val_features_file`` ...)
or ``val_percent``/``test_percent`` of the rows (seeded). Embedding code
with arrays in memory calls :func:`create_dataset_from_arrays`, which saves
them as ``.npy`` files and builds the dataset through the same path.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from wtforms import BooleanField, FloatField, Form, IntegerField, SelectField, StringField, validators
from wtforms.validators import ValidationError

from digits_core import DataIngestion, EncodedImage, select_choices

from . import listing
from .arrays import open_array
from .forms import existing_file, expand, fill_defaults

STORED = {"uint8", "uint16", "int16", "float32"}
CAST = {"float64": "float32", "float16": "float32", "bool": "uint8", "int8": None}


class NumpyArraysForm(Form):
    """Dataset options of ``numpy-arrays``."""

    features_file = StringField(
        "Features file",
        description="A .npy file (N×H×W×C or N×H×W) or a .npz archive",
        validators=[validators.InputRequired(), existing_file("features file")],
    )
    labels_file = StringField(
        "Labels file",
        description="A .npy/.npz file with one label per feature row (default: the labels member of the features .npz)",
        validators=[existing_file("labels file")],
    )
    features_key = StringField("Features key", default="features", description="Member name in .npz archives")
    labels_key = StringField("Labels key", default="labels", description="Member name in .npz archives")
    val_features_file = StringField(
        "Validation features",
        description="Separate validation features (.npy/.npz)",
        validators=[existing_file("validation features file")],
    )
    val_labels_file = StringField(
        "Validation labels",
        description="Labels of the separate validation features",
        validators=[existing_file("validation labels file")],
    )
    test_features_file = StringField(
        "Test features",
        description="Separate test features (.npy/.npz)",
        validators=[existing_file("test features file")],
    )
    test_labels_file = StringField(
        "Test labels",
        description="Labels of the separate test features",
        validators=[existing_file("test labels file")],
    )
    class_labels_file = StringField(
        "Class labels file",
        description="Class names, one per line (index = class id)",
        validators=[existing_file("class labels file")],
    )
    val_percent = FloatField(
        "Validation %",
        default=10.0,
        validators=[validators.NumberRange(0, 99)],
        description="Share of the rows used for validation when no validation file is given",
    )
    test_percent = FloatField(
        "Test %",
        default=0.0,
        validators=[validators.NumberRange(0, 99)],
        description="Share of the rows used for testing when no test file is given",
    )
    encoding = SelectField(
        "Feature encoding",
        choices=select_choices([("none", "None (raw values)"), ("png", "PNG (lossless)")]),
        default="none",
        description="How features are stored in the database",
    )
    shuffle = BooleanField("Shuffle", default=True, description="Write the records in a seeded random order")
    seed = IntegerField(
        "Random seed", default=0, validators=[validators.InputRequired()], description="Seeds the split and the shuffle"
    )

    def validate_val_percent(form, field):
        val = 0 if form.val_features_file.data else (field.data or 0)
        test = 0 if form.test_features_file.data else (form.test_percent.data or 0)
        if val + test >= 100:
            raise ValidationError(f"validation % ({val}) plus test % ({test}) must be under 100")


def _feature_row(row: np.ndarray, where: str) -> np.ndarray:
    arr = np.asarray(row)
    name = arr.dtype.name
    if name not in STORED:
        target = CAST.get(name)
        if target is None and name == "int8":
            if arr.size and arr.min() < 0:
                raise ValueError(f"{where}: int8 features with negative values; convert them to int16 or float32")
            target = "uint8"
        if target is None:
            raise ValueError(f"{where}: feature dtype {name} is not supported; use uint8, uint16, int16 or float32")
        arr = arr.astype(target)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    return np.ascontiguousarray(arr)


def _label_row(row: Any) -> Any:
    arr = np.asarray(row)
    if arr.dtype.kind == "b":
        arr = arr.astype(np.int64)
    if arr.ndim == 0:
        return int(arr) if arr.dtype.kind in "iu" else np.float32(arr).reshape(1)
    if arr.ndim == 1:
        return np.ascontiguousarray(arr, np.float32)
    if arr.dtype.kind in "iu":
        return np.ascontiguousarray(arr)
    return np.ascontiguousarray(arr, np.float32)


class NumpyArraysIngestion(DataIngestion):
    """Datasets from ``.npy``/``.npz`` features and labels, memory-mapped."""

    plugin_id = "numpy-arrays"
    title = "NumPy arrays (.npy / .npz)"
    category = "Other"

    def __init__(self, is_inference_db: bool = False, **form_data):
        super().__init__(is_inference_db=is_inference_db, **form_data)
        fill_defaults(self)
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    dataset_form = NumpyArraysForm
    dataset_template = "templates/numpy_arrays.html"

    @staticmethod
    def get_inference_form():
        """No inference form: give image or ``.npy`` files to ``digits infer``."""
        return None

    def _files(self, stage: str) -> tuple[str, str | None]:
        prefix = "" if stage == "train" else f"{stage}_"
        return getattr(self, f"{prefix}features_file"), getattr(self, f"{prefix}labels_file")

    def _open(self, stage: str) -> tuple[np.ndarray, np.ndarray]:
        """The memory-mapped (features, labels) of a source stage, opened once per process."""
        if stage not in self._arrays:
            features_file, labels_file = self._files(stage)
            features = open_array(expand(features_file), self.features_key)
            if labels_file:
                labels = open_array(expand(labels_file), self.labels_key)
            elif str(features_file).lower().endswith(".npz"):
                labels = open_array(expand(features_file), self.labels_key)
            else:
                raise ValueError(f"features file {features_file} is a .npy file: give its labels file too")
            if features.ndim not in (3, 4):
                raise ValueError(f"features in {features_file} have shape {features.shape}; expected N×H×W×C or N×H×W")
            if len(labels) != len(features):
                raise ValueError(f"{len(features)} feature rows in {features_file} but {len(labels)} labels")
            self._arrays[stage] = (features, labels)
        return self._arrays[stage]

    def itemize_entries(self, stage: str) -> list:
        """Entries are ``(source stage, row index)`` pairs; the split is made once for all stages."""
        if getattr(self, "_split", None) is None:
            self._split = self._build_split()
        return self._split.get(stage, [])

    def _build_split(self) -> dict[str, list]:
        features, labels = self._open("train")
        rows = [("train", i) for i in range(len(features))]
        stages: dict[str, list] = {"train": [], "val": [], "test": []}
        explicit = {}
        for stage in ("val", "test"):
            if self._files(stage)[0]:
                explicit[stage] = [(stage, i) for i in range(len(self._open(stage)[0]))]
        val_pct = 0.0 if "val" in explicit else float(self.val_percent or 0)
        test_pct = 0.0 if "test" in explicit else float(self.test_percent or 0)
        shuffled = listing.seeded_shuffle(rows, self.seed, "split")
        _, n_val, n_test = listing.split_counts(len(shuffled), val_pct, test_pct)
        stages.update(
            val=sorted(shuffled[:n_val]),
            test=sorted(shuffled[n_val : n_val + n_test]),
            train=sorted(shuffled[n_val + n_test :]),
        )
        stages.update(explicit)
        if self.shuffle:
            stages = {s: listing.seeded_shuffle(e, self.seed, f"stage:{s}") for s, e in stages.items()}
        if self.class_labels_file:
            self.userdata["class_labels"] = listing.read_labels_file(expand(self.class_labels_file))
        self.userdata["source_shape"] = list(features.shape)
        self.userdata["source_dtype"] = features.dtype.name
        return stages

    def encode_entry(self, entry):
        """Read one row of features and labels; returns ``(H×W×C array or PNG, label)``."""
        stage, index = entry
        features, labels = self._open(stage)
        where = f"row {index} of {self._files(stage)[0]}"
        feature = _feature_row(features[index], where)
        if self.encoding == "png" and (
            feature.dtype == np.uint8
            and feature.shape[2] in (1, 3)
            or feature.dtype == np.uint16
            and feature.shape[2] == 1
        ):
            feature = EncodedImage.from_array(feature, "png", keep_array=True)
        return feature, _label_row(labels[index])

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_arrays"] = {}  # each worker maps the files itself
        state.pop("_split", None)
        return state


def create_dataset_from_arrays(
    features: np.ndarray,
    labels: np.ndarray,
    *,
    folder: str | os.PathLike,
    val_features: np.ndarray | None = None,
    val_labels: np.ndarray | None = None,
    options: dict | None = None,
    **create_kwargs,
):
    """Build a ``numpy-arrays`` dataset from arrays in memory (embedding).

    The arrays are saved as ``.npy`` files in ``folder`` (kept: the job's
    form data points at them, so *Clone* works) and the dataset is built
    exactly as from files.

    Args:
        features: ``N×H×W×C`` (or ``N×H×W``) features.
        labels: One label per row (see the module docstring).
        folder: Where the ``.npy`` files are written (created if missing).
        val_features: Optional separate validation features; ``val_labels`` with them.
        options: Other form values (``val_percent``, ``encoding``, ``class_labels_file`` ...).
        **create_kwargs: Passed to :func:`digits_core.datasets.create_dataset` (``name``, ``jobs_dir``, ``workers`` ...).

    Returns:
        The dataset job.
    """
    from digits_core.datasets import create_dataset

    folder = os.path.abspath(os.fspath(folder))
    os.makedirs(folder, exist_ok=True)
    values = dict(options or {})
    arrays = {
        "features_file": features,
        "labels_file": labels,
        "val_features_file": val_features,
        "val_labels_file": val_labels,
    }
    for field, array in arrays.items():
        if array is not None:
            path = os.path.join(folder, field.replace("_file", "") + ".npy")
            np.save(path, np.asarray(array), allow_pickle=False)
            values[field] = path
    return create_dataset("numpy-arrays", values, **create_kwargs)
