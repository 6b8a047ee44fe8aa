"""`POST /callbacks/{token}` reads its body as JSON only: a body sent under another type is refused and the
token stays unused, so the sender's corrected retry resumes the run."""

from __future__ import annotations

from urllib.parse import urlsplit

from tests.api.conftest import Api
from tests.api.test_wait_callback import callback_flow
from tests.engine.conftest import wait_until

FORM = "application/x-www-form-urlencoded"


def test_a_body_sent_as_a_form_or_text_is_refused_and_a_json_retry_resumes(api: Api) -> None:
    api.publish(callback_flow())
    run_id = api.services.create_run("cb").run_id
    run = wait_until(lambda: (found := api.services.get_run(run_id, with_steps=False))
                     and found["status"] == "waiting" and found, timeout=10, what="the run to park")
    path = urlsplit(run["state"]["resume_at"]).path

    # What `curl -d '{"status": "form"}'` sends without `-H 'Content-Type: application/json'`.
    looks_like_json = api.http.post(path, content=b'{"status": "form"}', headers={"content-type": FORM})
    real_form = api.http.post(path, data={"status": "form"})
    text = api.http.post(path, content=b'{"status": "text"}', headers={"content-type": "text/plain; charset=utf-8"})
    for refused, sent_as in ((looks_like_json, FORM), (real_form, FORM), (text, "text/plain; charset=utf-8")):
        assert refused.status_code == 400, refused.text
        assert refused.headers["content-type"] == "application/json"
        assert refused.json()["error"]["code"] == "bad_json"
        assert repr(sent_as) in refused.json()["error"]["message"]
        assert "Content-Type: application/json" in refused.json()["error"]["message"]
    api.idle.wait()
    still = api.services.get_run(run_id, with_steps=False)
    assert still is not None and still["status"] == "waiting" and "reply" not in still["state"]

    retried = api.http.post(path, content=b'{"status": "json"}',
                            headers={"content-type": "application/json; charset=utf-8"})
    assert retried.status_code == 200, retried.text
    finished = api.services.wait_for_run(run_id, timeout=10)
    assert (finished["status"], finished["result"]) == ("succeeded", "json")
