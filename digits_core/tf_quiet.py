"""Keep TensorFlow's C++ start-up chatter off the terminal (unless ``-v``).

Importing TensorFlow 2.x and finding its devices prints lines such as
``Could not find cuda drivers on your machine, GPU will not be used``,
``oneDNN custom operations are on`` and, on a machine without a GPU,
``failed call to cuInit: ... (303)`` from C++, straight to file descriptor 2,
interleaved with progress bars. ``TF_CPP_MIN_LOG_LEVEL`` stops only part of it
(lines logged before absl's logging starts ignore it), so
:func:`quiet_tensorflow_startup` imports TensorFlow and lists its devices
while fd 2 goes through a filter that drops those lines and passes everything
else. Real errors stay: error/fatal lines other than the known noise, and a
``cuInit`` failure on a machine that has an NVIDIA driver (a real device
problem).
"""

from __future__ import annotations

import os
import re
import shutil
import threading

#: glog-style C++ log line: severity letter, date, time, thread, file:line].
_GLOG = re.compile(rb"^([IWEF])\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ [^ \]]+:\d+\] ")
#: Non-glog start-up lines that say nothing actionable.
_NOISE_PLAIN = (
    b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    b"To enable the following instructions:",
)
#: Error-level lines that are noise on a machine without an NVIDIA driver.
_NO_GPU_NOISE = (b"failed call to cuInit", b"Unable to register cu")


def gpu_driver_present() -> bool:
    """True if this machine has an NVIDIA driver (then a ``cuInit`` failure is a real error)."""
    return os.path.exists("/dev/nvidiactl") or shutil.which("nvidia-smi") is not None


def is_noise(line: bytes, *, gpu_expected: bool) -> bool:
    """True for a TensorFlow start-up line to drop; never for a real error."""
    text = line.strip()
    if any(text.startswith(prefix) for prefix in _NOISE_PLAIN):
        return True
    match = _GLOG.match(text)
    if not match:
        return False
    if match.group(1) in (b"I", b"W"):
        return True
    return not gpu_expected and any(marker in text for marker in _NO_GPU_NOISE)


class _Fd2Filter:
    """Route fd 2 through a pipe whose reader drops noise lines (until :meth:`close`)."""

    def __init__(self, gpu_expected: bool):
        self.gpu_expected = gpu_expected
        self.saved = os.dup(2)
        read_end, write_end = os.pipe()
        os.dup2(write_end, 2)
        os.close(write_end)
        self.read_end = read_end
        self.thread = threading.Thread(target=self._pump, name="digits-tf-stderr", daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        pending = b""
        while True:
            chunk = os.read(self.read_end, 65536)
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            out = b"".join(line + b"\n" for line in lines if not is_noise(line, gpu_expected=self.gpu_expected))
            if out:
                os.write(self.saved, out)
        if pending and not is_noise(pending, gpu_expected=self.gpu_expected):
            os.write(self.saved, pending)
        os.close(self.read_end)

    def close(self) -> None:
        os.dup2(self.saved, 2)  # closes the pipe's last write end: the reader sees EOF and drains
        self.thread.join(10)
        os.close(self.saved)


#: Packages TensorFlow and Keras import only for features the engine never uses, each optional there (an
#: ``ImportError`` is caught), hidden while TensorFlow loads: ``sklearn`` (and SciPy) for ``keras.wrappers``'
#: estimators; with ``lean`` also ``matplotlib.pyplot`` for ``keras.visualization``'s plots, ``pandas`` (and
#: pyarrow) so Keras's data adapters accept DataFrames, and ``scipy.sparse`` for the legacy ``tf.compat.v1``
#: Keras's sparse inputs: about a fifth of ``import tensorflow`` on 2 cores (``python -X importtime``, issue 44:
#: matplotlib 0.9 s, scipy 0.5 s, pandas 0.25 s of 8.4 s on a loaded machine; 1,180 fewer modules).
HIDDEN_WHILE_TENSORFLOW_LOADS = ("sklearn",)
HIDDEN_WHEN_LEAN = ("matplotlib", "pandas", "scipy")


def import_tensorflow(lean: bool = False):
    """Import TensorFlow (and Keras) without optional packages it never needs here; returns ``tensorflow``.

    While TensorFlow loads, each package of :data:`HIDDEN_WHILE_TENSORFLOW_LOADS` (and, when ``lean``,
    :data:`HIDDEN_WHEN_LEAN`) not yet imported is hidden (an ``ImportError`` for TensorFlow and Keras),
    then restored: ``import sklearn``, ``import pandas`` ... work as before afterwards. What such a
    process loses is only what Keras decided at its import: ``keras.wrappers``' scikit-learn estimators
    and, when lean, ``keras.visualization``'s plots and pandas DataFrames given straight to ``Model.fit``.
    ``digits``'s own processes (the CLI's TensorFlow commands, the job workers) are lean; a program that
    calls :func:`quiet_tensorflow_startup` itself is not, unless it asks.
    """
    import sys

    names = HIDDEN_WHILE_TENSORFLOW_LOADS + (HIDDEN_WHEN_LEAN if lean else ())
    hidden = [] if "tensorflow" in sys.modules else [m for m in names if m not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # an ImportError for whoever imports it now
    try:
        import tensorflow as tf
    finally:
        for name in hidden:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]
    return tf


def quiet_tensorflow_startup(lean: bool = False) -> None:
    """Import TensorFlow and find its devices with the start-up noise filtered out of stderr.

    ``lean``: leave out the optional packages :func:`import_tensorflow` names (``digits``'s own processes).

    Also sets ``TF_CPP_MIN_LOG_LEVEL=2`` (when unset) for what TensorFlow logs
    later. Does nothing when ``TF_CPP_MIN_LOG_LEVEL`` is ``0`` (``-v``) or
    TensorFlow is already imported.
    """
    import sys

    if os.environ.get("TF_CPP_MIN_LOG_LEVEL") == "0" or "tensorflow" in sys.modules:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.stderr.flush()
    filt = _Fd2Filter(gpu_driver_present())
    try:
        import_tensorflow(lean).config.list_physical_devices()
    finally:
        sys.stderr.flush()
        filt.close()


#: The documented switch for embedders (``digits_core.quiet_tensorflow()``): call it before anything imports
#: TensorFlow, and the Python API's runs print no C++ start-up lines, as the ``digits`` command does.
quiet_tensorflow = quiet_tensorflow_startup
