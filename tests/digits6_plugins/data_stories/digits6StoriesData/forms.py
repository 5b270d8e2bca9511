from __future__ import absolute_import

from digits import utils
from digits.utils import subclass
from flask.ext.wtf import Form
from wtforms import validators


@subclass
class DatasetForm(Form):
    """
    Options of a synthetic stories dataset
    """

    train_count = utils.forms.IntegerField(
        'Training stories',
        validators=[validators.DataRequired(), validators.NumberRange(min=1)],
        default=32,
        tooltip="How many stories the training set gets"
    )

    val_count = utils.forms.IntegerField(
        'Validation stories',
        validators=[validators.Optional(), validators.NumberRange(min=0)],
        default=8,
        tooltip="How many stories the validation set gets"
    )


@subclass
class InferenceForm(Form):
    """
    Stories typed in, one a line (bAbI's snippet)
    """

    snippet = utils.forms.TextAreaField(
        'Stories',
        tooltip="One story a line, e.g. 'Mary went to the kitchen'; the question is where the person is"
    )
