"""File and memory sources, sinks, and their positions (DESIGN §4)."""

import json

import pytest

from streambayes.errors import UsageError
from streambayes.runtime.records.decode import Decoded, Decoder, parse_cell
from streambayes.runtime.records.sinks import FileSink, MemorySink
from streambayes.runtime.records.sources import FileSource, MemorySource, Record, format_from_name


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


@pytest.fixture
def jsonl(tmp_path):
    lines = [json.dumps({"id": f"e{i}", "label": "a", "text": f"t{i}"}) for i in range(5)]
    return _write(tmp_path / "events.jsonl", ("\n".join(lines[:2]) + "\n\n" + "\n".join(lines[2:])
                                              + "\n").encode())


def test_format_from_name():
    assert format_from_name("a/b.jsonl") == "jsonl"
    assert format_from_name("b.json") == "jsonl"
    assert format_from_name("b.CSV") == "csv"
    assert format_from_name("b.tsv") == "tsv"
    assert format_from_name("b.txt") == "tsv"
    assert format_from_name("SMSSpamCollection") == "tsv"


def test_file_source_numbers_records_and_skips_blank_lines(jsonl):
    with FileSource(jsonl) as src:
        first = src.poll(2)
        rest = src.poll(10)
        assert src.poll(10) == []
        assert [r.offset for r in first + rest] == [0, 1, 2, 3, 4]
        assert [r.line for r in first + rest] == [1, 2, 4, 5, 6]  # line 3 is blank
        assert {r.topic for r in first} == {str(jsonl)} and first[0].partition == 0
        assert src.positions() == {str(jsonl): {"0": 5}}
        assert src.bytes_read == src.size_bytes


def test_file_source_seek_forward_and_back(jsonl):
    with FileSource(jsonl) as src:
        src.seek({str(jsonl): {"0": 3}})
        assert [json.loads(r.value)["id"] for r in src.poll(10)] == ["e3", "e4"]
        src.seek({str(jsonl): {"0": 1}})
        assert src.positions() == {str(jsonl): {"0": 1}}
        again = src.poll(1)[0]
        assert (again.offset, again.line, json.loads(again.value)["id"]) == (1, 2, "e1")
        src.seek({})  # no position for this file: from the start
        assert src.poll(1)[0].offset == 0
        src.seek({str(jsonl): {"0": 99}})
        assert src.poll(10) == [] and src.positions() == {str(jsonl): {"0": 5}}


def test_resume_from_positions_in_a_new_source(jsonl):
    with FileSource(jsonl) as src:
        src.poll(3)
        saved = src.positions()
    with FileSource(jsonl) as again:
        again.seek(saved)
        assert [r.offset for r in again.poll(10)] == [3, 4]


def test_crlf_and_bom_are_stripped(tmp_path):
    path = _write(tmp_path / "x.tsv", b"\xef\xbb\xbfham\thello\r\nspam\twin\r\n")
    with FileSource(path) as src:
        assert [r.value for r in src.poll(10)] == [b"ham\thello", b"spam\twin"]


def test_missing_file_and_directory_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        FileSource(tmp_path / "nope.jsonl")
    with pytest.raises(UsageError, match="directory"):
        FileSource(tmp_path)


def test_csv_header_quoted_newline_and_cells(tmp_path):
    path = _write(tmp_path / "d.csv",
                  b'label,text,n,colour,ratio,zip\n'
                  b'spam,"WIN\nnow, really",3,red,0.5,007\n'
                  b'ham,hi,,blue,-1e3,x1\n'
                  b'ham,"say ""hi""",nan,,inf,\n')
    with FileSource(path) as src:
        assert src.header == ["label", "text", "n", "colour", "ratio", "zip"]
        records = src.poll(10)
        decoder = Decoder("csv", header=src.header)
    assert [r.offset for r in records] == [0, 1, 2] and [r.line for r in records] == [2, 4, 5]
    d0, d1, d2 = (decoder.decode(r) for r in records)
    assert isinstance(d0, Decoded) and d0.label == "spam" and d0.event.id == "d-0"
    assert d0.x == {"n": 3, "colour": "red", "ratio": 0.5, "zip": 7, "text": "WIN\nnow, really"}
    assert d1.x == {"n": None, "colour": "blue", "ratio": -1000.0, "zip": "x1", "text": "hi"}
    assert d2.x == {"n": "nan", "colour": None, "ratio": "inf", "zip": None, "text": 'say "hi"'}


def test_csv_without_text_column_and_with_key_field(tmp_path):
    path = _write(tmp_path / "vote.csv", b"who,a,class\nu1,y,democrat\nu2,n,republican\n")
    with FileSource(path) as src:
        decoder = Decoder("csv", header=src.header, label_field="class", key_field="who")
        d = decoder.decode(src.poll(1)[0])
    assert (d.x, d.label, d.event.key) == ({"a": "y"}, "democrat", "u1")


def test_csv_missing_label_column_is_a_usage_error(tmp_path):
    path = _write(tmp_path / "d.csv", b"a,b\n1,2\n")
    with FileSource(path) as src, pytest.raises(UsageError, match="no label column 'label'"):
        Decoder("csv", header=src.header)


def test_parse_cell_rules():
    assert parse_cell("42") == 42 and type(parse_cell("42")) is int
    assert parse_cell("-0.25") == -0.25 and parse_cell("1e-3") == 0.001
    assert parse_cell("1_000") == "1_000"  # not Python's int syntax
    assert parse_cell("  ") is None
    assert parse_cell("Infinity") == "Infinity"


