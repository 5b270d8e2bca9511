"""``object-detection``: KITTI folders or COCO JSON → a detection dataset (label kind ``boxes``).

DIGITS's objectDetection layout: a training image folder and a label folder
(``IDENTIFIER.txt`` per ``IDENTIFIER.png|jpg``, KITTI lines; see
:mod:`.detection_labels`), optional separate validation folders, or else a
validation % of the training images (seeded). With ``label_format="coco"``
each stage is an image folder plus one COCO JSON file.

Other formats (:mod:`.annotations`): ``voc`` and ``yolo`` read a label folder
(``ID.xml`` / ``ID.txt`` per image), ``coco``, ``cvat`` and ``labelstudio``
one annotation file per stage; ``auto`` (the default) tells the format from
the files and logs why. For these formats the class names come from the
files (class 0 stays ``dontcare``; ``custom_classes`` still replaces them),
and every annotation left out (unknown class, degenerate box, out of image,
missing image, malformed line or record) is one line of the dataset's errors
report naming file, line or record and reason.

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

import numpy as np
from wtforms import BooleanField, FloatField, Form, IntegerField, SelectField, StringField, validators
from wtforms.validators import ValidationError

from digits_core import resize_geometry, select_choices, transform_boxes

from . import listing
from .annotations import detect, items
from .base import ImageIngestionBase
from .detection_labels import class_lookup, pair_kitti, parse_class_mapping, parse_kitti
from .encoding import encode_image_file
from .forms import DEFAULT_IMAGE_SIZE, existing_file, existing_folder, expand, image_option_fields, shared_image_size
from .inference import read_entry_bytes
from .segmentation import default_palette

logger = logging.getLogger("digits_data_images")

LABEL_FORMATS = [
    ("auto", "Detect from the files (the reason is logged)"),
    ("kitti", "KITTI (a label folder of .txt files)"),
    ("coco", "COCO (one JSON file per stage)"),
    ("voc", "Pascal VOC (a label folder of .xml files)"),
    ("yolo", "YOLO / Ultralytics (a label folder of .txt files, names in data.yaml)"),
    ("cvat", "CVAT for images 1.1 (one XML file per stage)"),
    ("labelstudio", "Label Studio (one JSON export per stage)"),
]
#: Formats that read a label folder (the others: one annotation file per stage).
FOLDER_FORMATS = ("kitti", "voc", "yolo")


class DetectionForm(Form):
    """Dataset options of ``object-detection`` (DIGITS's objectDetection form plus COCO)."""

    label_format = SelectField(
        "Label format",
        choices=select_choices(LABEL_FORMATS),
        default="auto",
        description="KITTI, Pascal VOC or YOLO label folders; COCO, CVAT or Label Studio annotation files; "
        "auto: told from the files",
    )
    train_image_folder = StringField(
        "Training image folder",
        description="Folder of training images",
        validators=[validators.InputRequired(), existing_folder("training image folder")],
    )
    train_label_folder = StringField(
        "Training label folder",
        description="KITTI, YOLO: IDENTIFIER.txt, VOC: IDENTIFIER.xml per training image",
        validators=[existing_folder("training label folder")],
    )
    train_annotations = StringField(
        "Training annotations (COCO, CVAT, Label Studio)",
        description="COCO or Label Studio JSON, or CVAT XML, of the training images",
        validators=[existing_file("training annotations file")],
    )
    val_image_folder = StringField(
        "Validation image folder",
        description="Separate validation images (optional)",
        validators=[existing_folder("validation image folder")],
    )
    val_label_folder = StringField(
        "Validation label folder",
        description="Label files of the validation images",
        validators=[existing_folder("validation label folder")],
    )
    val_annotations = StringField(
        "Validation annotations (COCO, CVAT, Label Studio)",
        description="The validation images' annotation file",
        validators=[existing_file("validation annotations file")],
    )
    val_percent = FloatField(
        "Validation %",
        default=10.0,
        validators=[validators.NumberRange(0, 99)],
        description="Share of the training images used for validation when no validation folder is given",
    )
    test_image_folder = StringField(
        "Test image folder",
        description="Separate held-out test images (optional; digits evaluate --stage test)",
        validators=[existing_folder("test image folder")],
    )
    test_label_folder = StringField(
        "Test label folder",
        description="Label files of the test images",
        validators=[existing_folder("test label folder")],
    )
    test_annotations = StringField(
        "Test annotations (COCO, CVAT, Label Studio)",
        description="The test images' annotation file",
        validators=[existing_file("test annotations file")],
    )
    test_percent = FloatField(
        "Test %",
        default=0.0,
        validators=[validators.NumberRange(0, 99)],
        description="Share of the training images held out for testing when no test folder is given",
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
        fmt = form.label_format.data
        if fmt in FOLDER_FORMATS and not field.data:
            raise ValidationError(f"{fmt.upper()} labels need a training label folder")
        if fmt == "auto" and not field.data and not form.train_annotations.data:
            raise ValidationError("give a training label folder or a training annotations file")

    def validate_train_annotations(form, field):
        fmt = form.label_format.data
        if fmt not in FOLDER_FORMATS and fmt != "auto" and not field.data:
            raise ValidationError(f"{fmt.upper()} labels need a training annotations file")

    def validate_val_image_folder(form, field):
        fmt = form.label_format.data
        folder = fmt in FOLDER_FORMATS or (fmt == "auto" and not form.train_annotations.data)
        other = form.val_label_folder.data if folder else form.val_annotations.data
        if bool(field.data) != bool(other):
            what = "validation label folder" if folder else "validation annotations file"
            raise ValidationError(f"give both a validation image folder and a {what}, or neither")

    def validate_test_image_folder(form, field):
        fmt = form.label_format.data
        folder = fmt in FOLDER_FORMATS or (fmt == "auto" and not form.train_annotations.data)
        other = form.test_label_folder.data if folder else form.test_annotations.data
        if bool(field.data) != bool(other):
            what = "test label folder" if folder else "test annotations file"
            raise ValidationError(f"give both a test image folder and a {what}, or neither")

    def validate_test_percent(form, field):
        val = 0.0 if form.val_image_folder.data else float(form.val_percent.data or 0)
        test = 0.0 if form.test_image_folder.data else float(field.data or 0)
        if val + test >= 100:
            raise ValidationError(f"validation % ({val:g}) plus test % ({test:g}) must be under 100")

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

    dataset_form = DetectionForm
    dataset_template = "templates/detection.html"

    # -- itemizing (parent process) -------------------------------------------------

    def _format(self) -> str:
        """The label format; ``auto`` is told from the training labels (logged, kept in userdata)."""
        fmt = self.label_format or "auto"
        if fmt != "auto":
            return fmt
        if self.train_annotations:
            fmt, reason = detect.detect_file(expand(self.train_annotations))
        else:
            fmt, reason = detect.detect_folder(expand(self.train_label_folder), want="boxes")
        # a warning, so the command line shows it without -v: a choice made for the user
        logger.warning("object-detection: label format auto -> %s: %s (set label_format to choose)", fmt, reason)
        self.userdata["label_format_detected"] = {"format": fmt, "reason": reason}
        return fmt

    def _kitti_sources(self) -> tuple[dict[str, list], list]:
        """KITTI entries of the training and (optional) validation folders, and the images without labels."""
        self.userdata["class_labels"] = parse_class_mapping(self.custom_classes)
        found, missing = {}, []
        folders = [("train", self.train_image_folder, self.train_label_folder)]
        if self.val_image_folder:
            folders.append(("val", self.val_image_folder, self.val_label_folder))
        if getattr(self, "test_image_folder", None):
            folders.append(("test", self.test_image_folder, self.test_label_folder))
        for stage, images, labels in folders:
            image_folder = expand(images)
            pairs, unmatched = pair_kitti(image_folder, expand(labels), listing.list_images(image_folder))
            found[stage] = [("kitti", image, label, None) for image, label in pairs]
            missing += unmatched
        return found, missing

    def _annotation_sources(self, fmt: str) -> tuple[dict[str, list], list]:
        """Entries of the other formats (:mod:`.annotations`), problems included as ``skip`` entries."""
        folder = fmt in FOLDER_FORMATS
        sources = [("train", self.train_image_folder, self.train_label_folder if folder else self.train_annotations)]
        if self.val_image_folder:
            sources.append(("val", self.val_image_folder, self.val_label_folder if folder else self.val_annotations))
        if getattr(self, "test_image_folder", None):
            sources.append(
                ("test", self.test_image_folder, self.test_label_folder if folder else self.test_annotations)
            )
        parsed, missing = {}, []
        for stage, images, labels in sources:
            parsed[stage], unmatched = items.read_source(fmt, expand(images), expand(labels), "boxes")
            missing += unmatched
        fixed = parse_class_mapping(self.custom_classes) if (self.custom_classes or "").strip() else None
        names = items.class_names("boxes", list(parsed.values()), fixed)
        self.userdata["class_labels"] = names
        others: list[str] | None = [] if fixed else None
        found = {stage: items.stage_entries(p, names, "boxes", others) for stage, p in parsed.items()}
        if others:
            logger.warning(
                "object-detection: %d boxes of classes not in custom classes became dontcare (e.g. %s)",
                len(others),
                ", ".join(sorted(set(others))[:5]),
            )
        self.userdata["other_classes"] = {"count": len(others or []), "examples": sorted(set(others or []))[:5]}
        return found, missing

    def _build_split(self) -> dict[str, list]:
        fmt = self._format()
        found, missing = self._kitti_sources() if fmt == "kitti" else self._annotation_sources(fmt)
        train = [e for e in found["train"] if e[0] != "skip"]
        skipped = [e for entries in found.values() for e in entries if e[0] == "skip"]
        if not train:
            labels = self.train_label_folder if fmt in FOLDER_FORMATS else self.train_annotations
            first = f" (first problem: {skipped[0][1]}: {skipped[0][2]})" if skipped else ""
            raise ValueError(f"no image in {self.train_image_folder} has labels in {labels}{first}")
        stages: dict[str, list] = {"train": [], "val": [], "test": sorted(found.get("test", []))}
        # datasets made before the test split (no test_* in their userdata) split exactly as they did
        test_folder = getattr(self, "test_image_folder", None)
        test_pct = 0.0 if test_folder else float(getattr(self, "test_percent", 0) or 0)
        if self.val_image_folder and not test_pct:
            stages["val"] = sorted(found["val"])
            stages["train"] = sorted(found["train"])
        else:
            shuffled = listing.seeded_shuffle(train, self.seed, "split")
            val_pct = 0.0 if self.val_image_folder else float(self.val_percent or 0)
            _, n_val, n_test = listing.split_counts(len(shuffled), val_pct, test_pct)
            stages["val"] = sorted(found["val"]) if self.val_image_folder else sorted(shuffled[:n_val])
            if test_pct:  # held out from the training images, after the validation share
                stages["test"] = sorted(shuffled[n_val : n_val + n_test])
            stages["train"] = sorted(shuffled[n_val + n_test :]) + [e for e in found["train"] if e[0] == "skip"]
        if missing:
            logger.warning(
                "object-detection: %d images have no labels and are left out (e.g. %s)", len(missing), missing[0]
            )
        if skipped:
            logger.warning(
                "object-detection: %d annotations or label files are left out (see the errors report; e.g. %s: %s)",
                len(skipped),
                skipped[0][1],
                skipped[0][2],
            )
        self._resolve_size([e for e in stages["train"] + stages["val"] if e[0] != "skip"])
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
        kind, image_path, labels, extra = entry
        if kind == "skip":
            raise ValueError(f"{image_path}: {labels}")
        if kind == "kitti":
            boxes = parse_kitti(labels, class_lookup(parse_class_mapping(self.custom_classes)))
        else:
            boxes = np.asarray(labels, np.float64).reshape(-1, 5)
        from PIL import Image

        try:
            with Image.open(image_path) as image:
                src_w, src_h = image.size
        except OSError as exc:
            raise ValueError(f"{image_path}: cannot read image ({exc})") from None
        if kind == "ann":
            boxes = _to_source_pixels(boxes, extra, image_path, src_w, src_h)
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


def _to_source_pixels(boxes: np.ndarray, extra, image_path: str, src_w: int, src_h: int) -> np.ndarray:
    """Boxes of an ``ann`` entry in the image's pixels (YOLO fractions scaled), float32.

    Raises:
        ValueError: The annotation file declares another image size than the image's.
    """
    declared, normalised = extra
    if declared is not None and tuple(declared) != (src_w, src_h):
        raise ValueError(
            f"{image_path}: the annotations are for a {declared[0]}x{declared[1]} image, the image is {src_w}x{src_h}"
        )
    if normalised:
        boxes = boxes * np.array([1, src_w, src_h, src_w, src_h], np.float64)
    return boxes.astype(np.float32)
