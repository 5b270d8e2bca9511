"""Job groups: a name several dataset and model jobs share (DIGITS 6's "Group Name").

A job's group is stored in its ``job.json`` (key ``group``; absent for no
group). The home page gathers each group's jobs under one collapsible row;
``digits dataset create --group``, ``digits train --group``, both web forms
and the JSON/Python APIs set it, and every job of a sweep joins one group
(:mod:`digits_core.sweeps`).
"""

from __future__ import annotations

from typing import Any

from .errors import FormValidationError

#: Longest group name accepted.
MAX_GROUP_LENGTH = 100


def normalize_group(value: Any, field_name: str = "group") -> str | None:
    """A job group name as stored in ``job.json``, or ``None`` for no group.

    Surrounding white space is removed and inner runs of it collapse to one
    space; an empty value means no group.

    Args:
        value: The name as given (``None`` or text).
        field_name: The form field or flag named in errors.

    Raises:
        FormValidationError: Naming ``field_name``: not text, longer than
            :data:`MAX_GROUP_LENGTH` characters, or containing control characters.
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise FormValidationError({field_name: ["a group is a name (text)"]}, "job group")
    text = " ".join(value.split())
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in text):
        raise FormValidationError({field_name: ["a group name cannot contain control characters"]}, "job group")
    if len(text) > MAX_GROUP_LENGTH:
        raise FormValidationError(
            {field_name: [f"at most {MAX_GROUP_LENGTH} characters, not {len(text)}"]}, "job group"
        )
    return text or None
