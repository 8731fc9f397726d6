"""A fixed-size worker pool for the subprocess-bound conversion and rendering jobs."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

DEFAULT_WORKERS = 2  # the study's reference machine has 2 cores


def map_ordered(
    function: Callable[[Item], Result], items: Iterable[Item], *, workers: int = DEFAULT_WORKERS
) -> list[Result]:
    """`[function(item) for item in items]` on `workers` threads, results in input order.

    Threads suffice: the work happens in sox / fluidsynth / espeak-ng child processes or in numpy
    and torch kernels that release the GIL. Input order keeps every output independent of timing.
    """
    items = list(items)
    if workers <= 1 or len(items) <= 1:
        return [function(item) for item in items]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(function, items))
