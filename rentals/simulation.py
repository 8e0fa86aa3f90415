"""The node simulator's view of the fleet, following the allocations' states: the loader that
`manage.py simulate_nodes` (and the tests) hand to telemetry's simulator."""

from rentals.selectors import gpu_states_at
from telemetry.simulator import fleet_from_database


def simulated_fleet():
    return fleet_from_database(gpu_states=gpu_states_at)
