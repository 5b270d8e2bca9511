"""The DIGITS web UI and JSON API: a Flask app over the same Python API as the CLI.

Create it with :func:`create_app`; ``digits serve`` does so and runs it.
Every HTML page has a JSON twin (``/datasets/ID.json``, ``/models/ID.json``,
``/api/...``), documented in ``docs/api.md``.
"""

from .app import create_app

__all__ = ["create_app"]
