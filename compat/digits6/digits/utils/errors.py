"""DIGITS 6's ``digits.utils.errors``: the exceptions its helpers raise."""


class DigitsError(Exception):
    """Base class of the DIGITS 6 utility errors."""


class LoadImageError(DigitsError):
    """An image could not be read (missing, unreadable or an unsupported mode)."""
