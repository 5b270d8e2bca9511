"""``DataIngestionInterface``: a DIGITS 6 data plugin, as a DIGITS Core :class:`~digits_core.DataIngestion`.

A DIGITS 6 plugin subclasses this and keeps its DIGITS 6 code. When the
subclass is created, its methods are wrapped so DIGITS Core sees the
contract it expects:

==========================================  ==========================================
DIGITS 6 plugin does                         DIGITS Core gets
==========================================  ==========================================
``encode_entry`` returns ``C×H×W`` features  ``H×W×C`` features
... and ``1×1×N`` / ``1×H×W`` labels         ``N``-vectors / ``H×W`` masks
``itemize_entries`` expects ``'train_db'``    the core's ``'train'``/``'val'``/``'test'`` renamed
``get_dataset_form()`` returns an instance   a form class
``get_inference_form(self)`` returns one     a form class (the core calls it on an instance)
``self.userdata['is_inference_db'] = x``     a flag; never persisted with the dataset
``self.userdata['key'] = an object``         pickled in the job folder, restored for inference
==========================================  ==========================================

See ``docs/porting-digits6.md``.
"""

from __future__ import annotations

import functools
import inspect
import threading
from typing import Any

from digits_core import DataIngestion

from ..._translate import form_class, pairs_to_core, static_form_method, wrap_own_methods
from ..._userdata import Userdata, restore_userdata, store_userdata
from ...utils.constants import STAGE_FROM_CORE

__all__ = ["DataIngestionInterface"]

_depth = threading.local()


def _outermost(method):
    """Wrap ``method`` so its result is translated once, at the outermost call.

    A plugin subclassing another DIGITS 6 plugin calls ``super().encode_entry``;
    only the call the core made translates.
    """

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        level = getattr(_depth, "level", 0)
        _depth.level = level + 1
        try:
            result = method(self, *args, **kwargs)
        finally:
            _depth.level = level
        return pairs_to_core(result, getattr(self, "label_kind", None)) if level == 0 else result

    return wrapper


def _wrap_itemize(method):
    @functools.wraps(method)
    def itemize_entries(self, stage):
        return list(method(self, STAGE_FROM_CORE.get(stage, stage)) or [])

    return itemize_entries


def _wrap_init(method):
    @functools.wraps(method)
    def __init__(self, *args, **kwargs):
        method(self, *args, **restore_userdata(kwargs))
        if kwargs.get("is_inference_db"):
            self.userdata.is_inference_db = True

    return __init__


def _wrap_inference_form(method):
    """``get_inference_form(self)`` returning an instance → the same method returning a form class."""
    if isinstance(method, staticmethod):  # some DIGITS 6 plugins kept it static
        return static_form_method(method.__func__)
    if not inspect.isfunction(method):
        return method

    @functools.wraps(method)
    def get_inference_form(self):
        return form_class(method(self), lambda: method(self))

    return get_inference_form


def _form_defaults(plugin_cls) -> dict:
    """The dataset form's default values (``{}`` when the form cannot be built; the load-time check reports that)."""
    from digits_core import user_fields

    try:
        form = plugin_cls.get_dataset_form()(meta={"csrf": False})
    except Exception:  # noqa: BLE001 - reported by the core's contract check, not here
        return {}
    return {field.name: field.data for field in user_fields(form)}


class DataIngestionInterface(DataIngestion):
    """Base class of DIGITS 6 data plugins (``digits.extensions.data.interface``).

    Args:
        is_inference_db: True when building an inference dataset (DIGITS 6
            plugins usually store it as ``self.userdata['is_inference_db']``).
        **kwargs: The dataset form's values (plus, for inference, the
            inference form's); stored in :attr:`userdata` and set as
            attributes. A dataset form field missing from them takes its
            default, so DIGITS 6 ``__init__`` code reading form fields also
            runs when the core creates an instance only to show the
            inference form (``digits infer --help``).
    """

    def __init__(self, is_inference_db: bool = False, **kwargs: Any):  # noqa: D107 - documented on the class
        kwargs = restore_userdata(kwargs)
        missing = {k: v for k, v in _form_defaults(type(self)).items() if k not in kwargs}
        self.userdata = Userdata({**missing, **kwargs}, is_inference_db=is_inference_db)
        for key, value in self.userdata.items():
            setattr(self, key, value)

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        wrap_own_methods(
            cls,
            {
                "__init__": _wrap_init,
                "encode_entry": _outermost,
                "itemize_entries": _wrap_itemize,
                "get_inference_form": _wrap_inference_form,
            },
            static_forms=("get_dataset_form",),
        )

    # -- userdata and the inference flag --------------------------------------

    @property
    def userdata(self) -> Userdata:
        """The persisted values (form data plus what the plugin adds); ``'is_inference_db'`` is a flag."""
        data = self.__dict__.get("_digits6_userdata")
        if data is None:
            data = self.__dict__["_digits6_userdata"] = Userdata()
        return data

    @userdata.setter
    def userdata(self, value) -> None:
        flag = self.__dict__["_digits6_userdata"].is_inference_db if "_digits6_userdata" in self.__dict__ else False
        self.__dict__["_digits6_userdata"] = (
            value if isinstance(value, Userdata) else Userdata(value, is_inference_db=flag)
        )

    @property
    def is_inference_db(self) -> bool:  # type: ignore[override]
        """True when the instance encodes inference inputs (the same flag as ``userdata['is_inference_db']``)."""
        return self.userdata.is_inference_db

    @is_inference_db.setter
    def is_inference_db(self, value: bool) -> None:
        self.userdata.is_inference_db = bool(value)

    # -- DIGITS 6 methods without a DIGITS Core counterpart --------------------

    def userdata_to_store(self, job_path: Any) -> dict:
        """The userdata for ``dataset.json``: values JSON cannot hold are pickled into the job folder.

        DIGITS 6 pickled the whole job, so DIGITS 6 plugins keep objects in
        userdata (Sunnybrook's ``Contour`` list); they come back, unpickled,
        when the plugin is re-created for inference.
        """
        return store_userdata(self.userdata, job_path)

    def get_user_data(self) -> dict:
        """Return the userdata persisted with the dataset (DIGITS 6 API)."""
        return self.userdata

    @staticmethod
    def get_default_visibility() -> bool:
        """Whether DIGITS 6 showed the plugin by default; every loaded plugin is shown in DIGITS Core."""
        return True
