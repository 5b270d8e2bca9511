"""``image-regression``: a folder of images plus a file of numeric targets → a regression dataset.

The targets file (CSV with a ``path,t1,...,tN`` header, or JSON lines; see
:mod:`.targets`) gives each image's target vector; its header names the
targets (kept as ``userdata["target_names"]``). Paths are relative to the
image folder. Labels are float32 vectors of length N (N = 1 included), so the
engine trains a regression (default loss MSE) and inference defaults to the
``regression`` view.

Validation and test images come from ``val_targets_file``/``test_targets_file``
(same format and target names, paths relative to the image folder) or else
``val_percent``/``test_percent`` of the rows (seeded shuffle). Images go
through the image plugins' type/size/resize/encoding options.

Inference: the image inputs of the image plugins, plus an optional targets
file whose rows become labelled inputs (ground truth for the view's
MAE/RMSE).
"""

from __future__ import annotations

import os

import numpy as np
from wtforms import BooleanField, FloatField, Form, StringField, validators
from wtforms.validators import ValidationError

from . import listing
from .base import ImageIngestionBase
from .encoding import encode_image_file
from .forms import InferenceForm, existing_file, existing_folder, expand, image_option_fields
from .inference import InferenceEntry, encode_inference_entry, inference_entries
from .targets import read_targets


class RegressionForm(Form):
    """Dataset options of ``image-regression``."""

    image_folder = StringField(
        "Image folder",
        description="Folder the image paths of the targets files start from",
        validators=[validators.InputRequired(), existing_folder("image folder")],
    )
    targets_file = StringField(
        "Targets file",
        description='CSV with a header "path,<target 1>,...,<target N>" '
        "(or JSON lines) giving each training image's numbers",
        validators=[validators.InputRequired(), existing_file("targets file")],
    )
    val_targets_file = StringField(
        "Validation targets file",
        description="Separate validation images and targets (same format and target names)",
        validators=[existing_file("validation targets file")],
    )
    test_targets_file = StringField(
        "Test targets file",
        description="Separate test images and targets",
        validators=[existing_file("test targets file")],
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
    shuffle = BooleanField("Shuffle", default=True, description="Write the records in a seeded random order")
    image_type, width, height, resize_mode, encoding, jpg_quality, seed = image_option_fields()

    def validate_val_percent(form, field):
        test = 0 if form.test_targets_file.data else (form.test_percent.data or 0)
        val = 0 if form.val_targets_file.data else (field.data or 0)
        if val + test >= 100:
            raise ValidationError(f"validation % ({val}) plus test % ({test}) must be under 100")


class RegressionInferenceForm(InferenceForm):
    """The image inference inputs plus a targets file (labelled inputs)."""

    targets_file = StringField(
        "Targets file",
        description="CSV/JSON lines of images and their true targets "
        "(paths relative to the list root folder, else to the file's folder)",
        validators=[existing_file("targets file")],
    )

    def validate_image_path(form, field):
        if not form.targets_file.data:
            InferenceForm.validate_image_path(form, field)


class ImageRegressionIngestion(ImageIngestionBase):
    """Regression datasets: images with a vector of numbers each (CSV or JSON lines)."""

    plugin_id = "image-regression"
    label_kind = "regression"
    title = "Image regression (images + CSV of targets)"
    category = "Images"

    dataset_form = RegressionForm

    @staticmethod
    def get_dataset_template(form):
        """Return the dataset form's Jinja2 layout."""
        return ImageIngestionBase.image_form_template("regression", form)

    inference_form = RegressionInferenceForm

    def itemize_entries(self, stage: str) -> list:
        """Entries are ``(image path, (t1, ..., tN))``; inference adds the rows of its targets file."""
        if self.is_inference_db:
            entries = inference_entries(self, stage)
            if stage == "test" and getattr(self, "targets_file", None):
                _, rows = read_targets(expand(self.targets_file), expand(getattr(self, "list_root", None)))
                # An image of the folder that the targets file names too is one input, with its values.
                known = {os.path.realpath(path): values for path, values in rows}
                named = {os.path.realpath(str(e)) for e in entries}
                entries = [
                    InferenceEntry(str(e), known[os.path.realpath(str(e))]) if os.path.realpath(str(e)) in known else e
                    for e in entries
                ]
                entries.extend(
                    InferenceEntry(path, values) for path, values in rows if os.path.realpath(path) not in named
                )
            return entries
        return super().itemize_entries(stage)

    def _read(self, path: str, what: str) -> list:
        names, rows = read_targets(expand(path), expand(self.image_folder))
        expected = self.userdata.get("target_names")
        if expected is not None and names != expected:
            raise ValueError(f"{what} {path} names the targets {names}, the training file {expected}")
        self.userdata["target_names"] = names
        return rows

    def _build_split(self) -> dict[str, list]:
        self.userdata["target_names"] = None
        rows = self._read(self.targets_file, "targets file")
        stages: dict[str, list] = {"train": [], "val": [], "test": []}
        explicit = {
            stage: self._read(path, f"{stage} targets file")
            for stage, path in (("val", self.val_targets_file), ("test", self.test_targets_file))
            if path
        }
        val_pct = 0.0 if "val" in explicit else float(self.val_percent or 0)
        test_pct = 0.0 if "test" in explicit else float(self.test_percent or 0)
        shuffled = listing.seeded_shuffle(rows, self.seed, "split")
        _, n_val, n_test = listing.split_counts(len(shuffled), val_pct, test_pct)
        stages["val"] = shuffled[:n_val]
        stages["test"] = shuffled[n_val : n_val + n_test]
        stages["train"] = shuffled[n_val + n_test :]
        stages.update(explicit)
        for stage, entries in stages.items():
            stages[stage] = (
                listing.seeded_shuffle(entries, self.seed, f"stage:{stage}") if self.shuffle else sorted(entries)
            )
        self.userdata["num_targets"] = len(self.userdata["target_names"])
        return stages

    def encode_entry(self, entry):
        """Read, convert, resize and encode one image; returns ``(feature, float32 targets)``."""
        if self.is_inference_db:
            feature, label = encode_inference_entry(self, entry)
            return feature, None if label is None else np.asarray(label, np.float32)
        path, values = entry
        feature = encode_image_file(
            path,
            channels=self.channels,
            width=int(self.width),
            height=int(self.height),
            resize_mode=self.resize_mode,
            encoding=self.encoding,
            seed=int(self.seed),
            jpg_quality=int(self.jpg_quality or 90),
        )
        return feature, np.asarray(values, np.float32)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_split"] = None
        return state
