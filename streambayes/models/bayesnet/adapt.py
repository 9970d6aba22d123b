"""Re-learning a streaming network's structure on a window, without starting over.

Hill climbing (``search.hill_climb``) starts from the current structure and scores a window of
complete rows — the last N events, or rows sampled from a snapshot's network. Families whose
parents did not change keep all their counts; the changed ones are re-counted from the window,
and the window's estimate becomes their CPT in the model's network (so a ``parameters="file"``
model keeps a prior for them). Counting then goes on under the new structure.
"""

from __future__ import annotations

from streambayes.errors import ModelError
from streambayes.models.bayesnet.counts import FamilyCounts, cpts_from_counts, dirichlet
from streambayes.models.bayesnet.search import changed_families, hill_climb, restructure


def learn_structure(model, window, score: str = "bic", max_parents: int = 3) -> list[str]:
    """Re-learn ``model``'s structure on ``window`` (rows or codes); return the changed families."""
    if model._em is not None:
        raise ModelError("learn_structure needs complete-data counts; this network is learning by "
                         "online EM (rows with missing values)")
    codes, _ = model._rows(window, None, None)
    codes = codes[(codes >= 0).all(axis=1)]
    if not len(codes):
        raise ModelError("learn_structure needs at least one complete row in the window")
    old = model._struct
    parents = hill_climb(codes, old, score=score, max_parents=max_parents,
                         equivalent_sample_size=model.equivalent_sample_size, start=dict(old.parents))
    changed = changed_families(old.parents, parents)
    if not changed:
        return []
    net = restructure(model._net, parents)
    struct = net.structure_copy()
    counts, fresh = FamilyCounts(struct), FamilyCounts(struct)
    fresh.add(codes)
    window_cpts = cpts_from_counts(struct, fresh.counts, dirichlet(struct, model.prior,
                                                                   model.equivalent_sample_size))
    for v in struct.states:
        counts.counts[v] = fresh.counts[v] if v in changed else model._counts.counts[v]
        if v in changed:
            net.cpts[v] = window_cpts[v]
    model._net, model._struct, model._counts = net, struct, counts
    model._pseudo = dirichlet(net, "file" if model.parameters == "file" else model.prior,
                              model.equivalent_sample_size)
    model._version += 1
    model._cache = None
    return changed
