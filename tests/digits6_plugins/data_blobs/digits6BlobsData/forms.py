from __future__ import absolute_import

from digits import utils
from digits.utils import subclass
from flask.ext.wtf import Form
from wtforms import validators


@subclass
class DatasetForm(Form):
    """
    A form used to create a blobs segmentation dataset
    """

    image_folder = utils.forms.StringField(
        u'Image folder',
        validators=[validators.DataRequired()],
        tooltip="Folder of image-*.npy and mask-*.npy files"
    )

    folder_pct_val = utils.forms.IntegerField(
        u'% for validation',
        default=34,
        validators=[validators.NumberRange(min=0, max=100)],
        tooltip="Share of the images kept for validation"
    )


@subclass
class InferenceForm(Form):
    """
    A form used to perform inference on a blobs dataset
    """

    validation_record = utils.forms.SelectField(
        'Record from validation set',
        choices=[('none', '- select record -')],
        default='none',
        tooltip="Test a record from the validation set"
    )
