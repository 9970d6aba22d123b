"""The arguments of every command and their validation (argparse types): one-line usage errors."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from streambayes.config import Settings
from streambayes.errors import UsageError

PROG = "streambayes"
# replay's largest mini-batch while every model predicts per event (= runtime.loops.replay.
# DEFAULT_BATCH_SIZE); while some model predicts by mini-batch, 8 (replay.BATCH_PATH_SIZE)
REPLAY_BATCH_SIZE = 256


def _positive_int(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def _count(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _partition_list(text: str) -> tuple[int, ...]:
    try:
        parts = tuple(int(p) for p in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected partitions like 0,1,2, got {text!r}") from None
    if any(p < 0 for p in parts) or len(set(parts)) != len(parts):
        raise argparse.ArgumentTypeError(f"expected distinct partitions >= 0, got {text!r}")
    return parts


def _dir_list(text: str) -> tuple[Path | str, ...]:
    from streambayes.runtime.stores import location, split_locations

    dirs = tuple(location(d) for d in split_locations(text))
    if not dirs:
        raise argparse.ArgumentTypeError(f"expected DIR[,DIR...], got {text!r}")
    return dirs


def _store(text: str) -> Path | str:
    """``--snapshots``: a directory, or a kafka:// or s3:// store URI (another scheme: exit 2)."""
    from streambayes.runtime.stores import location

    return location(text)


def _loss_mapping(text: str) -> dict:
    """``--loss``: a JSON object ``{"decided": {"truth": cost}}``, inline or in a file."""
    source = text
    path = Path(text)
    if not text.lstrip().startswith("{") and path.is_file():
        source = path.read_text(encoding="utf-8")
    try:
        mapping = json.loads(source)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"expected a JSON object or a JSON file, got {text!r} "
                                         f"({exc.msg})") from None
    if not isinstance(mapping, dict) or not all(isinstance(v, dict) for v in mapping.values()):
        raise argparse.ArgumentTypeError('expected {"decided class": {"true class": cost, ...}, ...}')
    return mapping


def _loss_matrix(args: argparse.Namespace, settings: Settings):
    """The LossMatrix of ``--loss``/``--reject``, else of ``STREAMBAYES_LOSS``/``_REJECT`` (or None)."""
    from streambayes.decide import LossMatrix
    from streambayes.errors import ModelError

    loss = args.loss if args.loss is not None else settings.loss
    reject = args.reject if args.reject is not None else settings.reject
    if loss is None and reject is None:
        return None
    if loss is None:
        raise UsageError("--reject needs --loss (the costs of the decisions it is weighed against)")
    try:
        return LossMatrix.from_mapping(loss, reject=reject)
    except ModelError as exc:
        raise UsageError(f"--loss: {exc}") from None


def _add_decision_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--loss", type=_loss_mapping, metavar="JSON|FILE",
                   help='loss matrix {"decided": {"truth": cost}} (missing: 0 on the diagonal, '
                        '1 off it); decisions minimise the expected cost')
    p.add_argument("--reject", type=float, metavar="COST",
                   help="cost of answering 'unsure' (the reject option; needs --loss)")


def _megabytes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of MiB, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of MiB, got {text!r}")
    return value


def _add_per_key_bounds(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-resident", type=_positive_int, metavar="N",
                   help="per-key: live models at most (least recently used spill to disk and come "
                        "back on demand; default: STREAMBAYES_MAX_RESIDENT, 10000)")
    p.add_argument("--max-resident-mb", type=_megabytes, metavar="M",
                   help="per-key: MiB of live models at most (default: STREAMBAYES_MAX_RESIDENT_MB, "
                        "1024)")


def _per_key_bounds(args: argparse.Namespace, settings: Settings) -> dict[str, int]:
    """``--max-resident``/``--max-resident-mb`` over the settings, and ``STREAMBAYES_MAX_KEYS``."""
    count = args.max_resident if args.max_resident is not None else settings.max_resident
    mib = args.max_resident_mb if args.max_resident_mb is not None else settings.max_resident_mb
    return {"max_resident": count, "max_resident_bytes": max(1, int(mib * 2**20)),
            "max_keys": settings.max_keys}


def _model_list(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(","))
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected NAME[,NAME...], got {text!r}")
    return names


def _add_record_arguments(p: argparse.ArgumentParser, label: bool = True) -> None:
    p.add_argument("--format", choices=("jsonl", "tsv", "csv"),
                   help="record format (default: from the file name; jsonl for Kafka)")
    if label:
        p.add_argument("--label-field", default="label", metavar="F",
                       help="label column/field (default: label)")
    p.add_argument("--text-field", metavar="F", help="text column/field")
    p.add_argument("--key-field", metavar="F", help="key column/field")


def _add_service_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metrics-port", type=_count, metavar="PORT",
                   help="serve Prometheus metrics on http://0.0.0.0:PORT/metrics (events/s, lag per "
                        "partition, dead letters by reason, latency, snapshot age; 0: any free port)")
    p.add_argument("--progress-seconds", type=_seconds, default=10.0, metavar="T",
                   help="log a progress line (counts, rate, lag) every T seconds (default: 10)")


