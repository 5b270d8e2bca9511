"""DIGITS data plugins for images: ``image-classification`` and ``image-segmentation``.

Modules: :mod:`.classification` and :mod:`.segmentation` (the plugins),
:mod:`.resize` (loading, channel conversion, DIGITS resize modes),
:mod:`.encoding` (what a record stores: raw, PNG, JPEG or pass-through
bytes), :mod:`.listing` (class folders, list files, the seeded split),
:mod:`.forms` and :mod:`.inference` (shared form fields and inference inputs).
Nothing here imports TensorFlow.
"""

__version__ = "0.1.0"
