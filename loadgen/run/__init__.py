"""One run of the load test: the engine facade (``engine``), its controller and the parts it wires
(``fleet``, ``steps``, ``live``, ``snapshots``, ``telemetry_link``, ``setup``, ``state``), the worker
processes (``worker``, ``loops``, ``shipping``, ``health``) and every message between them (``protocol``).

Import from the modules (``from loadgen.run.engine import Engine``): this package's ``__init__`` stays
empty so that a worker process imports only what it runs.
"""
