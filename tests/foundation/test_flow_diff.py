"""Version diffs: `diff_flows`, `lockgate diff`, `lockgate flows diff`, and git merging two edits of one file."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from engine.flow import Edge, Flow, Node, dump_flow, load_flow, save_flow
from engine.flow_diff import diff_flows
from engine.publish import publish
from engine.store.db import init_db, make_engine
from tests.cli import LOCKGATE
from tests.conftest import EXAMPLES

HELLO = EXAMPLES / "hello.flow.json"
TRIAGE = EXAMPLES / "ticket-triage.flow.json"


def _edited(flow: Flow, **changes: object) -> Flow:
    return flow.model_copy(deep=True, update=changes)


def _with_node(flow: Flow, node_id: str, **changes: object) -> Flow:
    nodes = [node.model_copy(deep=True, update=changes) if node.id == node_id else node for node in flow.nodes]
    return _edited(flow, nodes=nodes)


def test_same_flow_has_no_changes() -> None:
    flow = load_flow(TRIAGE)
    diff = diff_flows(flow, load_flow(TRIAGE))
    assert diff.empty and diff.nodes == [] and diff.edges == [] and diff.flow_fields == []


def test_config_change_names_the_field_path_with_both_values() -> None:
    before = load_flow(HELLO)
    greet = before.node("greet")
    assert greet is not None
    after = _with_node(before, "greet", config={"values": {"greeting": "Hi {{ inputs.name }}", "extra": 1}})
    change = diff_flows(before, after).node("greet")
    assert change is not None and change.status == "changed"
    assert [(f.path, f.kind, f.before, f.after) for f in change.fields] == [
        ("config.values.greeting", "changed", "Hello, {{ inputs.name }}!", "Hi {{ inputs.name }}"),
        ("config.values.extra", "added", None, 1),
    ]


def test_position_only_is_moved_and_a_number_type_change_counts() -> None:
    before = load_flow(HELLO)
    moved = diff_flows(before, _with_node(before, "done", position=(500.0, 20.0)))
    assert [(n.node_id, n.status) for n in moved.nodes] == [("done", "moved")]
    # 1 and 1.0 are both written as 1 in the file: no change. True and 1 differ.
    same = diff_flows(before, _with_node(before, "greet", config={"values": {"greeting": "Hello, {{ inputs.name }}!"}}))
    assert same.empty
    typed = _with_node(before, "greet", config={"flag": True})
    retyped = diff_flows(typed, _with_node(typed, "greet", config={"flag": 1}))
    assert [f.path for f in retyped.nodes[0].fields] == ["config.flag"]


def test_added_removed_nodes_edges_and_flow_fields() -> None:
    before = load_flow(HELLO)
    after = _edited(
        before,
        name="Hello there",
        nodes=[n for n in before.nodes if n.id != "done"] + [Node(id="log", type="set", title="Log")],
        edges=[before.edges[0], Edge(**{"from": "greet", "to": "log"})],
    )
    after.inputs["name"] = after.inputs["name"].model_copy(update={"required": False})
    diff = diff_flows(before, after)
    assert [(f.path, f.kind) for f in diff.flow_fields] == [("name", "changed"), ("inputs.name.required", "removed")]
    assert [(n.node_id, n.status) for n in diff.nodes] == [("log", "added"), ("done", "removed")]
    assert sorted((e.from_, e.to, e.status) for e in diff.edges) == [
        ("greet", "done", "removed"), ("greet", "log", "added")]


def test_cli_diff_exit_codes_human_and_json(tmp_path: Path) -> None:
    before = load_flow(HELLO)
    after = _with_node(before, "greet", title="Say hello")
    a, b = tmp_path / "a.flow.json", tmp_path / "b.flow.json"
    save_flow(before, a)
    save_flow(after, b)
    same = subprocess.run([*LOCKGATE, "diff", str(a), str(a)], capture_output=True, text=True, timeout=60)
    assert same.returncode == 0 and "no changes" in same.stdout
    human = subprocess.run([*LOCKGATE, "diff", str(a), str(b)], capture_output=True, text=True, timeout=60)
    assert human.returncode == 1, human.stderr
    assert '~ node greet (set "Say hello")' in human.stdout
    assert 'title: "Greet" → "Say hello"' in human.stdout
    assert "\x1b[" not in human.stdout  # not a terminal: plain lines
    as_json = subprocess.run([*LOCKGATE, "diff", "--json", str(a), str(b)], capture_output=True, text=True, timeout=60)
    assert as_json.returncode == 1
    data = json.loads(as_json.stdout)
    assert data["nodes"] == [{"node_id": "greet", "status": "changed", "type": "set", "title": "Say hello",
                              "fields": [{"path": "title", "kind": "changed", "before": "Greet",
                                          "after": "Say hello"}]}]
    missing = subprocess.run([*LOCKGATE, "diff", str(a), str(tmp_path / "nope.flow.json")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "no such file" in missing.stderr


def test_cli_ignore_layout_leaves_out_moves(tmp_path: Path) -> None:
    before = load_flow(HELLO)
    a, b = tmp_path / "a.flow.json", tmp_path / "b.flow.json"
    save_flow(before, a)
    save_flow(_with_node(before, "done", position=(900.0, 0.0)), b)
    result = subprocess.run([*LOCKGATE, "diff", "--ignore-layout", str(a), str(b)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "no changes" in result.stdout


def test_flows_diff_compares_published_versions(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'lockgate.db'}"
    sql = make_engine(url)
    init_db(sql)
    before = load_flow(HELLO)
    publish(sql, before)
    publish(sql, _with_node(before, "greet", config={"values": {"greeting": "Yo"}}))
    sql.dispose()
    env = {"LOCKGATE_DB_URL": url, "LOCKGATE_DATA_DIR": str(tmp_path / "data"), "PATH": "/usr/bin:/bin"}
    result = subprocess.run([*LOCKGATE, "flows", "diff", "hello", "1", "2", "--json"], capture_output=True,
                            text=True, timeout=60, env=env)
    assert result.returncode == 1, result.stderr
    fields = json.loads(result.stdout)["nodes"][0]["fields"]
    assert fields == [{"path": "config.values.greeting", "kind": "changed",
                       "before": "Hello, {{ inputs.name }}!", "after": "Yo"}]
    unknown = subprocess.run([*LOCKGATE, "flows", "diff", "hello", "1", "7"], capture_output=True, text=True,
                             timeout=60, env=env)
    assert unknown.returncode == 2 and "version 7" in unknown.stderr


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=60,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@example.org", "HOME": str(repo), "PATH": "/usr/bin:/bin"})


def test_git_merges_edits_of_different_nodes_without_conflict(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    path = repo / "triage.flow.json"
    base = load_flow(TRIAGE)
    path.write_text(dump_flow(base))
    assert _git(repo, "init", "-q", "-b", "main").returncode == 0
    _git(repo, "add", ".")
    assert _git(repo, "commit", "-qm", "base").returncode == 0
    ids = [node.id for node in base.nodes]
    first, second = ids[1], ids[2]  # neighbours in the file: the hardest case for a line merge

    _git(repo, "checkout", "-qb", "one")
    path.write_text(dump_flow(_with_node(base, first, title="Edited on one", position=(11.0, 12.0))))
    _git(repo, "commit", "-qam", "one")
    _git(repo, "checkout", "-q", "main")
    _git(repo, "checkout", "-qb", "two")
    second_node = base.node(second)
    assert second_node is not None
    path.write_text(dump_flow(_with_node(base, second, title="Edited on two",
                                         config={**second_node.config, "note": "added on two"})))
    _git(repo, "commit", "-qam", "two")

    merged = _git(repo, "merge", "-q", "--no-edit", "one")
    assert merged.returncode == 0, merged.stdout + merged.stderr
    result = load_flow(path)
    assert result.node(first) is not None and result.node(first).title == "Edited on one"  # type: ignore[union-attr]
    assert result.node(second).title == "Edited on two"  # type: ignore[union-attr]
    assert result.node(second).config["note"] == "added on two"  # type: ignore[union-attr]
    assert path.read_text() == dump_flow(result)  # the merge is itself a byte-stable file
