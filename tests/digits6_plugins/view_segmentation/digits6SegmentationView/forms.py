from __future__ import absolute_import

from digits import utils
from digits.utils import subclass
from flask.ext.wtf import Form
from wtforms import validators


@subclass
class ConfigForm(Form):
    """
    How to draw the segmentation
    """

    opacity = utils.forms.IntegerField(
        'Mask opacity (%)',
        validators=[validators.DataRequired(), validators.NumberRange(min=1, max=100)],
        default=60,
        tooltip="How much of the image the mask hides"
    )
