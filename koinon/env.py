"""Environment readers that fail loudly on a bad value."""

import ipaddress
import os
from pathlib import Path


class ImproperlyConfiguredEnv(RuntimeError):
    pass


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfiguredEnv(f"{name} must be a boolean (true/false), got {raw!r}")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfiguredEnv(f"{name} must be an integer, got {raw!r}") from None


def env_int_between(name: str, default: int, low: int, high: int) -> int:
    """An integer from low to high (inclusive); anything else fails loudly, naming the range."""
    value = env_int(name, default)
    if not low <= value <= high:
        raise ImproperlyConfiguredEnv(f"{name} must be between {low} and {high}, got {value}")
    return value


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise ImproperlyConfiguredEnv(f"{name} must be a number, got {raw!r}") from None


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_choice(name: str, default: str, choices: set[str]) -> str:
    value = os.environ.get(name) or default
    if value not in choices:
        raise ImproperlyConfiguredEnv(
            f"{name} must be one of {', '.join(sorted(choices))}, got {value!r}"
        )
    return value


def env_path(name: str, default: Path) -> Path:
    raw = os.environ.get(name)
    path = Path(raw) if raw else default
    return path.expanduser().resolve()


def judge_threads() -> int:
    """How many pairs the support judge's cross-encoder runs at once, each on one thread of
    its own: KOINON_JUDGE_THREADS, 2 by default. A selection judges its two best spans
    together, so two halve its wait on a quiet machine; 1 runs them one after another."""
    raw = os.environ.get("KOINON_JUDGE_THREADS", "").strip() or "2"
    if not raw.isdigit() or not 1 <= int(raw) <= 64:
        raise ImproperlyConfiguredEnv(
            f"KOINON_JUDGE_THREADS must be a whole number from 1 to 64, got {raw!r}"
        )
    return int(raw)


def env_host_ports(name: str) -> list[tuple[str, int]]:
    """A comma-separated list of `host:port` (Redis Sentinels); empty when unset."""
    pairs = []
    for item in env_list(name, []):
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ImproperlyConfiguredEnv(f"{name} must list host:port pairs, got {item!r}")
        pairs.append((host.strip("[]"), int(port)))
    return pairs


def env_networks(name: str) -> list[str]:
    """A comma-separated list of networks in CIDR notation (`10.1.0.0/16`, `fd12::/64`; a bare
    address is one host), each written back canonically; empty when unset. A malformed one or
    one with host bits set (`10.1.2.3/16`, most likely a typo) fails loudly."""
    networks = []
    for item in env_list(name, []):
        try:
            networks.append(str(ipaddress.ip_network(item, strict=True)))
        except ValueError:
            raise ImproperlyConfiguredEnv(
                f"{name} must list networks in CIDR notation, got {item!r}"
            ) from None
    return networks
