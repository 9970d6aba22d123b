"""``streambayes demo``: real data when present, download when online, else SYNTHETIC."""

import io
import os
import socket
import time
import zipfile
from pathlib import Path

import pytest

from streambayes.cli import main
from streambayes.config import Settings
from streambayes.errors import DataUnavailable
from streambayes.runtime.data import SMS_RELATIVE, download_sms, find_sms


def shared_data() -> Path:
    """$STREAMBAYES_DATA, else ../shared/data beside the repository; missing data fails."""
    env = os.environ.get("STREAMBAYES_DATA")
    repo = Path(__file__).resolve().parents[2]
    root = Path(env).resolve() if env else repo.parent / "shared" / "data"
    assert (root / SMS_RELATIVE).is_file(), f"SMS data missing under {root}; set STREAMBAYES_DATA"
    return root


@pytest.fixture(autouse=True)
def _away_from_the_checkout(tmp_path, monkeypatch):
    """Run in an empty folder: ``../shared/data`` beside the checkout is found only on purpose."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def no_data(tmp_path, monkeypatch):
    """An empty data folder, an empty cache, and no network."""
    (tmp_path / "data").mkdir()
    monkeypatch.setenv("STREAMBAYES_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("STREAMBAYES_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("STREAMBAYES_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)  # no ../shared/data beside the current directory either
    return tmp_path


def test_demo_offline_without_data_runs_on_a_synthetic_stream(capsys, no_data):
    assert main(["demo"]) == 0
    out, err = capsys.readouterr()
    assert "SYNTHETIC" in out and "offline" in out
    assert "nb" in out and "cnb" in out and "tok:" in out
    assert "Traceback" not in err
    assert not (no_data / "cache").exists()


def test_demo_on_the_real_sms_data_shows_posteriors_and_clues(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("STREAMBAYES_DATA", str(shared_data()))
    monkeypatch.setenv("STREAMBAYES_OFFLINE", "1")
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "SYNTHETIC" not in out and "SMSSpamCollection" in out
    assert "5572 events" in out  # 5,574 messages, two held back to explain
    for text in ("WINNER!! Claim", "lunch", "held back", "true: spam", "true: ham", "tok:claim"):
        assert text in out


def _sms_zip(tmp_path: Path) -> Path:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("readme", "SMS Spam Collection v.1")
        archive.writestr("SMSSpamCollection", "ham\thello\nspam\tWIN a prize\n")
    path = tmp_path / "sms.zip"
    path.write_bytes(buf.getvalue())
    return path


def test_demo_finds_the_shared_data_beside_the_checkout_without_the_variable(tmp_path, monkeypatch):
    checkout = tmp_path / "project"
    checkout.mkdir()
    target = tmp_path / "shared" / "data" / SMS_RELATIVE
    target.parent.mkdir(parents=True)
    target.write_bytes((shared_data() / SMS_RELATIVE).read_bytes())
    monkeypatch.delenv("STREAMBAYES_DATA", raising=False)
    monkeypatch.chdir(checkout)
    found = find_sms(Settings(offline=True, cache_dir=tmp_path / "cache"))
    assert found.origin == "local" and found.path.resolve() == target.resolve()


def test_download_extracts_into_the_cache_then_the_cache_is_used(tmp_path):
    settings = Settings(data=tmp_path / "none", cache_dir=tmp_path / "cache", offline=False,
                        sms_url=_sms_zip(tmp_path).as_uri())
    first = find_sms(settings)
    assert first.origin == "download" and first.path == tmp_path / "cache" / SMS_RELATIVE
    assert first.path.read_text() == "ham\thello\nspam\tWIN a prize\n"
    again = find_sms(settings.model_copy(update={"sms_url": "http://127.0.0.1:1/gone.zip"}))
    assert again.origin == "cache"


def test_offline_never_downloads(tmp_path):
    settings = Settings(data=tmp_path, cache_dir=tmp_path / "cache", offline=True,
                        sms_url=_sms_zip(tmp_path).as_uri())
    assert find_sms(settings).origin == "synthetic"


def test_unreachable_server_falls_back_fast(tmp_path):
    settings = Settings(data=tmp_path, cache_dir=tmp_path / "cache", offline=False,
                        sms_url="http://127.0.0.1:1/sms.zip", download_timeout=5)
    start = time.monotonic()
    found = find_sms(settings)
    assert found.origin == "synthetic" and "download failed" in found.note
    assert time.monotonic() - start < 5


def test_silent_server_times_out(tmp_path):
    with socket.socket() as server:  # accepts connections, never answers
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        url = f"http://127.0.0.1:{server.getsockname()[1]}/sms.zip"
        start = time.monotonic()
        with pytest.raises(DataUnavailable, match="timed out|failed"):
            download_sms(url, tmp_path / "x" / "SMSSpamCollection", timeout=0.5)
        assert time.monotonic() - start < 3
    assert not (tmp_path / "x").exists()


def test_a_download_that_is_not_a_zip_is_refused(tmp_path):
    bogus = tmp_path / "bogus.zip"
    bogus.write_text("<html>not found</html>")
    with pytest.raises(DataUnavailable, match="not a zip"):
        download_sms(bogus.as_uri(), tmp_path / "c" / "SMSSpamCollection", timeout=5)
