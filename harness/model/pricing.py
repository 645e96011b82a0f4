"""Usage → cost in USD, from the published per-million-token prices of Claude models.

Source: platform.claude.com "Pricing" (base input, 5-minute cache writes, cache hits, output).
Cache writes cost 1.25 times the input price. An unknown model costs ``None`` (never a guess).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.ports import Usage


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_read: float

    @property
    def cache_write(self) -> float:
        return self.input * 1.25


# Model id prefix (dated ids like claude-sonnet-4-5-20250929 match their family) → price.
# Longest prefix wins, so "claude-opus-4-1" is not priced as "claude-opus-4".
PRICES: dict[str, Price] = {
    "claude-fable-5-1": Price(10.0, 50.0, 0.25),
    "claude-mythos-5-1": Price(10.0, 50.0, 0.25),
    "claude-fable-5": Price(10.0, 50.0, 1.0),
    "claude-mythos-5": Price(10.0, 50.0, 1.0),
    "claude-opus-5": Price(5.0, 25.0, 0.5),
    "claude-opus-4-8": Price(5.0, 25.0, 0.5),
    "claude-opus-4-7": Price(5.0, 25.0, 0.5),
    "claude-opus-4-6": Price(5.0, 25.0, 0.5),
    "claude-opus-4-5": Price(5.0, 25.0, 0.5),
    "claude-opus-4-1": Price(15.0, 75.0, 1.5),
    "claude-opus-4": Price(15.0, 75.0, 1.5),
    "claude-sonnet-4-6": Price(3.0, 15.0, 0.3),
    "claude-sonnet-4-5": Price(3.0, 15.0, 0.3),
    "claude-sonnet-4": Price(3.0, 15.0, 0.3),
    "claude-3-7-sonnet": Price(3.0, 15.0, 0.3),
    "claude-haiku-4-5": Price(1.0, 5.0, 0.1),
    "claude-3-5-haiku": Price(0.8, 4.0, 0.08),
    "claude-3-haiku": Price(0.25, 1.25, 0.03),
}


def _of_family(model: str, prefix: str) -> bool:
    """``model`` is ``prefix`` or ``prefix`` then ``-YYYYMMDD``, ``-latest`` or ``@…`` (plain
    string tests: compiling a pattern per family cost the first model call of a run tens of ms)."""
    if not model.startswith(prefix):
        return False
    rest = model[len(prefix) :]
    if not rest or rest.startswith(("-latest", "@")):
        return True
    return len(rest) >= 9 and rest[0] == "-" and rest[1:9].isdecimal()


def price_of(model: str) -> Price | None:
    """The price of ``model`` (exact id, or a dated/suffixed id of a known family)."""
    best: str | None = None
    for prefix in PRICES:
        if _of_family(model, prefix) and (best is None or len(prefix) > len(best)):
            best = prefix
    return PRICES[best] if best is not None else None


def cost_usd(model: str, usage: Usage) -> float | None:
    """What ``usage`` on ``model`` costs; ``None`` when the model's price is unknown."""
    price = price_of(model)
    if price is None:
        return None
    total = (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_creation_input_tokens * price.cache_write
        + usage.cache_read_input_tokens * price.cache_read
    )
    return total / 1_000_000
