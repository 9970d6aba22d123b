"""Spam filtering quality on real mail and SMS: streambayes next to River and Bogofilter, one run.

Each stream is read in file order, prequentially (every message is scored before it is learned):

  sms      the SMS Spam Collection (5,574 messages, TSV)
  enron    enron1-3 as handed over (gzip JSONL, no ids; 16,541 mails of ~1,500 characters)

Contestants:

  sb-replay   ``streambayes replay FILE`` as a user runs it: the default model (``nb``) and default
              batching (mini-batches growing 1, 2, 4, ... to 256, each event predicted by the
              model of all events before it). Log loss raw, and with the calibration exponent
              fitted prequentially (what ``predict`` serves)
  sb-event    streambayes ``nb`` per event (``predict_proba_one`` then ``learn_one``), raw and with
              a prequential calibrator
  river       River ``BagOfWords() | MultinomialNB()`` per event (River's own tokenizer)
  bogofilter  Debian's ``bogofilter`` (C), prequential in chunks of 256: ``-T`` scores a chunk,
              then ``-s``/``-n`` registers it; the spamicity is P(spam)

  variants   issue 11's options as rows of their own (``VARIANT_ROWS``): ``alpha=1`` (the default
              before ``alpha="auto"``), other replay batch sizes, ``tf="log"``,
              ``min_token_length=2`` and a streaming TWCNB (``cnb`` with TF, smooth IDF and L2)

Log loss clips probabilities to [1e-15, 1 - 1e-15] for every contestant (a 0 or 1 from a filter
that is wrong would be infinite). Events/s include tokenizing; Bogofilter's include writing each
message to a file (its bulk interface reads files). Targets (issue 11): SMS per event accuracy >=
River and log loss <= 0.8x River; enron default replay accuracy >= River, log loss <= Bogofilter,
events/s >= 10x River.

    python bench/mail_quality.py                  # both streams, every contestant
    python bench/mail_quality.py --streams enron --only sb-replay,river
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import data_path, fmt, package_version, print_table

CLIP = 1e-15
CONTESTANTS = ("sb-replay", "sb-event", "river", "bogofilter")


def load(stream: str) -> tuple[Path, list[str], list[str]]:
    """(file as handed over, texts, labels) in file order."""
    if stream == "sms":
        path = data_path("sms_spam_collection", "SMSSpamCollection")
        rows = [line.split("\t", 1) for line in path.read_text(encoding="utf-8").splitlines() if line]
        return path, [t for _, t in rows], [y for y, _ in rows]
    path = data_path("enron_spam_dev", "enron1-3.jsonl.gz")
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        mails = [json.loads(line) for line in fh]
    return path, [m["text"] for m in mails], [m["label"] for m in mails]


def scores(p_true: list[float], right: list[bool], seconds: float) -> dict:
    p = np.clip(np.asarray(p_true, dtype=np.float64), CLIP, 1 - CLIP)
    return {"accuracy": float(np.mean(right)), "log_loss": float(-np.log(p).mean()),
            "events_per_s": len(p) / seconds}


def run_sb_replay(path: Path, texts: list[str], labels: list[str], name: str = "nb",
                  params: dict | None = None, batch_size: int | None = None) -> dict:
    from streambayes.models import make_model
    from streambayes.runtime.loops.replay import build_models, replay
    from streambayes.runtime.records.decode import Decoder
    from streambayes.runtime.records.sinks import MemorySink
    from streambayes.runtime.records.sources import FileSource

    with FileSource(path) as source:
        decoder = Decoder(source.format, header=source.header)
        start = time.perf_counter()
        models = build_models([name]) if params is None else {name: make_model(name, **params)}
        result = replay(source, decoder, models, MemorySink(), topic=str(path),
                        batch_size=batch_size)
        seconds = time.perf_counter() - start
    m = result.run.summary()[name]
    return {"accuracy": m["accuracy"], "log_loss": m["log_loss"],
            "log_loss_calibrated": m.get("log_loss_calibrated"), "events_per_s": m["events"] / seconds}


def run_sb_event(path: Path, texts: list[str], labels: list[str], name: str = "nb",
                 params: dict | None = None) -> dict:
    from streambayes.evaluate.calibration import OnlineCalibrator
    from streambayes.models import make_model

    params = params or {}
    model, cal = make_model(name, **params), OnlineCalibrator()
    p_raw, p_cal, right = [], [], []
    start = time.perf_counter()
    for text, y in zip(texts, labels, strict=True):
        x = {"text": text}
        proba = model.predict_proba_one(x)
        p_raw.append(proba.get(y, 0.0))
        right.append(bool(proba) and max(proba, key=proba.get) == y)
        model.learn_one(x, y)
    seconds = time.perf_counter() - start
    # the calibrated figure, apart (untimed): replay the same predictions through a calibrator
    model = make_model(name, **params)
    for text, y in zip(texts, labels, strict=True):
        x = {"text": text}
        classes = list(model.classes)
        if len(classes) >= 2 and y in classes:
            row = np.log(np.maximum([model.predict_proba_one(x)[c] for c in classes], 1e-320))
            p_cal.append(float(np.exp(cal.transform(row[None, :])[0, classes.index(y)])))
            if np.isfinite(row).all():
                cal.update(row[None, :], np.array([classes.index(y)]))
        else:
            p_cal.append(model.predict_proba_one(x).get(y, 0.0) if classes else 0.5)
        model.learn_one(x, y)
    out = scores(p_raw, right, seconds)
    out["log_loss_calibrated"] = float(-np.log(np.clip(p_cal, CLIP, 1 - CLIP)).mean())
    return out


def run_river(path: Path, texts: list[str], labels: list[str]) -> dict:
    from river import feature_extraction, naive_bayes

    model = feature_extraction.BagOfWords() | naive_bayes.MultinomialNB()
    p_true, right = [], []
    start = time.perf_counter()
    for text, y in zip(texts, labels, strict=True):
        proba = model.predict_proba_one(text)
        p_true.append(proba.get(y, 0.0) if proba else 0.5)
        right.append(bool(proba) and max(proba, key=proba.get) == y)
        model.learn_one(text, y)
    return scores(p_true, right, time.perf_counter() - start)


def run_bogofilter(path: Path, texts: list[str], labels: list[str], chunk: int = 256) -> dict:
    exe = shutil.which("bogofilter")
    if exe is None:
        return {"note": "bogofilter not installed (apt-get install bogofilter)"}
    p_true, right = [], []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        start = time.perf_counter()
        for lo in range(0, len(texts), chunk):
            files = []
            for i in range(lo, min(lo + chunk, len(texts))):
                f = work / f"m{i}.txt"
                body = texts[i] if texts[i].startswith("Subject:") else "Subject: \n\n" + texts[i]
                f.write_text(body, encoding="utf-8", errors="replace")
                files.append(f)
            out = subprocess.run([exe, "-d", str(work / "db"), "-T", "-B", *map(str, files)],
                                 capture_output=True, text=True).stdout.splitlines()
            spamicity = {line.split()[0]: float(line.split()[-1]) for line in out if line.strip()}
            for i, f in zip(range(lo, lo + len(files)), files, strict=True):
                s = spamicity.get(str(f), 0.5)
                p_true.append(s if labels[i] == "spam" else 1 - s)
                right.append((s > 0.5) == (labels[i] == "spam"))
            for flag, label in (("-s", "spam"), ("-n", "ham")):
                mine = [str(f) for i, f in zip(range(lo, lo + len(files)), files, strict=True)
                        if labels[i] == label]
                if mine:
                    subprocess.run([exe, "-d", str(work / "db"), flag, "-B", *mine], check=True)
            for f in files:
                f.unlink()
        seconds = time.perf_counter() - start
    return scores(p_true, right, seconds)


RUNNERS = {"sb-replay": run_sb_replay, "sb-event": run_sb_event, "river": run_river,
           "bogofilter": run_bogofilter}
# issue 11's options, as rows of their own: (runner, model, parameters[, replay batch size])
AUTO = {"alpha": "auto"}  # the default of nb, mnb and cnb; rows with alpha=1 show the old default
VARIANT_ROWS = {
    "sb-replay alpha=1": ("sb-replay", "nb", {"alpha": 1.0}),
    "sb-replay batch 256": ("sb-replay", "nb", AUTO, 256),
    "sb-replay batch 64": ("sb-replay", "nb", AUTO, 64),
    "sb-replay batch 16": ("sb-replay", "nb", AUTO, 16),
    "sb-replay tf=log": ("sb-replay", "nb", {**AUTO, "tf": "log"}),
    "sb-replay min_token_length=2": ("sb-replay", "nb", {**AUTO, "min_token_length": 2}),
    "sb-replay TWCNB": ("sb-replay", "cnb", {"norm": True, "tf": "log", "idf": "smooth",
                                             "length_norm": "l2"}),
    "sb-event alpha=1": ("sb-event", "nb", {"alpha": 1.0}),
    "sb-event tf=log": ("sb-event", "nb", {**AUTO, "tf": "log"}),
}
for _label, (_runner, _name, _params, *_bs) in VARIANT_ROWS.items():
    RUNNERS[_label] = functools.partial(RUNNERS[_runner], name=_name, params=_params,
                                        **({"batch_size": _bs[0]} if _bs else {}))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--streams", default="sms,enron")
    p.add_argument("--only", default=",".join(CONTESTANTS + tuple(VARIANT_ROWS)))
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    print(f"streambayes {package_version('streambayes')}, river {package_version('river')}, "
          f"bogofilter {'present' if shutil.which('bogofilter') else 'absent'}")
    results: dict = {}
    for stream in args.streams.split(","):
        path, texts, labels = load(stream)
        rows = []
        for name in args.only.split(","):
            r = RUNNERS[name](path, texts, labels)
            results.setdefault(stream, {})[name] = r
            rows.append([name, fmt(r.get("accuracy"), ".4f"), fmt(r.get("log_loss"), ".4f"),
                         fmt(r.get("log_loss_calibrated"), ".4f"), fmt(r.get("events_per_s")),
                         r.get("note", "")])
            print(f"  {stream} {name}: done", file=sys.stderr)
        print_table(f"{stream}: {len(texts):,} messages, prequential in file order",
                    ["contestant", "accuracy", "log loss", "log loss cal.", "events/s", "note"], rows)
        res = results[stream]
        river = res.get("river", {})
        for name in [k for k in res if k.startswith("sb-")]:
            mine = res.get(name)
            if not mine or not river:
                continue
            ll = min(mine["log_loss"], mine.get("log_loss_calibrated") or math.inf)
            line = (f"  {name}: accuracy {mine['accuracy'] - river['accuracy']:+.4f} vs River, "
                    f"log loss {ll / river['log_loss']:.2f}x River's, "
                    f"{mine['events_per_s'] / river['events_per_s']:.1f}x River's events/s")
            bogo = res.get("bogofilter", {})
            if "log_loss" in bogo:
                line += f", log loss {ll / bogo['log_loss']:.2f}x Bogofilter's"
            print(line)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
