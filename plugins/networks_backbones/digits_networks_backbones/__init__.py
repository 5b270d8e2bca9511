"""Pretrained backbones as DIGITS networks: ``keras.applications`` encoders with a pooled head.

The networks (:data:`~digits_networks_backbones.catalog.BACKBONES`) are registered through the
``digits_register_networks`` hook (:mod:`.hooks`), each with its metadata declared on the builder
(tasks, minimum input size, weight files, recommended options), so listing plugins never imports
TensorFlow. The models are built in :mod:`.build`. See ``docs/backbones.md``.
"""

from .catalog import BACKBONES, Backbone
from .network import make_network

__all__ = ["BACKBONES", "Backbone", "make_network"]
