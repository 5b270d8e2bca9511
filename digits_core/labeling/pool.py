"""An active-learning pool: a job folder of kind ``pool`` listing unlabelled candidates and their state.

A pool is a job-store record (``JOBS_DIR/<id>/job.json``, kind ``"pool"``) whose candidates live in
``pool.json`` beside it, written only here: every change re-reads the file and rewrites it atomically
(temporary file, then rename) under the folder's record lock
(:func:`~digits_core.jobs.lock.record_lock`), so a scoring job, two reviewers and a round that
retrains never lose each other's changes.

``pool.json``::

    {"format": 1,
     "source": {"kind": "folder", "root": "/data/unlabelled"}            # or
               {"kind": "dicomweb", "url": "http://pacs/dicom-web", "studies": [...]},
     "task": "segmentation", "dimensions": 2, "modality": "MR" | null,
     "class_labels": ["background", "lv"],
     "candidates": {"<id>": Candidate, ...},
     "rounds": [{"round": 1, "strategy": "variance", "model_id": ..., "count": 10, "at": ...}, ...]}

A candidate (``Candidate``): ``id`` (stable: a hash of its source, so re-listing a source finds the same
ids), ``source`` (``{"path": "rel/path.png"}`` under the folder root, or ``{"study": UID, "series": UID}``),
``state`` (:data:`STATES`), ``score`` and ``strategy`` (the last scoring), ``proposal`` (where the model's
prediction is: ``{"file": "proposals/<id>.png", "model_id": ..., "at": ...}`` or
``{"study": ..., "series": ..., "sop": ..., "model_id": ..., "at": ...}`` for a DICOM-SEG in the PACS),
``version`` (the newest label version, 0 before any), ``labels`` (every version kept:
``{"version": N, "by": user, "at": time, "file": "labels/<id>/v<N>.png"}`` or with ``series``/``sop``),
``claimed_by``/``claimed_at`` (the reviewer holding it) and ``history`` (``[state, who, when]``, oldest first).

Files: proposals under ``proposals/`` and label versions under ``labels/<candidate id>/`` in the pool's
folder (2-D masks as 8-bit PNG of class indices, volumes as ``.npy``). A label version file is created
exclusively (never replaced), so a stale edit cannot overwrite anything.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import DigitsError
from ..jobs import Job, JobStore
from ..jobs.lock import record_lock
from ..jobs.readers import UnreadableRecordError, read_json_object
from ..jobs.record import write_json_atomic
from ..submit.records import create_job_record
from .masks import encode_mask, read_mask
from .states import ACCEPTED, IN_REVIEW, PROPOSED, REJECTED, STATES, UNLABELLED, record_problem

POOL_FILE = "pool.json"
PROPOSALS_DIR = "proposals"
LABELS_DIR = "labels"
#: The job kind of a pool.
POOL_KIND = "pool"

#: Seconds a claim holds before another reviewer may take the candidate (a reviewer who closed the tab).
CLAIM_SECONDS = 30 * 60


class PoolError(DigitsError):
    """A pool, candidate or label cannot be used as asked (the message names it and what to do)."""


class StaleLabelError(PoolError):
    """A label was saved over a version that is no longer the newest: someone else saved first.

    Attributes:
        candidate: The candidate id.
        expected: The version the editor started from.
        current: The newest version on disk.
        by: Who saved the newest version.
    """

    def __init__(self, candidate: str, expected: int, current: int, by: str | None):
        self.candidate, self.expected, self.current, self.by = candidate, expected, current, by
        super().__init__(
            f"Candidate {candidate}: your edit starts from label version {expected}, but version {current} "
            f"was saved meanwhile by {by or 'someone else'}. Nothing was overwritten; reload the candidate "
            "and apply your changes to the newest version."
        )


class ClaimedError(PoolError):
    """The candidate is in review by another reviewer."""


def candidate_id(source: dict[str, Any]) -> str:
    """The stable id of a candidate: 12 hex digits of a hash of its source (same source, same id)."""
    key = source.get("path") or f"{source.get('study', '')}/{source.get('series', '')}"
    if not source.get("path") and source.get("sop"):  # one image instance of a series (a DICOMweb pool)
        key += f"/{source['sop']}"
    return "c" + hashlib.sha1(str(key).encode("utf-8")).hexdigest()[:12]


def _new_candidate(source: dict[str, Any], now: float) -> dict[str, Any]:
    return {
        "id": candidate_id(source),
        "source": dict(source),
        "state": UNLABELLED,
        "score": None,
        "strategy": None,
        "proposal": None,
        "version": 0,
        "labels": [],
        "claimed_by": None,
        "claimed_at": None,
        "history": [[UNLABELLED, None, now]],
    }


class Pool:
    """One pool job: its ``job.json`` (:attr:`job`) and ``pool.json`` (read fresh by every method).

    Args:
        job: The pool's job (kind ``"pool"``).
    """

    def __init__(self, job: Job):
        if job.kind != POOL_KIND:
            raise PoolError(f'Job "{job.id}" is a {job.kind} job, not a pool; run `digits label list`.')
        self.job = job
        self.path = job.path

    @property
    def id(self) -> str:
        """The pool's job id."""
        return self.job.id

    # -- reading ------------------------------------------------------------------

    def record(self) -> dict[str, Any]:
        """``pool.json`` as it is on disk now.

        Raises:
            PoolError: The file is missing or unreadable (named, with why).
        """
        path = self.path / POOL_FILE
        try:
            record = read_json_object(path)
        except (OSError, UnreadableRecordError) as exc:
            raise PoolError(f"Cannot read the pool record {path}: {exc}") from None
        problem = record_problem(record)
        if problem:
            raise PoolError(f"The pool record {path} is damaged ({problem}); nothing was changed.")
        return record

    def candidates(self, state: str | None = None) -> list[dict[str, Any]]:
        """The candidates (in a stable order: by id), optionally only those in ``state``."""
        found = sorted(self.record()["candidates"].values(), key=lambda c: c["id"])
        return [c for c in found if state is None or c["state"] == state]

    def candidate(self, cid: str) -> dict[str, Any]:
        """One candidate's entry.

        Raises:
            PoolError: No candidate ``cid`` in this pool.
        """
        return _get(self.record(), cid, self.id)

    def queue(self, *, user: str | None = None, now: float | None = None) -> list[dict[str, Any]]:
        """The review queue: proposed candidates, highest score first, then those in review by ``user``
        or whose claim has expired (:data:`CLAIM_SECONDS`); candidates another reviewer holds are left out."""
        now = time.time() if now is None else now
        rows = []
        for cand in self.record()["candidates"].values():
            if cand["state"] == PROPOSED or (
                cand["state"] == IN_REVIEW and (cand["claimed_by"] == user or _claim_expired(cand, now))
            ):
                rows.append(cand)
        return sorted(rows, key=lambda c: (-(c["score"] if c["score"] is not None else float("-inf")), c["id"]))

    def counts(self) -> dict[str, int]:
        """Candidates per state (every state present, 0 when none)."""
        counts = dict.fromkeys(STATES, 0)
        for cand in self.record()["candidates"].values():
            counts[cand["state"]] = counts.get(cand["state"], 0) + 1
        return counts

    def file(self, relative: str) -> Path:
        """A file of the pool folder named in the record (a proposal or label file), confined to the folder.

        Raises:
            PoolError: The name leaves the pool folder.
        """
        path = (self.path / relative).resolve()
        if not path.is_relative_to(self.path.resolve()):
            raise PoolError(f'Pool {self.id}: "{relative}" is not a file of the pool folder.')
        return path

    def label_file(self, cid: str, version: int | None = None) -> Path | None:
        """The file of a candidate's label version (the newest by default), or ``None`` when it has none in files."""
        cand = self.candidate(cid)
        entries = [e for e in cand["labels"] if version is None or e["version"] == version]
        if not entries or not entries[-1].get("file"):
            return None
        return self.file(entries[-1]["file"])

    def accepted(self) -> list[dict[str, Any]]:
        """The accepted candidates (each with its newest label entry as ``label``)."""
        return [{**c, "label": c["labels"][-1]} for c in self.candidates(ACCEPTED) if c["labels"]]

    # -- the writer: re-read, change, rewrite under the record lock ----------------------

    @contextmanager
    def changing(self) -> Iterator[dict[str, Any]]:
        """Hold the record lock around a change of ``pool.json``: yields the fresh record, rewritten on exit.

        Nothing is written when the block raises. Keep the block short (no network, no model).
        """
        with record_lock(self.path):
            record = self.record()
            yield record
            write_json_atomic(self.path / POOL_FILE, record)

    def add_candidates(self, sources: Iterable[dict[str, Any]]) -> int:
        """Add candidates for these sources (ones already listed are kept as they are). Returns how many were new."""
        now = time.time()
        with self.changing() as record:
            before = len(record["candidates"])
            for source in sources:
                cand = _new_candidate(source, now)
                record["candidates"].setdefault(cand["id"], cand)
            return len(record["candidates"]) - before

    def record_scores(
        self, scores: dict[str, float], strategy: str, *, run: str | None = None, model_id: str | None = None
    ) -> None:
        """Store a scoring's results (candidate id -> score), marked with the run that scored them."""
        with self.changing() as record:
            for cid, score in scores.items():
                cand = _get(record, cid, self.id)
                cand.update(score=float(score), strategy=strategy, scored_in=run, scored_by=model_id)
                cand.pop("error", None)

    def record_errors(self, errors: dict[str, str]) -> None:
        """Note why candidates could not be read (``error``; cleared when one is scored again)."""
        with self.changing() as record:
            for cid, message in errors.items():
                _get(record, cid, self.id)["error"] = str(message)[:500]

    def record_proposal(self, cid: str, proposal: dict[str, Any], *, user: str | None = None) -> None:
        """Record where a candidate's proposal is and move it to ``proposed`` (from unlabelled or rejected).

        A candidate in review or accepted keeps its state (a newer proposal is stored beside it).
        """
        with self.changing() as record:
            cand = _get(record, cid, self.id)
            cand["proposal"] = {**proposal, "at": time.time()}
            if cand["state"] in (UNLABELLED, REJECTED, PROPOSED):
                _move(cand, PROPOSED, user)

    def claim(self, cid: str, user: str, *, now: float | None = None) -> dict[str, Any]:
        """Take a candidate for review (state ``in review``, ``claimed_by`` = ``user``). Returns the candidate.

        Raises:
            ClaimedError: Another reviewer holds it (and the claim has not expired).
            PoolError: It is not proposed, in review or accepted (nothing to review yet).
        """
        now = time.time() if now is None else now
        with self.changing() as record:
            cand = _get(record, cid, self.id)
            if cand["state"] == IN_REVIEW and cand["claimed_by"] not in (None, user) and not _claim_expired(cand, now):
                raise ClaimedError(
                    f"Candidate {cid} is in review by {cand['claimed_by']}; take the next one in the queue."
                )
            if cand["state"] not in (PROPOSED, IN_REVIEW, ACCEPTED):
                raise PoolError(f"Candidate {cid} is {cand['state']}: score and propose it first (digits label round).")
            cand["claimed_by"], cand["claimed_at"] = user, now
            if cand["state"] != IN_REVIEW:
                _move(cand, IN_REVIEW, user, now)
            return dict(cand)

    def release(self, cid: str, user: str | None, state: str = PROPOSED) -> dict[str, Any]:
        """End a review without a label: ``proposed`` (skip) or ``rejected`` (reject). Returns the candidate.

        Raises:
            ClaimedError: Another reviewer holds it.
            PoolError: ``state`` is not proposed or rejected.
        """
        if state not in (PROPOSED, REJECTED):
            raise PoolError(f'A review ends as "{PROPOSED}" (skip) or "{REJECTED}" (reject), not "{state}".')
        with self.changing() as record:
            cand = _get(record, cid, self.id)
            _check_holder(cand, user)
            cand["claimed_by"] = cand["claimed_at"] = None
            if cand["state"] != ACCEPTED or state == REJECTED:
                _move(cand, state, user)
            return dict(cand)

    def store_label(
        self,
        cid: str,
        mask: Any,
        *,
        user: str | None,
        base_version: int,
        writer: Callable[[int], dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Store a new label version of a candidate and accept it (optimistic version check).

        Args:
            cid: The candidate.
            mask: The label (numpy array of class indices: H×W, or D×H×W), written as
                ``labels/<cid>/v<N>.png`` (``.npy`` for volumes) unless ``writer`` stores it elsewhere.
            user: The annotator (from the login; ``None`` from the command line).
            base_version: The version the edit started from (``candidate["version"]`` when it was loaded).
            writer: Stores version N elsewhere (e.g. a DICOM-SEG to the PACS) and returns its location
                (``{"study":..., "series":..., "sop":...}``); called after the version check.

        Returns:
            The new label entry (``version``, ``by``, ``at``, ``file`` or the writer's keys).

        Raises:
            StaleLabelError: ``base_version`` is not the newest version (nothing is written or overwritten).
            ClaimedError: Another reviewer holds the candidate.
        """
        with self.changing() as record:
            cand = _get(record, cid, self.id)
            current = int(cand["version"])
            if int(base_version) != current:
                by = cand["labels"][-1]["by"] if cand["labels"] else None
                raise StaleLabelError(cid, int(base_version), current, by)
            _check_holder(cand, user)
            version = current + 1
            location = writer(version) if writer is not None else self._write_label_file(cid, version, mask)
            entry = {"version": version, "by": user, "at": time.time(), **location}
            cand["labels"].append(entry)
            cand["version"] = version
            cand["claimed_by"] = cand["claimed_at"] = None
            _move(cand, ACCEPTED, user)
            return entry

    def add_round(self, info: dict[str, Any]) -> int:
        """Append a round's summary to ``rounds`` and return its number (1 for the first)."""
        with self.changing() as record:
            rounds = record.setdefault("rounds", [])
            number = len(rounds) + 1
            rounds.append({"round": number, "at": time.time(), **info})
            return number

    def update_round(self, number: int, **fields: Any) -> None:
        """Set keys of round ``number`` (its results once training ended)."""
        with self.changing() as record:
            for entry in record.get("rounds", []):
                if entry["round"] == number:
                    entry.update(fields)

    def _write_label_file(self, cid: str, version: int, mask: Any) -> dict[str, Any]:
        import numpy as np

        array = np.asarray(mask)
        folder = self.path / LABELS_DIR / cid
        folder.mkdir(parents=True, exist_ok=True)
        name = f"v{version}.png" if array.ndim == 2 else f"v{version}.npy"
        data = encode_mask(array)
        target = folder / name
        try:  # exclusive: a version file is never replaced
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            raise StaleLabelError(cid, version - 1, version, None) from None
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        return {"file": f"{LABELS_DIR}/{cid}/{name}"}


def _get(record: dict[str, Any], cid: str, pool_id: str) -> dict[str, Any]:
    cand = record["candidates"].get(cid) if isinstance(cid, str) else None
    if cand is None:
        raise PoolError(f'Pool {pool_id} has no candidate "{str(cid)[:40]}"; list them with `digits label queue`.')
    return cand


def _move(cand: dict[str, Any], state: str, user: str | None, now: float | None = None) -> None:
    cand["state"] = state
    cand["history"].append([state, user, time.time() if now is None else now])


def _claim_expired(cand: dict[str, Any], now: float) -> bool:
    return cand["claimed_at"] is None or now - float(cand["claimed_at"]) > CLAIM_SECONDS


def _check_holder(cand: dict[str, Any], user: str | None) -> None:
    holder = cand.get("claimed_by")
    if cand["state"] == IN_REVIEW and holder not in (None, user) and not _claim_expired(cand, time.time()):
        raise ClaimedError(f"Candidate {cand['id']} is in review by {holder}; nothing was stored.")


def create_pool(
    name: str,
    source: dict[str, Any],
    candidates: Iterable[dict[str, Any]],
    *,
    task: str = "segmentation",
    dimensions: int = 2,
    modality: str | None = None,
    class_labels: list[str] | None = None,
    listing: dict[str, Any] | None = None,
    jobs_dir: Any = None,
) -> Pool:
    """Create a pool job with these candidate sources (status Done: a pool is ready once listed).

    Args:
        name: The pool's name.
        source: Where the candidates come from (``{"kind": "folder", "root": ...}`` or ``{"kind": "dicomweb", ...}``).
        candidates: One source entry per candidate (``{"path": ...}`` relative to the root, or
            ``{"study": ..., "series": ...}``).
        task: The models' task (``"segmentation"``).
        dimensions: 2 (images) or 3 (volumes).
        modality: The modality (DICOM Modality, e.g. ``"MR"``), checked against a model's dataset.
        class_labels: The class names (index = class id).
        listing: What listing the source found besides the candidates (kept as the record's ``listing``:
            a DICOMweb pool's series left out and why, the SEG metadata reads).
        jobs_dir: The jobs folder.

    Raises:
        PoolError: No candidate.
    """
    now = time.time()
    listed: dict[str, dict[str, Any]] = {}
    for src in candidates:
        cand = _new_candidate(src, now)
        listed.setdefault(cand["id"], cand)
    if not listed:
        raise PoolError(f"The pool source {_describe(source)} holds no candidate image; nothing was created.")
    summary = {"source": source, "task": task, "dimensions": dimensions, "modality": modality}
    job = create_job_record(POOL_KIND, name, jobs_dir=jobs_dir, pool=summary)
    try:
        record = {
            "format": 1,
            **summary,
            "class_labels": list(class_labels or []),
            **({"listing": dict(listing)} if listing else {}),
            "candidates": listed,
            "rounds": [],
        }
        (job.path / PROPOSALS_DIR).mkdir()
        (job.path / LABELS_DIR).mkdir()
        with record_lock(job.path):
            write_json_atomic(job.path / POOL_FILE, record)
        job.finish("Done")
    except BaseException:
        shutil.rmtree(job.path, ignore_errors=True)
        raise
    return Pool(job)


def _describe(source: dict[str, Any]) -> str:
    if source.get("kind") == "folder":
        return f"folder {source.get('root')}"
    return f"DICOMweb {source.get('url')}"


def load_pool(pool_id: str, jobs_dir: Any = None) -> Pool:
    """The pool with this id (a unique prefix works).

    Raises:
        JobNotFoundError: No such job (a :class:`~digits_core.errors.DigitsError`).
        PoolError: The job is not a pool.
    """
    return Pool(JobStore(jobs_dir).get(pool_id))


def list_pools(jobs_dir: Any = None) -> list[Pool]:
    """Every readable pool in the jobs folder, newest first."""
    pools = []
    for job in JobStore(jobs_dir).list(POOL_KIND):
        if (job.path / POOL_FILE).is_file():
            pools.append(Pool(job))
    return pools


__all__ = [
    "ACCEPTED",
    "CLAIM_SECONDS",
    "IN_REVIEW",
    "LABELS_DIR",
    "POOL_FILE",
    "POOL_KIND",
    "PROPOSALS_DIR",
    "PROPOSED",
    "REJECTED",
    "STATES",
    "UNLABELLED",
    "ClaimedError",
    "Pool",
    "PoolError",
    "StaleLabelError",
    "candidate_id",
    "create_pool",
    "encode_mask",
    "list_pools",
    "load_pool",
    "read_mask",
]
