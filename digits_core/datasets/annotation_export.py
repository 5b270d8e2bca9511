"""Writing a published detection or segmentation dataset back out as COCO, YOLO or Pascal VOC.

``digits dataset export DATASET --format coco|yolo|voc OUT`` (and
:func:`export_dataset`) read the stored records (:mod:`.reader`) and write
what a labelling tool or the importers of the image plugins read back
without loss. Every layout puts the stored images, as PNG, under
``OUT/images/<stage>/NNNNNN.png`` (record order; boxes and masks are in these
images' pixels) and:

* ``coco``: ``OUT/annotations/<stage>.json``. Boxes ``[x, y, w, h]``; class 0
  (``dontcare``) is category 0. Masks: one uncompressed RLE per class present
  in an image (``iscrowd`` 1, as pycocotools writes uncompressed RLE);
  categories are the classes from 1 (class 0 is the background).
* ``yolo``: ``OUT/labels/<stage>/NNNNNN.txt`` (``class cx cy w h`` in fractions of
  the image size, class ids as the dataset's, ``dontcare`` included as class 0)
  and ``OUT/data.yaml`` (``names``). Boxes only: YOLO segmentation polygons
  cannot hold a mask exactly, so masks are refused (export ``coco`` or ``voc``).
* ``voc``: ``OUT/Annotations/<stage>/NNNNNN.xml`` (``xmin = x1 + 1``, ``ymin = y1 + 1``,
  ``xmax = x2``, ``ymax = y2``: VOC's 1-based inclusive pixel indexes, the
  inverse of the importer) or ``OUT/SegmentationClass/<stage>/NNNNNN.png``
  (palette PNGs with the dataset's palette), and ``OUT/labels.txt`` (the class
  names, one per line, index = class id).

Coordinates are written with every digit a float32 box has, so a re-import
gives the stored values back.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import numpy as np

from ..errors import DatasetError
from .reader import Dataset

FORMATS = ("coco", "yolo", "voc")
#: Label kinds that can be exported, by the name the plugins declare.
KINDS = ("boxes", "mask")


def export_dataset(dataset: Dataset, fmt: str, out: str | os.PathLike, *, batch_size: int = 64) -> dict[str, Any]:
    """Write ``dataset`` to ``out`` in ``fmt``.

    Args:
        dataset: A published detection (label kind ``boxes``) or segmentation (``mask``) dataset.
        fmt: ``coco``, ``yolo`` or ``voc``.
        out: A folder that does not exist yet, or is empty.
        batch_size: Records read per LMDB transaction.

    Returns:
        ``{"format", "out", "stages": {stage: images}, "objects": {stage: boxes or masks}}``.

    Raises:
        DatasetError: Another label kind, a format that cannot hold the labels, images that are
            not 8-bit, or an ``out`` folder that holds files.
    """
    if fmt not in FORMATS:
        raise DatasetError(f'export format "{fmt}" is not one of {", ".join(FORMATS)}')
    kind = dataset.label_kind
    if kind not in KINDS:
        raise DatasetError(
            f'Dataset "{dataset.id}" holds {kind} labels; only detection (boxes) and segmentation (mask) '
            "datasets can be exported as annotations."
        )
    if fmt == "yolo" and kind == "mask":
        raise DatasetError(
            "YOLO segmentation polygons cannot hold a mask exactly; export a segmentation dataset with "
            "--format coco or --format voc."
        )
    root = Path(out).expanduser()
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise DatasetError(f"{root} already exists and is not an empty folder; choose a new output folder.")
    names = _names(dataset)
    writer = _Writer(dataset, fmt, root, names)
    summary: dict[str, Any] = {"format": fmt, "out": str(root), "stages": {}, "objects": {}}
    for stage in dataset.stages:
        if not dataset.count(stage):
            continue
        images, objects = writer.stage(stage, batch_size)
        summary["stages"][stage], summary["objects"][stage] = images, objects
    writer.finish()
    return summary


def _names(dataset: Dataset) -> list[str]:
    names = list(dataset.class_labels or [])
    count = dataset.num_classes or len(names)
    return names + [str(i) for i in range(len(names), count)]


def number(value: float) -> str:
    """A coordinate as text: an integer without ``.0``, else every digit of the float."""
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)


def rle_counts(mask: np.ndarray) -> list[int]:
    """COCO's uncompressed RLE of a bool mask: column-major run lengths, starting with 0s."""
    flat = np.asarray(mask, bool).T.reshape(-1)
    changes = np.flatnonzero(flat[1:] != flat[:-1]) + 1
    runs = np.diff(np.concatenate([[0], changes, [flat.size]])).tolist()
    return ([0] + runs) if flat.size and flat[0] else runs


