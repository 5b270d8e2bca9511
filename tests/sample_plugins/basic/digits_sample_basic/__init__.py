"""A tiny third-party plugin: numbered grey squares, and a text view.

Test hook: when ``DIGITS_SAMPLE_GATE`` names a file, itemizing creates
``<that file>.waiting`` and then blocks until the file exists, so a test
holds a dataset job Running for exactly as long as it needs.
"""

import os
import time

import numpy as np
from wtforms import Form, IntegerField, validators

from digits_core import DataIngestion, View


class NumbersForm(Form):
    count = IntegerField("Images per stage", default=4, validators=[validators.NumberRange(min=1, max=1000)])


class NumbersIngestion(DataIngestion):
    """Image i of a stage is a 4x4 uint8 square of value i, labelled i % 2."""

    plugin_id = "sample-numbers"
    title = "Sample numbers"
    category = "Samples"

    @staticmethod
    def get_dataset_form():
        return NumbersForm

    @staticmethod
    def get_dataset_template(form):
        return "{{ form.count.label }} {{ form.count() }}", {}

    def itemize_entries(self, stage):
        gate = os.environ.get("DIGITS_SAMPLE_GATE")
        if gate:
            with open(gate + ".waiting", "w"):
                pass
            while not os.path.exists(gate):
                time.sleep(0.05)
        self.userdata["class_labels"] = ["even", "odd"]
        return list(range(self.count)) if stage != "test" else []

    def encode_entry(self, entry):
        return np.full((4, 4, 1), entry, dtype=np.uint8), entry % 2


class TextView(View):
    """Shows the arg-max of the output as text."""

    plugin_id = "sample-text"
    title = "Sample text view"

    def process_data(self, input_id, input_data, output_data, ground_truth=None):
        return {"id": input_id, "top": int(np.argmax(output_data))}

    def get_view_template(self, data):
        return "{{ id }}: {{ top }}", data
