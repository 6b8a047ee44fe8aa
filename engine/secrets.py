"""Secrets by name (provider API keys, approval API keys), shared by the app and the engine.

The system keyring holds them where a backend exists; otherwise a 0600 JSON file in the data
folder does. The app's Settings writes them; the engine reads a provider's key through its
reference (`api_key_ref` in providers.json) when it builds the provider's adapter, so the key
is never written in plain text next to the provider's settings.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

KEYRING_SERVICE = "lockgate"
SECRETS_FILE_NAME = "secrets.json"


def mask_secret(secret: str) -> str:
    """`sk-live-1234abcd` -> `sk-…abcd`: enough to recognise a key, never enough to use it."""
    if not secret:
        return ""
    if len(secret) <= 8:
        return "…" + secret[-2:]
    prefix = secret[:3] if secret[2] == "-" else secret[:2]
    return f"{prefix}…{secret[-4:]}"


def keyring_available() -> bool:
    """True when the system has a usable keyring backend (not the 'fail' or 'null' one)."""
    try:
        import keyring
        from keyring.backends import fail

        backend = keyring.get_keyring()
    except Exception:
        return False
    if isinstance(backend, fail.Keyring):
        return False
    return float(getattr(backend, "priority", 0) or 0) > 0


class SecretStore:
    """Secrets by name: the system keyring where present, else a 0600 JSON file in the data folder."""

    def __init__(self, data_dir: Path, use_keyring: bool | None = None) -> None:
        self.data_dir = data_dir
        self.uses_keyring = keyring_available() if use_keyring is None else use_keyring

    @property
    def file_path(self) -> Path:
        return self.data_dir / SECRETS_FILE_NAME

    @property
    def where(self) -> str:
        """A sentence for the Settings dialog saying where secrets go."""
        if self.uses_keyring:
            return "Secrets are stored in the system keyring."
        return (
            f"No system keyring is available: secrets are stored in {self.file_path} "
            "(readable only by you, permissions 0600)."
        )

    def get(self, name: str) -> str | None:
        if self.uses_keyring:
            import keyring

            return keyring.get_password(KEYRING_SERVICE, name)
        return self._read_file().get(name)

    def set(self, name: str, secret: str) -> None:
        if self.uses_keyring:
            import keyring

            keyring.set_password(KEYRING_SERVICE, name, secret)
            return
        secrets = self._read_file()
        secrets[name] = secret
        self._write_file(secrets)

    def delete(self, name: str) -> None:
        if self.uses_keyring:
            import keyring
            from keyring.errors import PasswordDeleteError

            try:
                keyring.delete_password(KEYRING_SERVICE, name)
            except PasswordDeleteError:
                pass
            return
        secrets = self._read_file()
        if secrets.pop(name, None) is not None:
            self._write_file(secrets)

    def masked(self, name: str) -> str:
        """The secret as the UI may show it."""
        return mask_secret(self.get(name) or "")

    def _read_file(self) -> dict[str, str]:
        try:
            data = json.loads(self.file_path.read_text("utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise OSError(
                f"secrets file {self.file_path} cannot be read ({exc}); fix or delete it and enter the keys again"
            ) from None
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def _write_file(self, secrets: dict[str, str]) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        temporary = self.file_path.with_suffix(".tmp")
        # Created 0600 from the start so the secret is never briefly world-readable.
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, stat.S_IRUSR | stat.S_IWUSR)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(secrets, handle, indent=2, sort_keys=True)
        os.chmod(temporary, stat.S_IRUSR | stat.S_IWUSR)
        os.replace(temporary, self.file_path)


def provider_secret_name(provider: str) -> str:
    return f"provider:{provider}:api_key"


def approval_key_secret_name(key_name: str) -> str:
    return f"approval-key:{key_name}"


def lookup_secret(data_dir: Path, name: str) -> str | None:
    """The secret `name` wherever the app may have put it: the keyring when one exists, else the data folder's file.

    Both are asked because the app falls back to the file when it had no keyring, and an engine
    started elsewhere (a worker process, `lockgate worker`) must find the key either way."""
    if keyring_available():
        try:
            found = SecretStore(data_dir, use_keyring=True).get(name)
        except Exception:  # a locked or broken keyring backend: the file may still hold it
            found = None
        if found:
            return found
    return SecretStore(data_dir, use_keyring=False).get(name)