class _Writer:
    def __init__(self, dataset: Dataset, fmt: str, root: Path, names: list[str]):
        self.dataset, self.fmt, self.root, self.names = dataset, fmt, root, names
        self.boxes = dataset.label_kind == "boxes"
        self.stages: list[str] = []

    def stage(self, stage: str, batch_size: int) -> tuple[int, int]:
        images_dir = self.root / "images" / stage
        images_dir.mkdir(parents=True, exist_ok=True)
        coco: dict[str, Any] = {"images": [], "annotations": [], "categories": self._categories()}
        index = objects = 0
        for features, labels in self.dataset.iter_batches(stage, batch_size):
            for feature, label in zip(features, labels):
                name = f"{index:06d}"
                height, width = self._save_image(feature, images_dir / f"{name}.png")
                if self.fmt == "coco":
                    objects += self._coco(coco, index + 1, f"{name}.png", width, height, label)
                elif self.fmt == "yolo":
                    objects += self._yolo(stage, name, width, height, label)
                else:
                    objects += self._voc(stage, name, width, height, label)
                index += 1
        if self.fmt == "coco":
            path = self.root / "annotations" / f"{stage}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(coco), encoding="utf-8")
        self.stages.append(stage)
        return index, objects

    def finish(self) -> None:
        if self.fmt == "yolo":
            lines = ["path: .", *(f"{s}: images/{s}" for s in self.stages), "names:"]
            lines += [f"  {i}: {json.dumps(n)}" for i, n in enumerate(self.names)]
            (self.root / "data.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
        elif self.fmt == "voc":
            (self.root / "labels.txt").write_text("".join(f"{n}\n" for n in self.names), encoding="utf-8")

    def _categories(self) -> list[dict]:
        first = 0 if self.boxes else 1
        return [{"id": i, "name": n} for i, n in enumerate(self.names) if i >= first]

    def _save_image(self, feature: np.ndarray, path: Path) -> tuple[int, int]:
        from PIL import Image  # heavy: only when exporting

        array = np.asarray(feature)
        if array.dtype != np.uint8:
            raise DatasetError(
                f'Dataset "{self.dataset.id}" stores {array.dtype} images; annotation exports write 8-bit PNGs.'
            )
        if array.ndim == 3 and array.shape[2] == 1:
            array = array[:, :, 0]
        if array.ndim == 3 and array.shape[2] not in (3, 4):
            raise DatasetError(f'Dataset "{self.dataset.id}" has {array.shape[2]}-channel images; PNG needs 1, 3 or 4.')
        Image.fromarray(array).save(path, format="PNG")
        return int(array.shape[0]), int(array.shape[1])

    @staticmethod
    def _rows(label: np.ndarray) -> np.ndarray:
        rows = np.asarray(label, np.float32).reshape(-1, 5)
        return rows[rows[:, 0] >= 0]  # batches pad with class -1

    def _coco(self, coco: dict, image_id: int, file_name: str, width: int, height: int, label) -> int:
        coco["images"].append({"id": image_id, "file_name": file_name, "width": width, "height": height})
        anns = coco["annotations"]
        if self.boxes:
            for cls, x1, y1, x2, y2 in self._rows(label).tolist():
                w, h = float(x2) - float(x1), float(y2) - float(y1)
                bbox = [float(x1), float(y1), w, h]
                anns.append(self._ann(len(anns) + 1, image_id, int(cls), bbox, w * h, 0))
            return len(self._rows(label))
        mask = np.asarray(label).reshape(height, width)
        values = [int(v) for v in np.unique(mask) if v != 0]
        for value in values:
            region = mask == value
            ys, xs = np.nonzero(region)
            bbox = [int(xs.min()), int(ys.min()), int(xs.max() - xs.min() + 1), int(ys.max() - ys.min() + 1)]
            ann = self._ann(len(anns) + 1, image_id, value, bbox, int(region.sum()), 1)
            ann["segmentation"] = {"size": [height, width], "counts": rle_counts(region)}
            anns.append(ann)
            if value >= len(self.names) and all(c["id"] != value for c in coco["categories"]):
                coco["categories"].append({"id": value, "name": str(value)})
        return len(values)

    @staticmethod
    def _ann(ident: int, image_id: int, category: int, bbox: list, area: float, crowd: int) -> dict:
        return {
            "id": ident,
            "image_id": image_id,
            "category_id": category,
            "bbox": bbox,
            "area": area,
            "iscrowd": crowd,
        }

    def _yolo(self, stage: str, name: str, width: int, height: int, label) -> int:
        folder = self.root / "labels" / stage
        folder.mkdir(parents=True, exist_ok=True)
        lines = []
        for cls, x1, y1, x2, y2 in self._rows(label).tolist():
            x1, y1, x2, y2 = (float(v) for v in (x1, y1, x2, y2))
            box = ((x1 + x2) / 2 / width, (y1 + y2) / 2 / height, (x2 - x1) / width, (y2 - y1) / height)
            lines.append(" ".join([str(int(cls)), *(repr(v) for v in box)]))
        (folder / f"{name}.txt").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        return len(lines)

    def _voc(self, stage: str, name: str, width: int, height: int, label) -> int:
        if not self.boxes:
            from PIL import Image  # heavy: only when exporting

            folder = self.root / "SegmentationClass" / stage
            folder.mkdir(parents=True, exist_ok=True)
            mask = np.asarray(label).reshape(height, width)
            if mask.dtype != np.uint8:
                raise DatasetError(f'Dataset "{self.dataset.id}" has more than 256 classes; VOC masks are 8-bit PNGs.')
            image = Image.fromarray(mask, mode="P")
            palette = [v for rgb in (self.dataset.color_palette or [])[:256] for v in rgb]
            image.putpalette(palette + [0] * (768 - len(palette)))
            image.save(folder / f"{name}.png", format="PNG")
            return int(len(np.unique(mask[mask != 0])))
        folder = self.root / "Annotations" / stage
        folder.mkdir(parents=True, exist_ok=True)
        objects = []
        for cls, x1, y1, x2, y2 in self._rows(label).tolist():
            label_name = self.names[int(cls)] if int(cls) < len(self.names) else str(int(cls))
            coords = zip(("xmin", "ymin", "xmax", "ymax"), (x1 + 1, y1 + 1, x2, y2))
            box = "".join(f"<{tag}>{number(v)}</{tag}>" for tag, v in coords)
            objects.append(
                f"  <object><name>{escape(label_name)}</name><difficult>0</difficult><bndbox>{box}</bndbox></object>\n"
            )
        depth = self.dataset.feature_shape(stage)[-1] if len(self.dataset.feature_shape(stage)) == 3 else 1
        (folder / f"{name}.xml").write_text(
            f"<annotation>\n  <filename>{name}.png</filename>\n"
            f"  <size><width>{width}</width><height>{height}</height><depth>{depth}</depth></size>\n"
            f"{''.join(objects)}</annotation>\n",
            encoding="utf-8",
        )
        return len(objects)