def test_memory_source_and_sink_round_trip():
    sink = MemorySink()
    for i in range(3):
        sink.send("learn", f"k{i}", {"id": f"e{i}", "label": "a", "text": "x"})
    sink.send("other", None, b"raw")
    sink.flush()
    src = MemorySource(sink.topics)
    records = src.poll(2)
    assert [(r.topic, r.offset, r.key) for r in records] == [("learn", 0, b"k0"),
                                                             ("learn", 1, b"k1")]
    assert json.loads(records[0].value) == {"id": "e0", "label": "a", "text": "x"}
    assert [r.value for r in src.poll(10)] == [sink.values("learn")[2], b"raw"]
    assert src.positions() == {"learn": {"0": 3}, "other": {"0": 1}}
    sink.send("learn", None, "late")  # appended later: seen by the next poll
    assert [r.value for r in src.poll(10)] == [b"late"]
    src.seek({"learn": {"0": 1}})
    assert [r.offset for r in src.poll(10)] == [1, 2, 3, 0]


def test_memory_source_accepts_str_and_records():
    src = MemorySource({"t": ["héllo", Record(b"v", b"k", "elsewhere", 3, 9, 123)]})
    a, b = src.poll(10)
    assert a.value == "héllo".encode() and (b.topic, b.partition, b.offset, b.key) == (
        "t", 0, 1, b"k")


def test_file_sink_is_created_lazily_and_truncates_or_appends(tmp_path):
    path = tmp_path / "sub" / "out.jsonl"
    sink = FileSink(path, mode="w")
    sink.flush()
    sink.close()
    assert not path.exists()
    with FileSink(path, mode="w") as sink:
        sink.send("t", None, {"a": 1})
        sink.send("t", None, "plain")
    with FileSink(path, mode="a") as sink:
        sink.send("t", None, {"b": "£"})
    assert path.read_text(encoding="utf-8").splitlines() == ['{"a":1}', "plain", '{"b":"£"}']
    with FileSink(path, mode="w") as sink:
        sink.send("t", None, {"c": 3})
        with pytest.raises(ValueError, match="newline"):
            sink.send("t", None, "two\nlines")
    assert path.read_text().splitlines() == ['{"c":3}']


def test_csv_empty_label_and_wrong_field_count_are_dead_letters(tmp_path):
    path = _write(tmp_path / "d.csv", b"label,a\n,1\nx,1,2\nx,\n")
    with FileSource(path) as src:
        decoder = Decoder("csv", header=src.header)
        results = [decoder.decode(r) for r in src.poll(10)]
    assert [getattr(r, "reason", None) for r in results] == [
        "missing_label", "invalid_event", "empty_event"]
    assert [r.line for r in results] == [2, 3, 4]


@pytest.mark.parametrize("compress", ["gzip", "bz2", "xz"])
def test_compressed_files_are_read_by_content_not_name(tmp_path, compress):
    import bz2
    import gzip
    import lzma

    lines = b'{"label": "spam", "text": "win"}\n{"label": "ham", "text": "lunch"}\n'
    packed = {"gzip": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}[compress](lines)
    for name in ("mail.jsonl.gz", "mail.data"):  # the name may say nothing, or something else
        path = tmp_path / name
        path.write_bytes(packed)
        with FileSource(path) as src:
            assert (src.format, src.compression) == ("jsonl", compress)
            records = src.poll(10)
            assert [r.value for r in records] == lines.splitlines()
            assert src.bytes_read == src.size_bytes
            src.seek({src.topic: {"0": 1}})
            assert [r.offset for r in src.poll(10)] == [1]


def test_format_sniffed_from_content_when_the_name_says_nothing(tmp_path):
    import gzip

    (tmp_path / "a").write_bytes(b"ham\thello, there\n")
    (tmp_path / "b.gz").write_bytes(gzip.compress(b"label,colour\nyes,red\n"))
    assert FileSource(tmp_path / "a").format == "tsv"
    assert FileSource(tmp_path / "b.gz").format == "csv"


def test_damaged_gzip_is_a_clear_error_not_a_traceback(tmp_path):
    import gzip

    from streambayes.errors import StreambayesError

    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"label": "a", "text": "x"}\n' * 5000)[:300])
    with FileSource(path) as src, pytest.raises(StreambayesError, match="damaged or truncated"):
        while src.poll(100):
            pass


def test_follow_refuses_a_compressed_file(tmp_path):
    import gzip

    path = tmp_path / "x.jsonl.gz"
    path.write_bytes(gzip.compress(b"{}\n"))
    with pytest.raises(UsageError, match="compressed"):
        FileSource(path, follow=True)


def test_events_without_id_get_a_stable_id_from_their_position(tmp_path):
    path = tmp_path / "mail.jsonl.gz"
    import gzip

    path.write_bytes(gzip.compress(b'{"label": "spam", "text": "win"}\n'
                                   b'{"id": "own", "label": "ham", "text": "lunch"}\n'
                                   b'{"label": "ham", "text": "tea"}\n'))
    with FileSource(path) as src:
        records = src.poll(10)
    decoder = Decoder("jsonl")
    one_by_one = [decoder.decode(r).event.id for r in records]
    batched = [d.event.id for d in decoder.decode_many(records)]
    assert one_by_one == batched == ["mail-0", "own", "mail-2"]
    kafka = Record(b'{"label": "spam", "text": "win"}', None, "events", 3, 41)
    assert decoder.decode(kafka).event.id == "events-3-41"


def test_zstd_files_are_read_when_zstandard_is_installed(tmp_path):
    import zstandard

    lines = b'{"label": "spam", "text": "win"}\n{"label": "ham", "text": "lunch"}\n'
    path = tmp_path / "mail.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(lines))
    with FileSource(path) as src:
        assert (src.format, src.compression) == ("jsonl", "zstd")
        assert [r.value for r in src.poll(10)] == lines.splitlines()
        src.seek({src.topic: {"0": 1}})
        assert [r.offset for r in src.poll(10)] == [1]
