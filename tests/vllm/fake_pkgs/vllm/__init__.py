"""Fake vLLM package for tests (see tests/vllm/fake_server.py)."""
