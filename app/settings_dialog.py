"""The Settings dialog: data folder, Redis, database, providers, budgets and API keys.

Secrets typed here go to the SecretStore at once on OK and are only ever shown
masked afterwards; a generated API key is shown in full exactly once.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.bridge import EngineBridge
from app.key_dialog import NewKeyDialog, rights_text
from app.panels.tables import fit_columns
from app.settings import (
    AppSettings,
    BudgetSetting,
    ProviderSetting,
    SecretStore,
    approval_key_secret_name,
    login_name,
    mask_secret,
    provider_secret_name,
)
from engine.approvals.keys import ALL_SCOPES

PERIODS = ("day", "week", "month")


class SettingsError(ValueError):
    """A value in the dialog that cannot be saved; the message says which and how to fix it."""


def _table(headers: tuple[str, ...]) -> QTableWidget:
    table = QTableWidget(0, len(headers))
    table.setHorizontalHeaderLabels(list(headers))
    table.verticalHeader().hide()
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setWordWrap(False)  # one line a row: a long URL or price table elides instead of wrapping out of sight
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
    return table


def _field_note(text: str) -> QLabel:
    """A hint right under the field before it (not the padded, centred text of an empty panel)."""
    note = QLabel(text)
    note.setObjectName("fieldNote")
    note.setWordWrap(True)
    note.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
    return note


def _cell(table: QTableWidget, row: int, column: int) -> str:
    item = table.item(row, column)
    return item.text().strip() if item is not None else ""


def parse_price_table(text: str, provider: str) -> dict[str, dict[str, float]]:
    """`{"model": {"input": 0.5, "output": 1.5}}` (USD per 1M tokens) from the Price table cell."""
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SettingsError(f"provider {provider!r}: the price table is not JSON ({exc}); "
                            'write it like {"sim-small": {"input": 0.5, "output": 1.5}}') from None
    if not isinstance(data, dict):
        raise SettingsError(f"provider {provider!r}: the price table must map model names to prices")
    prices: dict[str, dict[str, float]] = {}
    for model, entry in data.items():
        if not isinstance(entry, dict) or set(entry) - {"input", "output"} or not all(
            isinstance(v, int | float) and v >= 0 for v in entry.values()
        ):
            raise SettingsError(f"provider {provider!r}, model {model!r}: give input and output prices in USD per "
                                "million tokens, zero or more")
        prices[str(model)] = {k: float(v) for k, v in entry.items()}
    return prices


def providers_hint(data_dir: Path) -> str:
    """What the empty Providers tab says: which provider the engine uses with none set here (the bundled
    simulator as `local`, or the entries written by hand in providers.json) and how to add one."""
    from app.provider_file import SETTINGS_MANAGER, existing_providers, simulator_entry_wanted
    from engine.providers.registry import PROVIDERS_FILE

    add = ("To call a real provider, press <b>Add</b> and give its name (what an AI model node's Provider field "
           "says), its base URL (an OpenAI-compatible API, e.g. https://api.openai.com/v1), its API key and, for "
           "costs, its prices.")
    if simulator_entry_wanted(data_dir):
        return ("No providers are set here, so AI model nodes use <b>local</b>: the provider simulator that comes "
                "with Lockgate, which the app starts with its engine on this machine (models sim-small and "
                "sim-large, made-up answers at demo prices, no key; nothing leaves the machine). The examples "
                f"call it.<br><br>{add}")
    path = data_dir / PROVIDERS_FILE
    try:
        names = [p.name for p in existing_providers(data_dir) if p.managed_by != SETTINGS_MANAGER]
    except ValueError as exc:
        return f"No providers are set here, and {html.escape(str(path))} cannot be read: {html.escape(str(exc))}"
    listed = ", ".join(f"<b>{html.escape(name)}</b>" for name in names) or "none"
    return (f"No providers are set here; the engine uses the ones written by hand in {html.escape(str(path))}: "
            f"{listed}.<br><br>{add}")


class SettingsDialog(QDialog):
    key_created = Signal(str, str, list)
    """(name, key, scopes) of an API key just created: the only time the key is available in full."""
    keys_listed = Signal()

    def __init__(self, settings: AppSettings, parent: QWidget | None = None, store: SecretStore | None = None,
                 bridge: EngineBridge | None = None) -> None:
        super().__init__(parent)
        self.bridge = bridge
        self.setWindowTitle("Lockgate settings")
        self.setMinimumSize(680, 420)  # the Providers headers show whole
        self.resize(820, 460)  # room for a provider's base URL beside the other columns' headers
        self.settings = settings
        self.store = store or settings.secret_store()
        self.new_secrets: dict[str, str] = {}
        self.new_key_dialog: NewKeyDialog | None = None
        self.new_key_box: QMessageBox | None = None
        self.deleted_secrets: set[str] = set()
        self.key_created.connect(self._show_new_key)

        self.tabs = QTabWidget(self)
        self.tabs.addTab(self._general_tab(), "General")
        self.tabs.addTab(self._engine_tab(), "Engine")
        self.tabs.addTab(self._providers_tab(), "Providers")
        self.tabs.addTab(self._budgets_tab(), "Budgets")
        self.tabs.addTab(self._keys_tab(), "API keys")
        self.secrets_note = QLabel(self.store.where, self)
        self.secrets_note.setObjectName("secretsNote")
        self.secrets_note.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs)
        layout.addWidget(self.secrets_note)
        layout.addWidget(buttons)

    def show_tab(self, title: str) -> None:
        """Bring the tab titled `title` forward (General, Engine, Providers, Budgets, API keys)."""
        for index in range(self.tabs.count()):
            if self.tabs.tabText(index) == title:
                self.tabs.setCurrentIndex(index)
                return
        raise KeyError(f"no settings tab {title!r}")

    def show_budget(self, name: str) -> None:
        """The Budgets tab with budget `name` selected, added (with a starting limit) when there is none."""
        self.show_tab("Budgets")
        for row in range(self.budgets_table.rowCount()):
            if _cell(self.budgets_table, row, 0) == name:
                break
        else:
            self._add_budget_row(BudgetSetting(name, 10.0, "month"))
            row = self.budgets_table.rowCount() - 1
        self.budgets_table.setCurrentCell(row, 1)
        self.budgets_table.setFocus()

    # ----- tabs ---------------------------------------------------------------------

    def _general_tab(self) -> QWidget:
        page = QWidget()
        form = QFormLayout(page)
        self.your_name_edit = QLineEdit(self.settings.your_name)
        self.your_name_edit.setObjectName("yourNameEdit")
        self.your_name_edit.setPlaceholderText(login_name())
        form.addRow("Your name", self.your_name_edit)
        note = _field_note("Approvals you decide in the app are decided as this name: an approval node that lists "
                           "its approvers (alice, bob) accepts only those names. Empty: your login name.")
        form.addRow("", note)
        return page

    def _engine_tab(self) -> QWidget:
        page = QWidget()
        form = QFormLayout(page)
        self.data_dir_edit = QLineEdit(str(self.settings.data_dir))
        self.data_dir_edit.setObjectName("dataDirEdit")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse_data_dir)
        row = QHBoxLayout()
        row.addWidget(self.data_dir_edit, 1)
        row.addWidget(browse)
        self.redis_edit = QLineEdit(self.settings.redis_url)
        self.redis_edit.setObjectName("redisUrlEdit")
        self.redis_edit.setPlaceholderText("empty: the embedded server, kept in the data folder")
        self.db_edit = QLineEdit(self.settings.db_url)
        self.db_edit.setObjectName("dbUrlEdit")
        self.db_edit.setPlaceholderText("empty: SQLite file lockgate.db in the data folder")
        form.addRow("Data folder", row)
        form.addRow("Redis URL", self.redis_edit)
        form.addRow("Database URL", self.db_edit)
        form.addRow("", _field_note("Engine locations take effect the next time Lockgate starts."))
        return page

    def _providers_tab(self) -> QWidget:
        self.providers_table = _table(("Name", "Base URL", "API key", "Prices (USD per 1M tokens, JSON)",
                                       "Pool (calls at once)"))
        self.providers_table.setObjectName("providersTable")
        # Headers whole: the short columns fit their header (and a typical value), the base URL takes the rest.
        self.providers_table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        fit_columns(self.providers_table, {0: "openai", 2: "sk-…abcd"}, stretch=1)
        self.providers_hint = QLabel(self.providers_table.viewport())
        self.providers_hint.setObjectName("emptyHint")
        self.providers_hint.setTextFormat(Qt.TextFormat.RichText)
        self.providers_hint.setWordWrap(True)
        self.providers_hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.providers_hint.setText(providers_hint(self.settings.data_dir))
        self.providers_table.viewport().installEventFilter(self)
        model = self.providers_table.model()
        model.rowsInserted.connect(self._show_providers_hint)
        model.rowsRemoved.connect(self._show_providers_hint)
        for provider in self.settings.providers():
            self._add_provider_row(provider)
        self._show_providers_hint()
        self.providers_table.itemChanged.connect(self._provider_item_changed)
        return self._with_buttons(self.providers_table, lambda: self._add_provider_row(None), self._remove_provider)

    def _show_providers_hint(self) -> None:
        """The hint fills the empty table (under its headers) and goes once a row is added."""
        self.providers_hint.setGeometry(self.providers_table.viewport().rect())
        self.providers_hint.setVisible(self.providers_table.rowCount() == 0)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.providers_table.viewport() and event.type() == QEvent.Type.Resize:
            self.providers_hint.setGeometry(self.providers_table.viewport().rect())
        return super().eventFilter(watched, event)

    def _budgets_tab(self) -> QWidget:
        self.budgets_table = _table(("Name", "Limit (USD)", "Period"))
        self.budgets_table.setObjectName("budgetsTable")
        for budget in self.settings.budgets():
            self._add_budget_row(budget)
        return self._with_buttons(self.budgets_table, lambda: self._add_budget_row(None),
                                  lambda: self._remove_row(self.budgets_table))

    def _keys_tab(self) -> QWidget:
        self.keys_table = _table(("Name", "Rights", "Created", "State", "Key"))
        self.keys_table.setObjectName("keysTable")
        self.keys_table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.keys_table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        fit_columns(self.keys_table, {1: rights_text(ALL_SCOPES), 2: "2025-12-31 23:59:59", 3: "revoked",
                                      4: "lg…abcd"}, stretch=0)
        self.keys_note = QLabel(self)
        self.keys_note.setObjectName("keysNote")
        self.keys_note.setWordWrap(True)
        page = self._with_buttons(self.keys_table, self._generate_key, self._revoke_selected_key,
                                  add_text="Generate key…", remove_text="Revoke")
        page.layout().addWidget(self.keys_note)  # type: ignore[union-attr]
        self.key_buttons = [b for b in page.findChildren(QPushButton)]
        engine_ready = self.bridge is not None and self.bridge.available
        for button in self.key_buttons:
            button.setEnabled(engine_ready)
        if engine_ready:
            self.keys_note.setText("Keys for the HTTP API and the CLI's --key, each with its rights. They are "
                                   "created and revoked in the engine at once (it keeps only their hash); a new key "
                                   "is shown in full once.")
            self.refresh_keys()
        else:
            self.keys_note.setText("API keys live in the engine's database: start the engine to list, create "
                                   "or revoke them.")
        return page

    def _with_buttons(self, table: QTableWidget, add: Any, remove: Any, add_text: str = "Add",
                      remove_text: str = "Remove") -> QWidget:
        page = QWidget()
        layout = QVBoxLayout(page)
        layout.addWidget(table)
        row = QHBoxLayout()
        add_button = QPushButton(add_text)
        add_button.clicked.connect(lambda: add())
        remove_button = QPushButton(remove_text)
        remove_button.clicked.connect(lambda: remove())
        row.addWidget(add_button)
        row.addWidget(remove_button)
        row.addStretch(1)
        layout.addLayout(row)
        return page

    # ----- rows ---------------------------------------------------------------------

    def _add_provider_row(self, provider: ProviderSetting | None) -> None:
        table = self.providers_table
        table.blockSignals(True)
        row = table.rowCount()
        table.insertRow(row)
        name = provider.name if provider else ""
        table.setItem(row, 0, QTableWidgetItem(name))
        table.setItem(row, 1, QTableWidgetItem(provider.base_url if provider else ""))
        key_item = QTableWidgetItem(self.store.masked(provider_secret_name(name)) if name else "")
        key_item.setToolTip("Type a new key to replace it; it is stored as a secret and shown masked")
        table.setItem(row, 2, key_item)
        table.setItem(row, 3, QTableWidgetItem(json.dumps(provider.prices) if provider and provider.prices else ""))
        table.setItem(row, 4, QTableWidgetItem(str(provider.capacity if provider else ProviderSetting.capacity)))
        table.blockSignals(False)

    def _provider_item_changed(self, item: QTableWidgetItem) -> None:
        if item.column() != 2:
            return
        typed = item.text().strip()
        if not typed or "…" in typed:
            return
        name = _cell(self.providers_table, item.row(), 0)
        if not name:
            self.providers_table.blockSignals(True)
            item.setText("")
            self.providers_table.blockSignals(False)
            QMessageBox.warning(self, "Provider name first", "Name the provider before giving its API key.")
            return
        self.new_secrets[provider_secret_name(name)] = typed
        self.providers_table.blockSignals(True)
        item.setText(mask_secret(typed))
        self.providers_table.blockSignals(False)

    def set_provider_key(self, row: int, key: str) -> None:
        """Type `key` into a provider's API key cell (as a user would)."""
        item = self.providers_table.item(row, 2)
        assert item is not None
        item.setText(key)

    def _remove_provider(self) -> None:
        row = self.providers_table.currentRow()
        if row >= 0:
            name = _cell(self.providers_table, row, 0)
            if name:
                self.deleted_secrets.add(provider_secret_name(name))
            self.providers_table.removeRow(row)

    def _add_budget_row(self, budget: BudgetSetting | None) -> None:
        table = self.budgets_table
        row = table.rowCount()
        table.insertRow(row)
        table.setItem(row, 0, QTableWidgetItem(budget.name if budget else "default"))
        table.setItem(row, 1, QTableWidgetItem(f"{budget.limit_usd:g}" if budget else "10"))
        period = QComboBox()
        period.addItems(list(PERIODS))
        period.setCurrentText(budget.period if budget else "month")
        table.setCellWidget(row, 2, period)

    def refresh_keys(self) -> None:
        if self.bridge is None:
            return

        def done(keys: Any, error: BaseException | None) -> None:
            if error is not None:
                self.keys_note.setText(f"Keys cannot be read: {error}")
                return
            self.keys_table.setRowCount(len(keys))
            for row, info in enumerate(keys):
                cells = (info.name, rights_text(info.scopes), info.created_at[:19].replace("T", " "),
                         "revoked" if info.revoked_at else "active",
                         self.store.masked(approval_key_secret_name(info.name)))
                for column, text in enumerate(cells):
                    self.keys_table.setItem(row, column, QTableWidgetItem(text))
                rights = self.keys_table.item(row, 1)
                assert rights is not None
                rights.setToolTip("Scopes: " + (", ".join(info.scopes) or "none"))
            self.keys_listed.emit()

        self.bridge.list_approval_keys(done)

    def create_approval_key(self, name: str, scopes: tuple[str, ...] = ALL_SCOPES) -> None:
        """Create API key `name` with `scopes` in the engine; `key_created(name, key, scopes)` carries it, the only
        time it is seen."""
        if self.bridge is None:
            return

        def done(key: Any, error: BaseException | None) -> None:
            if error is not None:
                QMessageBox.warning(self, "API key not created", str(error))
                return
            self.store.set(approval_key_secret_name(name), key)
            self.key_created.emit(name, key, list(scopes))
            self.refresh_keys()

        self.bridge.create_approval_key(name.strip(), scopes, done)

    def revoke_approval_key(self, name: str) -> None:
        if self.bridge is None:
            return

        def done(_result: Any, error: BaseException | None) -> None:
            if error is not None:
                QMessageBox.warning(self, "API key not revoked", str(error))
                return
            self.store.delete(approval_key_secret_name(name))
            self.refresh_keys()

        self.bridge.revoke_approval_key(name, done)

    def _generate_key(self) -> None:
        """The New API key dialog (window-modal); on OK the key is created with the rights checked."""
        if self.new_key_dialog is not None:
            self.new_key_dialog.deleteLater()
        dialog = NewKeyDialog(self)
        dialog.accepted.connect(lambda: self.create_approval_key(dialog.key_name(), dialog.scopes()))
        self.new_key_dialog = dialog
        dialog.open()

    def _show_new_key(self, name: str, key: str, scopes: list[str]) -> None:
        if self.new_key_box is not None:
            self.new_key_box.deleteLater()
        box = QMessageBox(QMessageBox.Icon.Information, "API key created",
                          f"Key <b>{html.escape(name)}</b> with the rights {rights_text(scopes)}. Copy it now; it "
                          f"will not be shown again:<br><br><nobr><tt>{key}</tt></nobr>", parent=self)
        box.setObjectName("newKeyBox")
        box.setTextFormat(Qt.TextFormat.RichText)
        box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        copy = box.addButton("Copy key and close", QMessageBox.ButtonRole.AcceptRole)
        copy.clicked.connect(lambda: QGuiApplication.clipboard().setText(key))
        box.addButton(QMessageBox.StandardButton.Close)
        box.setDefaultButton(copy)
        self.new_key_box = box
        box.open()

    def _revoke_selected_key(self) -> None:
        row = self.keys_table.currentRow()
        if row >= 0:
            self.revoke_approval_key(_cell(self.keys_table, row, 0))

    @staticmethod
    def _remove_row(table: QTableWidget) -> None:
        if table.currentRow() >= 0:
            table.removeRow(table.currentRow())

    def _browse_data_dir(self) -> None:
        chosen = QFileDialog.getExistingDirectory(self, "Data folder", self.data_dir_edit.text())
        if chosen:
            self.data_dir_edit.setText(chosen)

    # ----- saving -------------------------------------------------------------------

    def collect(self) -> tuple[list[ProviderSetting], list[BudgetSetting]]:
        """The providers and budgets in the tables; raises SettingsError naming a bad cell."""
        providers: list[ProviderSetting] = []
        names: set[str] = set()
        for row in range(self.providers_table.rowCount()):
            name = _cell(self.providers_table, row, 0)
            if not name:
                raise SettingsError(f"provider row {row + 1} has no name; name it or remove the row")
            if name in names:
                raise SettingsError(f"provider {name!r} is listed twice; keep one row")
            names.add(name)
            base_url = _cell(self.providers_table, row, 1)
            if not base_url.startswith(("http://", "https://")):
                raise SettingsError(f"provider {name!r}: base URL {base_url!r} must start with http:// or https://")
            capacity_text = _cell(self.providers_table, row, 4) or str(ProviderSetting.capacity)
            if not capacity_text.isdigit() or not 1 <= int(capacity_text) <= 10_000:
                raise SettingsError(f"provider {name!r}: pool size {capacity_text!r} must be a whole number of calls "
                                    "at once, 1 to 10000")
            providers.append(ProviderSetting(name, base_url, parse_price_table(_cell(self.providers_table, row, 3),
                                                                               name), int(capacity_text)))
        budgets: list[BudgetSetting] = []
        for row in range(self.budgets_table.rowCount()):
            name = _cell(self.budgets_table, row, 0)
            try:
                limit = float(_cell(self.budgets_table, row, 1))
            except ValueError:
                raise SettingsError(f"budget {name!r}: the limit must be a number of USD, like 25 or 2.50") from None
            if not name or limit < 0:
                raise SettingsError(f"budget row {row + 1}: give it a name and a limit of zero or more USD")
            widget = self.budgets_table.cellWidget(row, 2)
            period = widget.currentText() if isinstance(widget, QComboBox) else "month"
            budgets.append(BudgetSetting(name, limit, period))  # type: ignore[arg-type]
        return providers, budgets

    def save(self) -> None:
        """Write everything to the settings and the secret store; raises SettingsError."""
        providers, budgets = self.collect()
        data_dir = self.data_dir_edit.text().strip()
        self.settings.data_dir = Path(data_dir).expanduser() if data_dir else None
        self.settings.your_name = self.your_name_edit.text()
        self.settings.redis_url = self.redis_edit.text()
        self.settings.db_url = self.db_edit.text()
        self.settings.set_providers(providers)
        self.settings.set_budgets(budgets)
        for name in self.deleted_secrets - set(self.new_secrets):
            self.store.delete(name)
        for name, secret in self.new_secrets.items():
            self.store.set(name, secret)
        self.new_secrets.clear()
        self.deleted_secrets.clear()
        self.settings.sync()
        self._write_providers_file(providers)

    def _write_providers_file(self, providers: list[ProviderSetting]) -> None:
        """The engine reads providers from the data folder's providers.json (keys by reference, never in it)."""
        from app.provider_file import write_settings_providers
        from engine.providers.config import ProviderConfigError

        with_keys = {p.name for p in providers if self.store.get(provider_secret_name(p.name))}
        try:
            write_settings_providers(self.settings.data_dir, providers, with_keys)
        except ProviderConfigError as exc:
            raise SettingsError(f"providers not written for the engine: {exc}") from None

    def accept(self) -> None:
        try:
            self.save()
        except (SettingsError, OSError) as exc:
            QMessageBox.warning(self, "Settings not saved", str(exc))
            return
        super().accept()
