from __future__ import absolute_import, print_function

import os

import numpy as np

from digits.utils import subclass, override, constants
from digits.extensions.data.interface import DataIngestionInterface
from .forms import DatasetForm, InferenceForm

DATASET_TEMPLATE = "templates/dataset_template.html"
INFERENCE_TEMPLATE = "templates/inference_template.html"

# The places come first: their word ids (1 to 4) are the answers
PLACES = ['kitchen', 'garden', 'office', 'hallway']
PEOPLE = ['mary', 'john']
WORDS = PLACES + PEOPLE + ['went', 'to', 'the', 'where', 'is']
# sentences a story, words a sentence (5 columns: the label shape once taken for N x 5 boxes)
STORY_SIZE, SENTENCE_SIZE = 3, 5


def read_template(name):
    return open(os.path.join(os.path.dirname(os.path.abspath(__file__)), name), "r").read()


@subclass
class DataIngestion(DataIngestionInterface):
    """
    One-sentence stories and the question where the person went (bAbI task 1's layout)
    """

    def __init__(self, is_inference_db=False, **kwargs):
        super(DataIngestion, self).__init__(**kwargs)
        self.userdata['is_inference_db'] = is_inference_db
        if 'word_map' not in self.userdata:
            self.userdata['word_map'] = dict((word, i + 1) for i, word in enumerate(WORDS))  # id 0 pads
        print("word map has %d words" % len(self.userdata['word_map']))  # bAbI prints as it goes

    def encode_sentence(self, words):
        ids = np.zeros(SENTENCE_SIZE)
        for i, word in enumerate(words[:SENTENCE_SIZE]):
            ids[i] = self.userdata['word_map'][word]
        return ids

    @override
    def encode_entry(self, entry):
        sentence, person, answer = entry
        print("encoding %s" % sentence)
        # DIGITS 6 layout, as bAbI's: a float64 2 x story x sentence feature (the story, the question)
        # and a float 1 x story x sentence label (the answer word first)
        feature = np.zeros((2, STORY_SIZE, SENTENCE_SIZE))
        feature[0, 0] = self.encode_sentence(sentence.split())
        feature[1, 0] = self.encode_sentence(['where', 'is', person])
        answer_ids = np.zeros((STORY_SIZE, SENTENCE_SIZE))
        answer_ids[0, 0] = self.userdata['word_map'][answer]
        return feature, answer_ids[np.newaxis, :]

    @staticmethod
    def parse_line(line):
        words = line.lower().replace('.', ' ').split()
        return ' '.join(words), words[0], words[-1]

    @override
    def itemize_entries(self, stage):
        if self.userdata['is_inference_db']:
            if stage != constants.TEST_DB:
                return []
            lines = [line for line in (self.snippet or '').splitlines() if line.strip()]
            print("lines are %s" % lines)
            return [self.parse_line(line) for line in lines]
        if stage == constants.TRAIN_DB:
            first, count = 0, self.train_count
        elif stage == constants.VAL_DB:
            first, count = self.train_count, self.val_count or 0
        else:
            return []
        entries = []
        for i in range(first, first + count):
            person, place = PEOPLE[i % len(PEOPLE)], PLACES[(i // len(PEOPLE)) % len(PLACES)]
            entries.append(('%s went to the %s' % (person, place), person, place))
        return entries

    @staticmethod
    @override
    def get_category():
        return "Text"

    @staticmethod
    @override
    def get_id():
        return "stories6"

    @staticmethod
    @override
    def get_title():
        return "Stories (DIGITS 6, bAbI idiom)"

    @staticmethod
    @override
    def get_dataset_form():
        return DatasetForm()

    @staticmethod
    @override
    def get_dataset_template(form):
        return (read_template(DATASET_TEMPLATE), {'form': form})

    @override
    def get_inference_form(self):
        return InferenceForm()

    @staticmethod
    @override
    def get_inference_template(form):
        return (read_template(INFERENCE_TEMPLATE), {'form': form})
