"""``object-detection``: KITTI folders or COCO JSON → a detection dataset (label kind ``boxes``).

DIGITS's objectDetection layout: a training image folder and a label folder
(``IDENTIFIER.txt`` per ``IDENTIFIER.png|jpg``, KITTI lines; see
:mod:`.detection_labels`), optional separate validation folders, or else a
validation % of the training images (seeded). With ``label_format="coco"``
each stage is an image folder plus one COCO JSON file.

Classes: DIGITS's KITTI mapping by default, or ``custom_classes``
(``dontcare,pedestrian`` → ids 0, 1); unknown types become 0, ``dontcare``,
whose boxes are kept as regions the engine ignores in training and
evaluation. Images are resized to ``width × height`` with the image
plugins' resize modes and the boxes move with them exactly (clipped; boxes
cropped away are dropped); boxes smaller than ``min_box_size`` pixels after
resizing become dontcare. Images without objects are kept (N = 0).

Labels are float32 ``N×5`` ``(class_id, x_min, y_min, x_max, y_max)`` in the
stored image's pixels. A bad label line skips its image and is named (file
and line) in the dataset's errors report.
"""

from __future__ import annotations

import logging
import os

import numpy as np
from wtforms import BooleanField, FloatField, Form, IntegerField, SelectField, StringField, validators
from wtforms.validators import ValidationError

from digits_core import DataIngestion, resize_geometry, select_choices, transform_boxes

from . import listing
from .base import ImageIngestionBase
from .detection_labels import class_lookup, pair_kitti, parse_class_mapping, parse_kitti, read_coco
from .encoding import encode_image_file
from .forms import DEFAULT_IMAGE_SIZE, existing_file, existing_folder, expand, image_option_fields, shared_image_size
from .inference import read_entry_bytes
from .segmentation import default_palette

logger = logging.getLogger("digits_data_images")

LABEL_FORMATS = [("kitti", "KITTI (a label folder of .txt files)"), ("coco", "COCO (one JSON file per stage)")]


class DetectionForm(Form):
    """Dataset options of ``object-detection`` (DIGITS's objectDetection form plus COCO)."""

    label_format = SelectField(
        "Label format",
        choices=select_choices(LABEL_FORMATS),
        default="kitti",
        description="KITTI label folders, or COCO JSON annotation files",
    )
    train_image_folder = StringField(
        "Training image folder",
        description="Folder of training images",
        validators=[validators.InputRequired(), existing_folder("training image folder")],
    )
    train_label_folder = StringField(
        "Training label folder",
        description="KITTI: IDENTIFIER.txt per training image",
        validators=[existing_folder("training label folder")],
    )
    train_annotations = StringField(
        "Training annotations (COCO JSON)",
        description="COCO: the training JSON file",
        validators=[existing_file("training annotations file")],
    )
    val_image_folder = StringField(
        "Validation image folder",
        description="Separate validation images (optional)",
        validators=[existing_folder("validation image folder")],
    )
    val_label_folder = StringField(
        "Validation label folder",
        description="KITTI labels of the validation images",
        validators=[existing_folder("validation label folder")],
    )
    val_annotations = StringField(
        "Validation annotations (COCO JSON)",
        description="COCO: the validation JSON file",
        validators=[existing_file("validation annotations file")],
    )
    val_percent = FloatField(
        "Validation %",
        default=10.0,
        validators=[validators.NumberRange(0, 99)],
        description="Share of the training images used for validation when no validation folder is given",
    )
    custom_classes = StringField(
        "Custom classes",
        description="Comma-separated class names, index = class id "
        '(e.g. "dontcare,pedestrian"); empty: DIGITS\'s KITTI classes. Unknown types '
        "map to class 0 (dontcare)",
    )
    min_box_size = IntegerField(
        "Minimum box size",
        default=0,
        validators=[validators.NumberRange(0, 10000)],
        description="Boxes narrower or lower than this (pixels, after resizing) become dontcare regions",
    )
    shuffle = BooleanField("Shuffle", default=True, description="Write the records in a seeded random order")
    image_type, width, height, resize_mode, encoding, jpg_quality, seed = image_option_fields(keep_source_size=True)

    def validate_train_label_folder(form, field):
        if form.label_format.data == "kitti" and not field.data:
            raise ValidationError("KITTI labels need a training label folder")

    def validate_train_annotations(form, field):
        if form.label_format.data == "coco" and not field.data:
            raise ValidationError("COCO labels need a training annotations file")

    def validate_val_image_folder(form, field):
        other = form.val_label_folder.data if form.label_format.data == "kitti" else form.val_annotations.data
        if bool(field.data) != bool(other):
            what = "validation label folder" if form.label_format.data == "kitti" else "validation annotations file"
            raise ValidationError(f"give both a validation image folder and a {what}, or neither")

    def validate_custom_classes(form, field):
        try:
            parse_class_mapping(field.data)
        except ValueError as exc:
            raise ValidationError(str(exc)) from None


