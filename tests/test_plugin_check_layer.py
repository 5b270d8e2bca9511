"""The plugin checker sits in the plugin layer: the record format it runs entries through lives with the interfaces.

``digits plugin check`` and :func:`digits_core.plugins.testing.check_plugin` pack a plugin's entries with the record
format (``digits_core.interfaces.records``) and check a volume plugin's pair (``digits_core.interfaces.volume``)
without loading the dataset builder; the former homes (``digits_core.datasets.images``, ``.labels``, ``.records``)
still import, with a warning (tests/test_moved_modules.py).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np


def test_the_plugin_checker_loads_no_dataset_builder():
    code = (
        "import sys, digits_core.plugins.check\n"
        "print(sorted(m for m in sys.modules if m.startswith('digits_core.datasets')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_the_dataset_builder_and_the_checker_share_one_record_format_and_volume_type():
    from digits_core import Volume
    from digits_core.datasets import volumes
    from digits_core.datasets.layout import channels_first_problem
    from digits_core.interfaces import records
    from digits_core.interfaces.volume import check_volume_pair
    from digits_core.plugins.check import check_feature

    assert volumes.Volume is Volume and volumes.check_volume_pair is check_volume_pair
    assert channels_first_problem is records.channels_first_problem
    assert check_feature(np.zeros((3, 28, 28), np.uint8), 0, "demo") == records.channels_first_problem(
        (3, 28, 28), "demo"
    )
    assert check_feature(np.zeros((28, 28, 1), np.uint8), 0, "demo") is None
