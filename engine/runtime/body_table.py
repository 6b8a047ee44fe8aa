"""Every node type's body: importing this module registers them all in `engine.runtime.bodies`.

The executor imports it, so any run (a worker's, a flow test's replay) finds every type's body.
"""

import engine.approvals.body
import engine.calls.body
import engine.money.bodies
import engine.parking.callback_body
import engine.runtime.builtin_bodies
import engine.runtime.http_body
import engine.runtime.script_body  # noqa: F401  (registers script)
