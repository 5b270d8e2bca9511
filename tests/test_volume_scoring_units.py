"""Volume scoring's running disagreement (issue 46): one pass in memory at a time, the same number as all at once."""

from __future__ import annotations

import numpy as np


def test_running_disagreement_equals_the_variance_over_all_passes_at_once():
    from digits_core.labeling.strategies import disagreement
    from digits_core.labeling.volume_scoring import _running_disagreement

    rng = np.random.default_rng(0)
    passes = rng.dirichlet(np.ones(3), size=(5, 4, 6, 7))  # 5 passes of a 4×6×7 volume, 3 classes
    calls = []

    def run(k):
        def one():
            calls.append(k)
            return passes[k]

        return one

    got = _running_disagreement([run(k) for k in range(len(passes))])
    assert calls == list(range(len(passes)))  # each pass made once, in order
    assert np.isclose(got, disagreement(passes[:, None])[0], rtol=1e-12)
