"""``digits.extensions.view``: DIGITS 6 view (visualization) plugins.

``GROUP`` is the entry-point group a DIGITS 6 ``setup.py`` registers its
class in: DIGITS Core's own view plugin group.
"""

from digits_core import ENTRY_POINT_GROUPS

#: Entry-point group of view plugins (``digits.plugins.view``, as in DIGITS 6).
GROUP = ENTRY_POINT_GROUPS["view"]

__all__ = ["GROUP"]
