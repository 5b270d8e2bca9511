# Written as DIGITS 6's Sunnybrook plugin is (its folder read in __init__, objects in userdata, a flat
# palette, C×H×W features and 1×H×W masks, choices from userdata), with the mechanical Python 3 fixes only.
from __future__ import absolute_import

import glob
import math
import os
import random

import numpy as np

from digits.utils import subclass, override, constants
from digits.utils.constants import COLOR_PALETTE_ATTRIBUTE
from digits.extensions.data.interface import DataIngestionInterface
from .forms import DatasetForm, InferenceForm

DATASET_TEMPLATE = "templates/dataset_template.html"
INFERENCE_TEMPLATE = "templates/inference_template.html"


class Blob(object):
    """An image and its mask (Sunnybrook's Contour: an object kept in userdata)"""

    def __init__(self, image_path):
        self.image_path = image_path
        self.mask_path = os.path.join(os.path.dirname(image_path),
                                      os.path.basename(image_path).replace("image-", "mask-"))
        self.case = os.path.basename(image_path)[len("image-"):-len(".npy")]

    def __str__(self):
        return "<Blob %s>" % self.case

    __repr__ = __str__


def get_all_blobs(folder):
    return list(map(Blob, sorted(glob.glob(os.path.join(folder, "image-*.npy")))))


@subclass
class DataIngestion(DataIngestionInterface):
    """
    A data ingestion extension for blobs segmentation
    """

    def __init__(self, is_inference_db=False, **kwargs):
        super(DataIngestion, self).__init__(**kwargs)

        self.userdata['is_inference_db'] = is_inference_db

        self.userdata['class_labels'] = ['background', 'red blob', 'green blob']

        # get list of blobs
        if 'blobs' not in self.userdata:
            blobs = get_all_blobs(self.image_folder)
            random.Random(0).shuffle(blobs)
            self.userdata['blobs'] = blobs
        else:
            blobs = self.userdata['blobs']

        # get number of validation entries
        pct_val = int(self.folder_pct_val)
        self.userdata['n_val_entries'] = int(math.floor(len(blobs) * pct_val / 100))

        # label palette (0->black, 1->red, 2->green, others->black)
        palette = [0, 0, 0, 255, 0, 0, 0, 255, 0] + [0] * (253 * 3)
        self.userdata[COLOR_PALETTE_ATTRIBUTE] = palette

    @override
    def encode_entry(self, entry):
        image = np.load(entry.image_path)
        label = np.load(entry.mask_path)[np.newaxis, ...]
        feature = image[np.newaxis, ...]
        return feature, label

    @staticmethod
    @override
    def get_category():
        return "Images"

    @staticmethod
    @override
    def get_id():
        return "blobs6"

    @staticmethod
    @override
    def get_dataset_form():
        return DatasetForm()

    @staticmethod
    @override
    def get_dataset_template(form):
        extension_dir = os.path.dirname(os.path.abspath(__file__))
        template = open(os.path.join(extension_dir, DATASET_TEMPLATE), "r").read()
        context = {'form': form}
        return (template, context)

    @override
    def get_inference_form(self):
        n_val_entries = self.userdata['n_val_entries']
        form = InferenceForm()
        for idx, blob in enumerate(self.userdata['blobs'][:n_val_entries]):
            form.validation_record.choices.append((str(idx), blob.case))
        return form

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
        return "Blobs segmentation (DIGITS 6)"

    @override
    def itemize_entries(self, stage):
        blobs = self.userdata['blobs']
        n_val_entries = self.userdata['n_val_entries']

        entries = []
        if not self.userdata['is_inference_db']:
            if stage == constants.TRAIN_DB:
                entries = blobs[n_val_entries:]
            elif stage == constants.VAL_DB:
                entries = blobs[:n_val_entries]
        elif stage == constants.TEST_DB:
            if self.userdata['validation_record'] != 'none':
                entries = [blobs[int(self.validation_record)]]
        return entries
