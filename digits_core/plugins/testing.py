"""A kit for testing DIGITS plugins (as pytest's ``pytester`` is for pytest plugins).

::

    from digits_core.plugins.testing import check_plugin, build_dataset

    def test_contract():
        report = check_plugin(MyIngestion, form_values={"folder": str(sample_folder)})
        assert report.ok, report          # str(report) lists every check

    def test_dataset(digits_jobs_dir):    # a pytest fixture from this module
        dataset = build_dataset(MyIngestion, {"folder": str(sample_folder)}, jobs_dir=digits_jobs_dir)
        assert dataset.count("train") > 0

* :func:`check_plugin` runs the whole plugin contract on a class, in
  process and without TensorFlow: the load-time check (forms constructible,
  no reserved field names, templates resolvable), the form defaults (or
  ``form_values``) validated, every template rendered, ``itemize_entries``
  on each stage and a few ``encode_entry`` calls checked for dtype, shape
  (channels-first features are named with the fix) and label; for a view,
  ``process_data`` and its templates on synthetic output. ``digits plugin
  check ID`` prints the same report for an installed plugin.
* :func:`build_dataset` builds a real dataset from the class in this
  process (one worker, no entry point needed) and opens it.
* :func:`registered` registers a class with the shared registry for a
  ``with`` block; the ``digits_jobs_dir`` fixture gives a temporary jobs
  folder (use it with ``pytest_plugins = ["digits_core.plugins.testing"]`` in a
  ``conftest.py``, or import the fixture).

The checks themselves live in :mod:`digits_core.plugins.check` (``digits
plugin check`` uses them too); their public names are importable from here.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

from ..interfaces import DataIngestion
from .check import (  # noqa: F401  (re-exported: the kit's public names)
    DEFAULT_ENTRIES,
    FAILED,
    OK,
    SKIPPED,
    Check,
    CheckReport,
    check_feature,
    check_plugin,
    synthetic_output,
)


@contextlib.contextmanager
def registered(*classes: type) -> Iterator[None]:
    """Register plugin classes with the shared registry for the block (replacing installed ones of the same id)."""
    from .registry import registry

    for cls in classes:
        registry.register(cls, replace=True)
    try:
        yield
    finally:
        for cls in classes:
            registry.unregister(cls)


def build_dataset(
    cls: type[DataIngestion],
    form_values: Mapping[str, Any] | None = None,
    *,
    jobs_dir: str | os.PathLike,
    name: str | None = None,
    max_errors: Any = None,
) -> Any:
    """Build a real dataset from a data plugin class in this process (one worker) and open it.

    The class needs no entry point: it is registered for the duration of
    the build.

    Returns:
        The opened :class:`~digits_core.datasets.Dataset`.
    """
    from ..datasets import create_dataset, open_dataset  # the build loads the job machinery: only when called

    with registered(cls):
        job = create_dataset(
            cls.get_id(), dict(form_values or {}), name=name, workers=1, jobs_dir=jobs_dir, max_errors=max_errors
        )
    return open_dataset(job.id, jobs_dir=jobs_dir)


try:  # the fixture exists only where pytest is installed (plugin test suites)
    import pytest

    @pytest.fixture
    def digits_jobs_dir(tmp_path: Any, monkeypatch: Any) -> Any:
        """A temporary, empty jobs folder, also set as ``DIGITS_JOBS_DIR`` for the test."""
        path = tmp_path / "digits-jobs"
        path.mkdir()
        monkeypatch.setenv("DIGITS_JOBS_DIR", str(path))
        return path
except ImportError:  # pragma: no cover
    pass

__all__ = [
    "DEFAULT_ENTRIES",
    "FAILED",
    "OK",
    "SKIPPED",
    "Check",
    "CheckReport",
    "build_dataset",
    "check_feature",
    "check_plugin",
    "digits_jobs_dir",
    "registered",
    "synthetic_output",
]
