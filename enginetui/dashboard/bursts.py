"""Synthetic bursts (`b`): prompts short and long, so bursts mix decode and chunked prefill, and
generation lengths that ignore EOS, so a burst really fills the KV pool."""

import random
from dataclasses import replace

from enginetui.settings import SamplingSettings

BURST_MAX_TOKENS = (32, 128)  # each burst request generates a (seeded) random count in this range, past EOS

BURST_PROMPTS = (
    "Once upon a time",
    "The capital of France is",
    "Write a haiku about paged attention.",
    "Explain continuous batching to a five year old.",
    "List three reasons a GPU is fast at matrix multiplication.",
    "The quick brown fox jumps over the lazy dog. " * 4,
    "Summarize the plot of a story where a small robot learns to paint, finds a friend in an old "
    "lighthouse keeper, loses everything in a storm, and rebuilds a studio from driftwood.",
    "In a distant galaxy",
    "Translate to French: the cache is full, so the scheduler preempts the newest request.",
    "Here is a long shopping list: apples, pears, flour, sugar, butter, eggs, milk, cream, "
    "salt, pepper, rice, beans, lentils, tomatoes, onions, garlic, ginger, lemons, limes, "
    "coffee, tea, honey, oats, yogurt, cheese, bread, pasta, olive oil. Sort it by aisle.",
    "def fibonacci(n):",
    "Dear diary, today the engine ran out of KV blocks and",
)


def burst_requests(rng: random.Random, settings: SamplingSettings, count: int) -> list[tuple[str, SamplingSettings]]:
    """`count` synthetic requests (prompt, settings): random prompts, the given sampling settings, but
    past EOS and a random length in BURST_MAX_TOKENS, so the pool really fills."""
    requests = []
    for _ in range(count):
        prompt = rng.choice(BURST_PROMPTS)
        length = rng.randint(*BURST_MAX_TOKENS)
        requests.append((prompt, replace(settings, max_tokens=length, ignore_eos=True)))
    return requests
