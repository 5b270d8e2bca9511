"""``image-processing``: feature images and target images matched by name → an image-to-image dataset.

DIGITS's "imageProcessing" extension (denoising, deblurring,
super-resolution from pre-upscaled inputs...): a feature folder and a label
(target) folder whose files are matched by name without extension
(``noisy/0001.png`` ↔ ``clean/0001.png``). Both go through the same channel
conversion (``image_type``) and the same resize (width, height, resize
mode), so every target has its feature's H×W. Features are stored with the
image plugins' encodings; targets are stored as ``H×W×C`` float32 arrays
scaled to ``[0, 1]`` (8-bit values / 255, 16-bit / 65535), label kind
``image``, so the engine trains the ``image-to-image`` task (same-size
linear output, MSE or MAE) and inference shows the ``image-output`` view.

Validation pairs come from ``val_feature_folder``/``val_label_folder`` or
else ``val_percent`` of the pairs (seeded). Inference takes the image
plugins' inputs; with ``target_folder`` images of the inference image folder
get their same-named target as ground truth (PSNR/SSIM in the view).
"""

from __future__ import annotations

import io
import logging

import numpy as np
from wtforms import BooleanField, FloatField, Form, StringField, validators
from wtforms.validators import ValidationError

from . import listing
from .base import ImageIngestionBase
from .encoding import encode_image_file, load_resized, read_file
from .forms import InferenceForm, existing_folder, expand, image_option_fields
from .inference import InferenceEntry, encode_inference_entry, inference_entries
from .segmentation import match_by_name

logger = logging.getLogger("digits_data_images")


class ProcessingForm(Form):
    """Dataset options of ``image-processing``."""

    feature_folder = StringField(
        "Feature image folder",
        description="Input images (e.g. noisy)",
        validators=[validators.InputRequired(), existing_folder("feature folder")],
    )
    label_folder = StringField(
        "Label image folder",
        description="Target images with the same file names (e.g. clean)",
        validators=[validators.InputRequired(), existing_folder("label folder")],
    )
    val_feature_folder = StringField(
        "Validation feature folder",
        description="Separate validation inputs",
        validators=[existing_folder("validation feature folder")],
    )
    val_label_folder = StringField(
        "Validation label folder",
        description="Targets of the separate validation inputs",
        validators=[existing_folder("validation label folder")],
    )
    val_percent = FloatField(
        "Validation %",
        default=10.0,
        validators=[validators.NumberRange(0, 99)],
        description="Share of the pairs used for validation when no validation folders are given",
    )
    shuffle = BooleanField("Shuffle", default=True, description="Write the records in a seeded random order")
    image_type, width, height, resize_mode, encoding, jpg_quality, seed = image_option_fields()

    def validate_val_label_folder(form, field):
        if bool(field.data) != bool(form.val_feature_folder.data):
            raise ValidationError("give both a validation feature folder and a validation label folder, or neither")


class ProcessingInferenceForm(InferenceForm):
    """The image inference inputs plus a folder of target images (ground truth)."""

    target_folder = StringField(
        "Target image folder",
        description="Targets named like the images of the image folder (ground truth for PSNR/SSIM)",
        validators=[existing_folder("target folder")],
    )


def target_array(
    source, path: str, *, channels: int, width: int, height: int, resize_mode: str, seed: int
) -> np.ndarray:
    """Load a target image like its feature and scale it to float32 ``[0, 1]`` (``H×W×C``)."""
    arr = load_resized(source, path, channels=channels, width=width, height=height, resize_mode=resize_mode, seed=seed)
    top = 65535.0 if arr.dtype == np.uint16 else 255.0
    return (arr.astype(np.float32) / top).reshape(height, width, channels)


class ImageProcessingIngestion(ImageIngestionBase):
    """Image-to-image datasets: feature images and target images matched by name."""

    plugin_id = "image-processing"
    label_kind = "image"
    title = "Image processing (image-to-image pairs)"
    category = "Images"

    dataset_form = ProcessingForm

    @staticmethod
    def get_dataset_template(form):
        """Return the dataset form's Jinja2 layout."""
        return ImageIngestionBase.image_form_template("processing", form)

    inference_form = ProcessingInferenceForm

    def itemize_entries(self, stage: str) -> list:
        """Entries are ``(feature path, target path)``; inference pairs images with ``target_folder`` targets."""
        if not self.is_inference_db:
            return super().itemize_entries(stage)
        entries = inference_entries(self, stage)
        if getattr(self, "target_folder", None) and getattr(self, "image_folder", None):
            pairs, _ = match_by_name(expand(self.image_folder), expand(self.target_folder))
            targets = dict(pairs)
            entries = [InferenceEntry(e.path, targets.get(e.path, e.label)) for e in entries]
        return entries

    def _build_split(self) -> dict[str, list]:
        pairs, unmatched = match_by_name(expand(self.feature_folder), expand(self.label_folder))
        if not pairs:
            raise ValueError(
                f"no image in {self.feature_folder} has a target with the same name in {self.label_folder}"
            )
        stages: dict[str, list] = {"train": [], "val": []}
        if self.val_feature_folder:
            val_pairs, val_unmatched = match_by_name(expand(self.val_feature_folder), expand(self.val_label_folder))
            unmatched += val_unmatched
            stages.update(train=sorted(pairs), val=sorted(val_pairs))
        else:
            shuffled = listing.seeded_shuffle(pairs, self.seed, "split")
            _, n_val, _ = listing.split_counts(len(shuffled), float(self.val_percent or 0), 0)
            stages.update(val=sorted(shuffled[:n_val]), train=sorted(shuffled[n_val:]))
        if unmatched:
            logger.warning(
                "image-processing: %d images have no target and are left out (e.g. %s)", len(unmatched), unmatched[0]
            )
        if self.shuffle:
            stages = {s: listing.seeded_shuffle(p, self.seed, f"stage:{s}") for s, p in stages.items()}
        self.userdata["unmatched_images"] = {"count": len(unmatched), "examples": unmatched[:5]}
        self.userdata["target_scale"] = "0..1 (8-bit / 255, 16-bit / 65535)"
        return stages

    def _target(self, path: str, source=None) -> np.ndarray:
        return target_array(
            source if source is not None else io.BytesIO(read_file(path)),
            path,
            channels=self.channels,
            width=int(self.width),
            height=int(self.height),
            resize_mode=self.resize_mode,
            seed=int(self.seed),
        )

    def encode_entry(self, entry):
        """Encode a feature image and its target; returns ``(feature, H×W×C float32 target)``."""
        if self.is_inference_db:
            feature, target = encode_inference_entry(self, entry)
            return feature, None if target is None else self._target(str(target))
        feature_path, label_path = entry
        feature = encode_image_file(
            feature_path,
            channels=self.channels,
            width=int(self.width),
            height=int(self.height),
            resize_mode=self.resize_mode,
            encoding=self.encoding,
            seed=int(self.seed),
            jpg_quality=int(self.jpg_quality or 90),
        )
        return feature, self._target(label_path)
