"""Input preprocessing shared by training and inference.

Training and inference must turn raw dataset features into network inputs
the same way; both use :class:`Preprocessing`, saved in the model job
(``model.json["preprocessing"]`` plus ``mean.npy``) and restored with
:meth:`Preprocessing.load`. The steps, in order:

1. cast the stored feature (uint8, uint16, int16 or float32, ``H×W×C``) to float32;
2. mean subtraction: ``none``; ``image`` subtracts the dataset's float32 mean
   image (``H×W×C``); ``pixel`` subtracts its per-channel mean (``C`` values);
3. multiply by ``scale``: with the ``scale`` training option ``auto`` (the
   default), ``1/255`` for uint8 data (DIGITS's LeNet scale), otherwise
   ``1/std`` of the mean-subtracted training data (measured once at training
   start), so 16-bit DICOM gets inputs of unit spread; ``none`` keeps the
   values (uint8 character ids are not pixels); a number multiplies by it;
4. crop to ``crop_size``: random crop in training (in the tf.data pipeline,
   together with the mask), **centre crop** in validation and inference.

Use :meth:`Preprocessing.apply` (numpy) for inference on batches, or
:meth:`Preprocessing.tf_normalize` / :func:`tf_center_crop` inside TensorFlow.
This module imports numpy only; the ``tf_*`` functions import TensorFlow when called.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InferenceError

MEAN_FILE = "mean.npy"


def center_crop_offsets(height: int, width: int, crop: int) -> tuple[int, int]:
    """Top-left corner of the centre ``crop×crop`` window (DIGITS's rounding: floor)."""
    return (height - crop) // 2, (width - crop) // 2


@dataclass
class Preprocessing:
    """How raw features become network inputs.

    Attributes:
        mean_subtraction: ``"none"``, ``"image"`` or ``"pixel"``.
        mean: The float32 mean image ``H×W×C`` of the training set (``None`` when not used).
        scale: Multiplier applied after mean subtraction.
        crop_size: Square crop size, or ``None``.
        feature_shape: The stored feature shape ``(H, W, C)``.
    """

    mean_subtraction: str
    mean: np.ndarray | None
    scale: float
    crop_size: int | None
    feature_shape: tuple

    # -- shapes ---------------------------------------------------------------

    @property
    def input_shape(self) -> tuple:
        """The network's input shape ``(H, W, C)`` after cropping."""
        h, w, c = self.feature_shape
        if self.crop_size:
            return (self.crop_size, self.crop_size, c)
        return (h, w, c)

    def mean_array(self) -> np.ndarray | float:
        """What is subtracted: the mean image, the per-channel mean, or 0."""
        if self.mean_subtraction == "none" or self.mean is None:
            return 0.0
        if self.mean_subtraction == "pixel":
            return self.mean.reshape(-1, self.mean.shape[-1]).mean(axis=0).astype(np.float32)
        return self.mean.astype(np.float32)

    # -- numpy ----------------------------------------------------------------

    def normalize(self, features: np.ndarray) -> np.ndarray:
        """Steps 1-3 on a batch ``[N, H, W, C]`` (or one ``H×W×C`` image), numpy float32."""
        x = np.asarray(features)
        if x.ndim == 2:
            x = x[..., None]
        x = x.astype(np.float32)
        if x.shape[-3:] != tuple(self.feature_shape):
            raise InferenceError(
                f"Input shape {x.shape[-3:]} does not match the model's dataset images {tuple(self.feature_shape)}; "
                "resize inputs as the dataset did."
            )
        return (x - self.mean_array()) * np.float32(self.scale)

    def apply(self, features: np.ndarray) -> np.ndarray:
        """All inference steps (normalize, then centre crop) on a batch or one image."""
        x = self.normalize(features)
        if self.crop_size:
            h, w = x.shape[-3], x.shape[-2]
            top, left = center_crop_offsets(h, w, self.crop_size)
            x = x[..., top : top + self.crop_size, left : left + self.crop_size, :]
        return x

    def crop_label(self, label: np.ndarray) -> np.ndarray:
        """Centre-crop a mask (``[N,] H×W``) the way :meth:`apply` crops images."""
        if not self.crop_size:
            return label
        h, w = label.shape[-2], label.shape[-1]
        top, left = center_crop_offsets(h, w, self.crop_size)
        return label[..., top : top + self.crop_size, left : left + self.crop_size]

    # -- TensorFlow ------------------------------------------------------------

    def tf_normalize(self, images):
        """Steps 1-3 in TensorFlow (``images``: ``[N, H, W, C]`` any dtype)."""
        import tensorflow as tf

        x = tf.cast(images, tf.float32)
        mean = self.mean_array()
        if not isinstance(mean, float):
            x = x - tf.constant(mean)
        return x * self.scale

    # -- persistence -------------------------------------------------------------

    def to_dict(self) -> dict:
        """JSON part (the mean is saved separately as ``mean.npy``)."""
        return {
            "mean_subtraction": self.mean_subtraction,
            "scale": float(self.scale),
            "crop_size": self.crop_size,
            "feature_shape": list(self.feature_shape),
            "input_shape": list(self.input_shape),
            "mean_file": MEAN_FILE if self.mean is not None else None,
        }

    def save(self, folder: str | Path) -> dict:
        """Write ``mean.npy`` into ``folder`` and return :meth:`to_dict`."""
        if self.mean is not None:
            np.save(Path(folder) / MEAN_FILE, self.mean.astype(np.float32))
        return self.to_dict()

    @classmethod
    def from_dict(cls, data: dict, folder: str | Path | None = None) -> Preprocessing:
        """Rebuild from :meth:`to_dict` output (reads ``mean.npy`` from ``folder``)."""
        mean = None
        if data.get("mean_file") and folder is not None:
            mean = np.load(Path(folder) / data["mean_file"]).astype(np.float32)
        return cls(
            data["mean_subtraction"], mean, float(data["scale"]), data.get("crop_size"), tuple(data["feature_shape"])
        )

    @classmethod
    def load(cls, model_job: Any) -> Preprocessing:
        """Load the preprocessing of a model job (a :class:`~digits_core.Job`, its folder or id).

        Args:
            model_job: A Job, a job folder path, or a job id in the default jobs folder.
        """
        from .jobio import model_folder, read_model_info

        folder = model_folder(model_job)
        return cls.from_dict(read_model_info(folder)["preprocessing"], folder)


def parse_scale(value: Any) -> str | float:
    """The ``scale`` training option: ``"auto"``, ``"none"`` or a positive finite number.

    Raises:
        ValueError: Anything else (the message says what to use).
    """
    text = "auto" if value is None else str(value).strip().lower()
    if text in ("auto", "none"):
        return text
    try:
        number = float(text)
    except ValueError:
        number = float("nan")
    if not np.isfinite(number) or number <= 0:
        raise ValueError(
            f'use "auto" (1/255 for uint8, else 1/std), "none" (no scaling) or a positive number, not "{value}"'
        )
    return number


def resolve_scale(option: str | float, dtype, sample: np.ndarray | None, mean: np.ndarray | float) -> float:
    """The multiplier the ``scale`` option means for this data (``"auto"``: :func:`compute_scale`)."""
    if option == "auto":
        return compute_scale(dtype, sample, mean)
    return 1.0 if option == "none" else float(option)


def compute_scale(dtype, sample: np.ndarray | None, mean: np.ndarray | float) -> float:
    """The input scale for a feature dtype (1/255 for uint8, else 1/std of a mean-subtracted sample)."""
    if np.dtype(dtype) == np.uint8 or sample is None or sample.size == 0:
        return 1.0 / 255.0
    std = float(np.std(sample.astype(np.float32) - mean))
    return 1.0 / std if std > 0 and np.isfinite(std) else 1.0


def tf_center_crop(images, crop_size: int | None):
    """Centre-crop ``[N, H, W, C]`` (or ``[N, H, W]`` masks) with the same offsets as numpy."""
    if not crop_size:
        return images
    h, w = int(images.shape[1]), int(images.shape[2])
    top, left = center_crop_offsets(h, w, crop_size)
    return images[:, top : top + crop_size, left : left + crop_size]
