"""The :class:`View` interface: turn network output into something a person can look at."""

from __future__ import annotations

import abc
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from .base import PluginBase, form_getter, form_template_getter, install_attribute_getters, template_package_of


@dataclass(frozen=True)
class ViewContext:
    """The model a view renders results for (plugin API 1.2), as :attr:`View.model_context`.

    With it a view can run the model again on inputs of its own, e.g. an
    occlusion or saliency map (the bundled ``saliency`` view), without asking
    the user which model made the results.

    Attributes:
        model_id: The model job's id.
        epoch: The epoch of the snapshot that made the results.
        task: The model's task (``"classification"``, ``"segmentation"``, ...).
        class_labels: Class names, index = class id, or ``None``.
        input_shape: The shape ``(H, W, C)`` of the ``input_data`` that
            :meth:`View.process_data` gets (the network's input, after its centre crop).
        run: ``run(batch)`` runs the model on raw inputs shaped like
            ``input_data`` (``[N, H, W, C]``, or one ``H×W×C`` input), with the
            same preprocessing as the results, and returns the outputs ``[N, ...]``
            as numpy (the form :meth:`View.process_data` gets them in).
    """

    model_id: str
    epoch: float
    task: str
    class_labels: list | None
    input_shape: tuple[int, ...]
    run: Callable[[Any], Any]


class View(PluginBase, abc.ABC):
    """Base class of view plugins (entry-point group ``digits.plugins.view``).

    A view gets, for each inference sample, the input the network saw, the
    network's output and (when known) the ground truth, and renders it with
    Jinja2. A results page is: the header template, one view template per
    sample, then the summary template.

    Lifecycle: the core creates ``cls(dataset, **config)`` once per results
    page, with ``config`` validated by :meth:`get_config_form`; then calls
    :meth:`process_data` for each sample and :meth:`get_view_template` on its
    result; finally :meth:`get_header_template` and
    :meth:`get_summary_template`, so a view can accumulate statistics (e.g.
    a confusion matrix) in ``process_data`` and show them in the summary.
    All calls happen in one process, in sample order.

    Static files: a view ships CSS/JS/images in a ``static`` folder next to
    its module (or returns another folder from :meth:`get_static_folder`).
    The web UI serves them under ``/plugins/view/<plugin id>/static/`` (and
    ``/extension-static/view/<plugin id>/``, DIGITS 6's address); HTML
    reports inline the CSS and JS files listed in :attr:`stylesheets` and
    :attr:`scripts`. A file missing there is looked up in
    :attr:`shared_static_folders` (files a base class ships for all its
    subclasses: the DIGITS 6 compat's stylesheet and jQuery).

    Attributes:
        dataset: Metadata of the dataset the model was trained on
            (``dataset.userdata``, ``dataset.class_labels``, ``dataset.color_palette``).
        config: The validated config form values.
        model_context: The model the results come from, as a :class:`ViewContext`
            (its id, epoch and a callable that runs it on arrays); set by the core
            after ``__init__`` and before the first :meth:`process_data`. ``None``
            where no model is at hand (a dataset explorer, a view of stored results).
        stylesheets: File names in the static folder to include as CSS.
        scripts: File names in the static folder to include as JavaScript.
        shared_static_folders: Folders searched after the static folder.
    """

    stylesheets: tuple[str, ...] = ()
    scripts: tuple[str, ...] = ()
    shared_static_folders: tuple[Path, ...] = ()
    model_context: ViewContext | None = None
    #: The config form class; setting it gives :meth:`get_config_form` (DIGITS 6 getters keep working).
    config_form: ClassVar[Any] = None
    #: The config form's template, a path in the plugin's package; gives :meth:`get_config_template`.
    config_template: ClassVar[str | None] = None
    #: One sample's template, a path in the plugin's package, rendered with the keys of what
    #: :meth:`process_data` returned; gives :meth:`get_view_template`.
    view_template: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        install_attribute_getters(
            cls,
            {
                "config_form": ("get_config_form", lambda _cls, form: form_getter(form)),
                "config_template": ("get_config_template", form_template_getter),
                "view_template": ("get_view_template", _sample_template_getter),
            },
        )

    def __init__(self, dataset: Any, **config: Any):
        self.dataset = dataset
        self.config = dict(config)
        for key, value in config.items():
            setattr(self, key, value)

    @staticmethod
    def get_config_form() -> Any:
        """Return the WTForms ``Form`` class (or an instance) of the view's options, or ``None``.

        Field names may not be ``dataset``, ``config`` or a name of this
        class's methods: the view would be reported ``failed`` at load.
        """
        return None

    @staticmethod
    def get_config_template(form: Any) -> tuple[str | None, dict | None]:
        """Return ``(jinja_source, context)`` laying out the config form, or ``(None, None)``.

        Args:
            form: A bound instance of the :meth:`get_config_form` class.
        """
        return None, None

    @abc.abstractmethod
    def process_data(self, input_id: str, input_data: Any, output_data: Any, ground_truth: Any = None) -> Any:
        """Turn one sample into the data its template shows.

        Args:
            input_id: A name for the sample (file name, record key).
            input_data: The feature the network saw, numpy ``H×W×C``, with
                the dataset's dtype (before mean subtraction).
            output_data: The network's output for this sample as a numpy
                array (class probabilities of shape ``(N,)``, or
                ``H×W×N`` class probabilities for segmentation).
            ground_truth: The known label of this sample (int class, float
                vector or ``H×W`` mask), or ``None`` when unknown.

        Returns:
            Whatever :meth:`get_view_template` needs; keep it JSON-friendly
            if it should appear in ``--json`` output.
        """

    @abc.abstractmethod
    def get_view_template(self, data: Any) -> tuple[str, dict]:
        """Return ``(jinja_source, context)`` showing one sample.

        Args:
            data: What :meth:`process_data` returned for the sample.
        """

    def get_header_template(self) -> tuple[str | None, dict | None]:
        """Return ``(jinja_source, context)`` for the top of a results page, or ``(None, None)``."""
        return None, None

    def get_summary_template(self) -> tuple[str | None, dict | None]:
        """Return ``(jinja_source, context)`` for the end of a results page, or ``(None, None)``."""
        return None, None

    @classmethod
    def get_static_folder(cls) -> Path | None:
        """Return the folder of the view's static files, or ``None``.

        Defaults to a ``static`` folder beside the module defining the class.
        """
        module_file = inspect.getfile(cls)
        folder = Path(module_file).resolve().parent / "static"
        return folder if folder.is_dir() else None

    @classmethod
    def static_file(cls, name: str) -> Path | None:
        """Return the static file ``name`` (a relative path), or ``None``.

        Looked up in :meth:`get_static_folder`, then :attr:`shared_static_folders`;
        a name that resolves outside its folder (``..``, an absolute path, a
        symlink out) is never returned.
        """
        own = cls.get_static_folder()
        for folder in ([own] if own is not None else []) + [Path(f) for f in cls.shared_static_folders]:
            root = folder.resolve()
            target = (root / name).resolve()
            if target.is_relative_to(root) and target != root and target.is_file():
                return target
        return None


def _sample_template_getter(cls: type, name: str) -> Callable[[View, Any], tuple[str, dict]]:
    """A ``get_view_template(self, data)`` rendering ``name`` from the view's package with ``data``'s keys."""

    def get_view_template(self: View, data: Any) -> tuple[str, dict]:
        return View.template_from_package(template_package_of(cls), name, **data)

    get_view_template.__doc__ = f"Return one sample's template, ``{name}`` of the plugin's package (a class attribute)."
    return get_view_template
