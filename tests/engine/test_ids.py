"""Time-ordered ids: later ids sort after earlier ones, and a forked child never repeats its parent's."""

from __future__ import annotations

import os
import re
import time

from engine.events import new_event_id
from engine.ids import time_ordered_id


def test_an_id_is_32_hex_digits_led_by_the_milliseconds_it_was_made_in() -> None:
    before = time.time_ns() // 1_000_000
    made = time_ordered_id()
    after = time.time_ns() // 1_000_000
    assert re.fullmatch(r"[0-9a-f]{32}", made)
    assert before <= int(made[:12], 16) <= after


def test_ids_made_in_later_milliseconds_sort_after_earlier_ones() -> None:
    earlier = [time_ordered_id() for _ in range(50)]
    time.sleep(0.002)
    later = [new_event_id() for _ in range(50)]
    assert max(earlier) < min(later)
    assert len(set(earlier + later)) == 100


def test_a_forked_child_draws_other_ids_than_its_parent() -> None:
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, through the pipe
        os.close(reader)
        os.write(writer, "".join(time_ordered_id()[12:] for _ in range(20)).encode())
        os._exit(0)
    os.close(writer)
    parent = {time_ordered_id()[12:] for _ in range(20)}
    with os.fdopen(reader, "rb") as pipe:
        text = pipe.read().decode()
    os.waitpid(pid, 0)
    child = {text[i:i + 20] for i in range(0, len(text), 20)}
    assert len(child) == 20
    assert not parent & child
