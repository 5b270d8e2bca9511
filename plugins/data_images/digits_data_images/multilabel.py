"""``image-multilabel``: images with any number of labels each → label kind ``multilabel``.

Three sources, one per dataset:

* ``labels_csv``: see below;
* ``tag_folder``: one sub-folder per label; an image linked (symlink or hard
  link: the same real file) into several sub-folders carries each of their
  labels. Copies are different images;
* ``coco_annotations`` with ``image_folder``: each image carries the
  categories of its annotations (crowd regions included); class names are
  the categories by id; an image listed without annotations carries none.

The CSV has one image per row: ``path,labels`` with the labels separated by
``;`` (``photos/001.jpg,cat;dog``); a header row ``path,labels`` is
skipped, as are blank rows and rows starting with ``#``. An image with an
empty labels field carries no label (all zeros). Relative paths start at
``image_folder``, or else at the CSV's folder; every path goes through the
data-root gate (:func:`digits_core.paths.resolve_in_roots`), named by file
and line, as every path read from a file.

Classes are the names of ``class_labels_file`` (one per line, index =
class id; a label not in it leaves its row out, named in the errors report),
or else every label used, sorted. Each record's label is a multi-hot
``uint8`` vector with one entry per class. Validation rows come from
``val_labels_csv`` or else ``val_percent`` of the rows (seeded).

Images go through the same type, size, resize and encoding options as
``image-classification``.
"""

from __future__ import annotations

import csv
import io
import os

import numpy as np
from wtforms import BooleanField, FloatField, Form, StringField, validators
from wtforms.validators import ValidationError

from digits_core.paths import resolve_in_roots

from . import listing
from .base import ImageIngestionBase
from .encoding import encode_image_file
from .forms import existing_file, existing_folder, expand, image_option_fields
from .inference import encode_inference_entry

#: Largest labels CSV read (bytes).
MAX_CSV_BYTES = 256 * 2**20


class MultilabelForm(Form):
    """Dataset options of ``image-multilabel``."""

    labels_csv = StringField(
        "Labels CSV",
        description='One image per row: path,labels with labels separated by ";" (e.g. a.jpg,cat;dog)',
        validators=[existing_file("labels CSV")],
    )
    tag_folder = StringField(
        "Tag folder",
        description="Or: one sub-folder per label; an image linked into several sub-folders carries each label",
        validators=[existing_folder("tag folder")],
    )
    coco_annotations = StringField(
        "COCO annotations",
        description="Or: a COCO JSON file; each image of the image folder carries its annotations' categories",
        validators=[existing_file("COCO annotations file")],
    )
    image_folder = StringField(
        "Image folder",
        description="Relative paths in the CSVs start here (default: the CSV's folder); COCO: the images",
        validators=[existing_folder("image folder")],
    )
    val_labels_csv = StringField(
        "Validation labels CSV",
        description="Separate validation rows (optional)",
        validators=[existing_file("validation labels CSV")],
    )
    val_percent = FloatField(
        "Validation %",
        default=10.0,
        validators=[validators.NumberRange(0, 99)],
        description="Share of the rows used for validation when no validation CSV is given",
    )
    class_labels_file = StringField(
        "Class labels file",
        description="Class names, one per line (index = class id); empty: every label used, sorted",
        validators=[existing_file("class labels file")],
    )
    shuffle = BooleanField("Shuffle", default=True, description="Write the records in a seeded random order")
    image_type, width, height, resize_mode, encoding, jpg_quality, seed = image_option_fields()

    def validate_labels_csv(form, field):
        given = [f for f in (field, form.tag_folder, form.coco_annotations) if f.data]
        if len(given) != 1:
            raise ValidationError("give exactly one of a labels CSV, a tag folder or COCO annotations")
        if form.coco_annotations.data and not form.image_folder.data:
            raise ValidationError("COCO annotations need the image folder their file names start in")


def read_tag_folder(folder: str) -> tuple[list[tuple[str, tuple[str, ...], str]], list[str]]:
    """``(rows, label names)`` of a tag folder: images grouped by the file they are (device and inode, so
    symlinks and hard links to one file are one image), labels by sub-folder."""
    by_file: dict[tuple[int, int], tuple[str, list[str]]] = {}
    names = listing.class_folders(folder)
    for name in names:
        for path in listing.list_images(os.path.join(folder, name)):
            stat = os.stat(path)  # follows symlinks; a hard link has the same inode
            first, labels = by_file.setdefault((stat.st_dev, stat.st_ino), (path, []))
            labels.append(name)
    rows = [(first, tuple(labels), first) for first, labels in by_file.values()]
    return sorted(rows), names


