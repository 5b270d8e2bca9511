"""Reading inference inputs from files the way image datasets are built.

For models whose data plugin has no inference form, each input file goes
through the dataset's own image preprocessing before the engine's (mean,
crop, scaling):

1. read: PNG/JPEG/BMP/GIF/TIFF/WebP/PPM with Pillow (16-bit PNG/TIFF keep
   their 16 bits), or ``.npy`` arrays;
2. channels: to the dataset's C (RGB → gray with weights 0.299, 0.587,
   0.114; gray → RGB by repeating; transparency composited over white);
3. resize to the dataset's H×W with its ``resize_mode`` (DIGITS's
   ``squash``, ``crop``, ``fill``, ``half_crop``);
4. cast to the dataset's feature dtype (rounded half to even and clipped for integers).

Steps 2–4 are :mod:`digits_core.resize`, the very functions the image data
plugins build datasets with, so the arrays are bit-identical. Datasets pad
``fill`` and ``half_crop`` with uniform noise as DIGITS did; inference pads
with a constant mid-grey (:func:`digits_core.resize.pad_value`) instead, so
repeated runs and exported models give the same result.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from ..errors import InferenceError
from ..limits import check_image_size, image_header
from ..resize import RESIZE_MODES, convert_channels, image_to_array, open_image, prepare_array, resize_image  # noqa: F401

#: File name suffixes read as images (``.npy`` is read as an array).
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm", ".pnm", ".npy"}


def is_image_file(path: str | os.PathLike) -> bool:
    """True when ``path``'s suffix is one of :data:`IMAGE_SUFFIXES`."""
    return Path(path).suffix.lower() in IMAGE_SUFFIXES


def read_image(path: str | os.PathLike, name: str | None = None) -> np.ndarray:
    """Read an image file (or ``.npy`` array) into an ``H×W×C`` array, keeping its bit depth.

    Decoding is :func:`digits_core.resize.image_to_array` (the dataset plugins' own), with the
    channels as stored; float (``F``) images are read as float32. The size its header declares is
    checked first (:func:`digits_core.limits.check_image_size`: the per-image limit, and the
    request's pixel budget in the web server's worker), so a small file declaring a huge image
    allocates nothing.

    Args:
        path: The file to read (for a list file's line, the path it resolved to).
        name: How errors name it (default ``path``): the path as the user gave it, so a message never
            tells where a symlink leads.

    Raises:
        InferenceError: The file is missing or not a readable image; the message names it.
        InputTooLargeError: Its header declares more pixels than a limit allows.
    """
    path = Path(path)
    what = f"Input {name or path}"
    if not path.is_file():
        raise InferenceError(f"{what} does not exist or is not a file.")
    if path.suffix.lower() == ".npy":
        array = read_npy(path, what)
        if array.ndim in (2, 3):
            check_image_size(array.shape[1], array.shape[0], what)
    else:
        try:
            with open(path, "rb") as handle:
                _format, width, height = image_header(handle)
                check_image_size(width, height, what)
                image = open_image(handle)
            array = np.asarray(image, dtype=np.float32) if image.mode == "F" else image_to_array(image, None)
        except (OSError, ValueError) as exc:
            raise InferenceError(f"{what} is not a readable image: {exc}") from exc
    if array.ndim == 2:
        array = array[:, :, None]
    if array.ndim != 3:
        raise InferenceError(f"{what} has shape {array.shape}; expected H×W or H×W×C.")
    return array


