"""BIF reading and writing on the bnlearn networks of ../shared/data/bif, against pgmpy."""

import logging
import os
from pathlib import Path

import numpy as np
import pytest

from streambayes.errors import NetworkError
from streambayes.models.bayesnet.bif import parse_bif, read_bif, write_bif
from streambayes.models.bayesnet.network import Network

DATA = Path(os.environ.get("STREAMBAYES_DATA") or Path(__file__).resolve().parents[3] / "shared" / "data")
COUNTS = {"asia": (8, 8, 18), "cancer": (5, 4, 10), "earthquake": (5, 4, 10), "sachs": (11, 17, 178),
          "alarm": (37, 46, 509), "child": (20, 25, 230)}  # nodes, arcs, parameters (data README)


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_networks_parse_with_published_counts_and_round_trip(name):
    net = read_bif(DATA / "bif" / f"{name}.bif")
    assert (len(net.states), len(net.edges()), net.n_parameters()) == COUNTS[name]
    back = parse_bif(write_bif(net))
    assert back.parents == net.parents and back.states == net.states
    assert all(np.array_equal(back.cpts[v], net.cpts[v]) for v in net.states)
    assert Network.from_json(net.to_json()).parents == net.parents


@pytest.mark.parametrize("name", ["alarm", "child", "sachs"])
def test_cpts_equal_pgmpy_reader(name):
    from pgmpy.readwrite import BIFReader

    logging.disable(logging.WARNING)
    ours = read_bif(DATA / "bif" / f"{name}.bif")
    for cpd in BIFReader(str(DATA / "bif" / f"{name}.bif")).get_model().get_cpds():
        order = [cpd.variable, *ours.parents[cpd.variable]]
        vals = np.transpose(cpd.values, [cpd.variables.index(x) for x in order])
        for axis, x in enumerate(order):
            vals = np.take(vals, [cpd.state_names[x].index(s) for s in ours.states[x]], axis=axis)
        np.testing.assert_allclose(vals, ours.cpts[cpd.variable], atol=1e-12)


def test_table_is_a_token_not_a_substring():
    text = """variable v { type discrete [ 2 ] { LessUnstable, table_top }; }
    probability ( v ) { table 0.25, 0.75; }"""
    net = parse_bif(text)
    assert net.states["v"] == ("LessUnstable", "table_top") and net.cpts["v"].tolist() == [0.25, 0.75]


def test_table_with_parents_and_default():
    text = """variable a { type discrete [ 2 ] { x, y }; }
    variable b { type discrete [ 2 ] { u, w }; }
    probability ( a ) { table 0.5, 0.5; }
    probability ( b | a ) { table 0.1, 0.8, 0.9, 0.2; }"""
    assert parse_bif(text).cpts["b"][:, 1].tolist() == [0.8, 0.2]  # child-major: b=u for a=x, a=y; …
    text2 = text.replace("table 0.1, 0.8, 0.9, 0.2;", "(x) 0.3, 0.7; default 0.6, 0.4;")
    assert parse_bif(text2).cpts["b"].T.tolist() == [[0.3, 0.7], [0.6, 0.4]]


@pytest.mark.parametrize("text, message", [
    ("variable a { type discrete [ 2 ] { x, y }; }\nprobability ( a | b ) { table 0.5, 0.5; }",
     "unknown parent 'b'"),
    ("variable a { type discrete [ 2 ] { x, y }; }\nvariable b { type discrete [ 2 ] { x, y }; }\n"
     "probability ( a | b ) { (x) 0.5, 0.5; (y) 0.5, 0.5; }\n"
     "probability ( b | a ) { (x) 0.5, 0.5; (y) 0.5, 0.5; }", "cycle through \\['a', 'b'\\]"),
    ("variable a { type discrete [ 2 ] { x, y }; }\nprobability ( a ) {\n table 0.5, zero; }",
     "line 3: expected numbers"),
    ("variable a { type discrete [ 3 ] { x, y }; }", "declares 3 states, lists 2"),
    ("variable a { type discrete [ 2 ] { x, y }; }\nprobability ( a ) { table 0.7, 0.7; }",
     "line 2: CPT of 'a'"),
    ("variable a { type discrete [ 2 ] { x, y }; }\nprobability ( a ) { table 0.5, 0.5;", "end of file"),
    ("variable a { type discrete [ 2 ] { x, y }; }", "no probability block for \\['a'\\]"),
    ("", "no variables"),
    ("variable a { type discrete [ 2 ] { x, y }; }\nprobability ( a ) { table 0.5, 0.5; }\n"
     "probability ( a ) { table 0.2, 0.8; }", "line 3: second probability block for 'a'"),
    ("variable a { type discrete [ 2 ] { x, y }; }\nprobability ( a ) { table nan, 0.5; }",
     "line 2: probabilities must be numbers in \\[0, 1\\]"),
])
def test_malformed_bif_names_the_problem(text, message):
    with pytest.raises(NetworkError, match=message):
        parse_bif(text)


def test_encode_refuses_unknown_variables_and_states():
    net = read_bif(DATA / "bif" / "asia.bif")
    codes = net.encode([{"asia": "yes", "smoke": None}, {"xray": "no"}])
    assert codes[0, net.index["asia"]] == 0 and codes[0, net.index["smoke"]] == -1
    with pytest.raises(NetworkError, match="'maybe' is not in the domain of 'asia'"):
        net.encode([{"asia": "maybe"}])
    with pytest.raises(NetworkError, match="unknown variable 'planet'"):
        net.encode([{"planet": "mars"}])
    assert net.decode(codes)[1] == {"xray": "no"}


def test_unreadable_bif_files_are_clear_errors(tmp_path):
    binary = tmp_path / "bin.bif"
    binary.write_bytes(b"\xff\xfe garbage")
    with pytest.raises(NetworkError, match="not UTF-8"):
        read_bif(binary)
    with pytest.raises(NetworkError, match="cannot read BIF file"):
        read_bif(tmp_path / "missing.bif")
