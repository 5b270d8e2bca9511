"""Every deprecation of the plugin API, declared in one place (as pytest's ``deprecated.py``).

A deprecated behaviour keeps working until the plugin API version named in
its :attr:`Deprecation.removal`, and warns with a
:class:`DigitsDeprecationWarning` (a ``FutureWarning``, so plugin authors
see it without enabling warnings) that says what to do instead. Code that
deprecates something adds a :class:`Deprecation` constant here, lists it in
:data:`DEPRECATIONS`, and calls its :meth:`~Deprecation.warn` where the old
behaviour is used; the stability statement is in ``docs/writing-plugins.md``.

Turn them into errors while testing a plugin::

    python -W error::digits_core.deprecated.DigitsDeprecationWarning -m pytest
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import sys
import warnings
from dataclasses import dataclass
from types import ModuleType

logger = logging.getLogger("digits_core.plugins")


class DigitsDeprecationWarning(FutureWarning):
    """A plugin uses something that goes away in a later plugin API version."""


@dataclass(frozen=True)
class Deprecation:
    """One deprecated behaviour.

    Attributes:
        name: Short identifier.
        since: Plugin API version (major, minor) that deprecated it.
        removal: Plugin API version in which it stops working.
        message: What is deprecated and what to do instead; ``str.format``
            fields are filled by :meth:`warn`.
    """

    name: str
    since: tuple[int, int]
    removal: tuple[int, int]
    message: str

    def warn(self, stacklevel: int = 3, **fields: object) -> None:
        """Emit the warning (also logged, so ``digits`` commands show it once per cause)."""
        text = self.message.format(**fields)
        logger.warning(text)
        warnings.warn(text, DigitsDeprecationWarning, stacklevel=stacklevel)


RESERVED_USERDATA_KEY = Deprecation(
    name="reserved-userdata-key",
    since=(1, 0),
    removal=(2, 0),
    message=(
        'Plugin "{plugin}" persisted the userdata key "{key}", a name the framework owns (the DIGITS 6 idiom '
        "userdata['is_inference_db']); it is ignored when the plugin is re-created, and plugin API 2.0 will "
        "reject it when the dataset is built. Store the value under another key."
    ),
)

MOVED_MODULE = Deprecation(
    name="moved-module",
    since=(1, 1),
    removal=(2, 0),
    message=(
        '{old} moved to {new} (docs/architecture.md, "Moved modules"); the old name stops '
        "working in plugin API 2.0. Import {new} instead."
    ),
)

MOVED_NAME = Deprecation(
    name="moved-name",
    since=(1, 1),
    removal=(2, 0),
    message=(
        "{old} is the application API, not the plugin API: import it from its submodule, {new}; the "
        "top-level name stops working in plugin API 2.0 (digits_core exports only what plugins use)."
    ),
)

#: Old dotted module name -> its new home. Importing an old name warns (:data:`MOVED_MODULE`) and gives
#: the new module itself (one module object under both names, so state such as the registry is shared).
MOVED_MODULES: dict[str, str] = {
    "digits_core.plugin_check": "digits_core.plugins.check",
    "digits_core.plugin_clashes": "digits_core.plugins.clashes",
    "digits_core.plugin_discovery": "digits_core.plugins.discovery",
    "digits_core.plugin_hooks": "digits_core.plugins.hooks",
    "digits_core.plugin_path_audit": "digits_core.plugins.path_audit",
    "digits_core.plugin_registry": "digits_core.plugins.registry",
    "digits_core.contract": "digits_core.plugins.contract",
    "digits_core.hookspecs": "digits_core.plugins.hookspecs",
    "digits_core.testing": "digits_core.plugins.testing",
    "digits_core.job_lock": "digits_core.jobs.lock",
    "digits_core.job_record": "digits_core.jobs.record",
    "digits_core.job_status": "digits_core.jobs.status",
    "digits_core.job_model": "digits_core.jobs.model",
    "digits_core.job_sweep": "digits_core.sweeps.record",
    # the box helpers moved below the plugin layer (issue 40)
    "digits_core.engine.detection.geometry": "digits_core.boxes.geometry",
    "digits_core.engine.detection.kitti": "digits_core.boxes.kitti",
    "digits_core.engine.detection.evaluate": "digits_core.boxes.evaluate",
    # one sweeps package (issue 40)
    "digits_core.sweep": "digits_core.sweeps",
    "digits_core.search_space": "digits_core.sweeps.space",
    "digits_core.tuning": "digits_core.sweeps.tune",
    "digits_core.sweep_report": "digits_core.sweeps.report",
    "digits_core.executors.tune_trials": "digits_core.sweeps.trials",
    "digits_core.jobs.sweep": "digits_core.sweeps.record",
    # the record format is the data contract: below the dataset builder, with the plugin interfaces (issue 40)
    "digits_core.datasets.images": "digits_core.interfaces.images",
    "digits_core.datasets.labels": "digits_core.interfaces.labels",
    "digits_core.datasets.records": "digits_core.interfaces.records",
}


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers the old names of :data:`MOVED_MODULES` with the moved modules (installed by ``digits_core``)."""

    def __init__(self) -> None:
        self._own_specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED_MODULES:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED_MODULES[spec.name]
        # 1 is Deprecation.warn, 2 this method; warnings skips the import system's frames above it itself
        MOVED_MODULE.warn(stacklevel=3, old=spec.name, new=new)
        module = importlib.import_module(new)
        self._own_specs[new] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system pointed the moved module's __spec__ at the old name's spec: put its own back
        module.__spec__ = self._own_specs.get(module.__name__, module.__spec__)


def install_module_aliases() -> None:
    """Make the old names of :data:`MOVED_MODULES` importable (idempotent; ``import digits_core`` calls it)."""
    if not any(isinstance(finder, _MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder())


#: Every deprecation in force, for documentation and tests.
DEPRECATIONS: tuple[Deprecation, ...] = (RESERVED_USERDATA_KEY, MOVED_MODULE, MOVED_NAME)
