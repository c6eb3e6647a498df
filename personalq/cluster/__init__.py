"""Beyond one machine: rendering as a Ray Serve deployment, multiplexed by (checkpoint, setting).

Nothing here is imported unless `PERSONALQ_RAY_ADDRESS` is set or `--ray` is passed; Ray is an
optional extra (requirements-cluster.txt), so a single-machine install never needs it.
"""