def read_npy(path: Path, what: str) -> np.ndarray:
    """A ``.npy`` file's array, its header checked before numpy allocates anything (``allow_pickle`` stays off).

    Raises:
        InferenceError: ``what`` (naming the file) has no valid header, holds Python objects (a pickle), or
            declares a shape its data does not fill; numpy's own error never reaches the user.
    """
    try:
        with open(path, "rb") as handle:
            try:
                version = np.lib.format.read_magic(handle)  # 3.0 (utf-8 field names) only for record dtypes
                read_header = (
                    np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                )
                shape, fortran, dtype = read_header(handle)
            except Exception:  # noqa: BLE001 - the header is a Python literal: any failure means "not a header"
                raise InferenceError(f"{what} is not a readable .npy array (no valid header).") from None
            if dtype.hasobject:
                raise InferenceError(
                    f"{what} holds Python objects (a pickled array), which are never loaded; "
                    "save a numeric array with numpy.save."
                )
            count = math.prod(int(n) for n in shape)  # Python ints: an absurd shape cannot overflow
            available = os.fstat(handle.fileno()).st_size - handle.tell()
            if min(shape, default=0) < 0 or count * dtype.itemsize != available:
                raise InferenceError(
                    f"{what}: its .npy header declares shape {tuple(shape)} of {dtype} "
                    f"({count * dtype.itemsize:,} bytes) but {available:,} bytes follow it; "
                    "the file is damaged or cut short."
                )
            data = np.fromfile(handle, dtype=dtype, count=count)
    except OSError as exc:
        raise InferenceError(f"{what} cannot be read ({exc.strerror or type(exc).__name__}).") from None
    return data.reshape(shape, order="F" if fortran else "C")


def prepare_image(
    image: np.ndarray, shape: tuple, dtype: str, resize_mode: str = "squash", rng: np.random.Generator | None = None
) -> np.ndarray:
    """Bring an image to a dataset's feature ``shape`` (H, W, C) and ``dtype``: channels, resize, cast.

    :func:`digits_core.resize.prepare_array`, the steps a dataset plugin applies; noise
    padding (``fill``/``half_crop``) comes from ``rng``; without one the padding is the
    constant :func:`digits_core.resize.pad_value` (mid-grey), as in exported models.

    Raises:
        InferenceError: Unknown resize mode or impossible channel conversion.
    """
    try:
        return prepare_array(image, shape, dtype, resize_mode or "squash", rng=rng, constant_pad=rng is None)
    except ValueError as exc:
        raise InferenceError(f"Cannot prepare the input: {exc}.") from None


def read_mask(path: str | os.PathLike, height: int, width: int, palette=None) -> np.ndarray:
    """Read a segmentation ground-truth image as an ``H×W`` int64 class map.

    Palette ('P') images give their indices; grayscale images their values;
    RGB images are mapped through ``palette`` (the dataset's
    ``color_palette``; an unknown colour raises). The map is resized to
    ``height × width`` by nearest neighbour.

    Raises:
        InferenceError: Unreadable file or a colour not in the palette.
    """
    from PIL import Image

    from .images import resize_nearest

    path = Path(path)
    if path.suffix.lower() == ".npy":
        classes = read_npy(path, f"Ground-truth mask {path}")
        if classes.ndim == 3:
            classes = classes[:, :, 0]
    else:
        try:
            with Image.open(path) as image:
                check_image_size(image.size[0], image.size[1], f"Ground-truth mask {path}")
                image.load()
                if image.mode in ("P", "L", "I", "I;16"):
                    classes = np.asarray(image).astype(np.int64)
                else:
                    rgb = np.asarray(image.convert("RGB")).astype(np.int64)
                    if not palette:
                        raise InferenceError(
                            f"Ground-truth mask {path} is an RGB image but the dataset has no color_palette."
                        )
                    codes = rgb[:, :, 0] * 65536 + rgb[:, :, 1] * 256 + rgb[:, :, 2]
                    lookup = {r * 65536 + g * 256 + b: i for i, (r, g, b) in enumerate(tuple(c)[:3] for c in palette)}
                    classes = np.full(codes.shape, -1, dtype=np.int64)
                    for code, index in lookup.items():
                        classes[codes == code] = index
                    if (classes < 0).any():
                        raise InferenceError(
                            f"Ground-truth mask {path} has colours that are not in the dataset's color_palette."
                        )
        except (OSError, ValueError) as exc:
            raise InferenceError(f"Ground-truth mask {path} is not a readable image: {exc}") from exc
    return resize_nearest(np.asarray(classes, dtype=np.int64), height, width)
