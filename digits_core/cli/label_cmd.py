"""``digits label``: active learning — pools of unlabelled images, scoring, proposals, rounds, simulation.

Sub-commands: ``pool`` (make a pool of a folder), ``list``, ``show``, ``queue``, ``score``, ``round``,
``accept`` (store a label file as a candidate's next version), ``reject`` and ``simulate``. They call
:mod:`digits_core.labeling`; TensorFlow loads only when a model scores or trains.
"""

from __future__ import annotations

import json
import sys

STRATEGY_CHOICES = ["random", "entropy", "variance", "tta"]
TOP_FRACTION_HELP = (
    "score each candidate by the mean of its F most uncertain share of pixels/voxels (0 < F <= 1; e.g. 0.05: the top "
    "5 %%); default 1: the mean over all"
)


def register(subparsers) -> None:
    """Add the ``label`` command and its sub-commands."""
    parser = subparsers.add_parser(
        "label",
        help="active learning: pools of unlabelled images, uncertainty scoring, proposals, rounds, simulation",
        description="Rank unlabelled images by a model's uncertainty, store its predictions as proposals for "
        "review, retrain on the accepted labels by rounds, or replay rounds on a labelled dataset to choose a "
        "strategy (see docs/active-learning.md).",
    )
    sub = parser.add_subparsers(dest="label_command", metavar="SUBCOMMAND")

    p = sub.add_parser("pool", help="make a pool of the images in a folder or on a PACS (DICOMweb)")
    p.add_argument("folder", nargs="?", help="folder of unlabelled images (searched recursively)")
    p.add_argument("--dicomweb", default=None, metavar="URL", help="or: a DICOMweb server's root (QIDO/WADO/STOW-RS)")
    p.add_argument("--dicomweb-server", default=None, metavar="NAME", help="or: a DICOMweb server the operator named")
    p.add_argument("--study", action="append", default=None, metavar="UID", help="only this study (repeatable)")
    p.add_argument("--series", action="append", default=None, metavar="UID", help="only this image series (repeatable)")
    p.add_argument("--username", default=None, help="DICOMweb basic-auth user (password: DIGITS_DICOMWEB_PASSWORD)")
    p.add_argument(
        "--volumes",
        action="store_true",
        help="one candidate per 3-D volume: a DICOMweb image series, or a folder's D×H×W .npy files",
    )
    p.add_argument("--name", default=None, help="the pool's name (default: the folder's name)")
    p.add_argument("--classes", default=None, metavar="A,B,...", help="class names, index = class id")
    p.add_argument("--modality", default=None, help="the images' modality (e.g. MR), checked against models")
    p.add_argument("--json", action="store_true", help="print the pool as JSON")
    p.set_defaults(handler=run_pool)

    p = sub.add_parser("list", help="list the pools")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=run_list)

    p = sub.add_parser("show", help="a pool's counts per state and its rounds")
    p.add_argument("pool", help="pool job id (or unique prefix)")
    p.add_argument("--json", action="store_true", help="print the whole pool record as JSON")
    p.set_defaults(handler=run_show)

    p = sub.add_parser("queue", help="the review queue: proposed candidates, highest score first")
    p.add_argument("pool", help="pool job id (or unique prefix)")
    p.add_argument("--user", default=None, help="include candidates this reviewer holds")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=run_queue)

    for name, helptext in (
        ("score", "score the pool's candidates with a model (stored per batch; --resume RUN continues one)"),
        ("round", "score, propose the top --count, then retrain from the model on every accepted label"),
    ):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--pool", required=True, metavar="ID", help="pool job id (or unique prefix)")
        p.add_argument("--model", required=True, metavar="ID", help="segmentation model job id (its last snapshot)")
        p.add_argument("--strategy", default="variance", choices=STRATEGY_CHOICES, help="default: variance")
        p.add_argument("--batch-size", type=int, default=16, metavar="N", help="candidates per batch (default 16)")
        p.add_argument("--passes", type=int, default=8, metavar="N", help="MC-dropout passes (default 8)")
        p.add_argument("--top-fraction", type=float, default=1.0, metavar="F", help=TOP_FRACTION_HELP)
        p.add_argument("--seed", type=int, default=0, help="seed of the random strategy")
        p.add_argument("--json", action="store_true", help="print the result as JSON")
        if name == "score":
            p.add_argument("--resume", default=None, metavar="RUN", help="continue this scoring run")
            p.set_defaults(handler=run_score)
        else:
            p.add_argument("--count", type=int, default=10, metavar="N", help="candidates to propose (default 10)")
            p.add_argument("--epochs", type=int, default=5, metavar="N", help="epochs of the retraining (default 5)")
            p.add_argument("--no-retrain", action="store_true", help="score and propose only")
            p.set_defaults(handler=run_round_cmd)

    p = sub.add_parser("accept", help="store a label image (grayscale PNG of class indices) as a candidate's label")
    p.add_argument("--pool", required=True, metavar="ID", help="pool job id (or unique prefix)")
    p.add_argument("--candidate", required=True, metavar="ID", help="candidate id (digits label queue)")
    p.add_argument("--label", required=True, metavar="FILE", help="the label image")
    p.add_argument("--user", default=None, help="the annotator's name")
    p.add_argument("--base-version", type=int, default=None, metavar="N", help="refuse if a newer version exists")
    p.set_defaults(handler=run_accept)

    p = sub.add_parser("reject", help="reject a candidate's proposal (it can be proposed again)")
    p.add_argument("--pool", required=True, metavar="ID", help="pool job id (or unique prefix)")
    p.add_argument("--candidate", required=True, metavar="ID", help="candidate id")
    p.add_argument("--user", default=None, help="the reviewer's name")
    p.set_defaults(handler=run_reject)

    p = sub.add_parser("simulate", help="replay rounds per strategy and seed on a labelled segmentation dataset")
    p.add_argument("--dataset", required=True, metavar="ID", help="segmentation dataset job (train: pool, val: metric)")
    p.add_argument(
        "--strategy", action="append", default=None, choices=STRATEGY_CHOICES, help="repeatable (default: all)"
    )
    p.add_argument("--seeds", default="0,1,2", metavar="A,B,C", help="at least 3 seeds (default 0,1,2)")
    p.add_argument("--initial", type=float, default=0.05, metavar="F", help="labelled share at the start")
    p.add_argument("--step", type=float, default=0.05, metavar="F", help="share labelled per round")
    p.add_argument("--rounds", type=int, default=5, metavar="N", help="rounds (default 5)")
    p.add_argument("--network", default="unet", help="engine network (default unet)")
    p.add_argument(
        "--network-param", action="append", default=[], metavar="KEY=VALUE", help="network parameter (repeatable)"
    )
    p.add_argument("--epochs", type=int, default=20, metavar="N", help="epochs of the initial training")
    p.add_argument("--round-epochs", type=int, default=10, metavar="N", help="epochs of each round's fine-tune")
    p.add_argument("--batch-size", type=int, default=16, metavar="N", help="training batch size")
    p.add_argument("--passes", type=int, default=8, metavar="N", help="MC-dropout passes")
    p.add_argument("--top-fraction", type=float, default=1.0, metavar="F", help=TOP_FRACTION_HELP)
    p.add_argument("--out", default=None, metavar="DIR", help="write simulation.json and simulation.svg here")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(handler=run_simulate)


