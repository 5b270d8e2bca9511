"""Contact sheets of dataset records (DIGITS's "Explore DB") as a Pillow image."""

from __future__ import annotations

import numpy as np

from ..errors import DatasetError


def to_display(feature: np.ndarray) -> np.ndarray:
    """Return an ``H×W×3`` uint8 view of a feature for display.

    uint8 is shown as is; other dtypes are stretched from their min..max.
    """
    arr = np.asarray(feature)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.dtype != np.uint8:
        lo, hi = float(arr.min()), float(arr.max())
        scale = 255.0 / (hi - lo) if hi > lo else 0.0
        arr = ((arr.astype(np.float64) - lo) * scale).round().clip(0, 255).astype(np.uint8)
    if arr.shape[2] == 1:
        arr = np.repeat(arr, 3, axis=2)
    elif arr.shape[2] != 3:
        arr = np.repeat(arr[:, :, :1], 3, axis=2)
    return arr


def colorize_mask(mask: np.ndarray, palette: list | None) -> np.ndarray:
    """Return an ``H×W×3`` uint8 image of a class-index mask coloured with ``palette``."""
    table = np.zeros((max(int(mask.max()) + 1, 256), 3), np.uint8)
    if palette:
        colors = np.asarray(palette, dtype=np.int64).clip(0, 255).astype(np.uint8)[:, :3]
        table[: len(colors)] = colors[: len(table)]
    else:
        table[:256] = np.stack([np.arange(256) * 37 % 256, np.arange(256) * 91 % 256, np.arange(256) * 53 % 256], 1)
    return table[mask.astype(np.int64)]


def draw_boxes(draw, boxes: np.ndarray, scale: float, origin: tuple, palette: list | None, names: list | None) -> None:
    """Draw ``N×5`` boxes (class, x1, y1, x2, y2; padding rows of class -1 skipped) scaled by ``scale`` at ``origin``.

    Each box is outlined in its class colour and captioned with the class
    name; ``dontcare`` regions (class 0) are outlined in grey.
    """
    ox, oy = origin
    for cls, x1, y1, x2, y2 in np.asarray(boxes, np.float64).reshape(-1, 5):
        if cls < 0:
            continue
        cls = int(cls)
        color = tuple(int(c) for c in palette[cls][:3]) if palette and cls < len(palette) else (255, 0, 0)
        if cls == 0:
            color = (128, 128, 128)
        rect = [ox + x1 * scale, oy + y1 * scale, ox + x2 * scale, oy + y2 * scale]
        draw.rectangle(rect, outline=color)
        name = names[cls] if names and cls < len(names) else str(cls)
        draw.text((rect[0] + 1, rect[1]), name[:10], fill=color)


def image_with_boxes(
    feature: np.ndarray, boxes: np.ndarray, palette: list | None, names: list | None, scale: int = 2
) -> np.ndarray:
    """An ``H×W×3`` uint8 picture of a feature (enlarged ``scale`` times) with its boxes drawn."""
    from PIL import Image, ImageDraw

    image = Image.fromarray(to_display(feature))
    image = image.resize((image.width * scale, image.height * scale), Image.Resampling.NEAREST)
    draw_boxes(ImageDraw.Draw(image), boxes, scale, (0, 0), palette, names)
    return np.asarray(image)


def boxes_caption(boxes: np.ndarray, names: list | None) -> str:
    """``"3 boxes: car, car, van"`` (dontcare regions counted apart; padding rows skipped)."""
    rows = np.asarray(boxes).reshape(-1, 5)
    classes = [int(c) for c in rows[:, 0] if c > 0]
    care = int((rows[:, 0] == 0).sum())
    named = [str(names[c]) if names and c < len(names) else str(c) for c in classes]
    text = f"{len(classes)} box{'es' if len(classes) != 1 else ''}" + (f": {', '.join(named[:6])}" if named else "")
    return text + ("..." if len(named) > 6 else "") + (f" (+{care} dontcare)" if care else "")


def target_to_uint8(label) -> np.ndarray:
    """An image-to-image target (float ``H×W×C`` in ``[0, 1]``) as displayable uint8 (``H×W`` when C is 1)."""
    shown = np.round(np.clip(np.asarray(label, np.float64), 0.0, 1.0) * 255).astype(np.uint8)
    return shown[:, :, 0] if shown.ndim == 3 and shown.shape[2] == 1 else shown


def label_text(dataset, label) -> str:
    """Return a short caption for a class or regression label."""
    if dataset.label_kind == "class":
        index = int(label)
        names = dataset.class_labels or []
        return f"{index}: {names[index]}" if 0 <= index < len(names) else str(index)
    values = np.atleast_1d(np.asarray(label, dtype=np.float64))
    return ", ".join(f"{v:.3g}" for v in values[:4]) + (" ..." if values.size > 4 else "")


