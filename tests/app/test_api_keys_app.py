"""Settings ▸ API keys: a key made with the rights checked in the New API key dialog, on the real engine."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QCheckBox, QStyle, QStyleOptionButton

from app.key_dialog import NewKeyDialog
from app.settings import SecretStore
from app.settings_dialog import SettingsDialog
from app.window import MainWindow
from engine.approvals.keys import DECIDE_SCOPE, READ_SCOPE, START_SCOPE, check_key
from tests.app.cells import cell


def click_box(qtbot, box: QCheckBox) -> None:
    """Click the check box's indicator, where a user clicks."""
    option = QStyleOptionButton()
    option.initFrom(box)
    indicator = box.style().subElementRect(QStyle.SubElement.SE_CheckBoxIndicator, option, box)
    qtbot.mouseClick(box, Qt.MouseButton.LeftButton, pos=indicator.center())


def test_generate_makes_a_key_with_only_the_rights_checked(
        qtbot, open_engine_window: Callable[..., MainWindow]) -> None:
    window = open_engine_window(serve_workers=False, show=False)
    store = SecretStore(window.settings.data_dir, use_keyring=False)
    settings = SettingsDialog(window.settings, store=store, bridge=window.bridge)
    qtbot.addWidget(settings)
    settings.show()
    settings.show_tab("API keys")
    qtbot.waitExposed(settings)
    generate = next(button for button in settings.key_buttons if button.text() == "Generate key…")
    qtbot.mouseClick(generate, Qt.MouseButton.LeftButton)
    dialog = settings.new_key_dialog
    assert dialog is not None
    qtbot.waitExposed(dialog)
    assert all(box.isChecked() for box in dialog.right_boxes.values())
    qtbot.keyClicks(dialog.name_edit, "approvals-bot")
    click_box(qtbot, dialog.right_boxes["start"])
    click_box(qtbot, dialog.right_boxes["publish"])
    assert dialog.ok_button.isEnabled()
    with qtbot.waitSignal(settings.key_created, timeout=20_000) as created:
        qtbot.mouseClick(dialog.ok_button, Qt.MouseButton.LeftButton)
    name, key, scopes = created.args
    assert (name, scopes) == ("approvals-bot", [READ_SCOPE, DECIDE_SCOPE])

    services = window.bridge.services if window.bridge is not None else None
    assert services is not None
    assert check_key(services.sql, key, START_SCOPE).refusal == "key_without_rights"
    assert check_key(services.sql, key, READ_SCOPE).name == "approvals-bot"
    assert check_key(services.sql, key, DECIDE_SCOPE).name == "approvals-bot"

    box = settings.new_key_box
    assert box is not None
    qtbot.waitExposed(box)
    assert "with the rights read, decide" in box.text()
    assert key in box.text()
    copy = box.defaultButton()
    assert copy.text() == "Copy key and close"
    qtbot.mouseClick(copy, Qt.MouseButton.LeftButton)
    assert QGuiApplication.clipboard().text() == key
    assert not box.isVisible()
    qtbot.waitUntil(lambda: settings.keys_table.rowCount() == 1, timeout=20_000)
    header = settings.keys_table.horizontalHeaderItem(1)
    assert header is not None
    assert header.text() == "Rights"
    assert [cell(settings.keys_table, 0, c).text() for c in (0, 1, 3)] == ["approvals-bot", "read, decide", "active"]


def test_create_key_is_disabled_without_a_name_or_a_right(qtbot) -> None:
    dialog = NewKeyDialog()
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    assert not dialog.ok_button.isEnabled()
    qtbot.keyClicks(dialog.name_edit, "dashboard")
    assert dialog.ok_button.isEnabled()
    for right in ("read", "start", "publish", "decide"):
        click_box(qtbot, dialog.right_boxes[right])
    assert not any(box.isChecked() for box in dialog.right_boxes.values())
    assert not dialog.ok_button.isEnabled()
    assert dialog.problem.text() == "Check at least one right."
    click_box(qtbot, dialog.right_boxes["read"])
    assert dialog.ok_button.isEnabled()
    assert dialog.scopes() == (READ_SCOPE,)
    dialog.name_edit.selectAll()
    qtbot.keyClick(dialog.name_edit, Qt.Key.Key_Delete)
    assert not dialog.ok_button.isEnabled()
    assert dialog.problem.text() == "Name the key."


def test_new_key_dialog_describes_every_right(qtbot) -> None:
    dialog = NewKeyDialog()
    qtbot.addWidget(dialog)
    texts = {right: box.text() for right, box in dialog.right_boxes.items()}
    assert texts == {
        "read": "read — see runs, flows, approvals and live streams",
        "start": "start — start, cancel and rerun runs",
        "publish": "publish — publish flows",
        "decide": "decide — decide approvals",
    }
