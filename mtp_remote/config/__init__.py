"""The files an operator writes: the inventory of hosts, the playbooks, and where the files are."""
