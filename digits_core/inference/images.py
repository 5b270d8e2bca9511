"""Image helpers for views and reports: display windowing and PNG data URIs.

Display rule (used by every bundled view, documented in docs/export.md):

* ``uint8`` images are shown as stored.
* Any other dtype (``uint16``, ``int16``, ``float32``...) is *windowed* to
  8 bits per image: values at or below the 1st percentile map to 0, values
  at or above the 99th percentile map to 255, linearly in between (computed
  over all channels together, NaNs ignored). A constant image maps to 0.
* Channels: ``H×W`` and ``H×W×1`` are grayscale, ``H×W×3`` is RGB,
  ``H×W×4`` is RGBA; any other channel count shows the first channel.

Only numpy is imported at module level; Pillow is imported when a PNG is
encoded.
"""

from __future__ import annotations

import base64
import io

import numpy as np

#: Percentiles used to window non-8-bit images for display.
WINDOW_PERCENTILES = (1.0, 99.0)


def window_to_uint8(array: np.ndarray, percentiles: tuple[float, float] = WINDOW_PERCENTILES) -> np.ndarray:
    """Map any numeric array to ``uint8`` with a percentile window.

    Args:
        array: Numeric array of any shape.
        percentiles: Low and high percentiles mapped to 0 and 255.

    Returns:
        A ``uint8`` array of the same shape.
    """
    values = np.asarray(array, dtype=np.float64)
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return np.zeros(values.shape, dtype=np.uint8)
    low, high = np.percentile(finite, percentiles)
    if high <= low:
        return np.zeros(values.shape, dtype=np.uint8)
    scaled = (np.nan_to_num(values, nan=low) - low) * (255.0 / (high - low))
    return np.clip(np.rint(scaled), 0, 255).astype(np.uint8)


def to_display_uint8(image: np.ndarray) -> np.ndarray:
    """Return an image ready to show: ``uint8``, ``H×W`` (gray), ``H×W×3`` or ``H×W×4``.

    Follows the module's display rule: ``uint8`` is kept, other dtypes are
    windowed from the 1st to the 99th percentile.

    Args:
        image: ``H×W`` or ``H×W×C`` array of any numeric dtype.

    Raises:
        ValueError: The array is not 2-D or 3-D.
    """
    image = np.asarray(image)
    if image.ndim == 3:
        channels = image.shape[2]
        if channels == 1 or channels not in (3, 4):
            image = image[:, :, 0]
    elif image.ndim != 2:
        raise ValueError(f"cannot display an array of shape {image.shape}: expected H×W or H×W×C")
    if image.dtype == np.uint8:
        return np.ascontiguousarray(image)
    if image.dtype == np.bool_:
        return image.astype(np.uint8) * 255
    return window_to_uint8(image)


def to_display_rgb(image: np.ndarray) -> np.ndarray:
    """Return :func:`to_display_uint8` of ``image`` as ``H×W×3`` RGB (gray repeated, alpha dropped)."""
    shown = to_display_uint8(image)
    if shown.ndim == 2:
        return np.repeat(shown[:, :, None], 3, axis=2)
    return np.ascontiguousarray(shown[:, :, :3])


def png_bytes(image: np.ndarray) -> bytes:
    """Encode an image as PNG after :func:`to_display_uint8`."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(to_display_uint8(image)).save(buffer, format="PNG")
    return buffer.getvalue()


def png_data_uri(image: np.ndarray, max_size: int | None = None) -> str:
    """Return ``data:image/png;base64,...`` for an image, optionally shrunk.

    Args:
        image: Array accepted by :func:`to_display_uint8`.
        max_size: When given, the longer side is scaled down to at most this
            many pixels (nearest neighbour for small upscales is never done:
            images are only shrunk).
    """
    shown = to_display_uint8(image)
    if max_size and max(shown.shape[:2]) > max_size:
        from PIL import Image

        pil = Image.fromarray(shown)
        pil.thumbnail((max_size, max_size), Image.Resampling.BILINEAR)
        shown = np.asarray(pil)
    return "data:image/png;base64," + base64.b64encode(png_bytes(shown)).decode("ascii")


def resize_nearest(array: np.ndarray, height: int, width: int) -> np.ndarray:
    """Resize a 2-D or 3-D array to ``height × width`` by nearest neighbour (pure numpy)."""
    array = np.asarray(array)
    if array.shape[:2] == (height, width):
        return array
    rows = (np.arange(height) * array.shape[0] / height).astype(int)
    cols = (np.arange(width) * array.shape[1] / width).astype(int)
    return array[rows][:, cols]
