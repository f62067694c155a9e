"""A broker set's replication: the replica's role and its leader lease from the name server (``role``,
``leader_lease``), the leader's feed to followers, the follower's fetcher, the state copied beside the log, and
the warning when a set runs with fewer copies."""
