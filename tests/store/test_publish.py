"""Publish: validated, numbered per flow, content-hashed, immutable, safe under concurrency."""

from __future__ import annotations

import dataclasses
import threading
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from engine.flow import Flow, dump_flow, flow_from_data, flow_to_data
from engine.publish import (
    PublishRefused,
    UnknownFlowVersion,
    content_hash,
    get_version,
    list_versions,
    publish,
)
from engine.store.db import read_scope, session_scope
from engine.store.models import FlowVersion, Run
from tests.store.conftest import variant


def test_first_publish_is_version_one(store: sa.Engine, hello_flow: Flow) -> None:
    published = publish(store, hello_flow)
    assert (published.flow_id, published.version) == ("hello", 1)
    assert published.content_hash == content_hash(dump_flow(hello_flow))
    assert published.published_at.tzinfo is not None


def test_identical_content_returns_the_latest_version(store: sa.Engine, hello_flow: Flow) -> None:
    first = publish(store, hello_flow)
    again = publish(store, flow_from_data(flow_to_data(hello_flow)))
    assert (first.created, again.created) == (True, False)
    assert again == dataclasses.replace(first, created=False)
    assert [v.version for v in list_versions(store, "hello")] == [1]


def test_changed_content_gets_the_next_number(store: sa.Engine, hello_flow: Flow) -> None:
    publish(store, hello_flow)
    second = publish(store, variant(hello_flow, "Hi, {{ inputs.name }}!"))
    third = publish(store, hello_flow)  # back to the first content: still a new version
    assert (second.version, third.version) == (2, 3)
    assert third.content_hash != second.content_hash
    assert [v.version for v in list_versions(store, "hello")] == [1, 2, 3]


def test_get_version_returns_the_frozen_flow(store: sa.Engine, hello_flow: Flow) -> None:
    publish(store, hello_flow)
    publish(store, variant(hello_flow, "Hi, {{ inputs.name }}!"))
    latest, latest_flow = get_version(store, "hello")
    first, first_flow = get_version(store, "hello", 1)
    assert (latest.version, first.version) == (2, 1)
    assert dump_flow(first_flow) == dump_flow(hello_flow)
    node = latest_flow.node("greet")
    assert node is not None and node.config["values"]["greeting"] == "Hi, {{ inputs.name }}!"


def test_unknown_flow_or_version_is_a_clear_error(store: sa.Engine, hello_flow: Flow) -> None:
    with pytest.raises(UnknownFlowVersion, match='flow "nope" is not published') as no_flow:
        get_version(store, "nope")
    assert no_flow.value.kind == "unknown_flow"
    with pytest.raises(UnknownFlowVersion, match='version 7 of flow "nope" is not published') as no_flow:
        get_version(store, "nope", 7)
    assert no_flow.value.kind == "unknown_flow"
    publish(store, hello_flow)
    with pytest.raises(UnknownFlowVersion, match='flow "hello" has no version 7 \\(its versions are 1 to 1\\)') \
            as no_version:
        get_version(store, "hello", 7)
    assert no_version.value.kind == "unknown_version"
    assert list_versions(store, "nope") == []


def test_flow_with_errors_is_refused_and_nothing_is_stored(store: sa.Engine, hello_flow: Flow) -> None:
    data = flow_to_data(hello_flow)
    data["edges"].append({"from": "greet", "to": "ghost"})
    broken = flow_from_data(data)
    with pytest.raises(PublishRefused) as refused:
        publish(store, broken)
    assert refused.value.diagnostics
    assert "ghost" in str(refused.value)
    assert list_versions(store, "hello") == []


def test_published_versions_are_immutable(store: sa.Engine, hello_flow: Flow) -> None:
    publish(store, hello_flow)
    with pytest.raises(ValueError, match="immutable"), session_scope(store) as session:
        row = session.scalars(sa.select(FlowVersion)).one()
        row.document = "{}"
    _, flow = get_version(store, "hello", 1)
    assert dump_flow(flow) == dump_flow(hello_flow)


def test_a_run_keeps_its_version_when_the_flow_is_republished(store: sa.Engine, hello_flow: Flow) -> None:
    publish(store, hello_flow)
    now = datetime.now(UTC)
    with session_scope(store) as session:
        session.add(Run(id="r1", flow_id="hello", version=1, status="waiting", created_at=now, updated_at=now))
    publish(store, variant(hello_flow, "Yo {{ inputs.name }}"))
    with read_scope(store) as session:
        run = session.get(Run, "r1")
        assert run is not None and run.version == 1
    _, pinned = get_version(store, "hello", 1)
    assert dump_flow(pinned) == dump_flow(hello_flow)


def test_run_cannot_pin_an_unpublished_version(store: sa.Engine, hello_flow: Flow) -> None:
    publish(store, hello_flow)
    now = datetime.now(UTC)
    with pytest.raises(sa.exc.IntegrityError), session_scope(store) as session:
        session.add(Run(id="r2", flow_id="hello", version=9, status="queued", created_at=now, updated_at=now))


def test_publish_inside_the_callers_session(store: sa.Engine, hello_flow: Flow) -> None:
    with pytest.raises(RuntimeError), session_scope(store) as session:
        assert publish(session, hello_flow).version == 1
        raise RuntimeError("caller aborts its transaction")
    assert list_versions(store, "hello") == []


def test_concurrent_publishes_never_share_a_number(store: sa.Engine, hello_flow: Flow) -> None:
    writers, rounds = 4, 6
    numbers: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def publish_variants(writer: int) -> None:
        try:
            for round_ in range(rounds):
                published = publish(store, variant(hello_flow, f"{writer}-{round_} {{{{ inputs.name }}}}"))
                with lock:
                    numbers.append(published.version)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=publish_variants, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert sorted(numbers) == list(range(1, writers * rounds + 1))
    assert [v.version for v in list_versions(store, "hello")] == list(range(1, writers * rounds + 1))