def contact_sheet(
    dataset, stage: str = "train", n: int = 24, *, columns: int | None = None, thumb: int = 96, start: int | None = None
):
    """Render ``n`` records of ``stage`` as a grid with their labels.

    Records are spread evenly over the stage (or taken from ``start`` on).
    Masks are shown next to their image, coloured with the dataset palette
    (image-to-image targets next to their input);
    boxes are drawn on their image with class names.

    Args:
        dataset: An open :class:`~digits_core.datasets.Dataset`.
        stage: The stage to show.
        n: How many records.
        columns: Grid columns (default: about square).
        thumb: Thumbnail size in pixels (longer side).
        start: First record; ``None`` spreads the records over the stage.

    Returns:
        A Pillow RGB image.
    """
    from PIL import Image, ImageDraw

    count = dataset.count(stage)
    if count == 0:
        raise DatasetError(
            f'Dataset "{dataset.id}" has no records in stage "{stage}" (stages: {", ".join(dataset.stages)}).'
        )
    n = max(1, min(int(n), count))
    if start is None:
        indexes = np.unique(np.linspace(0, count - 1, n).round().astype(int)).tolist()
    else:
        indexes = list(range(max(0, start), min(count, max(0, start) + n)))
    features, labels = dataset.read_indexes(stage, indexes)
    is_mask = dataset.label_kind in ("mask", "image")
    is_boxes = dataset.label_kind == "boxes"
    h, w = features.shape[1:3]
    ratio = thumb / max(h, w)
    tw, th = max(1, round(w * ratio)), max(1, round(h * ratio))
    cell_w = tw * (2 if is_mask else 1) + 8
    cell_h = th + 22
    columns = columns or max(1, int(np.ceil(np.sqrt(len(indexes) * cell_h / cell_w))))
    rows = int(np.ceil(len(indexes) / columns))
    sheet = Image.new("RGB", (columns * cell_w, rows * cell_h), (255, 255, 255))
    draw = ImageDraw.Draw(sheet)
    for k, (index, feature, label) in enumerate(zip(indexes, features, labels)):
        x, y = (k % columns) * cell_w + 4, (k // columns) * cell_h + 4
        image = Image.fromarray(to_display(feature)).resize((tw, th), Image.Resampling.NEAREST)
        sheet.paste(image, (x, y))
        if is_mask:
            shown = (
                target_to_uint8(label)
                if dataset.label_kind == "image"
                else colorize_mask(np.asarray(label), dataset.color_palette)
            )
            mask = Image.fromarray(shown).resize((tw, th), Image.Resampling.NEAREST)
            sheet.paste(mask, (x + tw, y))
            caption = f"#{index}"
        elif is_boxes:
            draw_boxes(draw, label, ratio, (x, y), dataset.color_palette, dataset.class_labels)
            caption = f"#{index} {int((np.asarray(label)[:, 0] > 0).sum())} boxes"
        else:
            caption = f"#{index} {label_text(dataset, label)}"
        draw.text((x, y + th + 2), caption[: max(4, cell_w // 6)], fill=(0, 0, 0))
    return sheet


#: What one count of a label histogram is, per label kind (for page captions).
HISTOGRAM_UNITS = {"class": "images", "mask": "pixels", "boxes": "boxes"}
#: Most classes a page lists (the dataset page's histogram, Explore's class menu): the most frequent ones.
MAX_LISTED_CLASSES = 200


def label_histograms(dataset, *, limit: int | None = MAX_LISTED_CLASSES, keep: int | None = None) -> dict | None:
    """Per-class counts of every stage, as the dataset page shows them.

    Args:
        dataset: The dataset.
        limit: Most classes listed: with more, the ``limit`` most frequent (over all stages), in id order;
            ``None`` lists every class.
        keep: A class id listed even when it is not among the most frequent (the one Explore shows).

    Returns:
        ``{"unit": "images"|"pixels"|"boxes", "stages": [...], "classes":
        [{"id", "name", "counts": {stage: n}}...], "totals": {stage: n},
        "peaks": {stage: largest n}, "class_count": all classes, "listed": classes listed}``,
        or ``None`` when the labels have no classes (regression, image
        targets) or no histogram was recorded.
    """
    unit = HISTOGRAM_UNITS.get(dataset.label_kind)
    if unit is None:
        return None
    per_stage = {s: list(dataset.label_histogram(s) or []) for s in dataset.stages}
    if not any(per_stage.values()):
        return None
    names = list(dataset.class_labels or [])
    size = max(len(names), *(len(h) for h in per_stage.values()))
    listed: list[int] | range = range(size)
    if limit is not None and size > limit:  # 100k distinct labels must not make a 100k-row page
        totals = np.zeros(size, np.int64)
        for h in per_stage.values():
            totals[: len(h)] += np.asarray(h, np.int64)
        top = set(np.argsort(-totals, kind="stable")[:limit].tolist())
        if keep is not None and 0 <= keep < size:
            top.add(int(keep))
        listed = sorted(top)
    classes = [
        {
            "id": i,
            "name": names[i] if i < len(names) else str(i),
            "counts": {s: int(h[i]) if i < len(h) else 0 for s, h in per_stage.items()},
        }
        for i in listed
    ]
    return {
        "unit": unit,
        "stages": list(per_stage),
        "classes": classes,
        "totals": {s: int(sum(h)) for s, h in per_stage.items()},
        "peaks": {s: int(max(h, default=0)) for s, h in per_stage.items()},
        "class_count": size,
        "listed": len(classes),
    }


def mean_image_uint8(dataset) -> np.ndarray | None:
    """The train stage's mean image as displayable ``H×W×3`` uint8, or ``None`` without one.

    8-bit features keep their levels (rounded); other dtypes (16-bit DICOM,
    float) are stretched from the mean's min..max, like :func:`to_display`.
    """
    mean = dataset.mean()
    if mean is None:
        return None
    if dataset.feature_dtype() == "uint8":
        mean = np.clip(np.round(mean), 0, 255).astype(np.uint8)
    return to_display(mean)


#: Label kinds Explore can filter by class: what a record "has" is its class, or a pixel / box of it.
FILTERABLE_KINDS = ("class", "mask", "boxes")


def class_indexes(dataset, stage: str, class_id: int) -> np.ndarray:
    """Record indexes of ``stage`` that have class ``class_id``, in record order.

    A classification record has it as its label; a segmentation record when
    one pixel of its mask has it; a detection record when one box has it.
    The stage's labels are read once per process (features are not
    decoded) and a compact summary is kept: a published dataset never changes.

    Raises:
        DatasetError: The dataset's labels have no classes (regression, image targets).
    """
    kind = dataset.label_kind
    if kind not in FILTERABLE_KINDS:
        raise DatasetError(
            f'Dataset "{dataset.id}" has {kind} labels: only datasets with class labels, masks '
            "or boxes can be filtered by class."
        )
    summary = _stage_summary(dataset, stage)
    if kind == "class":
        return np.flatnonzero(summary == int(class_id))
    if not 0 <= class_id < summary.shape[1]:
        return np.zeros(0, np.int64)
    return np.flatnonzero(summary[:, class_id])


_SUMMARY_CACHE: dict[tuple, np.ndarray] = {}
#: Stages whose label summaries are kept in memory (least recently used dropped first).
SUMMARY_CACHE_SIZE = 16


def _stage_summary(dataset, stage: str) -> np.ndarray:
    """Class id per record (class labels), or an ``N×K`` bool "record has class k" table (masks, boxes)."""
    count = dataset.count(stage)
    key = (str(dataset.path), stage, count)
    summary = _SUMMARY_CACHE.pop(key, None)
    if summary is None:
        classes = int(dataset.num_classes or 0)
        pixels = int(np.prod(dataset.label_shape)) if dataset.label_kind == "mask" else 1
        batch = max(1, min(1024, 4_000_000 // max(pixels, 1)))  # a batch of masks stays ~32 MB as int64
        parts = [
            _summarize(dataset.read_batch(stage, start, start + batch, decode=False)[1], dataset.label_kind, classes)
            for start in range(0, count, batch)
        ]
        summary = (
            np.concatenate(parts)
            if parts
            else np.zeros((0,) if dataset.label_kind == "class" else (0, classes), np.int64)
        )
    _SUMMARY_CACHE[key] = summary  # re-inserted: most recently used last
    while len(_SUMMARY_CACHE) > SUMMARY_CACHE_SIZE:
        _SUMMARY_CACHE.pop(next(iter(_SUMMARY_CACHE)))
    return summary


def _summarize(labels, kind: str, classes: int) -> np.ndarray:
    if kind == "class":
        return np.asarray(labels).astype(np.int64)
    labels = np.asarray(labels)
    n = len(labels)
    ids = labels[:, :, 0] if kind == "boxes" else labels.reshape(n, -1)
    ids = ids.astype(np.int64)
    ids = np.where((ids >= 0) & (ids < classes), ids, classes)  # padding rows and unknown ids: one spare column
    flat = (ids + np.arange(n)[:, None] * (classes + 1)).ravel()
    return (np.bincount(flat, minlength=n * (classes + 1)).reshape(n, classes + 1) > 0)[:, :classes]
