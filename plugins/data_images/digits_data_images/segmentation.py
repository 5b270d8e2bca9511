"""``image-segmentation``: an image folder and a label folder matched by file name → a segmentation dataset.

Images and labels are matched by file name without extension
(``img/0001.jpg`` ↔ ``labels/0001.png``); images without a label are left
out and counted in ``userdata["unmatched_images"]``. Labels are class-index
images: palette PNGs (the palette becomes ``color_palette``) or grayscale
images whose values are class ids (a default palette is generated). RGB
label images are rejected. A ``class_labels_file`` names the classes (one
per line, index = class id); without it the classes are numbered.

Images go through the same type/size/resize/encoding options as
``image-classification``; labels are resized with nearest neighbour (padding
is class 0) and stored raw as ``H×W`` uint8 masks (uint16 for 16-bit
label images).

Validation images come from ``val_image_folder``/``val_label_folder`` or
else ``val_percent`` of the images (seeded shuffle); in that case
``test_percent`` (default 0) more are held out as the ``test`` stage, the
test set of ``digits evaluate``.

``label_format`` (default ``auto``, told from the files and logged) also
reads masks from annotation tools (:mod:`.annotations`): COCO polygons and
RLE, YOLO segmentation polygons (a label folder of ``.txt`` files), CVAT
for images 1.1 polygons and masks, Label Studio brush RLE and polygons
(``coco``, ``cvat`` and ``labelstudio`` take an ``annotations`` file per
stage). Their class names come from the files (class 0 is ``background``;
a ``class_labels_file`` replaces them); shapes are painted in file order,
later over earlier; every shape left out is a line of the errors report.
``voc`` is the label-image folder described above (VOC's ``SegmentationClass``).
"""

from __future__ import annotations

import logging
import os

import numpy as np
from wtforms import BooleanField, FloatField, Form, SelectField, StringField, validators
from wtforms.validators import ValidationError

from digits_core import select_choices

from . import listing
from .annotations import detect, items
from .annotations.raster import paint
from .base import ImageIngestionBase
from .encoding import encode_image_file, read_file
from .forms import existing_file, existing_folder, expand, image_option_fields
from .inference import encode_inference_entry
from .resize import open_image, resize_image

logger = logging.getLogger("digits_data_images")

LABEL_FORMATS = [
    ("auto", "Detect from the files (the reason is logged)"),
    ("voc", "Label images (palette or grayscale PNGs, as VOC's SegmentationClass)"),
    ("coco", "COCO polygons or RLE (one JSON file per stage)"),
    ("yolo", "YOLO segmentation polygons (a label folder of .txt files, names in data.yaml)"),
    ("cvat", "CVAT for images 1.1 polygons and masks (one XML file per stage)"),
    ("labelstudio", "Label Studio brushes and polygons (one JSON export per stage)"),
]
#: Formats that read a label folder (the others: one annotation file per stage).
FOLDER_FORMATS = ("voc", "yolo")


def default_palette(n: int = 256) -> list[list[int]]:
    """Return the Pascal VOC colour map (bit-interleaved), ``n`` ``[r, g, b]`` entries."""
    palette = []
    for index in range(n):
        r = g = b = 0
        c = index
        for shift in range(7, -1, -1):
            r |= ((c >> 0) & 1) << shift
            g |= ((c >> 1) & 1) << shift
            b |= ((c >> 2) & 1) << shift
            c >>= 3
        palette.append([r, g, b])
    return palette


