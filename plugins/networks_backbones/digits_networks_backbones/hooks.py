"""The plugin's hook implementations (entry point ``digits.plugins.hooks``)."""

from __future__ import annotations

from digits_core import hookimpl

from .catalog import BACKBONES
from .network import make_network


@hookimpl
def digits_register_networks():
    """Every backbone of :data:`~.catalog.BACKBONES` as a network."""
    return {name: make_network(backbone) for name, backbone in BACKBONES.items()}
