"""Label masks as the pool stores them: 2-D class indices as 8-bit PNG, volumes as ``.npy``."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

from ..errors import DigitsError


class MaskError(DigitsError):
    """A label mask cannot be stored (the message says what is wrong with it)."""


def encode_mask(array: Any) -> bytes:
    """A mask's bytes as stored: 2-D class indices as an 8-bit PNG, volumes as ``.npy``.

    Raises:
        MaskError: More than 255 classes, or not 2-D/3-D.
    """
    import numpy as np

    array = np.asarray(array)
    if array.ndim not in (2, 3) or array.size == 0:
        raise MaskError(f"A label must be a 2-D or 3-D array of class indices, not shape {array.shape}.")
    if array.min() < 0 or array.max() > 255:
        raise MaskError("A label holds class indices 0-255; this one is out of range.")
    if array.ndim == 3:
        buffer = io.BytesIO()
        np.save(buffer, array.astype(np.uint8), allow_pickle=False)
        return buffer.getvalue()
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(array.astype(np.uint8), mode="L").save(buffer, format="PNG")
    return buffer.getvalue()


def read_mask(path: str | os.PathLike) -> Any:
    """A stored mask file back as a uint8 array (PNG or ``.npy``)."""
    import numpy as np

    path = Path(path)
    if path.suffix == ".npy":
        return np.load(path, allow_pickle=False)
    from PIL import Image

    with Image.open(path) as image:
        return np.asarray(image.convert("L"))
