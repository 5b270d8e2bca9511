"""The New Model form's Search panel (issue 30) with the Flask test client: refusals on their fields.

A search that starts (the form -> ``start_sweep`` -> ``tuning.tune`` call, Ray Tune and a trial) is
``tests/test_tune.py``'s slow ``test_the_new_model_form_starts_a_search_and_lands_on_its_comparison_page``.
"""

from __future__ import annotations

import pytest
from test_web_models import form_values

from digits_core.jobs import Job, JobStatus

CODE = "def build_model(input_shape, num_outputs, **params):\n    return None\n"


@pytest.fixture
def dataset(app):
    job = Job.create("dataset", "ds", jobs_dir=app.extensions["digits"]["jobs_dir"], plugin_id="image-classification")
    job.set_status(JobStatus.DONE)
    return job


def _nothing_created(app):
    jobs_dir = app.extensions["digits"]["jobs_dir"]
    return not (jobs_dir / ".sweeps").exists() and app.extensions["digits"]["store"].list("model") == []


def test_the_panel_is_collapsed_with_the_tuner_defaults(client):
    html = client.get("/models/new").get_data(as_text=True)
    panel = html[html.index('id="search-panel"') : html.index("</details>", html.index('id="search-panel"'))]
    assert ">" in panel and " open" not in panel.split(">", 1)[0]
    for name in (
        "search",
        "search_scheduler",
        "search_trials",
        "search_max_epochs",
        "search_metric",
        "search_max_concurrent",
    ):
        assert f'name="{name}"' in panel, name
    assert 'value="val_accuracy"' in panel and 'value="16"' in panel and '<option selected value="asha">' in panel


@pytest.mark.parametrize(
    "changes, field, message",
    [
        ({"search": "learning_rate=loguniform(-1,1)"}, "search", "learning_rate: "),
        ({"search": "frobnication=choice(1,2)"}, "search", "unknown training option"),
        ({"search": "solver=choice(sgd,lbfgs)"}, "search", "is not a choice of solver"),
        (
            {"search": "learning_rate=choice(0.1,0.01)", "search_metric": "accuracy"},
            "search_metric",
            "not a validation metric",
        ),
        ({"search": "batch_size=choice(8,16)", "learning_rate": "0.1,0.01"}, "learning_rate", "put the list in"),
        (
            {"search": "batch_size=choice(8,16)", "network": "__custom__", "custom_network": CODE},
            "search",
            "built-in or plugin network",
        ),
        ({"search": "learning_rate=choice(0.1,0.01)", "search_trials": "0"}, "search_trials", "between 1 and"),
    ],
)
def test_a_bad_search_is_refused_on_its_field_keeping_the_values(app, client, dataset, token, changes, field, message):
    values = form_values(token, dataset, **{"search_scheduler": "random", "search_trials": "5", **changes})
    answer = client.post("/models/new", data=values)
    html = answer.get_data(as_text=True)
    assert answer.status_code == 200 and 'id="form-errors"' in html
    error = html[html.index(f'data-for="{field}"') :]
    assert message in error[: error.index("</div>")]
    assert " open>" in html[html.index('id="search-panel"') :][:80] or field != "search"
    assert changes["search"] in html and '<option selected value="random">' in html  # what was typed stays
    assert _nothing_created(app)


def test_the_form_hands_its_search_to_the_core(app, client, dataset, token):
    """The core's refusal of what only it checks (the dataset's records) proves the form called it.

    The form's own learning rate (0.01, not the network's default) gives way to the searched one.
    """
    values = form_values(token, dataset, search="learning_rate=loguniform(1e-4,1e-1)", search_max_epochs="3")
    html = client.post("/models/new", data=values).get_data(as_text=True)
    error = html[html.index('data-for="dataset"') :]
    assert "has no published dataset" in error[: error.index("</div>")]
    assert "given both" not in html
    assert _nothing_created(app)
