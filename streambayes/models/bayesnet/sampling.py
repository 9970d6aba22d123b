"""Sampling from a Bayesian network: forward (ancestral) sampling, Gibbs sampling, likelihood weighting.

Every sampler takes a ``seed`` for a :func:`numpy.random.default_rng` and returns state codes
``(n, V)`` in the network's variable order. Evidence is a dict variable → state name.

* :func:`forward_sample` — ancestral sampling in topological order, vectorised over rows: each
  variable's CPT column is gathered for every row's parents and one uniform per row is turned into
  a state by the inverse CDF.
* :func:`gibbs` — Gibbs sampling as in reference 002 (start from a state consistent with the
  evidence; repeatedly resample each non-evidence variable from its conditional given all the others,
  i.e. given its Markov blanket; estimate P(q | e) ≈ n_q / T). Chains run side by side.
* :func:`likelihood_weighting` — evidence clamped, the rest sampled forward, each sample weighted
  by Π P(e_i | parents) (Fung & Chang 1990; Shachter & Peot 1990).

>>> from streambayes.models.bayesnet.bif import parse_bif
>>> net = parse_bif('''variable rain { type discrete [ 2 ] { yes, no }; }
... variable wet { type discrete [ 2 ] { yes, no }; }
... probability ( rain ) { table 0.2, 0.8; }
... probability ( wet | rain ) { (yes) 0.9, 0.1; (no) 0.1, 0.9; }''')
>>> forward_sample(net, 4, seed=0).shape
(4, 2)
>>> p = approximate_query(net, "rain", {"wet": "yes"}, 20000, seed=1, method="lw")
>>> round(float(p[0]), 1)   # exact: 0.18 / (0.18 + 0.08) = 0.69
0.7
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Literal

import numpy as np

from streambayes.errors import NetworkError
from streambayes.models.bayesnet.network import Network

_MAX_BLOCK = 64   # largest joint state space resampled as one Gibbs block


def _rows_of(net: Network, v: str, codes: np.ndarray) -> np.ndarray:
    """(n, |v|): the CPT column P(v | parents of each row)."""
    table = np.moveaxis(net.cpts[v], 0, -1)            # (|p1|, …, |pk|, |v|)
    idx = tuple(codes[:, net.index[p]] for p in net.parents[v])
    return table[idx] if idx else np.broadcast_to(table, (codes.shape[0], table.shape[-1]))


def _inverse_cdf(probs: np.ndarray, u: np.ndarray) -> np.ndarray:
    """One draw per row of ``probs`` (n, r) from uniforms ``u`` (n,)."""
    cdf = np.cumsum(probs, axis=1)
    cdf /= cdf[:, -1:]
    return np.minimum((u[:, None] >= cdf).sum(axis=1), probs.shape[1] - 1)


def _check_cpts(net: Network) -> None:
    missing = [v for v in net.variables if v not in net.cpts]
    if missing:
        raise NetworkError(f"sampling needs every CPT; missing for {missing}")


def _evidence_codes(net: Network, evidence: Mapping[str, str]) -> dict[int, int]:
    out = {}
    for v, s in evidence.items():
        if v not in net.index:
            raise NetworkError(f"unknown evidence variable {v!r}; the network has {net.variables}")
        if s not in net.state_index[v]:
            raise NetworkError(f"evidence state {s!r} is not in the domain of {v!r}: {list(net.states[v])}")
        out[net.index[v]] = net.state_index[v][s]
    return out


def forward_sample(net: Network, n: int, seed=None) -> np.ndarray:
    """``n`` rows of state codes drawn from the joint distribution (ancestral sampling)."""
    codes, _ = _sample(net, {}, n, np.random.default_rng(seed))
    return codes


def _sample(net: Network, clamp: dict[int, int], n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Forward sampling with the ``clamp`` columns fixed; returns codes and likelihood weights."""
    _check_cpts(net)
    codes = np.empty((n, len(net.variables)), np.int64)
    weights = np.ones(n)
    for v in net.order:
        i = net.index[v]
        probs = _rows_of(net, v, codes)
        if i in clamp:
            codes[:, i] = clamp[i]
            weights *= probs[:, clamp[i]]
        else:
            codes[:, i] = _inverse_cdf(probs, rng.random(n))
    return codes, weights


def likelihood_weighting(net: Network, evidence: Mapping[str, str], n: int,
                         seed=None) -> tuple[np.ndarray, np.ndarray]:
    """``n`` samples with the evidence clamped and weights w = Π_{e ∈ evidence} P(e | parents(e))."""
    return _sample(net, _evidence_codes(net, evidence), n, np.random.default_rng(seed))


