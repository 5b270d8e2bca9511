"""What the review page reads and writes for a pool candidate: its image, its current label, a posted mask.

A folder pool's candidate is a file under the pool's folder root (``source.root`` + the candidate's
``source.path``): in a 2-D pool an image file :func:`digits_core.inference.imageio.read_image` reads (PNG,
JPEG, ..., or an H×W(×C) ``.npy``); in a 3-D pool (``dimensions: 3``) a volume saved as ``.npy`` (D×H×W, or
D×H×W×C whose first channel is shown). Every path is read through the data-root gate
(:func:`digits_core.paths.check_server_path`) and every size is checked from the header before pixels are
decoded (:mod:`digits_core.limits`).

Labels travel between the page and the server as run-length pairs over the flat, row-major array
(``[value, count, value, count, ...]``); :func:`decode_mask` checks the declared shape against the image,
the counts against the shape and the values against the classes before anything is allocated. A 2-D label
may come as a PNG of class indices instead (base64), whose header is checked the same way.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
from pathlib import Path
from typing import Any

from ..errors import DigitsError
from ..labeling import Pool, PoolError
from ..labeling.masks import read_mask
from ..limits import (
    IMAGE_PIXELS,
    VOLUME_VOXELS,
    InputTooLargeError,
    check_image_size,
    image_header,
    volume_voxels_problem,
)
from ..paths import check_server_path
from ..plugins.registry import registry

#: File suffixes read as volumes (everything else is read as a 2-D image with Pillow).
VOLUME_SUFFIXES = (".npy",)


class MaskPayloadError(DigitsError):
    """A posted label cannot be used (wrong shape, counts or classes); the message says which and what to send."""


def is_pacs_pool(pool: Pool) -> bool:
    """True for a pool whose candidates are images on a DICOMweb server."""
    return (pool.record().get("source") or {}).get("kind") == "dicomweb"


def pacs_plugin(pool: Pool) -> Any:
    """The data plugin class that reads and stores a DICOMweb pool's images and labels (``review_image``,
    ``review_label``, ``review_store``): the source's ``plugin``, by default ``dicomweb-segmentation``.

    Raises:
        PoolError: The plugin is not installed, or it cannot review (named).
    """
    record = pool.record()
    source = record.get("source") or {}
    plugin_id = str(source.get("plugin") or "dicomweb-segmentation")
    try:
        plugin = registry.get_data_ingestion(plugin_id)
    except DigitsError as exc:
        raise PoolError(f"Pool {pool.id} reads its images from a DICOMweb server: {exc}") from None
    if not all(callable(getattr(plugin, name, None)) for name in ("review_image", "review_label", "review_store")):
        raise PoolError(f"Pool {pool.id}: the data plugin {plugin_id} cannot read or store review labels.")
    return plugin


def _pacs_image(pool: Pool, cand: dict[str, Any]) -> Any:
    return pacs_plugin(pool).review_image(pool.record()["source"], cand.get("source") or {})


def _source_path(pool: Pool, cand: dict[str, Any]) -> Path:
    source = pool.record().get("source") or {}
    if source.get("kind") != "folder":
        raise PoolError(f"Pool {pool.id}: candidate {cand['id']} comes from an unknown source {source.get('kind')}.")
    relative = str((cand.get("source") or {}).get("path") or "")
    root = Path(str(source.get("root") or ""))
    path = (root / relative).resolve()
    if not relative or not path.is_relative_to(root.resolve()):
        raise PoolError(f'Pool {pool.id}: candidate {cand["id"]} names "{relative[:80]}", not a file of {root}.')
    return check_server_path(path, "source.path", form_name=f"pool {pool.id}")


def _npy_shape(path: Path) -> tuple[tuple[int, ...], Any]:
    import numpy as np

    with open(path, "rb") as handle:
        version = np.lib.format.read_magic(handle)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, _, dtype = read(handle)  # the header only: no data is read
    return tuple(int(n) for n in shape), dtype


def candidate_shape(pool: Pool, cand: dict[str, Any]) -> tuple[int, ...]:
    """The label shape of a candidate (``(H, W)`` or ``(D, H, W)``) from its file's header; nothing is decoded.

    Raises:
        InputTooLargeError: The header declares more than the limits allow.
        PoolError: The file cannot be read as an image or volume.
        DigitsError: A DICOMweb pool's server or image cannot be read (named by the plugin).
    """
    volume = int(pool.record().get("dimensions") or 2) == 3
    if is_pacs_pool(pool):  # fetched (and cached) whole: headers are checked before decoding, by the plugin
        return tuple(int(n) for n in _pacs_image(pool, cand).shape[: 3 if volume else 2])
    path = _source_path(pool, cand)
    try:
        if volume:
            if path.suffix.lower() not in VOLUME_SUFFIXES:
                raise PoolError(f"{path.name}: the review page reads a volume candidate from a .npy file (D×H×W).")
            shape, _ = _npy_shape(path)
            problem = volume_voxels_problem(shape)
            if problem:
                raise InputTooLargeError(f"{path.name}: {problem}", VOLUME_VOXELS)
            if len(shape) not in (3, 4):
                raise PoolError(f"{path.name}: a volume must be D×H×W (or D×H×W×C), not {shape}")
            return shape[:3]
        if path.suffix.lower() == ".npy":  # a 2-D image stored as an H×W or H×W×C array
            shape, _ = _npy_shape(path)
            if len(shape) not in (2, 3):
                raise PoolError(f"{path.name}: an image array must be H×W or H×W×C, not {shape}")
            height, width = shape[0], shape[1]
        else:
            _, width, height = image_header(path)
    except (OSError, ValueError) as exc:
        raise PoolError(f"Pool {pool.id}: candidate {cand['id']} ({path.name}) cannot be read: {exc}") from None
    check_image_size(width, height, path.name)
    return (height, width)


def _to_uint8(array: Any, low: float, high: float) -> Any:
    import numpy as np

    scale = 255.0 / (high - low) if high > low else 0.0
    return np.clip((np.asarray(array, np.float32) - low) * scale, 0, 255).astype(np.uint8)


def image_png(pool: Pool, cand: dict[str, Any], slice_index: int = 0) -> bytes:
    """The candidate's image (or slice ``slice_index`` of its volume) as an 8-bit PNG for the page.

    Raises:
        InputTooLargeError: The header declares more than the limits allow.
        PoolError: The file cannot be read, or the slice is outside the volume.
    """
    import numpy as np
    from PIL import Image

    shape = candidate_shape(pool, cand) if not is_pacs_pool(pool) else ()  # the size check, before decoding
    pacs_volume = is_pacs_pool(pool) and int(pool.record().get("dimensions") or 2) == 3
    if len(shape) == 3 or pacs_volume:
        if pacs_volume:  # a series on the PACS: its slice stack (D×H×W) from the plugin, one volume in memory
            volume = np.asarray(_pacs_image(pool, cand))
        else:
            volume = np.load(_source_path(pool, cand), mmap_mode="r", allow_pickle=False)
        if not 0 <= slice_index < volume.shape[0]:
            raise PoolError(f"Candidate {cand['id']} has slices 0..{volume.shape[0] - 1}, not {slice_index}.")
        first = volume[..., 0] if volume.ndim == 4 else volume
        pixels = _to_uint8(first[slice_index], float(np.min(first)), float(np.max(first)))
        image = Image.fromarray(pixels, mode="L")
    else:
        from ..inference.imageio import read_image  # the dataset plugins' decoding (bit depth kept), size checked

        if is_pacs_pool(pool):
            pixels = _pacs_image(pool, cand)
        else:
            path = _source_path(pool, cand)
            pixels = read_image(path, name=f"{path.name} (candidate {cand['id']})")
        if pixels.shape[-1] >= 3:
            image = Image.fromarray(_to_uint8(pixels[..., :3], 0, 255) if pixels.dtype != np.uint8 else pixels[..., :3])
        else:
            plane = pixels[..., 0]
            image = Image.fromarray(_to_uint8(plane, float(plane.min()), float(plane.max())), mode="L")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def current_label(pool: Pool, cand: dict[str, Any], shape: tuple[int, ...]) -> Any:
    """The label an edit starts from: the newest stored version, else the proposal, else all background.

    Raises:
        PoolError: The stored label's shape differs from the image's.
    """
    import numpy as np

    entry = cand["labels"][-1] if cand.get("labels") else cand.get("proposal")
    if not entry:
        return np.zeros(shape, np.uint8)
    if not entry.get("file"):  # a DICOM-SEG on the pool's server
        label = np.asarray(pacs_plugin(pool).review_label(pool.record()["source"], cand["source"], entry), np.uint8)
        if label.shape != tuple(shape):
            raise PoolError(f"Candidate {cand['id']}: its label SEG is {label.shape}, the image {tuple(shape)}.")
        return label
    path = pool.file(entry["file"])
    if path.suffix == ".npy":
        stored, _ = _npy_shape(path)
        if stored != tuple(shape):
            raise PoolError(f"{path.name}: the label is {stored}, the image {tuple(shape)}; propose it again.")
    else:
        _, width, height = image_header(path)
        if (height, width) != tuple(shape):
            raise PoolError(f"{path.name}: the label is {height}x{width}, the image {shape}; propose it again.")
    return np.asarray(read_mask(path), np.uint8)


def encode_runs(array: Any) -> list[int]:
    """Run-length pairs ``[value, count, ...]`` of an array read row-major (what the page decodes)."""
    import numpy as np

    flat = np.asarray(array).ravel()
    if not flat.size:
        return []
    starts = np.flatnonzero(np.r_[True, flat[1:] != flat[:-1]])
    counts = np.diff(np.r_[starts, flat.size])
    return np.column_stack([flat[starts], counts]).ravel().astype(int).tolist()


def decode_mask(payload: Any, shape: tuple[int, ...], classes: int) -> Any:
    """The label a request posted, checked against the image before it is allocated.

    Args:
        payload: ``{"encoding": "rle", "shape": [...], "runs": [v, n, ...]}`` or, for 2-D,
            ``{"encoding": "png", "data": BASE64}`` (8-bit class indices).
        shape: The candidate image's label shape.
        classes: How many classes (values must lie in ``0..classes-1``).

    Raises:
        MaskPayloadError: Naming what is wrong (shape, counts, values, encoding).
        InputTooLargeError: The declared size is over the limits.
    """
    import numpy as np

    if not isinstance(payload, dict):
        raise MaskPayloadError('"mask" must be an object: {"encoding": "rle", "shape": [...], "runs": [...]}')
    encoding = payload.get("encoding")
    if encoding == "png":
        if len(shape) != 2:
            raise MaskPayloadError('"mask": a volume\'s label is sent as "rle", not "png".')
        try:
            data = base64.b64decode(str(payload.get("data") or ""), validate=True)
            _, width, height = image_header(data)
        except (binascii.Error, ValueError) as exc:
            raise MaskPayloadError(f'"mask.data" is not a base64 PNG ({exc}).') from None
        check_image_size(width, height, "mask")
        if (height, width) != tuple(shape):
            raise MaskPayloadError(f'"mask" is {height}x{width}; the image is {shape[0]}x{shape[1]}.')
        from PIL import Image

        with Image.open(io.BytesIO(data)) as image:
            if image.mode not in ("L", "P"):
                raise MaskPayloadError(f'"mask" must be an 8-bit PNG of class indices, not mode {image.mode}.')
            mask = np.array(image, np.uint8)
    elif encoding == "rle":
        declared = payload.get("shape")
        if not isinstance(declared, list) or [int(n) if isinstance(n, int) else None for n in declared] != list(shape):
            raise MaskPayloadError(f'"mask.shape" is {str(declared)[:60]}; the image\'s label is {list(shape)}.')
        size = math.prod(shape)
        if size > max(IMAGE_PIXELS.value(), VOLUME_VOXELS.value()):
            raise InputTooLargeError(f"mask: {size:,} values, more than the limits allow", IMAGE_PIXELS)
        runs = payload.get("runs")
        if not isinstance(runs, list) or len(runs) % 2 or not all(type(v) is int and v >= 0 for v in runs):
            raise MaskPayloadError('"mask.runs" must be pairs of whole numbers ≥ 0: [value, count, value, count, ...].')
        values, counts = runs[0::2], runs[1::2]
        if sum(counts) != size:
            raise MaskPayloadError(f'"mask.runs" covers {sum(counts):,} values; the image\'s label has {size:,}.')
        if values and max(values) >= classes:
            raise MaskPayloadError(f'"mask.runs" holds class {max(values)}; this pool has classes 0..{classes - 1}.')
        mask = np.repeat(np.asarray(values, np.uint8), np.asarray(counts, np.int64)).reshape(shape)
    else:
        raise MaskPayloadError(f'"mask.encoding" must be "rle" or "png", not {str(encoding)[:20]!r}.')
    if mask.size and int(mask.max()) >= classes:
        raise MaskPayloadError(f'"mask" holds class {int(mask.max())}; this pool has classes 0..{classes - 1}.')
    return mask


__all__ = [
    "MaskPayloadError",
    "candidate_shape",
    "current_label",
    "decode_mask",
    "encode_runs",
    "image_png",
]
