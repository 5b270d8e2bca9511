"""A long-lived inference worker process, one per web app.

TensorFlow and custom network code never load in the web server. Before,
each inference request started a fresh ``python -m digits_core.web.worker_calls``
process and paid the TensorFlow import, the model load and the tracing
every time. :class:`InferenceWorker` keeps one child process
(``python -m digits_core.web.inference_worker``) alive instead, so the
model cache of :mod:`digits_core.inference.model` stays warm across requests:

* started lazily on the first request; restarted when it has died (a crash
  in a custom network fails only the request that was running);
* requests are serialized with a lock and sent as one JSON line on the
  child's stdin; the answer comes back as one JSON line on a private pipe
  (the child's stdout is redirected to its log, so ``print`` in custom code
  cannot corrupt the protocol);
* a request that takes longer than its timeout kills the worker, the user
  gets an :class:`~digits_core.errors.InferenceError`, and the next request
  starts a fresh one;
* :meth:`InferenceWorker.close` (called when ``digits serve`` stops, and at
  exit) ends it; the child also exits when the server's end of its stdin
  closes.

Requests and results are those of :func:`digits_core.web.worker_calls.handle`
(``"infer"`` or ``"export"``); each result also carries ``"worker"``:
``{"pid", "requests", "model_loads", "loaded_model", "seconds"}`` where
``loaded_model`` is False when the model came from the warm cache.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from ..errors import DigitsError, FormValidationError, InferenceError
from ..limits import LIMITS, InputTooLargeError

#: Default per-request timeout (seconds) of the web app's inference worker.
DEFAULT_TIMEOUT = 600.0


class InferenceWorker:
    """One long-lived worker process that runs :func:`digits_core.web.worker_calls.handle` requests.

    Args:
        timeout: Default per-request timeout in seconds.
        env: Environment of the worker process (default: this process's).
    """

    def __init__(self, timeout: float = DEFAULT_TIMEOUT, env: dict | None = None):
        self.timeout = float(timeout)
        self.env = env
        self.starts = 0
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._reply_fd: int | None = None
        self._buffer = b""
        self._log_path: Path | None = None
        self._next_id = 0
        self._atexit = False

    @property
    def pid(self) -> int | None:
        """The worker's process id while it runs, else None."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def call(self, kind: str, request: dict, *, timeout: float | None = None) -> dict:
        """Run one request in the worker (starting or restarting it when needed).

        Args:
            kind: ``"infer"`` or ``"export"``.
            request: The request dict (JSON-serializable).
            timeout: Seconds before the worker is killed (default: :attr:`timeout`).

        Returns:
            The result dict, with a ``"worker"`` entry.

        Raises:
            FormValidationError: The request's values were refused (the same fields and messages).
            DigitsError: The request failed (same message as in the worker).
            InferenceError: The worker crashed, timed out or stayed busy.
        """
        timeout = self.timeout if timeout is None else float(timeout)
        if not self._lock.acquire(timeout=timeout):
            raise InferenceError(
                f"The inference worker stayed busy with other requests for {timeout:.0f} s; try again later."
            )
        try:
            self._ensure_running()
            self._next_id += 1
            message = {"id": self._next_id, "kind": kind, "request": request}
            deadline = time.monotonic() + timeout
            try:
                self._proc.stdin.write(json.dumps(message).encode("utf-8") + b"\n")
                self._proc.stdin.flush()
                reply = self._read_reply(deadline)
            except TimeoutError:
                self._stop(kill=True)
                raise InferenceError(
                    f"The {kind} request did not finish within {timeout:g} s; the inference worker was stopped "
                    "and a fresh one will serve the next request."
                ) from None
            except (OSError, EOFError, ValueError):
                code = self._stop(kill=True)
                raise InferenceError(
                    f"The inference worker stopped while running this {kind} request ({_describe_exit(code)}); "
                    f"a fresh one will serve the next request. {self._log_tail()}".strip()
                ) from None
            if reply.get("id") != message["id"]:
                self._stop(kill=True)
                raise InferenceError("The inference worker answered out of turn; it was restarted.")
            result = reply.get("result") or {}
            if isinstance(result.get("errors"), dict):  # a form error: each message on its field
                error = FormValidationError(result["errors"], "inference")
                error.args = (result.get("error") or str(error),)  # the worker's own message
                raise error
            if "error" in result:
                raise _error_of(result)
            return result
        finally:
            self._lock.release()

    def close(self, timeout: float = 5.0) -> None:
        """Stop the worker (it exits when its stdin closes; killed after ``timeout``).

        A request still running after ``timeout`` is ended by killing the
        worker; that request then fails like one whose worker crashed.
        """
        if not self._lock.acquire(timeout=timeout):
            proc = self._proc
            if proc is not None:
                proc.kill()
            return
        try:
            self._stop(kill=False, timeout=timeout)
            if self._log_path is not None:
                self._log_path.unlink(missing_ok=True)
                self._log_path = None
        finally:
            self._lock.release()

    # -- internals --------------------------------------------------------------

    def _ensure_running(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            return
        self._stop(kill=True)
        if self._log_path is None:
            fd, name = tempfile.mkstemp(prefix="digits-inference-worker-", suffix=".log")
            os.close(fd)
            self._log_path = Path(name)
        read_fd, write_fd = os.pipe()
        try:
            with open(self._log_path, "wb") as log:  # truncated at each start: the log of this process only
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "digits_core.web.inference_worker", str(write_fd)],
                    stdin=subprocess.PIPE,
                    stdout=log,
                    stderr=log,
                    pass_fds=(write_fd,),
                    env=self.env,
                    start_new_session=True,
                )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        self._reply_fd, self._buffer = read_fd, b""
        self.starts += 1
        if not self._atexit:
            atexit.register(self.close)
            self._atexit = True

    def _read_reply(self, deadline: float) -> dict:
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self._reply_fd], [], [], remaining)
            if ready:
                chunk = os.read(self._reply_fd, 1 << 20)
                if not chunk:
                    raise EOFError
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)

    def _stop(self, *, kill: bool, timeout: float = 5.0) -> int | None:
        proc, self._proc = self._proc, None
        code = None
        if proc is not None:
            try:
                if kill:
                    proc.kill()
                else:
                    proc.stdin.close()
                code = proc.wait(timeout)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                code = proc.wait()
            finally:
                if proc.stdin and not proc.stdin.closed:
                    try:
                        proc.stdin.close()
                    except OSError:
                        pass
        if self._reply_fd is not None:
            os.close(self._reply_fd)
            self._reply_fd = None
        self._buffer = b""
        return code

    def _log_tail(self, lines: int = 5) -> str:
        try:
            with open(self._log_path, "rb") as log:
                log.seek(0, os.SEEK_END)
                log.seek(max(0, log.tell() - 8192))
                text = log.read().decode("utf-8", "replace")
        except (OSError, TypeError):
            return ""
        tail = [line for line in text.strip().splitlines() if line.strip()][-lines:]
        return ("Last worker log lines: " + " | ".join(tail)) if tail else ""


