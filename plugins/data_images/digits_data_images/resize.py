"""Image loading, channel conversion and DIGITS's four resize modes: re-exported from the core.

The one implementation lives in :mod:`digits_core.resize`, shared with
inference and export so a model is served the pixels it was trained on;
these names stay importable from here for existing code.
"""

from __future__ import annotations

from digits_core.resize import (  # noqa: F401 - re-exports
    MODES_16BIT,
    RESIZE_MODES,
    ResizePlan,
    cast_to,
    convert_channels,
    image_to_array,
    open_image,
    prepare_array,
    resize_image,
    resize_plan,
    seeded_rng,
)

__all__ = [
    "MODES_16BIT",
    "RESIZE_MODES",
    "ResizePlan",
    "cast_to",
    "convert_channels",
    "image_to_array",
    "open_image",
    "prepare_array",
    "resize_image",
    "resize_plan",
    "seeded_rng",
]
