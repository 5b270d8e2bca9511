"""Backbone networks as ``build_model`` callables with their metadata declared (no TensorFlow).

DIGITS Core reads ``tasks``, ``batch_size``, ``defaults``, ``min_size``,
``weights`` and ``description`` from the callable without building a model
(see ``digits_core.engine.networks.plugin_networks``); the model is built only
when a run calls it (:func:`digits_networks_backbones.build.build_backbone_model`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .catalog import Backbone

#: Tasks every backbone serves: a pooled head (classification, regression), a U-Net decoder (segmentation)
#: or detectnet's heads on a top-down path (detection).
TASKS = ("classification", "regression", "segmentation", "detection")

#: What a user who only picks a backbone gets: ImageNet weights, the head alone for the first epoch,
#: then the backbone at 0.3 of the rate (Keras's transfer-learning recipe; fastai's ``fine_tune`` similar
#: rates), Adam at 0.003, and the pixels as stored (the backbone's own preprocessing is in the graph).
#: Measured with ``bench/transfer.py``'s sets (10 images per class, 15 epochs; 16 masks): Adam 0.001 with a
#: tenth for the backbone left the head under-trained once DIGITS's step policy cut the rate at a third of
#: the run (val top-1 0.61, train 0.75; U-Net Dice 0.856); 0.003 and 0.3 gave 0.74 and 0.875.
DEFAULTS = {
    "solver": "adam",
    "learning_rate": 0.003,
    "mean_subtraction": "none",
    "scale": "none",
    "weights": "imagenet",
    "freeze_epochs": 1.0,
    "backbone_lr_mult": 0.3,
    # per task, over the above (read by the engine's defaults_for): a U-Net's batch and fixed rate as the
    # built-in unet's; detection takes detectnet's measured schedule (batch 4, rate steps at 75 / 92 %,
    # random zoom 0.25), not yet measured with backbones
    "by_task": {
        "segmentation": {"batch_size": 8, "lr_policy": "fixed"},
        "detection": {
            "learning_rate": 0.001,  # not measured at 0.003 with backbones: kept
            "batch_size": 4,
            "lr_policy": "multistep",
            "lr_step_values": "75,92",
            "lr_gamma": 0.1,
            "aug_scale": 0.25,
        },
    },
}


def make_network(backbone: Backbone, *, defaults: dict | None = None, batch_size: int = 16) -> Callable[..., Any]:
    """The ``build_model(input_shape, num_outputs, **params)`` callable of ``backbone``, metadata attached.

    Args:
        backbone: The encoder (a :class:`~.catalog.Backbone`; tests may declare their own weights table).
        defaults: Recommended training options (default :data:`DEFAULTS`).
        batch_size: Default batch size.

    Network parameters (``--network-param``): ``input_size`` (resize in the graph to N×N, e.g. for images
    smaller than the minimum), ``dropout`` (before the pooled head, default 0.2), ``decoder_filters``
    (segmentation: the finest decoder level's filters, default 16).
    """

    def build_model(input_shape, num_outputs, **params):
        from .build import build_backbone_model  # TensorFlow loads only when a model is built

        return build_backbone_model(backbone, input_shape, num_outputs, **params)

    build_model.__name__ = backbone.name
    build_model.__doc__ = backbone.title
    meta: dict[str, Any] = {
        "tasks": TASKS,
        "batch_size": batch_size,
        "defaults": dict(DEFAULTS if defaults is None else defaults),
        "min_size": backbone.min_size,
        "weights": backbone.weights_table(),
        "description": backbone.title,
        "layouts": ("image",),
        "backbone": backbone,
    }
    for key, value in meta.items():
        setattr(build_model, key, value)
    return build_model