class SegmentationForm(Form):
    """Dataset options of ``image-segmentation``."""

    image_folder = StringField(
        "Image folder",
        description="Folder of input images",
        validators=[validators.InputRequired(), existing_folder("image folder")],
    )
    label_format = SelectField(
        "Label format",
        choices=select_choices(LABEL_FORMATS),
        default="auto",
        description="Label images, YOLO polygon files, or a COCO, CVAT or Label Studio file; auto: told from the files",
    )
    label_folder = StringField(
        "Label folder",
        description="Folder of label images with the same file names (palette PNGs or grayscale class indexes), "
        "or of YOLO segmentation .txt files",
        validators=[existing_folder("label folder")],
    )
    annotations = StringField(
        "Annotations file (COCO, CVAT, Label Studio)",
        description="COCO or Label Studio JSON, or CVAT XML, of the images",
        validators=[existing_file("annotations file")],
    )
    val_annotations = StringField(
        "Validation annotations file",
        description="The validation images' annotation file",
        validators=[existing_file("validation annotations file")],
    )
    val_image_folder = StringField(
        "Validation image folder",
        description="Separate validation images",
        validators=[existing_folder("validation image folder")],
    )
    val_label_folder = StringField(
        "Validation label folder",
        description="Labels of the separate validation images",
        validators=[existing_folder("validation label folder")],
    )
    val_percent = FloatField(
        "Validation %",
        default=10.0,
        validators=[validators.NumberRange(0, 99)],
        description="Share of the images used for validation when no validation folders are given",
    )
    test_percent = FloatField(
        "Test %",
        default=0.0,
        validators=[validators.NumberRange(0, 99)],
        description="Share of the images held out for testing (digits evaluate) when no validation folders are given",
    )
    class_labels_file = StringField(
        "Class labels file",
        description="Class names, one per line (index = class id)",
        validators=[existing_file("class labels file")],
    )
    shuffle = BooleanField("Shuffle", default=True, description="Write the records in a seeded random order")
    image_type, width, height, resize_mode, encoding, jpg_quality, seed = image_option_fields()

    def validate_test_percent(form, field):
        val = form.val_percent.data or 0
        if field.data and val + field.data >= 100:
            raise ValidationError(f"validation % ({val}) plus test % ({field.data}) must be under 100")

    def validate_label_folder(form, field):
        fmt = form.label_format.data
        if fmt in FOLDER_FORMATS and not field.data:
            raise ValidationError(f"{fmt.upper()} labels need a label folder")
        if fmt == "auto" and not field.data and not form.annotations.data:
            raise ValidationError("give a label folder or an annotations file")

    def validate_annotations(form, field):
        fmt = form.label_format.data
        if fmt not in FOLDER_FORMATS and fmt != "auto" and not field.data:
            raise ValidationError(f"{fmt.upper()} labels need an annotations file")

    def validate_val_label_folder(form, field):
        fmt = form.label_format.data
        if fmt not in FOLDER_FORMATS and (fmt != "auto" or form.annotations.data):
            if bool(form.val_annotations.data) != bool(form.val_image_folder.data):
                raise ValidationError(
                    "give both a validation image folder and a validation annotations file, or neither"
                )
        elif bool(field.data) != bool(form.val_image_folder.data):
            raise ValidationError("give both a validation image folder and a validation label folder, or neither")


def match_by_name(image_folder: str, label_folder: str) -> tuple[list[tuple[str, str]], list[str]]:
    """Pair images with labels by file name without extension; return ``(pairs, unmatched images)``."""
    labels = {}
    for path in listing.list_images(label_folder):
        rel = os.path.relpath(path, label_folder)
        labels.setdefault(os.path.splitext(rel)[0], path)
    pairs, unmatched = [], []
    for path in listing.list_images(image_folder):
        key = os.path.splitext(os.path.relpath(path, image_folder))[0]
        if key in labels:
            pairs.append((path, labels[key]))
        else:
            unmatched.append(path)
    return pairs, unmatched


def read_label(path: str) -> tuple[np.ndarray, object]:
    """Read a label image as an ``H×W`` class-index array; returns ``(mask, pillow image mode)``.

    Raises:
        ValueError: Unreadable, or an RGB label image (names the file).
    """
    try:
        image = open_image(read_file(path))
    except ValueError as exc:
        raise ValueError(f"label {path}: {exc}") from None
    mode = image.mode
    if mode in ("P", "L", "1"):
        mask = np.asarray(image if mode != "1" else image.convert("L").point(lambda v: 1 if v else 0))
        return mask.astype(np.uint8), mode
    if mode in ("I;16", "I;16B", "I;16L", "I;16N"):
        return np.asarray(image).astype(np.uint16), mode
    if mode == "I":
        arr = np.asarray(image)
        if arr.min() < 0 or arr.max() > 65535:
            raise ValueError(f"label {path}: class ids outside 0..65535")
        return arr.astype(np.uint16), mode
    raise ValueError(f"label {path} is a {mode} image; save labels as palette PNGs or grayscale class-index images")


