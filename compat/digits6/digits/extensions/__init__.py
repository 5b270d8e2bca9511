"""``digits.extensions``: the DIGITS 6 plugin interfaces (``data`` and ``view``)."""
