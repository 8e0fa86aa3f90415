"""Writes of the accounts layer, one module per thing a person owns: `teams` (teams,
invitations, roles, spend limit, buyer), `tokens` (API tokens), `ssh_keys` (their SSH keys),
`profile` (name, preferences, the e-mail confirmation). Callers import the module they use."""