class ImageSegmentationIngestion(ImageIngestionBase):
    """Image segmentation datasets from an image folder and a matching label folder."""

    plugin_id = "image-segmentation"
    label_kind = "mask"
    #: An inference list "with labels" pairs each image with its mask (:mod:`.inference`).
    label_file_kind = "mask image"
    title = "Image segmentation (image + label folders)"
    category = "Images"

    dataset_form = SegmentationForm
    dataset_template = "templates/segmentation.html"

    def _format(self) -> str:
        """The label format; ``auto`` is told from the labels (logged, kept in userdata)."""
        fmt = self.label_format or "auto"
        if fmt != "auto":
            return fmt
        if self.annotations:
            fmt, reason = detect.detect_file(expand(self.annotations))
        else:
            fmt, reason = detect.detect_folder(expand(self.label_folder), want="masks")
        # a warning, so the command line shows it without -v: a choice made for the user
        logger.warning("image-segmentation: label format auto -> %s: %s (set label_format to choose)", fmt, reason)
        self.userdata["label_format_detected"] = {"format": fmt, "reason": reason}
        return fmt

    def _test_percent(self) -> float:
        """The held-out test share (0 for datasets made before the option existed)."""
        return float(getattr(self, "test_percent", 0) or 0)

    def _build_split(self) -> dict[str, list]:
        fmt = self._format()
        if fmt != "voc":
            return self._annotation_split(fmt)
        pairs, unmatched = match_by_name(expand(self.image_folder), expand(self.label_folder))
        if not pairs:
            raise ValueError(f"no image in {self.image_folder} has a label with the same name in {self.label_folder}")
        if unmatched:
            logger.warning(
                "image-segmentation: %d images have no label and are left out (e.g. %s)", len(unmatched), unmatched[0]
            )
        stages = {"train": [], "val": [], "test": []}
        if self.val_image_folder:
            val_pairs, val_unmatched = match_by_name(expand(self.val_image_folder), expand(self.val_label_folder))
            unmatched += val_unmatched
            stages["train"] = sorted(pairs)
            stages["val"] = sorted(val_pairs)
        else:
            shuffled = listing.seeded_shuffle(pairs, self.seed, "split")
            _, n_val, n_test = listing.split_counts(len(shuffled), float(self.val_percent or 0), self._test_percent())
            stages["val"] = sorted(shuffled[:n_val])
            stages["test"] = sorted(shuffled[n_val : n_val + n_test])
            stages["train"] = sorted(shuffled[n_val + n_test :])
        if self.shuffle:
            stages = {s: listing.seeded_shuffle(p, self.seed, f"stage:{s}") for s, p in stages.items()}
        labels = listing.read_labels_file(expand(self.class_labels_file)) if self.class_labels_file else None
        palette = self._palette(pairs[0][1], len(labels) if labels else None)
        self.userdata["class_labels"] = labels
        self.userdata["color_palette"] = palette
        self.userdata["unmatched_images"] = {"count": len(unmatched), "examples": unmatched[:5]}
        return stages

    def _annotation_split(self, fmt: str) -> dict[str, list]:
        """Stages from annotation files (:mod:`.annotations`); problems become ``skip`` entries."""
        folder = fmt in FOLDER_FORMATS
        sources = [("train", self.image_folder, self.label_folder if folder else self.annotations)]
        if self.val_image_folder:
            sources.append(("val", self.val_image_folder, self.val_label_folder if folder else self.val_annotations))
        parsed, unmatched = {}, []
        for stage, images, labels in sources:
            parsed[stage], missing = items.read_source(fmt, expand(images), expand(labels), "masks")
            unmatched += missing
        fixed = listing.read_labels_file(expand(self.class_labels_file)) if self.class_labels_file else None
        names = items.class_names("masks", list(parsed.values()), fixed)
        others: list[str] | None = [] if fixed else None
        found = {stage: items.stage_entries(p, names, "masks", others) for stage, p in parsed.items()}
        if others:
            logger.warning(
                "image-segmentation: %d shapes of classes not in the class labels file are left unpainted (e.g. %s)",
                len(others),
                ", ".join(sorted(set(others))[:5]),
            )
        self.userdata["other_classes"] = {"count": len(others or []), "examples": sorted(set(others or []))[:5]}
        images = [e for e in found["train"] if e[0] == "ann"]
        skipped = [e for entries in found.values() for e in entries if e[0] == "skip"]
        if not images:
            first = f" (first problem: {skipped[0][1]}: {skipped[0][2]})" if skipped else ""
            raise ValueError(f"no image in {self.image_folder} has annotations{first}")
        stages: dict[str, list] = {"train": [], "val": [], "test": []}
        if self.val_image_folder:
            stages["train"], stages["val"] = sorted(found["train"]), sorted(found["val"])
        else:
            shuffled = listing.seeded_shuffle(images, self.seed, "split")
            _, n_val, n_test = listing.split_counts(len(shuffled), float(self.val_percent or 0), self._test_percent())
            stages["val"] = sorted(shuffled[:n_val])
            stages["test"] = sorted(shuffled[n_val : n_val + n_test])
            stages["train"] = sorted(shuffled[n_val + n_test :]) + [e for e in found["train"] if e[0] == "skip"]
        if unmatched or skipped:
            logger.warning(
                "image-segmentation: %d images without annotations left out, %d shapes or files left out "
                "(see the errors report)",
                len(unmatched),
                len(skipped),
            )
        if self.shuffle:
            stages = {s: listing.seeded_shuffle(p, self.seed, f"stage:{s}") for s, p in stages.items()}
        self.userdata["class_labels"] = names
        self.userdata["color_palette"] = default_palette(max(len(names), 256))[: len(names)]
        self.userdata["unmatched_images"] = {"count": len(unmatched), "examples": unmatched[:5]}
        return stages

    @staticmethod
    def _palette(label_path: str, num_classes: int | None) -> list[list[int]]:
        """Palette of the first label image (palette PNG), else the default colour map."""
        from PIL import Image

        palette = None
        try:
            with Image.open(label_path) as image:
                if image.mode == "P":
                    flat = image.getpalette() or []
                    palette = [list(flat[i : i + 3]) for i in range(0, len(flat) - 2, 3)]
        except OSError:
            palette = None
        if not palette:
            palette = default_palette(256)
        if num_classes:
            palette = (palette + default_palette(max(num_classes, 256))[len(palette) :])[:num_classes]
        return palette

    def encode_entry(self, entry):
        """Encode one image and its label; returns ``(feature, H×W mask)``."""
        if self.is_inference_db:
            feature, label_path = encode_inference_entry(self, entry)
            if not isinstance(label_path, str):
                return feature, label_path
            return feature, self._mask(label_path, entry[0])  # ground truth from the list, as training reads it
        if len(entry) == 4 and entry[0] == "skip":
            raise ValueError(f"{entry[1]}: {entry[2]}")
        image_path, label_path = entry if len(entry) == 2 else (entry[1], entry)
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
        return feature, self._mask(label_path, image_path)

    def _mask(self, label_path, image_path: str) -> np.ndarray:
        """The label image (or the ``ann`` entry's shapes) of ``image_path`` as the stored ``H×W`` mask
        (resized by nearest neighbour)."""
        from PIL import Image

        with Image.open(image_path) as image:
            src_w, src_h = image.size
        if isinstance(label_path, tuple):
            _, _, shapes, (declared, _) = label_path
            if declared is not None and tuple(declared) != (src_w, src_h):
                raise ValueError(
                    f"{image_path}: the annotations are for a {declared[0]}x{declared[1]} image, "
                    f"the image is {src_w}x{src_h}"
                )
            dtype = np.uint8 if len(self.userdata.get("class_labels") or ()) <= 256 else np.uint16
            try:
                mask = paint(shapes, src_w, src_h, dtype)
            except ValueError as exc:
                raise ValueError(f"{image_path}: {exc}") from None
        else:
            mask, _ = read_label(label_path)
        # The label must cover the image before resizing: compare the source sizes.
        if mask.shape != (src_h, src_w):
            raise ValueError(
                f"label {label_path} is {mask.shape[1]}x{mask.shape[0]} but image {image_path} is {src_w}x{src_h}"
            )
        mask = resize_image(mask[:, :, None], int(self.height), int(self.width), self.resize_mode, is_label=True)
        return np.ascontiguousarray(mask[:, :, 0])

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_split"] = None
        return state
