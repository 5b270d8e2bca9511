"""``digits.utils.image``: the image helpers DIGITS 6 plugins call.

Arrays follow DIGITS 6 conventions: ``H×W`` for grayscale, ``H×W×3`` for
RGB, ``uint8``. Resizing is DIGITS Core's own implementation of DIGITS's
resize modes (``squash``, ``crop``, ``fill``, ``half_crop``).
"""

from __future__ import annotations

import base64
import io
import os
from urllib.parse import urlparse

import numpy as np
import PIL.Image

from .errors import LoadImageError

#: File suffixes DIGITS 6 reads as images.
SUPPORTED_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".ppm", ".pgm")

_MODES = {None: None, 1: "L", 3: "RGB", 4: "RGBA"}


def load_image(path: str) -> PIL.Image.Image:
    """Read an image file into a PIL image of mode ``L`` or ``RGB``.

    Transparency is composited over white, as DIGITS 6 did. URLs are not
    fetched (DIGITS Core reads local files only).

    Raises:
        LoadImageError: The file is missing, unreadable or of an unsupported mode.
    """
    if urlparse(str(path)).scheme in ("http", "https", "ftp"):
        raise LoadImageError(f'"{path}" is a URL; download it first (DIGITS Core reads local files only)')
    if not os.path.exists(path):
        raise LoadImageError(f'"{path}" not found')
    try:
        image = PIL.Image.open(path)
        image.load()
    except (OSError, ValueError) as exc:
        raise LoadImageError(f"{path}: {exc}") from exc
    if image.mode in ("L", "RGB"):
        return image
    if image.mode == "1":
        return image.convert("L")
    if image.mode in ("LA", "P", "RGBA", "PA"):
        rgba = image.convert("RGBA")
        background = PIL.Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        composed = PIL.Image.alpha_composite(background, rgba)
        return composed.convert("L" if image.mode == "LA" else "RGB")
    if image.mode in ("CMYK", "YCbCr", "I", "I;16", "F"):
        return image.convert("RGB" if image.mode in ("CMYK", "YCbCr") else "L")
    raise LoadImageError(f'Image mode "{image.mode}" not supported')


def image_to_array(image, channels: int | None = None) -> np.ndarray:
    """Return a PIL image or array as a ``uint8`` array with ``channels`` channels.

    Args:
        image: A PIL image or a numpy array (``H×W``, ``H×W×1``, ``H×W×3`` or ``H×W×4``).
        channels: 1, 3, 4, or ``None`` to keep the image's own.

    Returns:
        ``H×W`` for one channel, else ``H×W×C``.

    Raises:
        ValueError: Unsupported ``channels`` or image shape.
    """
    if channels not in _MODES:
        raise ValueError(f"unsupported number of channels: {channels}")
    if isinstance(image, PIL.Image.Image):
        mode = _MODES[channels] or image.mode
        if mode not in ("L", "RGB", "RGBA"):
            raise ValueError(f'unknown image mode "{mode}"')
        return np.array(image.convert(mode) if image.mode != mode else image)
    if not isinstance(image, np.ndarray):
        raise ValueError("image_to_array() expected a PIL.Image.Image or a numpy.ndarray")
    array = image.astype(np.uint8) if image.dtype != np.uint8 else image
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    if not (array.ndim == 2 or (array.ndim == 3 and array.shape[2] in (3, 4))):
        raise ValueError(f"invalid image shape: {array.shape}")
    have = 1 if array.ndim == 2 else array.shape[2]
    if channels is None or channels == have:
        return array
    if channels == 1:
        return np.clip(np.floor(array[:, :, :3].astype(np.float64) @ [0.299, 0.587, 0.114] + 0.5), 0, 255).astype(
            np.uint8
        )
    if have == 1:
        array = np.repeat(array[:, :, None], channels, axis=2)
        if channels == 4:
            array[:, :, 3] = 255
        return array
    if channels == 3:
        return array[:, :, :3]
    return np.concatenate([array, np.full(array.shape[:2] + (1,), 255, np.uint8)], axis=2)


def resize_image(
    image, height: int, width: int, channels: int | None = None, resize_mode: str | None = None
) -> np.ndarray:
    """Resize an image as DIGITS 6 did and return it as a ``uint8`` array.

    Args:
        image: A PIL image or a numpy array.
        height: Target height.
        width: Target width.
        channels: Channels of the result (default: the image's own).
        resize_mode: ``squash`` (default), ``crop``, ``fill`` or ``half_crop``.

    Returns:
        ``H×W`` for one channel, else ``H×W×C``.

    Raises:
        ValueError: Unknown resize mode or unsupported image.
    """
    from digits_core.resize import RESIZE_MODES
    from digits_core.resize import resize_image as core_resize

    mode = resize_mode or "squash"
    if mode not in RESIZE_MODES:
        raise ValueError(f'resize_mode "{mode}" not supported')
    array = image_to_array(image, channels)
    planar = array.ndim == 2
    resized = core_resize(array[:, :, None] if planar else array, int(height), int(width), mode)
    return resized[:, :, 0] if planar else resized


def embed_image_html(image) -> str | None:
    """Return an image as a ``data:`` URI for an ``<img src=...>``.

    Args:
        image: A PIL image or a numpy array (``H×W``, ``H×W×1``, ``H×W×3``,
            ``H×W×4``); ``None`` gives ``None``.

    Returns:
        ``data:image/<format>;base64,...`` (PNG unless the PIL image has a format).

    Raises:
        ValueError: ``image`` is neither.
    """
    if image is None:
        return None
    if isinstance(image, np.ndarray):
        array = image[:, :, 0] if image.ndim == 3 and image.shape[2] == 1 else image
        image = PIL.Image.fromarray(array)
    elif not isinstance(image, PIL.Image.Image):
        raise ValueError("image must be a PIL.Image or a np.ndarray")
    fmt = (image.format or "png").lower()
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return f"data:image/{fmt};base64,{base64.b64encode(buffer.getvalue()).decode('ascii')}"


def save_image(image, path: str) -> None:
    """Write a PIL image or array (as :func:`embed_image_html` accepts) to ``path``; the suffix picks the format."""
    if isinstance(image, np.ndarray):
        image = PIL.Image.fromarray(image[:, :, 0] if image.ndim == 3 and image.shape[2] == 1 else image)
    image.save(path)


def image_from_array(array: np.ndarray) -> PIL.Image.Image:
    """Return a PIL image of an ``H×W``, ``H×W×1``, ``H×W×3`` or ``H×W×4`` array (cast to ``uint8``)."""
    return PIL.Image.fromarray(image_to_array(np.asarray(array)))
