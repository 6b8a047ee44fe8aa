"""The secret box: AES-GCM blobs, failures as kinds, and one data key per data folder (or from the environment)."""

from __future__ import annotations

import base64
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from engine.secret_box import ENV_KEY, VERSION, SecretBox, SecretBoxError, box_for, data_key, key_id
from engine.secrets import SecretStore

KEY_A = bytes(range(32))
KEY_B = bytes(range(1, 33))


def test_a_sealed_blob_opens_to_its_plaintext_and_hides_it() -> None:
    box = SecretBox.of_key(KEY_A)
    first, second = box.seal(b"hunter2", b"run-1"), box.seal(b"hunter2", b"run-1")
    assert first.startswith(VERSION) and b"hunter2" not in first
    assert first != second  # a fresh nonce each time
    assert box.open_sealed(first, b"run-1") == box.open_sealed(second, b"run-1") == b"hunter2"


def test_failures_are_kinds() -> None:
    blob = SecretBox.of_key(KEY_A).seal(b"hunter2", b"run-1")
    with pytest.raises(SecretBoxError) as wrong:
        SecretBox.of_key(KEY_B, "the test's key").open_sealed(blob, b"run-1")
    assert wrong.value.kind == "wrong_key" and ENV_KEY in str(wrong.value)
    assert key_id(KEY_A).hex() in str(wrong.value) and "the test's key" in str(wrong.value)
    with pytest.raises(SecretBoxError) as moved:
        SecretBox.of_key(KEY_A).open_sealed(blob, b"run-2")
    assert moved.value.kind == "corrupt"
    damaged = blob[:-1] + bytes([blob[-1] ^ 1])
    with pytest.raises(SecretBoxError) as corrupt:
        SecretBox.of_key(KEY_A).open_sealed(damaged, b"run-1")
    assert corrupt.value.kind == "corrupt"
    with pytest.raises(SecretBoxError) as plain:
        SecretBox.of_key(KEY_A).open_sealed(b'{"token": "hunter2"}')
    assert plain.value.kind == "unknown_format"


def test_the_environment_key_wins_and_a_bad_one_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_KEY, base64.b64encode(KEY_B).decode())
    assert data_key(tmp_path) == (KEY_B, ENV_KEY)
    assert not any(tmp_path.iterdir()), "an environment key leaves the data folder alone"
    monkeypatch.setenv(ENV_KEY, base64.b64encode(b"short").decode())
    with pytest.raises(SecretBoxError) as bad:
        box_for(tmp_path).seal(b"x")
    assert bad.value.kind == "bad_key" and ENV_KEY in str(bad.value)


def test_the_folder_key_is_made_once_in_a_0600_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_KEY, raising=False)
    store = SecretStore(tmp_path)
    if store.uses_keyring:
        pytest.skip("this machine has a system keyring: the key would go there, not to the file")
    blob = box_for(tmp_path).seal(b"hunter2")
    assert stat.S_IMODE(os.stat(store.file_path).st_mode) == 0o600
    assert box_for(tmp_path).open_sealed(blob) == b"hunter2"  # a second box (process) finds the same key
    assert data_key(tmp_path)[0] != data_key(tmp_path / "elsewhere")[0]


def test_processes_starting_together_on_one_folder_agree_on_the_key(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_KEY, raising=False)
    script = ("import sys; from pathlib import Path; from engine.secret_box import data_key, key_id; "
              "print(key_id(data_key(Path(sys.argv[1]))[0]).hex())")
    children = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE)
                for _ in range(4)]
    ids = {child.communicate(timeout=60)[0].strip() for child in children}
    assert all(child.returncode == 0 for child in children)
    assert len(ids) == 1 and ids != {b""}
