"""Loading the newest merged model on a fresh process: a local directory, the Kafka state topic, S3.

The issue's target: from the Kafka state topic (``kafka://HOST:PORT/TOPIC``) on a fresh host,
<= 2x the time from a local directory. One run, side by side:

  dir     ``SnapshotStore`` on local disk (the page cache is warm: the files were just written)
  kafka   the compacted state topic (chunked, checksummed) on the broker of
          ``streambayes.devtools.broker`` (Apache Kafka when java and mvn are there; printed),
          read through each client of ``--clients`` (``STREAMBAYES_KAFKA_CLIENT``; the default
          one is printed)
  s3      S3 through boto3 against a local moto server (moto's server mode), for reference

A text model (``--model``, default ``nb``) is learned on enron1-3 (16,541 mails) split into
``--shards`` disjoint shards, and each shard's snapshot is written to a child store
``partition-events-N`` of each backend (the layout of group-managed learners). Then each backend
is loaded ``--repeats`` times, round-robin, each time in a fresh Python process that imports, then
times: open the store → list its children → newest good snapshot of each (verified, rebuilt) →
merge. It also reports the whole process's wall time (interpreter, imports, load). Medians; the
machine is shared and noisy, so compare the ratios.

    .venv/bin/python bench/state_stores.py                   # ~1 minute with the broker start
    .venv/bin/python bench/state_stores.py --data sms --repeats 3
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import data_path, load_sms_spam, print_table

LOAD_TARGET = 2.0  # kafka / dir


def worker(uri: str) -> None:
    """Fresh process: time open → children → latest of each (rebuilt) → merge; print JSON.
    The settings (client, limits) come from the environment, as in ``streambayes predict``."""
    import streambayes.models  # noqa: F401 (imports are not the load: river, scipy...)
    import streambayes.runtime.loops.calibrate  # noqa: F401
    from streambayes.config import Settings
    from streambayes.runtime.loops.shards import merge_snapshots
    from streambayes.runtime.loops.spill import check_build
    from streambayes.runtime.stores import open_store

    if uri.startswith("kafka://"):  # imports are not the load (a predictor has them already)
        import confluent_kafka  # noqa: F401
        import kafka  # noqa: F401

        import streambayes.runtime.kafka.connect  # noqa: F401
        import streambayes.runtime.stores.kafka_readers  # noqa: F401
        import streambayes.runtime.stores.kafka_topic  # noqa: F401
    elif uri.startswith("s3://"):
        import boto3  # noqa: F401
    settings = Settings()
    t0 = time.perf_counter()
    store = open_store(uri, settings)
    snaps = [store.child(name).latest(check_build) for name in store.children()]
    merged = merge_snapshots(snaps)
    seconds = time.perf_counter() - t0
    print(json.dumps({"seconds": seconds, "events": merged.events, "shards": len(snaps)}))


def corpus(name: str) -> tuple[list[str], list[str]]:
    if name == "sms":
        return load_sms_spam()
    with gzip.open(data_path("enron_spam_dev", "enron1-3.jsonl.gz"), "rt", encoding="utf-8") as fh:
        mails = [json.loads(line) for line in fh]
    return [m["text"] for m in mails], [m["label"] for m in mails]


def shard_states(model: str, shards: int, texts: list[str], labels: list[str]) -> list[tuple]:
    """(state, positions, events) of each shard's learner (round-robin split, mini-batches)."""
    from streambayes.models import make_model

    out = []
    for shard in range(shards):
        xs = [{"text": t} for t in texts[shard::shards]]
        ys = labels[shard::shards]
        learner = make_model(model)
        for lo in range(0, len(xs), 1000):
            learner.learn_many(learner.featurize(xs[lo:lo + 1000]), ys[lo:lo + 1000])
        out.append((learner.to_state(), {"events": {str(shard): len(xs)}}, len(xs)))
    return out


def fill(uri: str, model: str, states: list[tuple]) -> int:
    from streambayes.runtime.stores import open_store

    store = open_store(uri)
    size = 0
    for shard, (state, positions, events) in enumerate(states):
        info = store.child(f"partition-events-{shard}").write(state, model=model, positions=positions,
                                                             events=events)
        size += info.size
    return size