def _pool(args):
    from ..labeling import load_pool

    return load_pool(args.pool, args.jobs_dir)


def _print_json(data) -> None:
    print(json.dumps(data, indent=2, default=str))


def run_pool(args) -> int:
    """Make a folder or DICOMweb pool and print its id."""
    from pathlib import Path

    from ..labeling import PoolError, create_folder_pool

    classes = [c.strip() for c in args.classes.split(",")] if args.classes else None
    pacs = args.dicomweb or args.dicomweb_server
    if bool(pacs) == bool(args.folder):
        raise PoolError("digits label pool: give a folder, or --dicomweb URL / --dicomweb-server NAME (one of them).")
    if pacs:
        from ..labeling.pacs import create_dicomweb_pool

        pool = create_dicomweb_pool(
            args.name or "pacs pool", url=args.dicomweb, named_server=args.dicomweb_server, studies=args.study,
            series=args.series, modality=args.modality, username=args.username, class_labels=classes,
            plugin="dicomweb-volumes" if args.volumes else None, jobs_dir=args.jobs_dir,
        )  # fmt: skip
    elif args.study or args.series:
        raise PoolError("digits label pool: --study and --series are for a DICOMweb pool (--dicomweb URL).")
    else:
        pool = create_folder_pool(
            args.name or Path(args.folder).name, args.folder, class_labels=classes, modality=args.modality,
            volumes=args.volumes, jobs_dir=args.jobs_dir,
        )  # fmt: skip
    counts = pool.counts()
    listing = pool.record().get("listing") or {}
    if args.json:
        _print_json(
            {"id": pool.id, "path": str(pool.path), "counts": counts, **({"listing": listing} if listing else {})}
        )
    else:
        print(f"pool {pool.id}: {counts['unlabelled']} candidates ({pool.path})")
        for line in listing.get("skipped") or []:
            print(f"left out {line}", file=sys.stderr)
        if "seg_reads" in listing:
            print(f"read the metadata of {listing['seg_reads']} SEG series of DIGITS Core", file=sys.stderr)
    return 0


def run_list(args) -> int:
    """Print the pools."""
    from ..labeling import list_pools

    rows = [{"id": p.id, "name": p.job.name, **p.counts()} for p in list_pools(args.jobs_dir)]
    if args.json:
        _print_json(rows)
        return 0
    for row in rows:
        states = ", ".join(f"{k} {v}" for k, v in row.items() if k not in ("id", "name") and v)
        print(f"{row['id']}  {row['name']}  {states}")
    return 0


