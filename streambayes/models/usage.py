"""Which fields of a stream a model can use, so that a model that learns nothing is said aloud.

An event's fields are of three kinds (the featurizer's convention): ``text`` (a string in one of
the model's ``text_fields``), ``categorical`` (other strings and bools) and ``numeric`` (other
numbers). Each likelihood component reads some kinds: token tables read text (and every field when
they fold fields into tokens), the categorical table reads categories (and numbers when it counts
numbers as categories), the Gaussian reads numbers, the semi-naive tables read categories and
numbers (only their ``schema``'s when one is given); a Bayesian network reads its own variables.
A model without any usable field predicts the class shares only (SMS text to ``catnb``: 0.8667).

>>> from streambayes.models import make_model
>>> kinds = FieldKinds()
>>> kinds.observe([{"text": "free prize", "n_links": 3}])
>>> fields_used(make_model("mnb"), kinds), fields_used(make_model("catnb"), kinds)
(['n_links', 'text'], ['n_links'])
>>> fields_used(make_model("gnb"), FieldKinds([{"text": "hi"}]))
[]
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping

from streambayes.models.field_components import Categorical, Gaussian
from streambayes.models.token_components import TokenTable

KINDS = ("text", "categorical", "numeric")


class FieldKinds:
    """The fields seen in a stream's events with the kind of their first non-null value."""

    def __init__(self, xs: Iterable[Mapping] = ()) -> None:
        self.values: dict[str, object] = {}  # field -> its first non-null value
        self.observe(xs)

    def observe(self, xs: Iterable[Mapping]) -> None:
        xs = list(xs)
        for name in set().union(*xs) - self.values.keys() if xs else ():
            value = next((x[name] for x in xs if x.get(name) is not None), None)
            if value is not None:
                self.values[name] = value

    def kind(self, name: str, text_fields: Iterable[str]) -> str | None:
        value = self.values[name]
        if isinstance(value, str | bool):
            return "text" if name in text_fields and isinstance(value, str) else "categorical"
        return "numeric" if isinstance(value, numbers.Real) else None


def fields_used(model: object, kinds: FieldKinds) -> list[str] | None:
    """The observed fields ``model`` can learn from, sorted; None for a model this cannot tell."""
    inner = getattr(model, "inner", None) or getattr(model, "_global", None)
    if inner is not None:  # a keyed or per-key wrapper: its models all read the same fields
        return fields_used(inner, kinds)
    variables = getattr(model, "_net", None)
    if variables is not None:  # a Bayesian network: its variables (the class comes as the label)
        return sorted(f for f in kinds.values if f in variables.states)
    components = getattr(model, "_components", None)
    featurizer = getattr(model, "_featurizer", None)
    if components is None or featurizer is None:
        return None
    reads = set().union(*(_reads(c) for c in components)) if components else set()
    schema = getattr(model, "schema", None)
    used = []
    for name in kinds.values:
        kind = kinds.kind(name, featurizer.text_fields)
        if kind in reads and (schema is None or kind == "text" or name in schema):
            used.append(name)
    return sorted(used)


def _reads(component: object) -> set[str]:
    if isinstance(component, TokenTable):
        return set(KINDS) if component.fold else {"text"}
    if isinstance(component, Categorical):
        return {"categorical", "numeric"} if component.numeric_as_categories else {"categorical"}
    if isinstance(component, Gaussian):
        return {"numeric"}
    return {"categorical", "numeric"}  # the semi-naive attribute tables


def usage(models: Mapping[str, object], kinds: FieldKinds) -> dict[str, list[str] | None]:
    """``fields_used`` of every model, by name."""
    return {name: fields_used(model, kinds) for name, model in models.items()}


def unused_warning(name: str, kinds: FieldKinds) -> str:
    """The warning for a model that can use none of the stream's fields."""
    seen = ", ".join(sorted(kinds.values)) or "none"
    return (f"model {name!r} gets no usable feature from the stream's fields ({seen}): it will only "
            f"learn the class shares (text goes to nb, mnb, bnb, cnb; categories and numbers to "
            f"catnb, gnb, aode, spode, tan, kdb)")


def usage_line(used: Mapping[str, list[str] | None]) -> str:
    """``fields used: nb: text; catnb: none`` (a model that cannot tell is left out)."""
    parts = [f"{name}: {', '.join(fields) if fields else 'NONE'}" for name, fields in used.items()
             if fields is not None]
    return "fields used: " + "; ".join(parts) if parts else ""


def first_batch_note(name: str, model: object, xs: Iterable[Mapping]) -> tuple[bool, str] | None:
    """(whether to warn, the message) about the fields ``model`` uses in a stream's first events;
    None when it cannot tell or the events have no fields."""
    kinds = FieldKinds(xs)
    used = fields_used(model, kinds)
    if used is None or not kinds.values:
        return None
    if not used:
        return True, unused_warning(name, kinds)
    return False, f"model {name!r} uses the fields {', '.join(used)}"
