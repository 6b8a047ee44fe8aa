"""Sealing secret run data at rest: AES-256-GCM under one data key per deployment.

The data key is 32 random bytes: `LOCKGATE_SECRET_KEY` (base64) where it is set, which every host
sharing one Redis must be given; else the data folder's entry in the `engine.secrets` store (the
system keyring, or the folder's 0600 file), created there on first use. A sealed blob is
`LGS1` + key id (8 bytes) + nonce (12 bytes) + ciphertext and tag. The header and the caller's
context (a run id, say) are authenticated, so a blob copied to another run does not open.
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import hashlib
import hmac
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from engine.secrets import SecretStore, lookup_secret
from engine.settings import LockgateSettings, load_settings

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

ENV_KEY = "LOCKGATE_SECRET_KEY"
VERSION = b"LGS1"
KEY_BYTES = 32
KEY_ID_BYTES = 8
NONCE_BYTES = 12
LOCK_NAME = "secret-key.lock"
_HEADER_BYTES = len(VERSION) + KEY_ID_BYTES

SecretBoxFailure = Literal["wrong_key", "corrupt", "unknown_format", "bad_key", "no_key"]


class SecretBoxError(Exception):
    """A blob cannot be sealed or opened; `kind` says why (a caller never matches the message)."""

    def __init__(self, kind: SecretBoxFailure, message: str) -> None:
        super().__init__(message)
        self.kind: SecretBoxFailure = kind


def key_id(key: bytes) -> bytes:
    """Names a key in its blobs without revealing it, so a wrong key is told from a damaged blob."""
    return hashlib.sha256(b"lockgate data key id\0" + key).digest()[:KEY_ID_BYTES]


def decode_key(text: str, where: str) -> bytes:
    """The 32-byte key that `text` (base64) holds; SecretBoxError `bad_key` naming `where` otherwise."""
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if len(key) != KEY_BYTES:
        raise SecretBoxError("bad_key", f"{where} is not the base64 of {KEY_BYTES} bytes; make one with "
                                        "`python -c \"import os, base64; print(base64.b64encode(os.urandom(32))"
                                        ".decode())\"`")
    return key


def encode_key(key: bytes) -> str:
    return base64.b64encode(key).decode()


class SecretBox:
    """Seals and opens blobs under one data key, fetched from `source` at first use and kept."""

    def __init__(self, source: Callable[[], tuple[bytes, str]]) -> None:
        """`source` returns the key and a phrase saying where it came from (for error messages)."""
        self._source = source
        self._key: tuple[AESGCM, bytes, str] | None = None
        self._derived: dict[str, bytes] = {}
        self._lock = threading.Lock()

    @classmethod
    def of_key(cls, key: bytes, where: str = "the given key") -> SecretBox:
        if len(key) != KEY_BYTES:
            raise SecretBoxError("bad_key", f"{where} has {len(key)} bytes, not {KEY_BYTES}")
        return cls(lambda: (key, where))

    def _loaded(self) -> tuple[AESGCM, bytes, str]:
        with self._lock:
            if self._key is None:
                # Imported at first use: cryptography's native module is 6.5 MB in each process, and most never
                # seal or open a secret.
                from cryptography.hazmat.primitives.ciphers.aead import AESGCM

                key, where = self._source()
                self._key = (AESGCM(key), key_id(key), where)
            return self._key

    def derived_key(self, purpose: str) -> bytes:
        """A 32-byte key for one `purpose` (an HMAC key, say), derived from the data key, which never leaves
        the box; every process with the same data key derives the same one."""
        with self._lock:
            derived = self._derived.get(purpose)
            if derived is None:
                key, _where = self._source()
                derived = self._derived[purpose] = hmac.new(key, b"lockgate derived key\0" + purpose.encode(),
                                                            hashlib.sha256).digest()
            return derived

    def seal(self, plaintext: bytes, context: bytes = b"") -> bytes:
        cipher, own_id, _where = self._loaded()
        header = VERSION + own_id
        nonce = os.urandom(NONCE_BYTES)
        return header + nonce + cipher.encrypt(nonce, plaintext, header + context)

    def open_sealed(self, blob: bytes, context: bytes = b"") -> bytes:
        """The plaintext of a `seal()` blob made with the same key and context; SecretBoxError otherwise."""
        if blob[:len(VERSION)] != VERSION or len(blob) < _HEADER_BYTES + NONCE_BYTES + 16:
            raise SecretBoxError("unknown_format", "the stored secret is not a sealed blob this version of "
                                                   f"Lockgate reads (it starts {blob[:4]!r}, not {VERSION!r})")
        cipher, own_id, where = self._loaded()
        from cryptography.exceptions import InvalidTag

        header, nonce = blob[:_HEADER_BYTES], blob[_HEADER_BYTES:_HEADER_BYTES + NONCE_BYTES]
        sealed_id = header[len(VERSION):]
        if sealed_id != own_id:
            raise SecretBoxError(
                "wrong_key", f"the stored secret was sealed under data key {sealed_id.hex()}, but this process "
                f"has key {own_id.hex()} ({where}); every engine process sharing this Redis needs the same key: "
                f"set {ENV_KEY} (base64) to the key the other processes use")
        try:
            return cipher.decrypt(nonce, blob[_HEADER_BYTES + NONCE_BYTES:], header + context)
        except InvalidTag:
            raise SecretBoxError("corrupt", "the stored secret does not open with its own key: it was damaged or "
                                            "copied from another run") from None


def data_key_name(data_dir: Path) -> str:
    """The data key's name in the secret store: one per data folder (a keyring is shared by all of them)."""
    return f"engine:data-key:{data_dir.expanduser().resolve()}"


def data_key(data_dir: Path, settings: LockgateSettings | None = None) -> tuple[bytes, str]:
    """The deployment's data key and where it came from: `settings`' `LOCKGATE_SECRET_KEY` (None: the
    environment's now), else the data folder's store, which gets one when it has none."""
    configured = (settings if settings is not None else load_settings()).secret_key
    if configured is not None:
        return decode_key(configured.get_secret_value(), ENV_KEY), ENV_KEY
    name = data_key_name(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    # Two processes starting on one folder must not each create a key: the second waits and reads the first's.
    with open(data_dir / LOCK_NAME, "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            stored = lookup_secret(data_dir, name)
            if stored:
                return decode_key(stored, f'the secret store entry "{name}"'), f"the data key of {data_dir}"
            key = os.urandom(KEY_BYTES)
            store = SecretStore(data_dir)
            try:
                store.set(name, encode_key(key))
            except Exception:  # a locked or broken keyring: the folder's 0600 file still keeps it
                if not store.uses_keyring:
                    raise
                SecretStore(data_dir, use_keyring=False).set(name, encode_key(key))
            return key, f"the data key of {data_dir}"
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def box_for(data_dir: Path, settings: LockgateSettings | None = None) -> SecretBox:
    """The box of a deployment whose data folder is `data_dir`; its key is read (or made) at first use."""
    return SecretBox(lambda: data_key(data_dir, settings))
