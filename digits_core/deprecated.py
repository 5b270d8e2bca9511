"""Every deprecation of the plugin API, declared in one place (as pytest's ``deprecated.py``).

A deprecated behaviour keeps working until the plugin API version named in
its :attr:`Deprecation.removal`, and warns with a
:class:`DigitsDeprecationWarning` (a ``FutureWarning``, so plugin authors
see it without enabling warnings) that says what to do instead. Code that
deprecates something adds a :class:`Deprecation` constant here, lists it in
:data:`DEPRECATIONS`, and calls its :meth:`~Deprecation.warn` where the old
behaviour is used; the stability statement is in ``docs/writing-plugins.md``.

Turn them into errors while testing a plugin::

    python -W error::digits_core.deprecated.DigitsDeprecationWarning -m pytest
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass

logger = logging.getLogger("digits_core.plugins")


class DigitsDeprecationWarning(FutureWarning):
    """A plugin uses something that goes away in a later plugin API version."""


@dataclass(frozen=True)
class Deprecation:
    """One deprecated behaviour.

    Attributes:
        name: Short identifier.
        since: Plugin API version (major, minor) that deprecated it.
        removal: Plugin API version in which it stops working.
        message: What is deprecated and what to do instead; ``str.format``
            fields are filled by :meth:`warn`.
    """

    name: str
    since: tuple[int, int]
    removal: tuple[int, int]
    message: str

    def warn(self, stacklevel: int = 3, **fields: object) -> None:
        """Emit the warning (also logged, so ``digits`` commands show it once per cause)."""
        text = self.message.format(**fields)
        logger.warning(text)
        warnings.warn(text, DigitsDeprecationWarning, stacklevel=stacklevel)


RESERVED_USERDATA_KEY = Deprecation(
    name="reserved-userdata-key",
    since=(1, 0),
    removal=(2, 0),
    message=(
        'Plugin "{plugin}" persisted the userdata key "{key}", a name the framework owns (the DIGITS 6 idiom '
        "userdata['is_inference_db']); it is ignored when the plugin is re-created, and plugin API 2.0 will "
        "reject it when the dataset is built. Store the value under another key."
    ),
)

#: Every deprecation in force, for documentation and tests.
DEPRECATIONS: tuple[Deprecation, ...] = (RESERVED_USERDATA_KEY,)
