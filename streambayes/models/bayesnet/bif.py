"""Read and write the BIF text format of the bnlearn repository.

The text is split into tokens (words and punctuation, with their line numbers), so a state
named ``LessUnstable`` or ``table_top`` is a word like any other and only the whole word
``table`` is the keyword. Errors name the line. ``table`` lists the CPT child-major: the child's
state varies slowest, then the parents in order, the last one fastest (pgmpy's reading).

>>> net = parse_bif('''variable rain { type discrete [ 2 ] { yes, no }; }
... variable wet { type discrete [ 2 ] { yes, no }; }
... probability ( rain ) { table 0.2, 0.8; }
... probability ( wet | rain ) { (yes) 0.9, 0.1; (no) 0.1, 0.9; }''')
>>> net.parents["wet"], net.cpts["wet"][:, 1].tolist()
(('rain',), [0.1, 0.9])
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np

from streambayes.errors import NetworkError
from streambayes.models.bayesnet.network import Network

_TOKEN = re.compile(r"//[^\n]*|/\*.*?\*/|[{}()\[\];,|]|[^\s{}()\[\];,|]+", re.S)


class _Tokens:
    def __init__(self, text: str) -> None:
        self.items: list[tuple[str, int]] = []
        for m in _TOKEN.finditer(text):
            tok = m.group()
            if not tok.startswith(("//", "/*")):
                self.items.append((tok, text.count("\n", 0, m.start()) + 1))
        self.i = 0

    def peek(self) -> str | None:
        return self.items[self.i][0] if self.i < len(self.items) else None

    def line(self) -> int:
        return self.items[min(self.i, len(self.items) - 1)][1] if self.items else 1

    def take(self, expected: str | None = None) -> str:
        if self.i >= len(self.items):
            raise NetworkError(f"BIF: unexpected end of file (expected {expected or 'more'})")
        tok, line = self.items[self.i]
        if expected is not None and tok != expected:
            raise NetworkError(f"BIF line {line}: expected {expected!r}, got {tok!r}")
        self.i += 1
        return tok

    def until(self, stop: str) -> list[str]:
        """Words up to ``stop`` (consumed), commas dropped."""
        out = []
        while self.peek() != stop:
            tok = self.take()
            if tok != ",":
                out.append(tok)
        self.take(stop)
        return out


def parse_bif(text: str) -> Network:
    t = _Tokens(text)
    name, states, parents, tables = "network", {}, {}, {}
    while t.peek() is not None:
        keyword, line = t.take(), t.line()
        if keyword == "network":
            name = t.take()
            _skip_block(t)
        elif keyword == "variable":
            v = t.take()
            if v in states:
                raise NetworkError(f"BIF line {line}: variable {v!r} declared twice")
            states[v] = _variable_body(t, v)
        elif keyword == "probability":
            child, ps, line = *_family(t), t.line()
            if child not in states:
                raise NetworkError(f"BIF line {line}: probability of undeclared variable {child!r}")
            if child in tables:
                raise NetworkError(f"BIF line {line}: second probability block for {child!r}")
            parents[child] = ps
            tables[child] = (line, _probability_body(t))
        else:
            raise NetworkError(f"BIF line {line}: unexpected {keyword!r}")
    if not states:
        raise NetworkError("BIF: no variables")
    missing = [v for v in states if v not in parents]
    if missing:
        raise NetworkError(f"BIF: no probability block for {missing}")
    net = Network(states, parents, None, name)
    for v, (line, entries) in tables.items():
        try:
            net.set_cpt(v, _table(net, v, entries))
        except NetworkError as e:
            raise NetworkError(f"BIF line {line}: {e}") from None
    return net


def _skip_block(t: _Tokens) -> None:
    t.take("{")
    depth = 1
    while depth:
        tok = t.take()
        depth += {"{": 1, "}": -1}.get(tok, 0)


def _variable_body(t: _Tokens, v: str) -> list[str]:
    t.take("{")
    states = None
    while t.peek() != "}":
        word = t.take()
        if word == "type":
            t.take("discrete")
            t.take("[")
            n = int(t.take())
            t.take("]")
            t.take("{")
            states = t.until("}")
            t.take(";")
            if len(states) != n:
                raise NetworkError(f"BIF line {t.line()}: {v!r} declares {n} states, lists {len(states)}")
        else:  # property …;
            t.until(";")
    t.take("}")
    if states is None:
        raise NetworkError(f"BIF line {t.line()}: variable {v!r} has no discrete type")
    return states


def _family(t: _Tokens) -> tuple[str, list[str]]:
    t.take("(")
    child = t.take()
    parents = []
    if t.peek() == "|":
        t.take("|")
        parents = t.until(")")
    else:
        t.take(")")
    return child, parents


def _probability_body(t: _Tokens) -> list[tuple[str, list[str], list[float]]]:
    """Entries: ("table"|"default", [], numbers) or ("row", parent states, numbers)."""
    t.take("{")
    entries = []
    while t.peek() != "}":
        word, line = t.take(), t.line()
        if word in ("table", "default"):
            entries.append((word, [], _numbers(t.until(";"), line)))
        elif word == "(":
            config = t.until(")")
            entries.append(("row", config, _numbers(t.until(";"), line)))
        else:  # property …;
            t.until(";")
    t.take("}")
    return entries


def _numbers(words: list[str], line: int) -> list[float]:
    try:
        values = [float(w) for w in words]
    except ValueError:
        raise NetworkError(f"BIF line {line}: expected numbers, got {words}") from None
    if not all(0.0 <= v <= 1.0 for v in values):  # also refuses nan and inf
        raise NetworkError(f"BIF line {line}: probabilities must be numbers in [0, 1], got {words}")
    return values


def _table(net: Network, v: str, entries) -> np.ndarray:
    shape = net.family_shape(v)
    ps = net.parents[v]
    cpt = np.full(shape, np.nan)
    for kind, config, values in entries:
        if kind == "table":
            if len(values) != int(np.prod(shape)):
                raise NetworkError(f"{v!r}: table has {len(values)} values, expected {int(np.prod(shape))}")
            cpt = np.array(values).reshape(shape)
        elif kind == "default":
            for idx in itertools.product(*(range(n) for n in shape[1:])):
                if np.isnan(cpt[(slice(None), *idx)]).all():
                    cpt[(slice(None), *idx)] = values
        else:
            if len(config) != len(ps):
                raise NetworkError(f"{v!r}: row {config} does not name one state per parent {list(ps)}")
            idx = tuple(_state(net, p, s) for p, s in zip(ps, config, strict=True))
            cpt[(slice(None), *idx)] = values
    if np.isnan(cpt).any():
        raise NetworkError(f"{v!r}: some parent configurations have no probabilities")
    return cpt


def _state(net: Network, v: str, s: str) -> int:
    code = net.state_index[v].get(s)
    if code is None:
        raise NetworkError(f"state {s!r} is not in the domain of {v!r}: {list(net.states[v])}")
    return code


def read_bif(path) -> Network:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise NetworkError(f"cannot read BIF file {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise NetworkError(f"cannot read BIF file {path}: not UTF-8 text") from None
    return parse_bif(text)


def write_bif(net: Network, path=None) -> str:
    """The BIF text of ``net`` (with its CPTs); written to ``path`` if given."""
    lines = [f"network {net.name} {{", "}"]
    for v in net.states:
        lines += [f"variable {v} {{",
                  f"  type discrete [ {net.card(v)} ] {{ {', '.join(net.states[v])} }};", "}"]
    for v in net.states:
        ps = net.parents[v]
        lines.append(f"probability ( {v}{' | ' + ', '.join(ps) if ps else ''} ) {{")
        cpt = net.cpts[v]
        if not ps:
            lines.append(f"  table {', '.join(repr(float(x)) for x in cpt)};")
        for idx in itertools.product(*(range(net.card(p)) for p in ps)):
            config = ", ".join(net.states[p][i] for p, i in zip(ps, idx, strict=True))
            lines.append(f"  ({config}) {', '.join(repr(float(x)) for x in cpt[(slice(None), *idx)])};")
        lines.append("}")
    text = "\n".join(lines) + "\n"
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text