def run_worker(uri: str, env: dict) -> tuple[float, float]:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, "--worker", uri], env=env, check=True,
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    return json.loads(done.stdout.strip().splitlines()[-1])["seconds"], wall


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", metavar="URI", help=argparse.SUPPRESS)
    p.add_argument("--data", choices=("enron", "sms"), default="enron")
    p.add_argument("--model", default="nb")
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--clients", default="confluent,kafka-python",
                   help="clients that read the Kafka state topic, side by side")
    args = p.parse_args()
    if args.worker:
        worker(args.worker)
        return
    from moto.server import ThreadedMotoServer

    from streambayes.devtools.broker import broker_info
    from streambayes.runtime.stores.s3 import s3_client

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    from streambayes.config import Settings

    default = Settings().kafka_client
    clients = [c for c in args.clients.split(",") if c]
    print(f"default client (STREAMBAYES_KAFKA_CLIENT): {default}; state topic read by {clients}",
          flush=True)
    texts, labels = corpus(args.data)
    states = shard_states(args.model, args.shards, texts, labels)
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
           "AWS_DEFAULT_REGION": "us-east-1"}
    os.environ.update(env)
    s3 = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    s3.start()
    host, port = s3.get_host_and_port()
    env["AWS_ENDPOINT_URL"] = os.environ["AWS_ENDPOINT_URL"] = f"http://{host}:{port}"
    s3_client(env["AWS_ENDPOINT_URL"]).create_bucket(Bucket="bench-state")
    try:
        with broker_info() as broker, tempfile.TemporaryDirectory() as tmp:
            kafka = f"kafka://{broker.bootstrap}/bench-state-{os.getpid()}"
            uris = {"dir": str(Path(tmp) / "state"), "kafka": kafka, "s3": "s3://bench-state/sms"}
            sizes = {name: fill(uri, args.model, states) for name, uri in uris.items()}
            readers = {"dir": (uris["dir"], None), "s3": (uris["s3"], None)}
            readers.update({f"kafka/{client}": (kafka, client) for client in clients})
            runs: dict[str, list[tuple[float, float]]] = {name: [] for name in readers}
            for _ in range(args.repeats):
                for name, (uri, client) in readers.items():
                    runs[name].append(run_worker(uri, {**env, "STREAMBAYES_KAFKA_CLIENT": client}
                                                 if client else env))
            report(args, broker, sizes, runs, default)
    finally:
        s3.stop()


def report(args, broker, sizes: dict, runs: dict, default: str) -> None:
    load = {name: statistics.median(r[0] for r in rs) for name, rs in runs.items()}
    wall = {name: statistics.median(r[1] for r in rs) for name, rs in runs.items()}
    print(f"broker: {broker}")
    print(f"model {args.model} on {args.data}, {args.shards} shards, {sizes['dir'] / 1e6:.1f} MB of "
          f"snapshots; medians of {args.repeats} fresh processes; load average "
          f"{os.getloadavg()[0]:.1f}")
    rows = []
    for name in runs:
        spread = [r[0] * 1000 for r in runs[name]]
        rows.append([name, f"{load[name] * 1000:.1f}", f"{min(spread):.1f}-{max(spread):.1f}",
                     f"{load[name] / load['dir']:.2f}x", f"{wall[name] * 1000:.0f}",
                     f"{wall[name] / wall['dir']:.2f}x"])
    print_table("newest merged model, fresh process",
                ["store", "load ms", "min-max", "vs dir", "process ms", "vs dir"], rows)
    for name in (n for n in runs if n.startswith("kafka/")):
        ratio = load[name] / load["dir"]
        verdict = "PASS" if ratio <= LOAD_TARGET else "MISS"
        tag = " (the default client)" if name == f"kafka/{default}" else ""
        print(f"target: {name}{tag} load <= {LOAD_TARGET:g}x dir: {ratio:.2f}x {verdict}")


if __name__ == "__main__":
    main()