def read_coco_categories(path: str, image_folder: str) -> tuple[list, list[tuple], list[str]]:
    """``(rows, problems, category names)`` of a COCO file: each image's categories, matched in ``image_folder``."""
    from .annotations.items import read_source

    parsed, _ = read_source("coco", image_folder, path, "boxes")
    rows = [
        (image, tuple(dict.fromkeys(shape.label for shape in ann.shapes)), ann.where)
        for image, ann in sorted(parsed.images.items())
    ]
    return rows, [("skip", where, reason, None) for where, reason in parsed.problems], parsed.classes


def read_labels_csv(path: str, root: str | None) -> tuple[list[tuple[str, tuple[str, ...], str]], list[tuple]]:
    """Read a ``path,labels`` CSV.

    Returns:
        ``(rows, problems)``: rows are ``(image path, label names, where)``; problems are
        ``("skip", where, reason, None)`` entries for rows that cannot be used.

    Raises:
        ValueError: The file cannot be read (names it).
    """
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            text = handle.read(MAX_CSV_BYTES + 1)
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read labels CSV {path} ({type(exc).__name__})") from None
    if len(text) > MAX_CSV_BYTES:
        raise ValueError(f"labels CSV {path} is larger than {MAX_CSV_BYTES // 2**20} MiB")
    base = root or os.path.dirname(os.path.abspath(path))
    rows, problems = [], []
    for number, fields in enumerate(csv.reader(io.StringIO(text)), 1):
        where = f"{path} line {number}"
        if not fields or not "".join(fields).strip() or fields[0].lstrip().startswith("#"):
            continue
        if number == 1 and [f.strip().lower() for f in fields] == ["path", "labels"]:
            continue
        if len(fields) != 2 or not fields[0].strip():
            problems.append(("skip", where, f'expected 2 columns "path,labels", found {len(fields)}', None))
            continue
        image = str(resolve_in_roots(fields[0].strip(), base=base, where=where))
        names = tuple(dict.fromkeys(n.strip() for n in fields[1].split(";") if n.strip()))
        rows.append((image, names, where))
    return rows, problems


class ImageMultilabelIngestion(ImageIngestionBase):
    """Multi-label image classification datasets from ``path,labels`` CSVs."""

    plugin_id = "image-multilabel"
    label_kind = "multilabel"
    title = "Multi-label classification (CSV of path,labels)"
    category = "Images"

    dataset_form = MultilabelForm
    dataset_template = "templates/multilabel.html"

    def _build_split(self) -> dict[str, list]:
        root = expand(self.image_folder)
        order: list[str] | None = None
        if self.tag_folder:
            (train, order), problems = read_tag_folder(expand(self.tag_folder)), []
        elif self.coco_annotations:
            train, problems, order = read_coco_categories(expand(self.coco_annotations), root)
        else:
            train, problems = read_labels_csv(expand(self.labels_csv), root)
        val: list = []
        if self.val_labels_csv:
            val, val_problems = read_labels_csv(expand(self.val_labels_csv), root)
        fixed = listing.read_labels_file(expand(self.class_labels_file)) if self.class_labels_file else None
        names = fixed or order or sorted({n for _, labels, _ in train + val for n in labels})
        if not names:
            raise ValueError(f"{self.labels_csv or self.tag_folder or self.coco_annotations} names no label")
        lookup = {n: i for i, n in enumerate(names)}

        def entries(rows):
            out, bad = [], []
            for image, labels, where in rows:
                unknown = [n for n in labels if n not in lookup]
                if unknown:
                    bad.append(("skip", where, f'unknown class: "{unknown[0]}" is not in the class labels file', None))
                else:
                    out.append(("image", image, tuple(sorted(lookup[n] for n in labels)), where))
            return out, bad

        train_entries, train_bad = entries(train)
        stages: dict[str, list] = {"train": [], "val": [], "test": []}
        if self.val_labels_csv:
            val_entries, val_bad = entries(val)
            stages["val"] = sorted(val_entries) + val_bad + val_problems
            stages["train"] = sorted(train_entries)
        else:
            shuffled = listing.seeded_shuffle(train_entries, self.seed, "split")
            _, n_val, _ = listing.split_counts(len(shuffled), float(self.val_percent or 0), 0)
            stages["val"], stages["train"] = sorted(shuffled[:n_val]), sorted(shuffled[n_val:])
        stages["train"] += train_bad + problems
        if self.shuffle:
            stages = {s: listing.seeded_shuffle(e, self.seed, f"stage:{s}") for s, e in stages.items()}
        self.userdata["class_labels"] = list(names)
        return stages

    def encode_entry(self, entry):
        """Read, convert, resize and encode one image; returns ``(feature, uint8 multi-hot vector)``."""
        if self.is_inference_db:
            return encode_inference_entry(self, entry)
        kind, path, ids, where = entry
        if kind == "skip":
            raise ValueError(f"{path}: {ids}")
        label = np.zeros(len(self.userdata["class_labels"]), np.uint8)
        label[list(ids)] = 1
        try:
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
        except (OSError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from None
        return feature, label

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_split"] = None
        return state
