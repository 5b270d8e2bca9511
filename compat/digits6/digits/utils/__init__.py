"""``digits.utils`` as DIGITS 6 plugins use it: ``subclass``, ``override`` and the submodules.

``@override`` marks a method as overriding one of a base class and
``@subclass`` checks, when the class is created, that every marked method
really exists in a base class (a misspelled override fails at import
instead of being silently ignored).
"""

from __future__ import annotations

import inspect


def override(method):
    """Mark ``method`` as overriding a base-class method; checked by :func:`subclass`.

    Works on plain functions and, placed under ``@staticmethod``, on static methods.
    """
    method.override = True
    return method


def _function_of(member):
    return getattr(member, "__func__", member)


def subclass(cls):
    """Class decorator: verify every ``@override`` method of ``cls`` exists in a base class.

    A method without a docstring takes the base method's docstring.

    Raises:
        AssertionError: A marked method overrides nothing (as in DIGITS 6).
    """
    for name, member in list(cls.__dict__.items()):
        function = _function_of(member)
        if not getattr(function, "override", False):
            continue
        for base in inspect.getmro(cls)[1:]:
            if name in base.__dict__:
                if not function.__doc__:
                    try:
                        function.__doc__ = _function_of(base.__dict__[name]).__doc__
                    except (AttributeError, TypeError):  # a builtin's doc cannot be copied
                        pass
                break
        else:
            raise AssertionError(f'"{cls.__name__}.{name}" not found in any base class')
    return cls


from . import constants, errors, forms, image  # noqa: E402

__all__ = ["subclass", "override", "constants", "errors", "forms", "image"]
