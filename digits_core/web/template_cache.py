"""Compiled page templates shared by every web app in one process.

Flask gives each app its own Jinja2 environment, which compiles each page
template the first time that app renders it. A process that builds several
apps (a tool embedding the core, a test suite) would compile the same
templates again for each; with :data:`SHARED_BYTECODE_CACHE` in the app's
``jinja_options`` the second app loads the compiled code instead. Jinja2
keys each entry by template name and checks the source's checksum, so an
edited template is compiled afresh.
"""

from __future__ import annotations

import threading

import jinja2


class ProcessBytecodeCache(jinja2.BytecodeCache):
    """A :class:`jinja2.BytecodeCache` kept in memory for the life of the process."""

    def __init__(self) -> None:
        self._code: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        """Fill ``bucket`` from memory when its template was compiled before (Jinja2 checks the checksum)."""
        with self._lock:
            code = self._code.get(bucket.key)
        if code is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        """Keep the bucket's freshly compiled code."""
        code = bucket.bytecode_to_string()
        with self._lock:
            self._code[bucket.key] = code

    def clear(self) -> None:
        """Forget every compiled template."""
        with self._lock:
            self._code.clear()


#: The cache every app made by :func:`digits_core.web.app.create_app` uses.
SHARED_BYTECODE_CACHE = ProcessBytecodeCache()
