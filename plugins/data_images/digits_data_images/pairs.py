"""``image-pairs``: same/different pairs drawn from a class-folder dataset (Siamese training).

Each record is one pair stacked as a 2-channel image (channel 0 = first
image, channel 1 = second, both grayscale and resized alike) with the class
label 1 when both images show the same class and 0 otherwise
(``class_labels`` ``["different", "same"]``). This is the dataset
``examples/networks/siamese.py`` trains on.

Images come from class folders (sorted sub-folder names are the classes,
as in ``image-classification``). ``val_percent`` of each class's images are
held out first, so validation pairs never reuse a training image. Pairs are
drawn with a seeded generator: ``same_percent`` of them same-class (two
different images of one class), the rest from two different classes;
``train_pairs`` and ``val_pairs`` set how many. Features are stored raw
(``uint8``/``uint16``), since PNG/JPEG hold 1 or 3 channels only.
"""

from __future__ import annotations

import io
import random

import numpy as np
from wtforms import BooleanField, FloatField, Form, IntegerField, StringField, validators

from digits_core import DataIngestion

from . import listing
from .encoding import load_resized, read_file
from .forms import IMAGE_OPTION_FIELDS, existing_folder, expand, fill_defaults, image_option_fields


class PairsForm(Form):
    """Dataset options of ``image-pairs``."""

    folder = StringField(
        "Training images",
        description="Folder with one sub-folder of images per class",
        validators=[validators.InputRequired(), existing_folder("training folder")],
    )
    train_pairs = IntegerField(
        "Training pairs",
        default=1000,
        validators=[validators.InputRequired(), validators.NumberRange(1, 10_000_000)],
        description="How many training pairs to draw",
    )
    val_pairs = IntegerField(
        "Validation pairs",
        default=200,
        validators=[validators.InputRequired(), validators.NumberRange(0, 10_000_000)],
        description="How many validation pairs to draw",
    )
    val_percent = FloatField(
        "Validation images %",
        default=25.0,
        validators=[validators.NumberRange(0, 90)],
        description="Share of each class's images held out to draw validation pairs from",
    )
    same_percent = FloatField(
        "Same-class pairs %",
        default=50.0,
        validators=[validators.NumberRange(0, 100)],
        description="Share of pairs whose two images show the same class",
    )
    shuffle = BooleanField("Shuffle", default=True, description="Write the records in a seeded random order")
    width, height, resize_mode, seed = (
        field
        for name, field in zip(IMAGE_OPTION_FIELDS, image_option_fields())
        if name in ("width", "height", "resize_mode", "seed")
    )


def draw_pairs(by_class: list[list[str]], count: int, same_percent: float, rng: random.Random) -> list[tuple]:
    """Draw ``count`` ``(path_a, path_b, same)`` pairs; ``same`` is 1 for same-class pairs.

    Raises:
        ValueError: Same-class pairs need a class with 2+ images; different-class pairs need 2+ classes.
    """
    n_same = int(round(count * same_percent / 100.0))
    multi = [files for files in by_class if len(files) >= 2]
    filled = [files for files in by_class if files]
    if n_same and not multi:
        raise ValueError("same-class pairs need a class with at least 2 images")
    if count - n_same and len(filled) < 2:
        raise ValueError("different-class pairs need at least 2 classes with images")
    pairs = []
    for _ in range(n_same):
        a, b = rng.sample(rng.choice(multi), 2)
        pairs.append((a, b, 1))
    for _ in range(count - n_same):
        first, second = rng.sample(filled, 2)
        pairs.append((rng.choice(first), rng.choice(second), 0))
    return pairs


class ImagePairsIngestion(DataIngestion):
    """Same/different pairs of grayscale images as 2-channel records (Siamese networks)."""

    plugin_id = "image-pairs"
    label_kind = "class"
    title = "Image pairs (same/different class, Siamese)"
    category = "Images"

    def __init__(self, is_inference_db: bool = False, **form_data):
        super().__init__(is_inference_db=is_inference_db, **form_data)
        fill_defaults(self)
        self._split: dict[str, list] | None = None

    dataset_form = PairsForm
    dataset_template = "templates/pairs.html"

    @staticmethod
    def get_inference_form():
        """No inference form: give 2-channel ``.npy`` pairs to ``digits infer``."""
        return None

    def itemize_entries(self, stage: str) -> list:
        """Entries are ``(path_a, path_b, same)``; the pairs are drawn once for all stages."""
        if self._split is None:
            self._split = self._build_split()
        return self._split.get(stage, [])

    def _build_split(self) -> dict[str, list]:
        by_name = listing.scan_class_folders(expand(self.folder))
        if len(by_name) < 2:
            raise ValueError(f"{self.folder} needs at least 2 class sub-folders to draw pairs from")
        train, val = [], []
        for name, files in by_name.items():
            files = listing.seeded_shuffle(files, self.seed, name)
            _, n_val, _ = listing.split_counts(len(files), float(self.val_percent or 0), 0)
            val.append(files[:n_val])
            train.append(files[n_val:])
        rng = random.Random(f"{self.seed}:pairs")
        stages: dict[str, list] = {"train": [], "val": []}
        for stage, by_class, count in (("train", train, int(self.train_pairs)), ("val", val, int(self.val_pairs or 0))):
            if count:
                try:
                    stages[stage] = draw_pairs(by_class, count, float(self.same_percent), rng)
                except ValueError as exc:
                    held = "held out for validation" if stage == "val" else "left for training"
                    raise ValueError(
                        f"{stage} pairs: {exc} ({self.val_percent}% of each class's images are {held}; "
                        "change the validation % or add images)"
                    ) from None
        if not self.shuffle:
            stages = {s: sorted(p) for s, p in stages.items()}
        self.userdata["class_labels"] = ["different", "same"]
        self.userdata["source_classes"] = list(by_name)
        return stages

    def _load(self, path: str) -> np.ndarray:
        return load_resized(
            io.BytesIO(read_file(path)),
            path,
            channels=1,
            width=int(self.width),
            height=int(self.height),
            resize_mode=self.resize_mode,
            seed=int(self.seed),
        )

    def encode_entry(self, entry):
        """Stack the two images of a pair; returns ``(H×W×2 array, 0 or 1)``."""
        path_a, path_b, same = entry
        a, b = self._load(path_a), self._load(path_b)
        if a.dtype != b.dtype:
            a, b = a.astype(np.uint16), b.astype(np.uint16)
        return np.concatenate([a, b], axis=2), int(same)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_split"] = None
        return state