def _error_of(result: dict) -> DigitsError:
    """The worker's error as raised here: an input over a size limit stays an ``InputTooLargeError`` (HTTP 413)."""
    limit = next((x for x in LIMITS if x.env == result.get("limit")), None)
    return DigitsError(result["error"]) if limit is None else InputTooLargeError(result["error"], limit)


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "no exit code"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def get_worker(app) -> InferenceWorker:
    """The app's inference worker (created on first use; the process starts on the first request)."""
    ext = app.extensions["digits"]
    worker = ext.get("inference_worker")
    if worker is None:
        worker = InferenceWorker(app.config.get("DIGITS_INFERENCE_TIMEOUT", DEFAULT_TIMEOUT))
        ext["inference_worker"] = worker
    return worker


def run_in_worker(kind: str, request: dict) -> dict:
    """Run a request in the current Flask app's worker, with ``DIGITS_INFERENCE_TIMEOUT`` from its config."""
    from flask import current_app

    app = current_app._get_current_object()
    return get_worker(app).call(kind, request, timeout=app.config.get("DIGITS_INFERENCE_TIMEOUT", DEFAULT_TIMEOUT))


def serve(reply_fd: int) -> int:
    """Worker process loop: one JSON request per stdin line, one JSON answer per line on ``reply_fd``."""
    from ..inference import model as model_module
    from ..tf_quiet import quiet_tensorflow_startup
    from .worker_calls import handle

    quiet_tensorflow_startup()  # every request needs TensorFlow; its C++ start-up lines stay out of the log
    os.dup2(2, 1)  # print() in custom code goes to the log, never into the answers
    replies = os.fdopen(reply_fd, "wb", buffering=0)
    served = 0
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        message = json.loads(line)
        before = model_module.model_load_count()
        start = time.perf_counter()
        result = handle(message["kind"], message.get("request") or {})
        served += 1
        loads = model_module.model_load_count()
        result["worker"] = {
            "pid": os.getpid(),
            "requests": served,
            "model_loads": loads,
            "loaded_model": loads > before,
            "seconds": round(time.perf_counter() - start, 4),
        }
        replies.write(json.dumps({"id": message.get("id"), "result": result}, default=str).encode("utf-8") + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(serve(int(sys.argv[1])))
