from digits_sample_basic import NumbersIngestion
from wtforms import BooleanField, Form


class ReservedForm(Form):
    is_inference_db = BooleanField("Inference?")  # a name the framework owns


class ReservedField(NumbersIngestion):
    """A dataset form field named after a framework argument: failed at load, naming the field."""

    plugin_id = "reserved-field"

    @staticmethod
    def get_dataset_form():
        return ReservedForm
