"""``digits.extensions.data``: DIGITS 6 data plugins.

``GROUP`` is the entry-point group a DIGITS 6 ``setup.py`` registers its
class in (``entry_points={GROUP: ['class=pkg:DataIngestion']}``): it is
DIGITS Core's own data plugin group, so such a plugin is discovered like
any other.
"""

from digits_core import ENTRY_POINT_GROUPS

#: Entry-point group of data plugins (``digits.plugins.data``, as in DIGITS 6).
GROUP = ENTRY_POINT_GROUPS["data"]

__all__ = ["GROUP"]
