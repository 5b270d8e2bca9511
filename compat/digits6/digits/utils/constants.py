"""DIGITS 6 constants plugins compare against (``constants.TRAIN_DB`` ...).

DIGITS 6 names dataset stages ``train_db``, ``val_db`` and ``test_db``;
DIGITS Core names them ``train``, ``val`` and ``test``. The compat base
class hands a DIGITS 6 plugin's ``itemize_entries`` the DIGITS 6 names
(:data:`STAGE_FROM_CORE`), so both ``stage == constants.TRAIN_DB`` and a
literal ``'train_db'`` keep working.
"""

TRAIN_FILE = "train.txt"
TRAIN_DB = "train_db"
VAL_FILE = "val.txt"
VAL_DB = "val_db"
TEST_FILE = "test.txt"
TEST_DB = "test_db"
MEAN_FILE_IMAGE = "mean.jpg"

LABELS_FILE = "labels.txt"
DEFAULT_BATCH_SIZE = 16

#: Userdata key of the colour palette (DIGITS Core reads the same key).
COLOR_PALETTE_ATTRIBUTE = "color_palette"

#: DIGITS Core stage name -> DIGITS 6 stage name.
STAGE_FROM_CORE = {"train": TRAIN_DB, "val": VAL_DB, "test": TEST_DB}
