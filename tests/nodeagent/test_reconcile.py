"""The reference agent's reconcile on a simulated machine (a folder): accounts made, keys
written with the GPUs pinned, revoke and wipe, and the rules that keep it safe: paid_until
by its own clock, nothing done to an account it did not make, nothing wiped on a guess."""

import json
from datetime import timedelta

from nodeagent.agent import Agent
from nodeagent.hosts import FolderHost
from tests.support.desired import KEY, NOW, entry, iso, state


def _agent(tmp_path, at=NOW):
    host = FolderHost(tmp_path / "node")
    return Agent(url="http://unused", credential="x", host=host, state_dir=tmp_path / "agent",
                 clock=lambda: at.timestamp()), host  # fmt: skip


def test_a_granted_allocation_gets_an_account_with_restricted_keys_and_its_gpus(tmp_path):
    agent, host = _agent(tmp_path)
    running = entry()
    result = agent.reconcile(state(running))
    assert result.applied == [running["id"]] and result.errors == []
    assert host.accounts() == {running["login"]: running["id"]}
    # No option of the key's sets the GPUs (a tenant could set them otherwise): the session
    # wrapper does, by UUID, and the kernel holds the devices.
    assert host.authorized_keys(running["login"]) == [f"restrict,pty,port-forwarding {KEY}"]
    assert host.granted() == {running["login"]: [0, 1]}
    grant = host.grant_of(running["login"])
    assert grant["environment"] == "CUDA_VISIBLE_DEVICES=GPU-0,GPU-1"
    assert (grant["cpus"], grant["memory_mib"]) == (48, 512 * 1024)


def test_a_key_line_with_options_of_its_own_never_reaches_the_node(tmp_path):
    agent, host = _agent(tmp_path)
    sneaky = entry(keys=(f'command="/bin/sh" {KEY}', f"{KEY}\nssh-ed25519 AAAA second"))
    result = agent.reconcile(state(sneaky))
    assert result.applied == [] and "not a public key line" in result.errors[0]["detail"]
    assert host.authorized_keys(sneaky["login"]) == [] and host.granted() == {}


def test_a_node_too_small_for_the_shares_sold_says_so_for_the_allocation_past_it(tmp_path):
    class SmallNode(FolderHost):
        def capacity(self):
            return 64, 600 * 2**30  # 64 CPUs, 600 GiB

    host = SmallNode(tmp_path / "node")
    agent = Agent(url="http://unused", credential="x", host=host, state_dir=tmp_path / "agent",
                  clock=lambda: NOW.timestamp())  # fmt: skip
    first, second = entry(gpus=(0,)), entry(gpus=(1, 2))  # 24 CPUs and 256 GiB a GPU
    second["paid_from"] = iso(NOW - timedelta(minutes=30))
    result = agent.reconcile(state(first, second))
    assert result.applied == [first["id"]]
    assert result.errors == [
        {"allocation": second["id"], "detail": "this node has 64 CPUs and 600 GiB of memory; "
         "its allocations need 72 CPUs and 768 GiB up to this one"}
    ]  # fmt: skip
    assert host.granted()[second["login"]] == [1, 2]  # still let in, confined, and reported


def test_revoked_takes_the_keys_away_and_wiped_leaves_nothing(tmp_path):
    agent, host = _agent(tmp_path)
    running = entry()
    agent.reconcile(state(running))
    (host.home(running["login"]) / "results.txt").write_text("work")
    agent.reconcile(state({**running, "granted": False, "keys": []}))
    assert host.authorized_keys(running["login"]) == [] and host.granted() == {}
    assert (host.home(running["login"]) / "results.txt").exists()  # stopped: data stays
    agent.reconcile(state())
    assert host.accounts() == {} and not host.home(running["login"]).exists()


def test_paid_until_is_enforced_by_the_agents_own_clock(tmp_path):
    ending = entry(until=NOW + timedelta(minutes=1))
    agent, host = _agent(tmp_path)
    agent.reconcile(state(ending))
    later, _ = _agent(tmp_path, at=NOW + timedelta(minutes=2))
    later.reconcile(state(ending))  # the same state, kept through an outage
    assert host.accounts() == {}


def test_an_account_it_did_not_make_is_never_touched(tmp_path):
    agent, host = _agent(tmp_path)
    stranger = entry()
    foreign = host.root / "accounts" / stranger["login"]
    (foreign / "home").mkdir(parents=True)
    (foreign / "account.json").write_text(json.dumps({"marker": "someone-else"}))
    result = agent.reconcile(state(stranger))
    assert result.applied == [] and "not made by this agent" in result.errors[0]["detail"]
    assert result.errors[0]["allocation"] == stranger["id"]
    agent.reconcile(state())
    assert foreign.exists()  # not ours: not wiped either


def test_with_no_state_at_all_access_goes_and_nothing_is_wiped(tmp_path):
    agent, host = _agent(tmp_path)
    running = entry()
    agent.reconcile(state(running))
    fresh, _ = _agent(tmp_path)
    (tmp_path / "agent" / "state.json").unlink(missing_ok=True)
    fresh.reconcile(None)
    assert host.accounts() == {running["login"]: running["id"]}
    assert host.authorized_keys(running["login"]) == [] and host.granted() == {}


def test_amd_nodes_set_rocr_visible_devices_by_uuid(tmp_path):
    agent, host = _agent(tmp_path)
    running = entry(gpus=(3,))
    agent.reconcile({**state(running), "gpu_variable": "ROCR_VISIBLE_DEVICES"})
    assert host.grant_of(running["login"])["environment"] == "ROCR_VISIBLE_DEVICES=GPU-3"
