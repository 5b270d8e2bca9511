"""``image-classification``: images in class folders (or list files) → a classification dataset.

Sources, as in DIGITS's "New Image Classification Dataset":

* ``folder``: a training folder with one sub-folder per class (sorted
  sub-folder names are the class labels, index = class id), or
* ``train_list``: a list file, ``<path> <class id>`` per line, with an
  optional ``list_root`` for relative paths and a ``labels_file`` (one class
  name per line), or
* ``s3_path`` with ``s3_bucket`` (and ``s3_endpoint_url``, keys or profile):
  class folders in an S3 bucket, DIGITS's "Use S3" (fields and checks from
  :class:`digits_core.S3SourceFields`; ``s3_val_path``/``s3_test_path`` likewise).

Validation and test images come from ``val_folder``/``val_list`` and
``test_folder``/``test_list`` when given, else ``val_percent``/``test_percent``
of each class of the training images go there (a seeded shuffle per class,
rounded half up). Class folders with fewer than ``min_per_class`` training
images are dropped (and listed in ``userdata["dropped_classes"]``); the
classes of a list file keep the ids the list gives (small ones are listed in
``userdata["small_classes"]``). ``max_per_class`` caps each class.

Entries are ``(path, class id)`` tuples, so the worker processes receive
paths and read the files themselves. Userdata gets ``class_labels`` and
per-stage image counts per class.

For inference create the plugin with the dataset's userdata plus the
inference form's values: ``cls(is_inference_db=True, **{**dataset.userdata, **values})``;
stage ``"test"`` then lists the inference images and ``encode_entry``
returns ``(H×W×C uint8/uint16 array, label or None)``.
"""

from __future__ import annotations

import logging

from wtforms import BooleanField, FloatField, IntegerField, StringField, validators
from wtforms.validators import ValidationError

from digits_core import S3SourceFields, is_s3_url, s3_source

from . import listing
from .base import ImageIngestionBase
from .encoding import encode_image_file
from .forms import class_folder_tree, existing_file, existing_folder, expand, image_option_fields
from .inference import encode_inference_entry

logger = logging.getLogger("digits_data_images")


class ClassificationForm(S3SourceFields):
    """Dataset options of ``image-classification`` (DIGITS defaults)."""

    folder = StringField(
        "Training images",
        description="Folder with one sub-folder of images per class",
        validators=[existing_folder("training folder"), class_folder_tree("training folder")],
    )
    train_list = StringField(
        "Training list",
        description='Instead of a folder: a file with "<path> <class id>" per line',
        validators=[existing_file("training list")],
    )
    list_root = StringField(
        "List root folder",
        description="Folder that relative paths in the list files start from (default: each list file's folder)",
        validators=[existing_folder("list root folder")],
    )
    labels_file = StringField(
        "Labels file",
        description="Class names for list files, one per line (index = class id)",
        validators=[existing_file("labels file")],
    )
    val_percent = FloatField(
        "Validation %",
        default=25.0,
        validators=[validators.NumberRange(0, 100)],
        description="Share of each class used for validation when no validation folder/list is given",
    )
    test_percent = FloatField(
        "Test %",
        default=0.0,
        validators=[validators.NumberRange(0, 100)],
        description="Share of each class used for testing when no test folder/list is given",
    )
    val_folder = StringField(
        "Validation images",
        description="Separate validation folder (class sub-folders)",
        validators=[existing_folder("validation folder"), class_folder_tree("validation folder")],
    )
    val_list = StringField(
        "Validation list", description="Separate validation list file", validators=[existing_file("validation list")]
    )
    test_folder = StringField(
        "Test images",
        description="Separate test folder (class sub-folders)",
        validators=[existing_folder("test folder"), class_folder_tree("test folder")],
    )
    test_list = StringField("Test list", description="Separate test list file", validators=[existing_file("test list")])
    min_per_class = IntegerField(
        "Minimum images per class",
        default=2,
        validators=[validators.InputRequired(), validators.NumberRange(min=1)],
        description="Classes with fewer training images are left out",
    )
    max_per_class = IntegerField(
        "Maximum images per class",
        validators=[validators.Optional(), validators.NumberRange(min=1)],
        description="Cap on training images per class (default: no cap)",
    )
    shuffle = BooleanField(
        "Shuffle", default=True, description="Write the records of each stage in a seeded random order"
    )
    image_type, width, height, resize_mode, encoding, jpg_quality, seed = image_option_fields()

    def validate_folder(form, field):
        if not field.data and not form.train_list.data and not form.s3_path.data:
            raise ValidationError(
                "give a training folder (with one sub-folder per class) or a training list (or an S3 training path)"
            )
        if field.data and form.train_list.data:
            raise ValidationError("give a training folder or a training list, not both")

    def validate_val_percent(form, field):
        test = form.test_percent.data or 0
        if field.data is not None and field.data + test >= 100:
            raise ValidationError(f"validation % ({field.data}) plus test % ({test}) must be under 100")

    def validate_max_per_class(form, field):
        if field.data is not None and form.min_per_class.data and field.data < form.min_per_class.data:
            raise ValidationError(f"must be at least the minimum images per class ({form.min_per_class.data})")

    def validate_val_list(form, field):
        if field.data and form.val_folder.data:
            raise ValidationError("give a validation folder or a validation list, not both")

    def validate_test_list(form, field):
        if field.data and form.test_folder.data:
            raise ValidationError("give a test folder or a test list, not both")


