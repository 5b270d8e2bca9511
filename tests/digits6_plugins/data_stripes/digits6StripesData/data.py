from __future__ import absolute_import

import os

import numpy as np
from flask.ext.wtf import Form
from wtforms import validators

from digits import utils
from digits.utils import subclass, override, constants
from digits.extensions.data.interface import DataIngestionInterface


@subclass
class DatasetForm(Form):
    count = utils.forms.IntegerField(
        'Images per stage',
        validators=[validators.DataRequired(), validators.NumberRange(min=1)],
        default=8,
        tooltip="Images in each of the train and val stages"
    )
    size = utils.forms.SelectField(
        'Size',
        choices=[('8', '8x8'), ('16', '16x16')],
        default='8',
        tooltip="Side of the square images"
    )


@subclass
class DataIngestion(DataIngestionInterface):
    """
    Horizontal (class 0) or vertical (class 1) RGB stripes
    """

    @override
    def encode_entry(self, entry):
        index, vertical = entry
        side = int(self.size)
        image = np.zeros((3, side, side), dtype=np.float64)  # CHW; DIGITS stored non-uint8 as float
        stripes = (np.arange(side) // 2) % 2 * 200.0 + index
        if vertical:
            image[0] = stripes[np.newaxis, :]
        else:
            image[0] = stripes[:, np.newaxis]
        image[1] = 50.0
        image[2] = index
        return image, np.array([int(vertical)])

    @staticmethod
    @override
    def get_category():
        return "Images"

    @staticmethod
    @override
    def get_id():
        return "stripes6"

    @staticmethod
    @override
    def get_dataset_form():
        return DatasetForm()

    @staticmethod
    @override
    def get_dataset_template(form):
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates", "dataset.html")
        return open(path).read(), {'form': form}

    @staticmethod
    @override
    def get_title():
        return "Stripes (DIGITS 6)"

    @override
    def itemize_entries(self, stage):
        if stage in (constants.TRAIN_DB, constants.VAL_DB):
            return [(i, i % 2 == 1) for i in range(self.count)]
        return []
