"""A run seen from outside: ramp's own Prometheus metrics and health (``exporter``), the latest snapshot shared
read-only for ``ramp attach`` (``share``), a ``Snapshot`` as JSON and back (``snapshot_json``), and the attach
console's link to another ramp (``remote``).

A sibling of ``loadgen.run`` in the layers contract: it reads what the engine publishes (snapshots, the run's
state) and never steers the run's hot path. Import from the modules; this ``__init__`` stays empty.
"""
