"""The node agent's poll."""


# --- Node agents -------------------------------------------------------------------------

# One statement per agent poll: the credential's agent and node, the database's clock, and
# the node's allocations as its desired state lists them (live, paid past now, a scheduled
# one within the lead), each with the GPUs it holds now and the keys of its team's members
# that were chosen for it. The agent's last_seen_at is written in passing, at most every
# %(seen_every)s, so most polls write nothing. rentals.access builds the state from it.
AGENT_POLL = """
WITH agent AS (
    SELECT a.id, a.node_id, a.served_generation, statement_timestamp() AS now
    FROM telemetry_nodeagent a
    WHERE a.key_hash = %(key_hash)s AND a.revoked_at IS NULL
), seen AS (
    UPDATE telemetry_nodeagent a SET last_seen_at = agent.now
    FROM agent
    WHERE a.id = agent.id
      AND (a.last_seen_at IS NULL OR a.last_seen_at < agent.now - %(seen_every)s)
    RETURNING a.id
)
SELECT agent.id, agent.served_generation, agent.now, n.id, n.hostname, n.exporter,
       coalesce((
           SELECT json_agg(json_build_array(
                      al.id, al.state, al.paid_from, al.paid_until,
                      (SELECT coalesce(json_agg(json_build_array(g.index, g.uuid)), '[]')
                       FROM rentals_allocationgpu ag JOIN catalog_gpu g ON g.id = ag.gpu_id
                       WHERE ag.allocation_id = al.id AND NOT ag.released
                         AND ag.ends_at = al.paid_until),  -- its GPUs now, not swapped ones
                      (SELECT coalesce(json_agg(k.public_key), '[]')
                       FROM rentals_allocationkey ak
                       JOIN accounts_sshkey k ON k.id = ak.ssh_key_id
                       JOIN accounts_membership m
                         ON m.user_id = k.user_id AND m.team_id = al.team_id
                       JOIN accounts_team t ON t.id = al.team_id
                       WHERE ak.allocation_id = al.id
                         AND (NOT t.require_second_factor OR EXISTS (
                               SELECT 1 FROM mfa_authenticator f
                               WHERE f.user_id = k.user_id AND f.type = %(totp)s))),
                      al.vcpus_per_gpu, al.ram_gib_per_gpu))
           FROM rentals_allocation al
           WHERE al.node_id = n.id AND al.state = ANY(%(live)s) AND al.paid_until > agent.now
             AND (al.state <> %(scheduled)s OR al.paid_from <= agent.now + %(lead)s)
       ), '[]') AS allocations,
       (SELECT count(*) FROM seen)
FROM agent JOIN catalog_node n ON n.id = agent.node_id
"""
