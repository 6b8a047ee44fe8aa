"""A run's timeline: one bar per step from its start to its end; a park shows as a hatched gap labelled by
why the run waited (the step's work is the solid part, the rest of its span is the wait)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QBrush, QColor, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QWidget

from app.live import REASON_TEXT, timed_out
from app.theme import status_colour
from app.waiting import run_waiting
from engine.catalog import CATALOG, RETRY_PARK_REASON
from engine.durations import format_duration
from engine.read_models import Run

ROW_HEIGHT = 22
LABEL_WIDTH = 130
MIN_PARK_S = 1.0
"""A span this much longer than the step's own work counts as a park."""


@dataclass(frozen=True)
class Bar:
    node: str
    status: str
    start: float
    end: float
    work_s: float
    park_reason: str | None
    timed_out: bool = False
    """An approval nobody decided in time: labelled "timed out"."""

    @property
    def parked_s(self) -> float:
        return max(0.0, (self.end - self.start) - self.work_s) if self.park_reason else 0.0


def _seconds(value: str | None) -> float | None:
    if not value:
        return None
    moment = datetime.fromisoformat(value)
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def bars_of(run: Run, now: float) -> list[Bar]:
    """Bars of the steps that started, in start order (from `get_run` steps with started_at/finished_at); a
    rerun's reused steps did not run in it and take no time there."""
    waiting = run_waiting(run)
    bars = []
    for step in run.steps:
        start = _seconds(step.started_at)
        if start is None or step.reused_from:
            continue
        end = _seconds(step.finished_at) or now
        work = float(step.duration_ms or 0) / 1000
        spec = CATALOG.get(step.type or "")
        reason: str | None = None
        if step.status == "suspended" and waiting and waiting.node == step.node:
            reason = str(waiting.reason)
        elif (step.attempts or 0) > 1 and (end - start) - work >= MIN_PARK_S:
            reason = RETRY_PARK_REASON
        elif spec is not None and spec.park_reasons and (end - start) - work >= MIN_PARK_S:
            reason = spec.park_reasons[0]
        bars.append(Bar(step.node, step.status, start, end, work, reason, timed_out(step)))
    return sorted(bars, key=lambda b: b.start)


class TimelineWidget(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("runTimeline")
        self.bars: list[Bar] = []
        self.setMinimumHeight(ROW_HEIGHT * 3)

    def set_run(self, run: Run, now: float) -> None:
        self.bars = bars_of(run, now)
        self.setMinimumHeight(ROW_HEIGHT * (len(self.bars) + 2))
        self.updateGeometry()
        self.update()

    def sizeHint(self) -> QSize:
        return QSize(600, ROW_HEIGHT * (len(self.bars) + 2))

    def paintEvent(self, _event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        text = self.palette().text().color()
        muted = self.palette().placeholderText().color()
        if not self.bars:
            painter.setPen(muted)
            painter.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "No steps have started yet.")
            painter.end()
            return
        first = min(b.start for b in self.bars)
        last = max(b.end for b in self.bars)
        span = max(last - first, 0.001)
        width = max(self.width() - LABEL_WIDTH - 10, 50)

        def x(moment: float) -> float:
            return LABEL_WIDTH + (moment - first) / span * width

        painter.setPen(muted)
        painter.drawText(QRectF(LABEL_WIDTH, 0, width, ROW_HEIGHT), Qt.AlignmentFlag.AlignLeft, "0s")
        painter.drawText(QRectF(LABEL_WIDTH, 0, width, ROW_HEIGHT), Qt.AlignmentFlag.AlignRight,
                         format_duration(round(span)))
        for index, bar in enumerate(self.bars):
            top = ROW_HEIGHT * (index + 1) + 3
            painter.setPen(text)
            painter.drawText(QRectF(4, top - 3, LABEL_WIDTH - 8, ROW_HEIGHT),
                             Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, bar.node)
            colour = QColor(status_colour(bar.status))
            full = QRectF(x(bar.start), top, max(x(bar.end) - x(bar.start), 2.0), ROW_HEIGHT - 8)
            if bar.park_reason:
                work_share = bar.work_s / max(bar.end - bar.start, 0.001)
                solid = QRectF(full.left(), full.top(), max(full.width() * work_share, 2.0), full.height())
                gap = QRectF(solid.right(), full.top(), max(full.right() - solid.right(), 0.0), full.height())
                painter.setPen(QPen(QColor(status_colour("waiting")), 1))
                painter.setBrush(QBrush(QColor(status_colour("waiting")), Qt.BrushStyle.BDiagPattern))
                painter.drawRect(gap)
                painter.setPen(Qt.PenStyle.NoPen)
                painter.setBrush(colour)
                painter.drawRect(solid)
                label = f"{REASON_TEXT.get(bar.park_reason, bar.park_reason)} · {format_duration(round(bar.parked_s))}"
                if bar.timed_out:
                    label += " · timed out"
                painter.setPen(text)
                align = Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft
                painter.drawText(gap.adjusted(4, -2, 200, 2), align, label)
            else:
                painter.setPen(Qt.PenStyle.NoPen)
                painter.setBrush(colour)
                painter.drawRoundedRect(full, 2, 2)
                if bar.timed_out:
                    painter.setPen(text)
                    painter.drawText(full.adjusted(full.width() + 4, -2, 200, 2),
                                     Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, "timed out")
        painter.end()
