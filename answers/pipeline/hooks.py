"""Ports of the answer path, filled by the apps above it in their AppConfig.ready().

The pipeline calls upward only through these (core.ports): memory steers a plan's searches
and rechecks the entries it used before sealing; the world model records a released
comparison's claims inside the publication transaction.
"""

from core.ports import Port

# (run, plan, scope) -> Plan: the plan with the searches the asker's memory steers (memory).
plan_steer: Port = Port("answers.plan_steer")
# (run, user, scope) -> code | None: a memory entry the plan used is no longer valid in
# the recheck's fresh scope (memory).
memory_recheck: Port = Port("answers.memory_recheck")
# (user, run, generation, claims) -> records, inside the publication (worldmodel).
world_claims_record: Port = Port("answers.world_claims_record")
