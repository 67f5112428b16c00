"""The run: the controller and its parts (protocol, health, worker, steps, snapshots) behind the ``Engine`` facade."""
