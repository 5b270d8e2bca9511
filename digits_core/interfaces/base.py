"""What every DIGITS plugin class has: an id, a title and a template helper."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

#: A plugin id: lower-case letters, digits, ``-`` and ``_``, starting with a letter or digit.
PLUGIN_ID_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


class PluginBase:
    """Identity shared by :class:`~digits_core.DataIngestion` and :class:`~digits_core.View`.

    A plugin either sets the class attributes ``plugin_id``, ``title`` and
    (for data plugins) ``category``, or overrides the DIGITS-style static
    methods ``get_id()``, ``get_title()`` and ``get_category()``.

    Attributes:
        plugin_id: Unique id, matching ``^[a-z0-9][a-z0-9_-]*$``. It names
            the plugin on the command line, in URLs and in saved jobs, so
            never change it once published.
        title: Human-readable name shown in menus.
        category: Menu group (e.g. ``"Images"``).
        replaces_bundled: Set to ``True`` to take over the id of a plugin
            bundled with DIGITS Core on purpose; without it a plugin
            claiming a bundled id is reported ``failed``.
    """

    plugin_id: ClassVar[str] = ""
    title: ClassVar[str] = ""
    category: ClassVar[str] = "Other"
    replaces_bundled: ClassVar[bool] = False
    #: The package the template attributes (``dataset_template``, ``view_template``, ...) are read from;
    #: ``None``: the package of the module that defines the class.
    template_package: ClassVar[str | None] = None

    @classmethod
    def get_id(cls) -> str:
        """Return the plugin's unique id."""
        return cls.plugin_id

    @classmethod
    def get_title(cls) -> str:
        """Return the plugin's human-readable title (defaults to the id)."""
        return cls.title or cls.get_id()

    @classmethod
    def get_category(cls) -> str:
        """Return the menu group the plugin is listed under."""
        return cls.category

    @staticmethod
    def template_from_package(package: str, name: str, **context: Any) -> tuple[str, dict]:
        """Load a Jinja2 template shipped as package data.

        A convenience for ``get_*_template`` methods: plugins keep their
        templates as files next to their code and return them with this.

        Args:
            package: Importable package holding the template (e.g. ``"my_plugin"``).
            name: Path of the template inside the package (e.g. ``"templates/dataset.html"``).
            **context: Variables the template uses.

        Returns:
            ``(jinja_source, context)``.
        """
        from importlib import resources

        source = resources.files(package).joinpath(name).read_text(encoding="utf-8")
        return source, dict(context)


def template_package_of(cls: type) -> str:
    """The package a plugin class's template attributes name files in: ``template_package``, else its module's."""
    package = getattr(cls, "template_package", None)
    if package:
        return str(package)
    module = cls.__module__
    return module.rpartition(".")[0] or module


def form_getter(form: Any) -> staticmethod:
    """A ``get_*_form()`` that returns the class attribute's form (the DIGITS 6 getter, made from the attribute)."""

    def get_form() -> Any:
        return form

    get_form.__doc__ = f"Return :class:`{getattr(form, '__name__', form)}` (set as a class attribute)."
    return staticmethod(get_form)


def form_template_getter(cls: type, name: str) -> staticmethod:
    """A ``get_*_template(form)`` that renders ``name`` from the class's template package with ``form``."""

    def get_template(form: Any) -> tuple[str, dict]:
        return PluginBase.template_from_package(template_package_of(cls), name, form=form)

    get_template.__doc__ = f"Return the form's layout, ``{name}`` of the plugin's package (a class attribute)."
    return staticmethod(get_template)


def install_attribute_getters(cls: type, getters: Mapping[str, tuple[str, Callable[[type, Any], Any]]]) -> None:
    """Give ``cls`` a getter for each class attribute it sets itself, unless it defines that getter too.

    The DIGITS 6 getter methods stay the contract (the core calls them); a plugin may set the attribute
    instead (``dataset_form = MyForm``, ``view_template = "templates/view.html"``) and gets the getter made
    from it. A getter the class defines itself wins over its own attribute.

    Args:
        cls: The plugin class being defined.
        getters: Attribute name -> (getter name, maker of the getter from the class and the attribute's value).
    """
    own = vars(cls)
    for attribute, (getter, make) in getters.items():
        if attribute in own and own[attribute] is not None and getter not in own:
            setattr(cls, getter, make(cls, own[attribute]))  # before ABCMeta lists what is still abstract
