from __future__ import absolute_import

from digits import utils
from digits.utils import subclass
from digits.utils.forms import validate_required_iff
from flask.ext.wtf import Form
import wtforms
from wtforms import validators


@subclass
class DatasetForm(Form):
    """
    Options of a synthetic gradients dataset
    """

    train_image_count = utils.forms.IntegerField(
        'Training images',
        validators=[validators.DataRequired(), validators.NumberRange(min=1)],
        default=200,
        tooltip="How many gradient images the training set gets"
    )

    val_image_count = utils.forms.IntegerField(
        'Validation images',
        validators=[validators.Optional(), validators.NumberRange(min=0)],
        default=50,
        tooltip="How many gradient images the validation set gets"
    )

    test_image_count = utils.forms.IntegerField(
        'Test images',
        validators=[validators.Optional(), validators.NumberRange(min=0)],
        default=0,
        tooltip="How many gradient images the test set gets"
    )

    image_width = wtforms.IntegerField(
        u'Width',
        default=32,
        validators=[validators.DataRequired(), validators.NumberRange(min=4)]
    )

    image_height = wtforms.IntegerField(
        u'Height',
        default=32,
        validators=[validators.DataRequired(), validators.NumberRange(min=4)]
    )


@subclass
class InferenceForm(Form):
    """
    One gradient given by its slopes, or a number of random ones
    """

    gradient_x = utils.forms.FloatField(
        'Slope along x',
        validators=[
            validate_required_iff(test_image_count=None),
            validators.NumberRange(min=-0.5, max=0.5),
        ],
        tooltip="A number between -0.5 and 0.5"
    )

    gradient_y = utils.forms.FloatField(
        'Slope along y',
        validators=[
            validate_required_iff(test_image_count=None),
            validators.NumberRange(min=-0.5, max=0.5),
        ],
        tooltip="A number between -0.5 and 0.5"
    )

    test_image_count = utils.forms.IntegerField(
        'Random images',
        validators=[validators.Optional(), validators.NumberRange(min=0)],
        tooltip="Instead of one gradient: this many random ones"
    )
