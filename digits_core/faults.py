"""Faults a job meets that are the machine's, not the user's: a full disk (ENOSPC, EDQUOT), an I/O error, a dead server.

:func:`disk_error_message` turns such an ``OSError`` into the message a job
records ("The disk is full ... under <folder> ..."), so the job ends
``Error`` with a reason a person can act on instead of a traceback.
:func:`note_stop_cause` / :func:`signal_reason` let the code that sends this
process a stop signal say why (e.g. its server died), so the job records what
happened instead of "received SIGTERM".
"""

from __future__ import annotations

import errno
import os
import signal

from .errors import DiskFullError

#: errno values that mean "the storage cannot take this write".
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG})


#: Libraries whose errors report a failed write as text, not as an ``OSError`` (TensorFlow's SaveV2 raises
#: ``ResourceExhaustedError: ... No space left on device``); their messages are read for the C library's words.
_TEXT_ERROR_LIBRARIES = frozenset({"tensorflow", "keras", "tf_keras", "h5py", "onnx", "tf2onnx", "ai_edge_litert"})
#: The C library's words for a full disk or quota, which such libraries put in their messages.
_DISK_FULL_WORDS = {errno.ENOSPC: os.strerror(errno.ENOSPC), errno.EDQUOT: os.strerror(errno.EDQUOT)}


def disk_error(exc: BaseException | None) -> OSError | None:
    """The ``OSError`` in ``exc`` or its causes that is a full disk or an I/O error, else ``None``.

    An error of TensorFlow (or Keras, h5py, the ONNX converters) whose message
    says "No space left on device" or "Disk quota exceeded" counts too: an
    ``OSError`` with that errno is returned for it. TensorFlow is never imported
    here; its errors are recognised by their module and message.
    """
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS:
            return exc
        if type(exc).__module__.split(".")[0] in _TEXT_ERROR_LIBRARIES:
            text = str(exc)
            for number, words in _DISK_FULL_WORDS.items():
                if words in text:
                    return OSError(number, words)
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def disk_error_message(
    exc: BaseException,
    where: str | os.PathLike,
    *,
    action: str = "The job could not finish",
    again: str = "run it again",
) -> str | None:
    """``"The disk is full ..."`` for a full disk or I/O error in ``exc`` (writing under ``where``), else ``None``.

    Args:
        exc: The exception (its causes are searched too).
        where: The folder written to.
        action: What failed, the message's start (e.g. ``"The job could not be created"``).
        again: What to do once there is space (e.g. ``"submit it again"``).
    """
    found = disk_error(exc)
    if found is None:
        return None
    if found.errno == errno.EIO:
        return f"An I/O error occurred writing under {where} ({found.strerror}); check the disk, then {again}."
    what = "the disk quota is exceeded" if found.errno == errno.EDQUOT else "the disk is full"
    return f"{action}: {what} ({found.strerror}) under {where}. Free some space (delete old jobs), then {again}."


def raise_if_disk_full(
    exc: BaseException,
    where: str | os.PathLike,
    *,
    action: str = "The job could not be created",
    again: str = "submit it again",
) -> None:
    """Raise :class:`~digits_core.errors.DiskFullError` (from ``exc``) when ``exc`` is a full disk or I/O error.

    Returns (raising nothing) for any other exception, which the caller re-raises.
    """
    message = disk_error_message(exc, where, action=action, again=again)
    if message is not None:
        raise DiskFullError(message) from exc


_STOP_CAUSE: dict[str, str] = {}


def note_stop_cause(cause: str) -> None:
    """Record why this process is about to stop itself with a signal (the job's Aborted message uses it)."""
    _STOP_CAUSE["cause"] = cause


def stop_cause() -> str | None:
    """The cause noted by :func:`note_stop_cause`, or ``None`` (a signal from outside)."""
    return _STOP_CAUSE.get("cause")


def signal_reason(signum: int) -> str:
    """Why signal ``signum`` stops this process's job: the noted cause, else ``"received SIGTERM"`` (its name)."""
    return stop_cause() or f"received {signal.Signals(signum).name}"


#: The stop signals (Ctrl-C, SIGTERM, SIGHUP) this process has received while a command ran.
_STOP_SIGNALS: list[int] = []


def note_stop_signal(signum: int) -> None:
    """Record that stop signal ``signum`` reached this process (the command line's signal handler calls it)."""
    _STOP_SIGNALS.append(int(signum))


def clear_stop_signals() -> None:
    """Forget the stop signals noted so far (a new command starts in this process)."""
    _STOP_SIGNALS.clear()


def stop_requested() -> bool:
    """Whether a stop signal has reached this process (see :func:`note_stop_signal`)."""
    return bool(_STOP_SIGNALS)


def raise_if_stop_requested() -> None:
    """Raise ``KeyboardInterrupt`` when a stop signal has reached this process; code about to publish asks.

    The ``KeyboardInterrupt`` a signal raises can be lost on its way: landing while compiled code
    (TensorFlow tracing a function) calls back into Python, it comes out as another error, which a
    library's fallback may catch and carry on. The noted signal is not lost, so a result is not
    published after the user stopped the command.
    """
    if _STOP_SIGNALS:
        raise KeyboardInterrupt


__all__ = [
    "DISK_ERRNOS",
    "disk_error",
    "disk_error_message",
    "clear_stop_signals",
    "note_stop_cause",
    "note_stop_signal",
    "raise_if_disk_full",
    "raise_if_stop_requested",
    "signal_reason",
    "stop_cause",
    "stop_requested",
]