def run_show(args) -> int:
    """Print a pool's counts and rounds (or its record)."""
    pool = _pool(args)
    if args.json:
        _print_json({"id": pool.id, "name": pool.job.name, **pool.record()})
        return 0
    print(f"pool {pool.id} ({pool.job.name}): " + ", ".join(f"{k} {v}" for k, v in pool.counts().items()))
    for entry in pool.record().get("rounds", []):
        dice = entry.get("val_dice")
        print(
            f"  round {entry['round']}: {entry['strategy']} with {entry['model_id']}, {len(entry['proposed'])} proposed, "
            f"{entry['labels']} labels" + (f", retrained {entry['new_model_id']} (val Dice {dice:.4f})" if dice else "")
        )
    return 0


def run_queue(args) -> int:
    """Print the review queue."""
    rows = _pool(args).queue(user=args.user)
    if args.json:
        _print_json(rows)
        return 0
    for cand in rows:
        where = cand["source"].get("path") or cand["source"].get("series")
        print(f"{cand['id']}  {cand['score']:.6f}  {cand['state']}  {where}")
    return 0


def _progress(kind: str):
    if not sys.stderr.isatty():
        return None

    def show(info: dict) -> None:
        if info.get("phase", "score") == "score" and "total" in info:
            end = "\n" if info["done"] >= info["total"] else ""
            print(f"\r{kind}: {info['done']}/{info['total']} candidates", end=end, file=sys.stderr)

    return show


def _scoring(strategy: str, top_fraction: float) -> str:
    """The strategy as a result line names it (with its aggregation when that is not the plain mean)."""
    if strategy == "random" or top_fraction >= 1.0:
        return strategy
    return f"{strategy} (mean of the top {top_fraction:g} of each candidate's pixels)"


def run_score(args) -> int:
    """Score a pool and print how many were scored (and which were skipped, with why)."""
    from ..labeling import score_pool

    result = score_pool(
        _pool(args), args.model, args.strategy, batch_size=args.batch_size, passes=args.passes, seed=args.seed,
        top_fraction=args.top_fraction, run=args.resume, jobs_dir=args.jobs_dir, progress=_progress("scoring"),
    )  # fmt: skip
    if args.json:
        _print_json(vars(result))
        return 0
    print(f"scored {result.scored} candidates with {_scoring(result.strategy, result.top_fraction)} (run {result.run})")
    for skipped in result.skipped:
        print(f"skipped {skipped['id']}: {skipped['error']}", file=sys.stderr)
    return 0


def run_round_cmd(args) -> int:
    """Run one round and print what it did."""
    from ..labeling import run_round

    result = run_round(
        args.pool, args.model, strategy=args.strategy, count=args.count, epochs=args.epochs,
        retrain_model=not args.no_retrain, batch_size=args.batch_size, passes=args.passes, seed=args.seed,
        top_fraction=args.top_fraction, jobs_dir=args.jobs_dir, progress=_progress("round"),
    )  # fmt: skip
    if args.json:
        _print_json(result.to_dict())
        return 0
    print(
        f"round {result.round}: scored {result.scored} with {_scoring(result.strategy, result.top_fraction)}, "
        f"proposed {len(result.proposed)} for review"
    )
    for skipped in result.skipped:
        print(f"skipped {skipped['id']}: {skipped['error']}", file=sys.stderr)
    if result.new_model_id:
        dice = f" (val Dice {result.val_dice:.4f})" if result.val_dice is not None else ""
        print(f"retrained on {result.labels} accepted labels: model {result.new_model_id}{dice}")
    else:
        print("no accepted label yet: review the proposals, then run the next round")
    return 0


def run_accept(args) -> int:
    """Store a label file as the candidate's next version."""
    from ..labeling.review import import_label

    entry = import_label(_pool(args), args.candidate, args.label, user=args.user, base_version=args.base_version)
    print(f"candidate {args.candidate}: label version {entry['version']} stored ({entry.get('file')})")
    return 0


def run_reject(args) -> int:
    """Reject a candidate's proposal."""
    from ..labeling import REJECTED

    _pool(args).release(args.candidate, args.user, REJECTED)
    print(f"candidate {args.candidate}: rejected")
    return 0


def run_simulate(args) -> int:
    """Replay rounds, print the table (or JSON) and write the chart."""
    from ..labeling import simulate
    from ..labeling.simulate import DEFAULT_NETWORK_PARAMS, SimulationError, save

    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        raise SimulationError(f'--seeds takes integers separated by commas, not "{args.seeds}".') from None
    params = dict(DEFAULT_NETWORK_PARAMS)
    for item in args.network_param:
        key, _, value = item.partition("=")
        try:
            params[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            params[key.strip()] = value
    result = simulate(
        args.dataset, strategies=args.strategy or STRATEGY_CHOICES, seeds=seeds, initial=args.initial,
        step=args.step, rounds=args.rounds, network=args.network, network_params=params, epochs=args.epochs,
        round_epochs=args.round_epochs, batch_size=args.batch_size, passes=args.passes,
        top_fraction=args.top_fraction, jobs_dir=args.jobs_dir,
        progress=(lambda line: print(line, file=sys.stderr)) if sys.stderr.isatty() else None,
    )  # fmt: skip
    if args.out:
        data, chart = save(result, args.out)
    if args.json:
        _print_json(result.to_dict())
    else:
        print(result.table())
        if args.out:
            print(f"wrote {data} and {chart}")
    return 0
