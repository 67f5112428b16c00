"""Built-in workload profiles (TOML files beside this module), installed as ``loadgen.builtin_profiles``."""
