"""The recorder's rewrite of a run's resume URLs into the fixed URLs replay's `callback_url()` gives, and a test
file saved onto one already there."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest

from engine.flowtest.callbacks import CallbackUrls, placeholder_url, run_tokens
from engine.flowtest.model import ExpectedOutcome, FlowTest, RecordedFrom, dump_test, load_test, save_test
from engine.parking.callback_links import callback_token
from engine.secret_box import SecretBox

RUN = "0123456789abcdef0123456789abcdef"
OTHER = "fedcba9876543210fedcba9876543210"


@pytest.fixture
def box() -> SecretBox:
    return SecretBox(lambda: (b"k" * 32, "a test key"))


def test_every_form_of_the_runs_url_becomes_what_replay_renders(box: SecretBox) -> None:
    urls = CallbackUrls(run_tokens(box, [RUN], ["wait", "ask.back"]))
    wait, ask = callback_token(box, RUN, "wait"), callback_token(box, RUN, "ask.back")
    real = f"http://127.0.0.1:8080/callbacks/{wait}"
    proxied = f"https://ops.example.com/lockgate/callbacks/{ask}"
    fixed, fixed_ask = placeholder_url("wait"), placeholder_url("ask.back")
    assert urls.text(real) == fixed == "https://lockgate.test/callbacks/wait"
    assert urls.text(proxied) == fixed_ask
    assert urls.text(quote(real, safe="/")) == quote(fixed, safe="/")  # Jinja's urlencode
    assert urls.text(quote(real, safe="")) == quote(fixed, safe="")  # a query value, fully encoded
    assert urls.text(f"see {real}, or {proxied}.") == f"see {fixed}, or {fixed_ask}."
    assert urls.text(f"http://a.example/x,{real}") == f"http://a.example/x,{fixed}"
    assert urls.text(wait) == "wait" == fixed.rsplit("/", 1)[1]  # the last part alone
    others = f"http://127.0.0.1:8080/callbacks/{callback_token(box, OTHER, 'wait')}"
    assert urls.text(others) == others  # another run's URL is data like any other
    assert urls.data({"a": [real, {"b": real}], real: 1, "n": 2}) == {"a": [fixed, {"b": fixed}], fixed: 1, "n": 2}


def test_without_a_data_key_or_a_wait_node_nothing_is_rewritten(box: SecretBox) -> None:
    token = callback_token(box, RUN, "wait")
    assert CallbackUrls(run_tokens(None, [RUN], ["wait"])).text(token) == token
    assert CallbackUrls(run_tokens(box, [RUN], [])).data({"t": token}) == {"t": token}


def test_a_test_file_already_there_is_replaced_only_when_asked(tmp_path: Path) -> None:
    test = FlowTest(
        name="case",
        flow_id="f",
        recorded_from=RecordedFrom(run_id=RUN, version=1, started_at=0.0),
        trigger="start",
        inputs={},
        answers=[],
        expected=ExpectedOutcome(status="succeeded", path=["start"], state={}),
    )
    path = save_test(test, tmp_path)
    edited = path.read_text(encoding="utf-8") + "\n"
    path.write_text(edited, encoding="utf-8")
    with pytest.raises(FileExistsError):
        save_test(test, tmp_path)
    assert path.read_text(encoding="utf-8") == edited and [p.name for p in tmp_path.iterdir()] == [path.name]
    assert save_test(test, tmp_path, replace=True) == path
    assert path.read_text(encoding="utf-8") == dump_test(test) and load_test(path) == test