def gibbs(net: Network, evidence: Mapping[str, str], n: int, seed=None, burn_in: int = 200,
          thin: int = 1, chains: int = 200) -> np.ndarray:
    """``n`` Gibbs samples (reference 002) from ``chains`` parallel chains, evidence fixed.

    1. Start: each chain gets a state consistent with the evidence, drawn by likelihood weighting
       and resampling by weight (so it has positive probability; zero-probability evidence raises).
    2. Sweep: each non-evidence variable v is resampled from P(v | everything else) ∝
       P(v | pa(v)) · Π_{c child of v} P(c | pa(c)) — only v's Markov blanket enters.
       Deterministic CPTs (exact zeros, e.g. asia's ``either`` = tub OR lung) make single-site
       Gibbs reducible or very slow to mix, so a child c whose CPT has zeros is resampled *jointly*
       with v, together with c's other parents (a block, enumerated when its joint state space has
       at most 64 states; evidence variables stay fixed).
    3. After ``burn_in`` sweeps, every ``thin``-th sweep contributes one sample per chain.
    """
    if burn_in < 0 or thin < 1 or chains < 1:
        raise ValueError("gibbs needs burn_in >= 0, thin >= 1 and chains >= 1")
    rng = np.random.default_rng(seed)
    clamp = _evidence_codes(net, evidence)
    chains = max(1, min(chains, n))
    state = _initial_states(net, clamp, chains, rng)
    blocks = _blocks(net, clamp)
    per_chain = -(-n // chains)
    out = np.empty((per_chain, chains, state.shape[1]), np.int64)
    for sweep in range(burn_in + per_chain * thin):
        for block, factors in blocks:
            _resample_block(net, state, block, factors, rng)
        kept = sweep - burn_in
        if kept >= 0 and (kept + 1) % thin == 0:
            out[kept // thin] = state
    return out.reshape(-1, state.shape[1])[:n]


def _initial_states(net: Network, clamp: dict[int, int], chains: int, rng) -> np.ndarray:
    codes, w = _sample(net, clamp, 20 * chains, rng)
    if not w.sum() > 0:
        names = {net.variables[i]: net.states[net.variables[i]][c] for i, c in clamp.items()}
        raise NetworkError(f"no sample is consistent with the evidence {names} (probability ~0)")
    return codes[rng.choice(len(w), size=chains, p=w / w.sum())]


def _blocks(net: Network, clamp: dict[int, int]) -> list[tuple[list[str], list[str]]]:
    """Gibbs blocks and their factors: v, plus — for every child c of v whose CPT has exact zeros —
    c itself (if not evidence) and c's other non-evidence parents, while the block's joint state
    space stays within ``_MAX_BLOCK``."""
    free = [v for v in net.order if net.index[v] not in clamp]
    out = []
    for v in free:
        block = [v]
        for c in net.children(v):
            if not np.any(net.cpts[c] == 0):
                continue
            extra = [u for u in (c, *net.parents[c]) if u in free and u not in block]
            if np.prod([net.card(u) for u in block + extra]) <= _MAX_BLOCK:
                block += extra
        factors = sorted({*block, *(c for b in block for c in net.children(b))}, key=net.order.index)
        out.append((block, factors))
    return out


def _resample_block(net: Network, state: np.ndarray, block: list[str], factors: list[str], rng) -> None:
    """Draw the block's joint state from its conditional given the rest, for every chain."""
    cols = [net.index[b] for b in block]
    joint = list(itertools.product(*(range(net.card(b)) for b in block)))
    probs = np.empty((state.shape[0], len(joint)))
    for j, assignment in enumerate(joint):
        state[:, cols] = assignment
        score = np.ones(state.shape[0])
        for f in factors:
            score *= _rows_of(net, f, state)[np.arange(state.shape[0]), state[:, net.index[f]]]
        probs[:, j] = score
    total = probs.sum(axis=1, keepdims=True)
    if np.any(total <= 0):
        raise NetworkError(f"Gibbs reached a state where {block} has no positive-probability value")
    pick = _inverse_cdf(probs / total, rng.random(state.shape[0]))
    state[:, cols] = np.asarray(joint)[pick]


def approximate_query(net: Network, variable: str, evidence: Mapping[str, str], n: int, seed=None,
                      method: Literal["gibbs", "lw"] = "gibbs", **options) -> np.ndarray:
    """P(variable | evidence) estimated from ``n`` samples, as a (|variable|,) array.

    ``"gibbs"``: the frequency n_q / T of each state among the Gibbs samples (reference 002);
    ``"lw"``: the likelihood-weighted frequency Σ w·[x = q] / Σ w. ``options`` go to the sampler.
    """
    if variable not in net.index:
        raise NetworkError(f"unknown query variable {variable!r}; the network has {net.variables}")
    col, card = net.index[variable], net.card(variable)
    if method == "gibbs":
        codes = gibbs(net, evidence, n, seed, **options)
        weights = np.ones(len(codes))
    elif method == "lw":
        codes, weights = likelihood_weighting(net, evidence, n, seed)
    else:
        raise ValueError(f"method must be 'gibbs' or 'lw', got {method!r}")
    hist = np.bincount(codes[:, col], weights=weights, minlength=card)
    if not hist.sum() > 0:
        raise NetworkError(f"every sample has weight 0: the evidence {dict(evidence)} has probability ~0")
    return hist / hist.sum()
