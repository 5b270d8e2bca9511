"""DIGITS data plugins for images and arrays.

Plugins: :mod:`.classification` (``image-classification``),
:mod:`.segmentation` (``image-segmentation``), :mod:`.regression`
(``image-regression``: images + a CSV/JSON-lines file of targets, read by
:mod:`.targets`), :mod:`.processing` (``image-processing``: image-to-image
pairs), :mod:`.numpy_arrays` (``numpy-arrays``: memory-mapped ``.npy``/``.npz``
through :mod:`.arrays`; :func:`.numpy_arrays.create_dataset_from_arrays` for
arrays in memory) and :mod:`.pairs` (``image-pairs``: same/different pairs for
Siamese networks). Shared modules:
:mod:`.resize` (loading, channel conversion, DIGITS resize modes),
:mod:`.encoding` (what a record stores: raw, PNG, JPEG or pass-through
bytes), :mod:`.listing` (class folders, list files, the seeded split),
:mod:`.forms` and :mod:`.inference` (shared form fields and inference inputs).
Nothing here imports TensorFlow.
"""

__version__ = "0.1.0"
