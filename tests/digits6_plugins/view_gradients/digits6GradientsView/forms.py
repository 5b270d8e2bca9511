from __future__ import absolute_import

from digits import utils
from digits.utils import subclass
from flask.ext.wtf import Form
import wtforms
from wtforms import validators


@subclass
class ConfigForm(Form):
    """
    How to draw the arrow
    """

    arrow_color = wtforms.SelectField(
        'Arrow colour',
        choices=[
            ('red', 'Red'),
            ('green', 'Green'),
            ('blue', 'Blue'),
        ],
        default='red',
    )

    arrow_size = utils.forms.IntegerField(
        'Arrow length (%)',
        validators=[validators.DataRequired(), validators.NumberRange(min=1)],
        default=80,
        tooltip="In percent of the image size"
    )