def _add_learn_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source", required=True, metavar="URI",
                   help="labelled events: a JSONL/TSV/CSV file or kafka://HOST:PORT/TOPIC")
    p.add_argument("--snapshots", required=True, type=_store, metavar="DIR|URI",
                   help="snapshot directory, kafka://HOST:PORT/TOPIC or s3://BUCKET/PREFIX "
                        "(restored on start, written every N events / T s)")
    p.add_argument("--model", metavar="NAME",
                   help="model to learn (default: the snapshot's, else nb)")
    p.add_argument("--every", type=_positive_int, default=10_000, metavar="N",
                   help="snapshot every N records (default: 10000)")
    p.add_argument("--every-seconds", type=_seconds, default=60.0, metavar="T",
                   help="and at least every T seconds while records arrive (default: 60)")
    p.add_argument("--dead-letter", metavar="URI",
                   help="bad records: a JSONL file or kafka://HOST:PORT/TOPIC (default: logged)")
    p.add_argument("--partitions", type=_partition_list, metavar="0,1,...",
                   help="Kafka partitions this learner owns, assigned statically (default: "
                   "join the consumer group, one state shard per partition it is given)")
    p.add_argument("--batch-size", type=_positive_int, default=1000, metavar="N",
                   help="records per mini-batch (default: 1000)")
    p.add_argument("--follow", action="store_true", help="with a file: wait for appended lines")
    p.add_argument("--keep", type=_positive_int, default=5, metavar="K",
                   help="snapshots kept (default: 5)")
    p.add_argument("--network", type=Path, metavar="FILE.bif", help="Bayesian network for bn")
    p.add_argument("--per-key", action="store_true",
                   help="one model per event key (user), backed off to a global model")
    p.add_argument("--new-source", action="store_true",
                   help="continue a snapshot learned from another source (default: refuse)")
    p.add_argument("--no-calibration", action="store_true",
                   help="do not fit the calibration exponent the predictor serves with")
    p.add_argument("--exactly-once", action="store_true",
                   help="each checkpoint's dead letters and snapshot in one Kafka transaction: one "
                        "committed letter per bad record (a kafka:// store; --dead-letter a topic)")
    _add_per_key_bounds(p)
    _add_bound_arguments(p)
    _add_record_arguments(p)
    _add_service_arguments(p)


def _add_predict_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--source", required=True, metavar="URI",
                   help="unlabelled events: a JSONL/TSV/CSV file or kafka://HOST:PORT/TOPIC")
    p.add_argument("--sink", required=True, metavar="URI",
                   help="posteriors: a JSONL file or kafka://HOST:PORT/TOPIC")
    p.add_argument("--snapshots", required=True, type=_dir_list, metavar="DIR|URI[,...]",
                   help="snapshot directory, kafka://HOST:PORT/TOPIC or s3://BUCKET/PREFIX; "
                        "several shards are merged")
    p.add_argument("--dead-letter", metavar="URI", help="bad records: a JSONL file or Kafka topic")
    p.add_argument("--batch-size", type=_positive_int, default=500, metavar="N",
                   help="events per micro-batch (default: 500)")
    p.add_argument("--clues", type=_count, default=5, metavar="K",
                   help="top-K features per posterior (default: 5; 0: none)")
    p.add_argument("--reload-seconds", type=_seconds, default=1.0, metavar="T",
                   help="look for a newer snapshot every T seconds (default: 1)")
    p.add_argument("--follow", action="store_true", help="with a file: wait for appended lines")
    p.add_argument("--raw", action="store_true",
                   help="serve the model's raw posteriors, not the snapshot's calibrated ones")
    _add_decision_arguments(p)
    p.add_argument("--per-key", action="store_true",
                   help="the snapshots must hold a per-key model (learned with 'learn --per-key')")
    _add_per_key_bounds(p)
    _add_record_arguments(p)
    p.add_argument("--exactly-once", action="store_true",
                   help="one Kafka transaction per micro-batch: exactly one committed posterior "
                        "per input for read_committed readers (Kafka source and sinks)")
    p.add_argument("--transactional-id", metavar="ID",
                   help="with --exactly-once: this instance's id, stable across its restarts "
                        "(default: streambayes-predict-<group>-<hostname>)")
    _add_service_arguments(p)


def _add_rank_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", metavar="FILE|URI",
                   help="unlabelled articles: a JSONL/TSV/CSV file or kafka://HOST:PORT/TOPIC?from=&to=")
    p.add_argument("--snapshots", required=True, type=_dir_list, metavar="DIR[,DIR...]",
                   help="snapshots of a per-key model (learn --per-key); several shards are merged")
    p.add_argument("--key", metavar="READER[,READER...]",
                   help="rank every article for these readers (default: each article's own key)")
    p.add_argument("--top", type=_positive_int, metavar="N", help="the first N of each list")
    p.add_argument("--clues", type=_count, default=5, metavar="K",
                   help="top-K clues per ranked article (default: 5; 0: none)")
    p.add_argument("--limit", type=_count, metavar="N", help="rank the first N articles only")
    p.add_argument("--out", metavar="URI", help="a JSONL file or kafka://HOST:PORT/TOPIC "
                                                "(default: standard output)")
    p.add_argument("--dead-letter", metavar="URI", help="bad records: a JSONL file or Kafka topic")
    _add_per_key_bounds(p)
    _add_record_arguments(p)