class ImageClassificationIngestion(ImageIngestionBase):
    """Image classification datasets from class folders or list files (DIGITS's image classification)."""

    plugin_id = "image-classification"
    label_kind = "class"
    title = "Image classification (folders or lists)"
    category = "Images"

    # -- forms ---------------------------------------------------------------

    dataset_form = ClassificationForm
    dataset_template = "templates/classification.html"

    # -- entries -------------------------------------------------------------

    def _source(self, folder, list_file) -> dict[int, list[str]] | None:
        """Return class id -> files of a folder or list source, or None when neither is given."""
        if folder:
            by_name = {n: f for n, f in self._scan(folder).items() if n not in self._dropped_names}
            unknown = [n for n in by_name if n not in self._class_ids]
            if unknown:
                raise ValueError(f"{folder} has class folders that are not training classes: {', '.join(unknown)}")
            return {self._class_ids[n]: files for n, files in by_name.items()}
        if list_file:
            items = listing.read_list_file(expand(list_file), expand(self.list_root))
            out: dict[int, list[str]] = {}
            for path, label in items:
                if label >= len(self._labels):
                    raise ValueError(
                        f"{list_file}: class id {label} has no label (the training data has "
                        f"{len(self._labels)} classes)"
                    )
                out.setdefault(label, []).append(path)
            return out
        return None

    def _s3_url(self, stage: str) -> str | None:
        """The ``s3://`` URL of a stage's class tree given in the S3 fields, or None."""
        source = s3_source(self)
        return source.stage_url(stage) if source is not None else None

    def _scan(self, folder: str) -> dict[str, list[str]]:
        """Class name -> files of a class-folder tree: a local folder, or an S3 URL (files are s3:// URLs)."""
        if is_s3_url(folder):
            return s3_source(self).class_files(folder)
        return listing.scan_class_folders(expand(folder))

    def _build_split(self) -> dict[str, list]:  # noqa: C901 - split pending (the complexity ratchet in pyproject.toml)
        train_folder = self.folder or self._s3_url("train")
        if train_folder:
            by_name = self._scan(train_folder)
            if not by_name:
                raise ValueError(f"training folder {train_folder} has no class sub-folders")
            names = list(by_name)
            files_by_index = [by_name[n] for n in names]
        else:
            items = listing.read_list_file(expand(self.train_list), expand(self.list_root))
            if not items:
                raise ValueError(f"training list {self.train_list} lists no images")
            if self.labels_file:
                names = listing.read_labels_file(expand(self.labels_file))
            else:
                names = [str(i) for i in range(max(label for _, label in items) + 1)]
            files_by_index = [[] for _ in names]
            for path, label in items:
                if label >= len(names):
                    raise ValueError(
                        f"training list {self.train_list}: class id {label} but the labels file "
                        f"has only {len(names)} labels"
                    )
                files_by_index[label].append(path)
        # Class folders with too few images are dropped (DIGITS's minimum per category) and the
        # rest renumbered. Classes of a list file keep the ids the list gives: small ones are only
        # reported, since renumbering would change the user's labels.
        from_list = not train_folder
        kept, dropped, small = [], [], []
        for name, files in zip(names, files_by_index):
            if len(files) < self.min_per_class:
                note = f"{name} ({len(files)} images < {self.min_per_class})"
                (small if from_list else dropped).append(note)
                logger.warning(
                    "image-classification: class %s %s: %d images < minimum %d",
                    name,
                    "kept (list ids are fixed)" if from_list else "dropped",
                    len(files),
                    self.min_per_class,
                )
            if from_list or len(files) >= self.min_per_class:
                kept.append((name, files))
        if not any(len(files) >= self.min_per_class for _, files in kept):
            raise ValueError(
                f"no class has at least {self.min_per_class} images ({', '.join(dropped + small) or 'no classes'})"
            )
        self.userdata["small_classes"] = small
        self._labels = [name for name, _ in kept]
        self._dropped_names = {name for name in names if name not in {k for k, _ in kept}}
        self._class_ids = {name: i for i, name in enumerate(self._labels)}
        old_ids = {name: i for i, name in enumerate(names)}
        stages: dict[str, list] = {"train": [], "val": [], "test": []}
        counts: dict[str, list[int]] = {s: [0] * len(kept) for s in stages}
        explicit = {}
        for stage, folder, list_file in (
            ("val", self.val_folder or self._s3_url("val"), self.val_list),
            ("test", self.test_folder or self._s3_url("test"), self.test_list),
        ):
            if folder or list_file:
                if list_file and not folder:
                    # list ids refer to the original numbering
                    raw = self._source(None, list_file) if not dropped else self._remap(list_file, old_ids)
                else:
                    raw = self._source(folder, None)
                explicit[stage] = raw
        val_pct = 0.0 if "val" in explicit else float(self.val_percent or 0)
        test_pct = 0.0 if "test" in explicit else float(self.test_percent or 0)
        for class_id, (name, files) in enumerate(kept):
            files = listing.seeded_shuffle(files, self.seed, name)
            if self.max_per_class:
                files = files[: self.max_per_class]
            n_train, n_val, n_test = listing.split_counts(len(files), val_pct, test_pct)
            parts = {"val": files[:n_val], "test": files[n_val : n_val + n_test], "train": files[n_val + n_test :]}
            for stage, part in parts.items():
                stages[stage].extend((path, class_id) for path in part)
                counts[stage][class_id] += len(part)
        for stage, raw in explicit.items():
            for class_id, files in sorted(raw.items()):
                stages[stage].extend((path, class_id) for path in sorted(files))
                counts[stage][class_id] += len(files)
        for stage in stages:
            if self.shuffle:
                stages[stage] = listing.seeded_shuffle(stages[stage], self.seed, f"stage:{stage}")
            else:  # class by class, files in name order
                stages[stage] = sorted(stages[stage], key=lambda item: (item[1], item[0]))
        self.userdata["class_labels"] = list(self._labels)
        self.userdata["dropped_classes"] = dropped
        self.userdata["images_per_class"] = {s: c for s, c in counts.items() if sum(c)}
        return stages

    def _remap(self, list_file, old_ids) -> dict[int, list[str]]:
        """Read a val/test list whose ids use the original numbering, mapping to kept classes."""
        names = {i: n for n, i in old_ids.items()}
        out: dict[int, list[str]] = {}
        for path, label in listing.read_list_file(expand(list_file), expand(self.list_root)):
            name = names.get(label)
            if name in self._class_ids:
                out.setdefault(self._class_ids[name], []).append(path)
        return out

    def encode_entry(self, entry):
        """Read, convert, resize and encode one image; returns ``(feature, class id)``."""
        if self.is_inference_db:
            return encode_inference_entry(self, entry)
        path, label = entry
        feature = encode_image_file(
            path,
            channels=self.channels,
            width=int(self.width),
            height=int(self.height),
            resize_mode=self.resize_mode,
            encoding=self.encoding,
            seed=int(self.seed),
            jpg_quality=int(self.jpg_quality or 90),
            data=s3_source(self).read(path) if is_s3_url(path) else None,
        )
        return feature, int(label)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_split"] = None  # workers need settings, not the entry lists
        return state
