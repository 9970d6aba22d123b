"""``streambayes demo``: a prequential replay of SMS spam with three naive Bayes models, then
the posterior and top clues for a few messages. Works offline on a fresh machine: it falls
back to a synthetic stream (see :mod:`streambayes.runtime.data`) and says so loudly.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from streambayes.config import Settings
from streambayes.evaluate.prequential import Learner
from streambayes.runtime.data import SmsData, find_sms, synthetic_sms
from streambayes.runtime.loops.replay import ReplayResult, build_models, print_summary, replay
from streambayes.runtime.records.decode import Decoded, Decoder
from streambayes.runtime.records.sinks import MemorySink
from streambayes.runtime.records.sources import FileSource, MemorySource, Record

DEMO_MODELS = ("nb", "mnb", "cnb")
WRITTEN_EXAMPLES = ("WINNER!! Claim your free prize now", "are we still on for lunch tomorrow?")


@dataclass(frozen=True)
class Example:
    """A message to explain: its text, its true label if known, and where it comes from."""

    text: str
    label: str | None
    origin: str


def run_demo(settings: Settings, console: Console | None = None) -> ReplayResult:
    """Replay the SMS stream (minus two held-back messages), then explain four messages."""
    console = console or Console()
    data = find_sms(settings)
    topic, records = _load(data)
    if data.origin == "synthetic":
        console.print(f"[bold red]SYNTHETIC DATA[/]: {escape(data.note)}; running on a "
                      f"SYNTHETIC spam/ham stream of {len(records)} generated messages "
                      "(set STREAMBAYES_DATA or go online for the real SMS Spam Collection).",
                      soft_wrap=True)
    else:
        console.print(f"data: {escape(data.note)} ({len(records)} messages)", soft_wrap=True)
    console.print(f"prequential replay of {', '.join(DEMO_MODELS)} side by side: each mini-batch "
                  "is predicted first, then learned; the last spam and the last ham message "
                  "are held back to be explained at the end.", soft_wrap=True, highlight=False)
    decoder = Decoder("tsv")
    stream, held = _hold_back(records, decoder)
    models = build_models(DEMO_MODELS)
    sink = MemorySink()
    result = replay(MemorySource({topic: stream}), decoder, models, sink, topic=topic)
    print_summary(result, console)
    examples = [Example(d.event.text or "", d.label, "held back from the stream") for d in held]
    examples += [Example(text, None, "written for the demo") for text in WRITTEN_EXAMPLES]
    console.print(explain(models, examples))
    if data.origin == "synthetic":
        console.print("[bold red]Note:[/] these results are on SYNTHETIC data.")
    return result


def _load(data: SmsData) -> tuple[str, list[bytes]]:
    if data.path is None:
        return "synthetic-sms", [line.encode("utf-8") for line in synthetic_sms()]
    values: list[bytes] = []
    with FileSource(data.path, "tsv") as source:
        while batch := source.poll(4096):
            values.extend(r.value for r in batch)
    return str(data.path), values


def _hold_back(records: list[bytes], decoder: Decoder) -> tuple[list[bytes], list[Decoded]]:
    """Take the last spam and the last ham message out of the stream, to explain them later."""
    held: dict[str, int] = {}
    for offset in range(len(records) - 1, -1, -1):
        item = decoder.decode(Record(records[offset], None, "demo", 0, offset))
        if isinstance(item, Decoded) and item.label in ("spam", "ham") and item.label not in held:
            held[item.label] = offset
            if len(held) == 2:
                break
    chosen = sorted(held.values())
    stream = [value for i, value in enumerate(records) if i not in held.values()]
    decoded = [decoder.decode(Record(records[i], None, "demo", 0, i)) for i in chosen]
    return stream, [d for d in decoded if isinstance(d, Decoded)]


def explain(models: dict[str, Learner], examples: list[Example], k: int = 5) -> Table:
    """Posterior of every model and the first model's top clues, one row per message."""
    first = next(iter(models))
    table = Table(title=f"posteriors, and top clues of {first} (log-odds of its decision)",
                  show_lines=True)
    table.add_column("message")
    table.add_column("posterior")
    table.add_column(f"top clues ({first})")
    for ex in examples:
        x = {"text": ex.text}
        shown = ex.text if len(ex.text) <= 90 else ex.text[:87] + "..."
        truth = f"true: {ex.label}" if ex.label else "no label"
        lines = []
        for name, model in models.items():
            posterior = model.predict_proba_one(x)
            parts = " ".join(f"{label} {p:.3f}" for label, p in sorted(posterior.items()))
            lines.append(f"{name}: {parts}")
        clues = "\n".join(f"{feature} {weight:+.2f}"
                          for feature, weight in models[first].clues_one(x, k=k))
        table.add_row(f"{escape(shown)}\n[dim]{ex.origin}; {truth}[/]",
                      escape("\n".join(lines)), escape(clues))
    return table
