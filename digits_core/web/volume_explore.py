"""Explore for a volume dataset (``"layout": "DHWC"``): each case scrolled slice by slice with its label.

The cases of a page are shown with the ``volume`` view plugin (bundled in
``digits-data-volumes``): the image with the label blended over it, one
slice at a time, in any of the three planes. Cases are read whole from the
slabbed LMDB stage; a page holds :data:`CASES_PER_PAGE` of them.
"""

from __future__ import annotations

from flask import render_template_string

from ..datasets.volumes import VolumeStageReader
from ..errors import DigitsError, FormValidationError
from ..jobs import Job
from ..jobs.readers import UnreadableRecordError, read_json_object
from ..plugins.registry import registry
from ..templating import give_csp_nonce, render_plugin_template
from .request_guard import csp_nonce

#: Cases shown per Explore page (each is a whole volume).
CASES_PER_PAGE = 4

_PAGE = """{% extends "base.html" %}
{% block title %}Explore {{ job.name }}{% endblock %}
{% block content %}
<div class="page-head">
  <div><h1>Explore <a href="{{ url_for('datasets.show', job_id=job.id) }}">{{ job.name }}</a></h1>
    <div class="muted" id="explore-summary">{{ count }} cases in stage <b>{{ stage }}</b> · page {{ page + 1 }}
      of {{ pages }}</div></div>
  <div class="actions">
    {% for s in stages %}<a class="btn {{ 'btn-primary' if s == stage }}"
       href="{{ url_for('datasets.explore', job_id=job.id, stage=s) }}">{{ s }}</a>{% endfor %}
  </div>
</div>
<div class="volume-cases">{% for fragment in fragments %}<section class="panel">{{ fragment | safe }}</section>{% endfor %}</div>
<div class="pager">
  {% if page > 0 %}<a class="btn" href="{{ url_for('datasets.explore', job_id=job.id, stage=stage, page=page - 1) }}">previous</a>{% endif %}
  {% if page + 1 < pages %}<a class="btn" href="{{ url_for('datasets.explore', job_id=job.id, stage=stage, page=page + 1) }}">next</a>{% endif %}
</div>
{% endblock %}"""


def is_volume_job(job: Job) -> bool:
    """True for a dataset job whose published ``dataset.json`` says ``"layout": "DHWC"``."""
    try:
        return read_json_object(job.path / "dataset" / "dataset.json").get("layout") == "DHWC"
    except (OSError, UnreadableRecordError):
        return False


def volume_explore(job: Job, stage: str, page: int) -> str:
    """The Explore page of a volume dataset's ``stage`` (cases of page ``page``, from 0).

    Raises:
        FormValidationError: An unknown stage.
        DigitsError: The ``volume`` view plugin is not installed.
    """
    info = read_json_object(job.path / "dataset" / "dataset.json")  # checked by is_volume_job just before
    stages = list(info["stages"])
    if stage not in stages:
        raise FormValidationError({"stage": [f"choose one of {', '.join(stages)}"]}, "explore")
    try:
        view = registry.get_view("volume")(info)
    except DigitsError as exc:
        raise DigitsError(f"Exploring volumes needs the volume view plugin (digits-data-volumes): {exc}") from None
    count = int(info["stages"][stage]["count"])
    pages = max(1, -(-count // CASES_PER_PAGE))
    page = min(max(page, 0), pages - 1)
    reader = VolumeStageReader(job.path / "dataset" / stage)
    fragments = []
    try:
        for index in range(page * CASES_PER_PAGE, min(count, (page + 1) * CASES_PER_PAGE)):
            volume, label = reader.case(index)
            data = view.process_data(volume.name or f"case {index}", volume, label)
            fragments.append(render_plugin_template(*view.get_view_template(data)))
    finally:
        reader.close()
    return render_template_string(
        _PAGE,
        job=job,
        stage=stage,
        stages=stages,
        page=page,
        pages=pages,
        count=count,
        fragments=give_csp_nonce(fragments, csp_nonce()),
    )