class ObjectDetectionIngestion(ImageIngestionBase):
    """Object detection datasets from KITTI folders or COCO JSON."""

    plugin_id = "object-detection"
    label_kind = "boxes"
    #: An inference list "with labels" pairs each image with its KITTI label file (:mod:`.inference`).
    label_file_kind = "KITTI label file"
    title = "Object detection (KITTI)"
    category = "Images"

    @staticmethod
    def get_dataset_form():
        """Return :class:`DetectionForm`."""
        return DetectionForm

    @staticmethod
    def get_dataset_template(form):
        """Return the dataset form's Jinja2 layout."""
        return DataIngestion.template_from_package("digits_data_images", "templates/detection.html", form=form)

    # -- itemizing (parent process) -------------------------------------------------

    def _stage_entries(self, image_folder: str, labels: str, what: str) -> tuple[list, list]:
        """Entries of one stage and the images left out (no label)."""
        images = listing.list_images(image_folder)
        if self.label_format == "coco":
            names, boxes = read_coco(labels, self.userdata.get("class_labels") or self._mapping())
            self.userdata["class_labels"] = names
            by_name = {os.path.normpath(name): rows for name, rows in boxes.items()}
            entries, missing = [], []
            for path in images:
                rows = by_name.get(os.path.normpath(os.path.relpath(path, image_folder)))
                (
                    missing.append(path)
                    if rows is None
                    else entries.append(("coco", path, tuple(tuple(r) for r in rows), labels))
                )
            return entries, missing
        pairs, missing = pair_kitti(image_folder, labels, images)
        return [("kitti", image, label, None) for image, label in pairs], missing

    def _mapping(self) -> list[str] | None:
        """The class names the form gives (COCO without custom classes: ``None``, from the file)."""
        if self.label_format == "coco" and not (self.custom_classes or "").strip():
            return None
        return parse_class_mapping(self.custom_classes)

    def _build_split(self) -> dict[str, list]:
        coco = self.label_format == "coco"
        self.userdata["class_labels"] = self._mapping()
        train_labels = expand(self.train_annotations if coco else self.train_label_folder)
        entries, missing = self._stage_entries(expand(self.train_image_folder), train_labels, "training")
        if not entries:
            raise ValueError(
                f"no image in {self.train_image_folder} has labels in "
                f"{self.train_annotations if coco else self.train_label_folder}"
            )
        stages: dict[str, list] = {"train": [], "val": [], "test": []}
        if self.val_image_folder:
            val_labels = expand(self.val_annotations if coco else self.val_label_folder)
            stages["val"], val_missing = self._stage_entries(expand(self.val_image_folder), val_labels, "validation")
            missing += val_missing
            stages["train"] = sorted(entries)
        else:
            shuffled = listing.seeded_shuffle(entries, self.seed, "split")
            _, n_val, _ = listing.split_counts(len(shuffled), float(self.val_percent or 0), 0)
            stages["val"], stages["train"] = sorted(shuffled[:n_val]), sorted(shuffled[n_val:])
        if missing:
            logger.warning(
                "object-detection: %d images have no labels and are left out (e.g. %s)", len(missing), missing[0]
            )
        self._resolve_size(stages["train"] + stages["val"])
        if self.shuffle:
            stages = {s: listing.seeded_shuffle(e, self.seed, f"stage:{s}") for s, e in stages.items()}
        names = self.userdata["class_labels"]
        palette = default_palette(max(len(names), 2))
        palette[0] = [128, 128, 128]  # dontcare
        self.userdata["color_palette"] = palette[: len(names)]
        self.userdata["unmatched_images"] = {"count": len(missing), "examples": missing[:5]}
        return stages

    def _resolve_size(self, entries: list) -> None:
        """An empty width or height: the images' own size when they all share one, else the default.

        The resolved size is what the dataset stores (userdata ``width``/``height``, read back at
        inference) and says how it was chosen (``image_size``, and the dataset log).
        """
        if self.width and self.height:
            return
        shared = shared_image_size(entry[1] for entry in entries)
        if shared is not None:
            width, height = shared
            source = "source"
            logger.info(
                "object-detection: all %d images are %dx%d: kept at that size (no resizing)",
                len(entries),
                width,
                height,
            )
        else:
            width = height = DEFAULT_IMAGE_SIZE
            source = "default"
            logger.warning(
                "object-detection: the images differ in size: resized to the default %dx%d "
                "(set width and height to choose)",
                width,
                height,
            )
        self.width, self.height = int(self.width or width), int(self.height or height)
        self.userdata.update(width=self.width, height=self.height, image_size=source)

    # -- encoding (worker processes) ------------------------------------------------------

    def encode_entry(self, entry):
        """Read one image and its boxes, resize both; returns ``(feature, float32 N×5 boxes)``."""
        if self.is_inference_db:
            return self._inference_image(entry)
        kind, image_path, labels, _ = entry
        if kind == "kitti":
            boxes = parse_kitti(labels, class_lookup(parse_class_mapping(self.custom_classes)))
        else:
            boxes = np.asarray(labels, np.float32).reshape(-1, 5)
        from PIL import Image

        try:
            with Image.open(image_path) as image:
                src_w, src_h = image.size
        except OSError as exc:
            raise ValueError(f"{image_path}: cannot read image ({exc})") from None
        width, height = int(self.width), int(self.height)
        feature = encode_image_file(
            image_path,
            channels=self.channels,
            width=width,
            height=height,
            resize_mode=self.resize_mode,
            encoding=self.encoding,
            seed=int(self.seed),
            jpg_quality=int(self.jpg_quality or 90),
        )
        geometry = resize_geometry(src_h, src_w, height, width, self.resize_mode)
        return feature, transform_boxes(boxes, geometry, float(self.min_box_size or 0))

    def _inference_image(self, entry):
        """An inference input at its own size (the core resizes it and maps boxes back to these pixels).

        A KITTI label file with it becomes its known boxes, in the network input's pixels (what the
        view compares the detections with), as the dataset maps its training boxes.
        """
        import io

        from .resize import image_to_array, open_image

        path, label = entry if isinstance(entry, tuple) else (entry, None)
        try:
            image = image_to_array(open_image(io.BytesIO(read_entry_bytes(self, path))), self.channels)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
        if isinstance(label, str):
            boxes = parse_kitti(label, class_lookup(parse_class_mapping(self.custom_classes)))
            geometry = resize_geometry(
                image.shape[0], image.shape[1], int(self.height), int(self.width), self.resize_mode
            )
            label = transform_boxes(boxes, geometry, 0.0)
        return image, label

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_split"] = None
        return state