def _add_produce_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", type=Path, metavar="FILE", help="a JSONL, TSV or CSV file")
    p.add_argument("--to", required=True, metavar="URI", help="kafka://HOST:PORT/TOPIC (or a file)")
    p.add_argument("--limit", type=_count, metavar="N", help="send the first N records only")
    p.add_argument("--partitions", type=_positive_int, metavar="N",
                   help="create the topic with N partitions if it does not exist")
    p.add_argument("--no-label", action="store_true",
                   help="drop labels (an unlabelled stream for predict)")
    _add_record_arguments(p)


def _add_snapshot_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    ls = sub.add_parser("ls", help="list the snapshots of a directory")
    ls.add_argument("dir", type=_store, metavar="DIR|URI")
    show = sub.add_parser("show", help="print the newest good snapshot's header as JSON")
    show.add_argument("dir", type=_store, metavar="DIR|URI")
    show.add_argument("--id", metavar="ID", help="a given snapshot instead of the newest")
    merge = sub.add_parser("merge", help="merge the newest snapshots of shard directories")
    merge.add_argument("dirs", type=_store, nargs="+", metavar="DIR|URI")
    merge.add_argument("--to", required=True, type=_store, metavar="DIR|URI",
                       help="directory to write the merged snapshot to")


def _add_bound_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-classes", type=_positive_int, metavar="N",
                   help="classes per model (default: STREAMBAYES_MAX_CLASSES, else 1000); an event "
                        "with one more label is a dead letter 'limit'")
    p.add_argument("--max-fields", type=_positive_int, metavar="N",
                   help="categorical + numeric field names per model (default: "
                        "STREAMBAYES_MAX_FIELDS, else 10000; 100 for aode/spode/tan/kdb); past "
                        "it: dead letter 'limit'")
    p.add_argument("--max-values", type=_positive_int, metavar="N",
                   help="values per categorical field (default: STREAMBAYES_MAX_VALUES, else "
                        "100000; 1000 for aode/spode/tan/kdb); past it: dead letter 'limit'")


def _bounds(args: argparse.Namespace, settings: Settings) -> dict[str, int]:
    """The bounds set on the command line, else in the settings (unset: the model's default)."""
    out = {}
    for name in ("max_classes", "max_fields", "max_values"):
        value = getattr(args, name, None)
        value = value if value is not None else getattr(settings, name)
        if value is not None:
            out[name] = value
    return out


def _add_replay_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", metavar="SOURCE",
                   help="a JSONL, TSV or CSV file, or kafka://HOST:PORT/TOPIC?from=...&to=...")
    p.add_argument("--model", type=_model_list, default=("nb",), metavar="NAME[,NAME...]",
                   help="models to evaluate side by side (default: nb)")
    p.add_argument("--format", choices=("jsonl", "tsv", "csv"),
                   help="input format (default: from the file name; no extension = tsv)")
    p.add_argument("--label-field", default="label", metavar="F",
                   help="label column/field (default: label)")
    p.add_argument("--text-field", metavar="F", help="text column/field")
    p.add_argument("--key-field", metavar="F", help="key column/field")
    p.add_argument("--limit", type=_count, metavar="N", help="stop after N records")
    p.add_argument("--batch-size", type=_positive_int, default=None, metavar="N",
                   help="largest mini-batch; batches grow 1, 2, 4, ... up to N. Prequential per event: "
                        "nb (on text), mnb and cnb on plain counts predict every event with the model of "
                        "all events before it, whatever N (N changes speed only); other models predict a "
                        "mini-batch with the model of its start, then learn it (default N: "
                        f"{REPLAY_BATCH_SIZE}, or 8 while such a model runs: close to per-event scores)")
    p.add_argument("--positive", metavar="LABEL",
                   help="positive class for ROC AUC (default: the larger of two labels)")
    p.add_argument("--dead-letter", type=Path, metavar="PATH",
                   help="JSONL file for bad records (default: DIR/dead_letters.jsonl with "
                        "--report, else ./streambayes-dead-letters.jsonl; written only if any)")
    p.add_argument("--report", type=Path, metavar="DIR",
                   help="write DIR/metrics.json and DIR/learning_curves.png")
    p.add_argument("--network", type=Path, metavar="FILE.bif",
                   help="Bayesian network for --model bn (its class variable is the label field)")
    _add_decision_arguments(p)
    p.add_argument("--per-key", action="store_true",
                   help="one model per event key (user), backed off to a global model; reports "
                        "precision of each key's top 10%% and NDCG")
    p.add_argument("--label-delay", type=_count, metavar="N",
                   help="labels arrive N events after their event (as spam reports do); adds "
                        "sliding-window and fading accuracy and ADWIN drift points")
    _add_per_key_bounds(p)
    _add_bound_arguments(p)

