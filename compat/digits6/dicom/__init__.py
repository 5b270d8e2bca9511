"""``import dicom``: what DIGITS 6 plugins import, pydicom 3 underneath (distribution ``digits6-compat``).

pydicom was the ``dicom`` package before 1.0, and 3.0 removed
``read_file`` (now ``dcmread``). DIGITS 6 plugins (Sunnybrook:
``dicom.read_file(path).pixel_array``) run unchanged with this alias; every
other name is pydicom's. New code imports ``pydicom`` itself.
"""

from __future__ import annotations

from typing import Any

try:
    import pydicom as _pydicom
except ImportError as exc:  # pydicom is optional for digits6-compat
    raise ImportError(
        "`import dicom` (a DIGITS 6 plugin's) is pydicom under another name: pip install 'pydicom>=2.4'"
    ) from exc

#: DIGITS 6's name for :func:`pydicom.dcmread` (removed from pydicom 3.0).
read_file = _pydicom.dcmread
dcmread = _pydicom.dcmread
__version__ = _pydicom.__version__


def __getattr__(name: str) -> Any:
    """Every other name (``dicom.dataset``, ``dicom.Dataset``...) is pydicom's."""
    return getattr(_pydicom, name)
