"""The plugin system: what plugins implement and how the core finds, checks and calls them.

- :mod:`~digits_core.plugins.hookspecs`: every pluggy lifecycle hook (project name ``"digits"``).
- :mod:`~digits_core.plugins.registry`: the registry and hook calls, over
  :mod:`~digits_core.plugins.discovery` (records, allow/block lists, entry points),
  :mod:`~digits_core.plugins.hooks` (plugins into pluggy) and :mod:`~digits_core.plugins.clashes` (id clashes).
- :mod:`~digits_core.plugins.contract`: contract checks at load, forms as class or instance, one-line plugin errors.
- :mod:`~digits_core.plugins.check` and :mod:`~digits_core.plugins.path_audit`: the checks behind
  ``check_plugin`` and ``digits plugin check``, and the record of what a plugin reads.
- :mod:`~digits_core.plugins.testing`: the plugin-author kit (``check_plugin``, ``build_dataset``, the
  ``digits_jobs_dir`` fixture).

Plugins import the contract from :mod:`digits_core` itself; these modules are its implementation. Their
old flat names (``digits_core.plugin_registry``, ``digits_core.hookspecs``, ...) still import, with a
warning, until plugin API 2.0 (:data:`digits_core.deprecated.MOVED_MODULES`).
"""
