"""``VisualizationInterface``: a DIGITS 6 view plugin, as a DIGITS Core :class:`~digits_core.View`.

When a subclass is created its methods are wrapped so DIGITS Core sees the
contract it expects:

=================================================  =============================================
DIGITS 6 view does                                  what the wrapper does
=================================================  =============================================
``__init__(self, dataset, **kwargs)``               gets a dataset with DIGITS 6's methods
                                                    (``get_feature_dims()``, ``extension_userdata``)
``process_data(self, input_id, input_data,          called with 3 arguments (4 when it takes
output_data)``                                      ``ground_truth``); grayscale input as ``H×W``;
                                                    ``output_data`` as ``{name: array}``, 3-D
                                                    arrays ``C×H×W`` (DIGITS 6's layout)
``dataset.extension_userdata['color_palette']``     a flat 768-value palette (256 colours)
``get_config_form()`` returns an instance           a form class
``get_*_template`` returns ``(source, context)``    dicts in the context answer ``iteritems()``;
                                                    ``{[ ]}`` AngularJS blocks stripped; inline
                                                    scripts nonce'd, run after jQuery is loaded
=================================================  =============================================

Every DIGITS 6 view also gets ``digits6-compat.css`` (the Bootstrap 3
classes DIGITS 6 templates use) and jQuery, from the compat's ``static``
folder, on the web page and in HTML reports.

See ``docs/porting-digits6.md``.
"""

from __future__ import annotations

import functools
import inspect
import os
from pathlib import Path
from typing import Any

from digits_core import View

from ..._translate import view_input, view_outputs, wrap_own_methods
from ..._views import digits6_template, output_to_digits6, palette_to_digits6, py2_context

#: The compat's own static files (its stylesheet and jQuery), shared by every DIGITS 6 view.
COMPAT_STATIC = Path(__file__).resolve().parents[2] / "static"
COMPAT_STYLESHEETS = ("digits6-compat.css",)
COMPAT_SCRIPTS = ("jquery.min.js",)

__all__ = ["VisualizationInterface", "Digits6Dataset"]


class Digits6Dataset:
    """The dataset a DIGITS 6 view is constructed with: DIGITS 6's dataset-job methods over DIGITS Core's metadata.

    Anything else is read from the wrapped DIGITS Core dataset description
    (``userdata``, ``class_labels``, ``color_palette``, ``feature_shape``...).
    """

    def __init__(self, dataset: Any):
        self._dataset = dataset

    def get_feature_dims(self) -> tuple:
        """The stored feature shape ``(H, W, C)``."""
        shape = getattr(self._dataset, "feature_shape", None)
        return tuple((shape() if callable(shape) else shape) or ())

    @property
    def extension_userdata(self) -> dict:
        """The data plugin's userdata (form values and what it added), as DIGITS 6 kept it.

        ``color_palette`` is the flat 768-value palette DIGITS 6 views expect
        (from the userdata or the dataset's palette); ``class_labels`` comes
        from the dataset when the userdata lacks it.
        """
        userdata = dict(getattr(self._dataset, "userdata", None) or {})
        palette = userdata.get("color_palette") or getattr(self._dataset, "color_palette", None)
        if palette is not None:
            userdata["color_palette"] = palette_to_digits6(palette)
        labels = getattr(self._dataset, "class_labels", None)
        if labels and "class_labels" not in userdata:
            userdata["class_labels"] = list(labels)
        return py2_context(userdata)

    @property
    def extension_id(self) -> str | None:
        """The id of the data plugin that built the dataset."""
        return getattr(self._dataset, "plugin_id", None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_dataset"], name)


def _takes_ground_truth(function) -> bool:
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return True
    if any(p.kind is p.VAR_POSITIONAL for p in parameters) or "ground_truth" in {p.name for p in parameters}:
        return True
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 5  # self, input_id, input_data, output_data, ground_truth


def _wrap_process_data(method):
    with_truth = _takes_ground_truth(method)

    @functools.wraps(method)
    def process_data(self, input_id, input_data, output_data, ground_truth=None):
        outputs = view_outputs(output_data)
        for name, value in outputs.items():
            outputs[name] = output_to_digits6(value)
        args = (self, input_id, view_input(input_data), outputs)
        return method(*args, ground_truth) if with_truth else method(*args)

    return process_data


def _wrap_template(method):
    """A ``get_*_template`` (static or not) returning ``(source, context)`` → the same, in DIGITS 6 terms."""
    function = method.__func__ if isinstance(method, staticmethod) else method

    @functools.wraps(function)
    def get_template(*args, **kwargs):
        pair = function(*args, **kwargs)
        if not isinstance(pair, tuple) or len(pair) != 2:
            return pair
        return digits6_template(pair[0]), py2_context(pair[1])

    return staticmethod(get_template) if isinstance(method, staticmethod) else get_template


def _wrap_init(method):
    @functools.wraps(method)
    def __init__(self, dataset=None, *args, **config):
        proxy = dataset if isinstance(dataset, Digits6Dataset) or dataset is None else Digits6Dataset(dataset)
        method(self, proxy, *args, **config)
        self.__dict__.setdefault("dataset", proxy)
        self.__dict__.setdefault("config", dict(config))

    return __init__


class VisualizationInterface(View):
    """Base class of DIGITS 6 view plugins (``digits.extensions.view.interface``).

    Args:
        dataset: The model's dataset (a :class:`Digits6Dataset`).
        **kwargs: The validated config form values.
    """

    stylesheets = COMPAT_STYLESHEETS
    scripts = COMPAT_SCRIPTS
    shared_static_folders = (COMPAT_STATIC,)

    def __init__(self, dataset: Any = None, *args: Any, **kwargs: Any):  # noqa: D107 - documented on the class
        View.__init__(self, dataset, **kwargs)

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        templates = {
            name: _wrap_template
            for name in ("get_view_template", "get_header_template", "get_summary_template", "get_config_template")
        }
        wrap_own_methods(
            cls,
            {"__init__": _wrap_init, "process_data": _wrap_process_data, **templates},
            static_forms=("get_config_form",),
        )
        # a view listing files of its own still gets the compat's stylesheet and jQuery (first)
        cls.stylesheets = tuple(dict.fromkeys((*COMPAT_STYLESHEETS, *cls.stylesheets)))
        cls.scripts = tuple(dict.fromkeys((*COMPAT_SCRIPTS, *cls.scripts)))

    # -- DIGITS 6 methods without a DIGITS Core counterpart --------------------

    @staticmethod
    def get_default_visibility() -> bool:
        """Whether DIGITS 6 showed the view by default; every loaded view is offered in DIGITS Core."""
        return True

    def get_ng_templates(self) -> tuple[None, None]:
        """DIGITS 6's AngularJS app wrapper: not used by DIGITS Core (always ``(None, None)``)."""
        return None, None

    @classmethod
    def get_dirname(cls) -> str:
        """The folder of the plugin's module (DIGITS 6 served static files from it)."""
        return os.path.dirname(os.path.abspath(inspect.getfile(cls)))
