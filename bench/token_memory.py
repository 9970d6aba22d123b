"""Memory of a multinomial naive Bayes trained on the SMS Spam Collection (file order).

Prints the token table's state arrays (nbytes), ``memory_bytes()``, the Python heap growth while
learning (tracemalloc: current and peak; this includes the featurizer's token -> bucket cache and
tokenizer strings, not only the counts) and the size of a packed snapshot (JSON header + npz).

    .venv/bin/python bench/token_memory.py [--batch-size 1000] [--model mnb]
"""

from __future__ import annotations

import argparse
import tracemalloc

import numpy as np
from _common import load_sms_spam

from streambayes.models import make_model
from streambayes.snapshot import pack


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch-size", type=int, default=1000)
    ap.add_argument("--model", default="mnb")
    args = ap.parse_args()
    texts, labels = load_sms_spam()
    xs = [{"text": t} for t in texts]
    m = make_model(args.model)
    m.predict_proba_many(xs[:1])  # imports done before tracing: count what learning allocates
    tracemalloc.start()
    for lo in range(0, len(xs), args.batch_size):
        m.learn_many(xs[lo:lo + args.batch_size], labels[lo:lo + args.batch_size])
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    state = m.to_state()
    arrays = sum(a.nbytes for c in state["components"] for a in c.values() if isinstance(a, np.ndarray))
    data, _ = pack(state, snapshot_id="1", model=m.name, config={}, positions={}, events=len(xs),
                   created_at="2024-01-01T00:00:00Z")
    mib = 2**20
    print(f"{args.model} on SMS ({len(xs)} events, batches of {args.batch_size}):")
    print(f"  token state arrays   {arrays / mib:8.3f} MiB")
    print(f"  memory_bytes()       {m.memory_bytes() / mib:8.3f} MiB")
    print(f"  tracemalloc current  {current / mib:8.3f} MiB   peak {peak / mib:.3f} MiB")
    print(f"  packed snapshot      {len(data) / mib:8.3f} MiB")


if __name__ == "__main__":
    main()
