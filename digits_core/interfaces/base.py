"""What every DIGITS plugin class has: an id, a title and a template helper."""

from __future__ import annotations

import re
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
