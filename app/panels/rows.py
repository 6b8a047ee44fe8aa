"""What the engine panels show, as plain rows (the bridge converts the engine's records into these)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from engine.durations import format_duration
from engine.money.amounts import MICROS_PER_USD, format_usd

RUN_STATUSES: tuple[str, ...] = ("queued", "running", "waiting", "succeeded", "failed", "interrupted", "cancelled")
STATUS_COLOURS: dict[str, str] = {
    "queued": "#646b77",
    "running": "#1b64c0",
    "waiting": "#a35200",
    "succeeded": "#1d7a43",
    "failed": "#c42b2b",
    "interrupted": "#9c3f8a",
    "cancelled": "#5f6673",
}
"""Status colours on the light theme's white and light grey (text and bars)."""
STATUS_COLOURS_DARK: dict[str, str] = {
    "queued": "#a3aab6",
    "running": "#6ea8ff",
    "waiting": "#ffa94d",
    "succeeded": "#51cf66",
    "failed": "#ff7b72",
    "interrupted": "#e599f7",
    "cancelled": "#9aa1ad",
}
"""The same on the dark theme's near-black."""


def status_colours(dark: bool) -> dict[str, str]:
    return STATUS_COLOURS_DARK if dark else STATUS_COLOURS


@dataclass(frozen=True)
class RunRow:
    run_id: str
    flow_id: str
    version: int
    status: str
    started_at: datetime | None
    finished_at: datetime | None
    cost_usd: float | None
    """None: the engine did not report a cost for this run."""
    current_node: str | None = None
    waiting_reason: str | None = None
    waiting_until: datetime | None = None
    tokens_in: int | None = None
    """Prompt tokens of the run's model calls; None: the engine did not report them."""
    tokens_out: int | None = None

    def where(self, now: datetime) -> str:
        """The current node, or what the run waits on and for how long."""
        if self.status == "waiting" and self.current_node:
            text = f"{self.current_node}: {self.waiting_reason or 'waiting'}"
            if self.waiting_until is not None:
                text += f" ({time_left(self.waiting_until, now)} left)"
            return text
        return self.current_node or ""

    def duration(self, now: datetime) -> str:
        if self.started_at is None:
            return ""
        end = self.finished_at or now
        return format_duration(max(0.0, round((end - self.started_at).total_seconds())))


@dataclass(frozen=True)
class ApprovalRow:
    approval_id: str
    flow_id: str
    run_id: str
    node: str
    message: str
    requested_at: datetime
    expires_at: datetime | None
    required: int = 1
    approved_count: int = 0
    decisions: tuple[ApprovalVoteRow, ...] = field(default_factory=tuple)
    escalated: bool = False
    reminders_sent: int = 0
    title: str = ""
    """The node's title in the run's published version ('' when the node has none)."""

    @property
    def node_label(self) -> str:
        """What the panel calls the node: its title, else its id."""
        return self.title or self.node

    @property
    def is_quorum(self) -> bool:
        return self.required > 1

    def progress(self) -> str:
        """"2 of 3 approved" for a quorum ("" for a v1 approval), then "escalated" and the reminders sent."""
        parts = [f"{self.approved_count} of {self.required} approved"] if self.is_quorum else []
        if self.escalated:
            parts.append("escalated")
        if self.reminders_sent:
            parts.append(f"{self.reminders_sent} reminder{'s' if self.reminders_sent != 1 else ''} sent")
        return " · ".join(parts)

    def decided_so_far(self) -> str:
        """Who decided so far, when, and their comments: one line each."""
        return "\n".join(vote.line() for vote in self.decisions)


@dataclass(frozen=True)
class ApprovalVoteRow:
    by: str
    decision: str
    """`approve` or `reject`."""
    comment: str
    at: datetime

    def line(self) -> str:
        said = f" — “{self.comment}”" if self.comment else ""
        return f"{self.decision}d by {self.by} at {local_time(self.at)}{said}"


@dataclass(frozen=True)
class BudgetRow:
    name: str
    limit_usd: float
    spent_usd: float
    held_usd: float
    period: str

    @property
    def remaining_usd(self) -> float:
        return max(0.0, self.limit_usd - self.spent_usd - self.held_usd)


@dataclass(frozen=True)
class HoldRow:
    hold_id: str
    run_id: str
    node: str
    amount_usd: float
    state: str
    expires_at: datetime | None
    charged_usd: float | None = None


def time_left(until: datetime, now: datetime) -> str:
    """`8m30s`, or `23h59m` past an hour (seconds are noise there, as on the canvas), or `due`."""
    seconds = (until - now).total_seconds()
    if seconds <= 0:
        return "due"
    return format_duration(seconds // 60 * 60 if seconds >= 3600 else round(seconds))


def local_time(moment: datetime | None) -> str:
    if moment is None:
        return ""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def short_time(moment: datetime | None, now: datetime) -> str:
    """`17:26:33` today, `Dec 7 17:26` earlier this year, `2025-12-31` before: a table's time that leaves the
    room to the columns beside it (`local_time` says it in full, as its tooltip)."""
    if moment is None:
        return ""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    local, today = moment.astimezone(), now.astimezone()
    if local.date() == today.date():
        return local.strftime("%H:%M:%S")
    if local.year == today.year:
        return f"{local:%b} {local.day} {local:%H:%M}"
    return local.strftime("%Y-%m-%d")


def token_count(count: int) -> str:
    """`980`, `12,400`, `125.3k`, `4.2M`: exact while short, rounded once it would be long."""
    if count < 100_000:
        return f"{count:,}"
    if count < 1_000_000:
        return f"{count / 1000:.1f}k"
    return f"{count / 1_000_000:.1f}M"


def tokens_text(tokens_in: int | None, tokens_out: int | None) -> str:
    """`1,234 in · 56 out`, or `—` when no model call reported tokens."""
    if not tokens_in and not tokens_out:
        return "—"
    return f"{token_count(tokens_in or 0)} in · {token_count(tokens_out or 0)} out"


def usd(amount: float) -> str:
    """Dollars as the engine and the CLI write them (`format_usd`): `$0.00`, `$1.25`, and more decimals only when
    the amount has them, to the micro-dollar (`$0.0042`, `$0.000186`), so no cost shows as a bare `$0`."""
    return format_usd(round(amount * MICROS_PER_USD))


def cents(amount: float) -> str:
    """Dollars as a table cell shows them: to the cent, `<$0.01` for a cost below one (never a bare `$0` or a
    number cut short); `usd` gives the exact amount, for the cell's tooltip."""
    if 0 < amount < 0.01:
        return "<$0.01"
    return f"${amount:,.2f}"
