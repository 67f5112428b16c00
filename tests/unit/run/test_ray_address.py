"""Ray addresses as ramp shows them: no password, with a scheme or without one."""

from __future__ import annotations

import pytest

from loadgen.run.ray_fleet import ramp_starts_ray, shown_address


@pytest.mark.parametrize(
    ("address", "secret", "shown"),
    [
        ("u:s3cret@10.0.0.9:6379", "s3cret", "u:***@10.0.0.9:6379"),
        ("ray://u:s3cret@10.0.0.9:10001", "s3cret", "ray://***@10.0.0.9:10001"),
        ("redis://:p%40ss@10.0.0.9:6379", "p@ss", "redis://***@10.0.0.9:6379"),
    ],
)
def test_the_password_is_masked_in_the_address_and_in_messages(address: str, secret: str, shown: str) -> None:
    assert shown_address(address, address) == shown
    message = f"Invalid address format: {address} (also {secret} alone)"
    masked = shown_address(message, address)
    assert secret not in masked and "s3cret" not in masked and "p%40ss" not in masked
    assert shown_address("10.0.0.9:6379", "10.0.0.9:6379") == "10.0.0.9:6379"


def test_ramp_starts_ray_only_without_an_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert ramp_starts_ray("") and ramp_starts_ray(None) and not ramp_starts_ray("auto")
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.9:6379")
    assert not ramp_starts_ray("")
