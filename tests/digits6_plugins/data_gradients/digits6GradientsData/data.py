from __future__ import absolute_import

from digits.utils import subclass, override, constants
from digits.extensions.data.interface import DataIngestionInterface
from .forms import DatasetForm, InferenceForm

import numpy as np
import os

TEMPLATE = "templates/template.html"
INFERENCE_TEMPLATE = "templates/inference_template.html"


@subclass
class DataIngestion(DataIngestionInterface):
    """
    Gradient images labelled with their slopes (a regression dataset)
    """

    def __init__(self, is_inference_db=False, **kwargs):
        super(DataIngestion, self).__init__(**kwargs)

        self.userdata['is_inference_db'] = is_inference_db

        # pixel coordinates, centred
        rows, cols = np.mgrid[:self.image_height, :self.image_width].astype('float')
        self.cols = cols - self.image_width / 2.0
        self.rows = rows - self.image_height / 2.0

    @override
    def encode_entry(self, entry):
        slope_x, slope_y = entry
        image = 127.5 + slope_x * 255 * self.cols / self.image_width + slope_y * 255 * self.rows / self.image_height
        image = np.clip(image, 0, 255).astype('uint8')

        # DIGITS wants 3D tensors: CHW features, 1x1xN labels
        feature = image[np.newaxis, ...]
        label = np.array([slope_x, slope_y])[np.newaxis, np.newaxis, ...]
        return feature, label

    @staticmethod
    @override
    def get_category():
        return "Images"

    @staticmethod
    @override
    def get_id():
        return "gradients6"

    @staticmethod
    @override
    def get_dataset_form():
        return DatasetForm()

    @staticmethod
    @override
    def get_dataset_template(form):
        extension_dir = os.path.dirname(os.path.abspath(__file__))
        template = open(os.path.join(extension_dir, TEMPLATE), "r").read()
        context = {'form': form}
        return (template, context)

    @override
    def get_inference_form(self):
        return InferenceForm()

    @staticmethod
    @override
    def get_inference_template(form):
        extension_dir = os.path.dirname(os.path.abspath(__file__))
        template = open(os.path.join(extension_dir, INFERENCE_TEMPLATE), "r").read()
        context = {'form': form}
        return (template, context)

    @staticmethod
    @override
    def get_title():
        return "Gradients (DIGITS 6)"

    @override
    def itemize_entries(self, stage):
        count = 0
        if self.userdata['is_inference_db']:
            if stage == constants.TEST_DB:
                if self.test_image_count:
                    count = self.test_image_count
                else:
                    return [(self.gradient_x, self.gradient_y)]
        elif stage == constants.TRAIN_DB:
            count = self.train_image_count
        elif stage == constants.VAL_DB:
            count = self.val_image_count
        elif stage == constants.TEST_DB:
            count = self.test_image_count
        rng = np.random.RandomState(count)
        return [tuple(rng.random_sample(2) - 0.5) for i in range(count)] if count > 0 else []
