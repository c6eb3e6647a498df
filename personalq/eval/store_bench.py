"""`personalq bench store`: how long the store takes to load, reopen, snapshot and reindex a catalog.

Catalogs are synthetic but realistic in shape: every entry has its own description (so the
embedding cache cannot hide any work), a few subject types, styles and places, and dates spread over
two years. Each size runs in a fresh temporary store with the configured embedder. Figures are
wall-clock seconds on this machine, and the machine details are printed beside them.
"""

from __future__ import annotations

import json
import os
import platform
import random
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

_SUBJECTS = [
    ("bear", "teddy bear", "plush toy"), ("dog", "corgi", "puppy"), ("cat", "kitten", "tabby"), ("person", "woman", "portrait"),
    ("car", "sports car", "vehicle"), ("watch", "wristwatch", "accessory"), ("house", "cottage", "building"),
    ("shoe", "sneaker", "footwear"), ("chair", "armchair", "furniture"), ("logo", "emblem", "brand mark"),
]
_STYLES = ["cartoon", "realistic", "anime", "watercolor", "oil painting", "pixel art", "sketch", "3d render"]
_PLACES = ["forest", "beach", "city street", "studio", "snowy mountain", "desert", "park", "living room", "night sky"]
_COLOURS = ["red", "blue", "green", "white", "brown", "black", "yellow", "gray", "pink", "golden"]
_DETAILS = ["with a scarf", "with a scratch on the left side", "with round glasses", "wearing a tiny hat",
            "with a faded patch", "with shiny buttons", "with a long tail", "with a chipped corner"]


def synthetic_catalog(size: int, seed: int = 0) -> list[dict]:
    """`size` distinct context tuples in the catalog JSONL shape."""
    rng = random.Random(seed)
    start = datetime(2024, 1, 1, tzinfo=timezone.utc)
    versions: dict[str, int] = {}
    entries = []
    for n in range(size):
        subjects = rng.choice(_SUBJECTS)
        category = subjects[0]
        versions[category] = versions.get(category, 0) + 1
        colour, place, detail = rng.choice(_COLOURS), rng.choice(_PLACES), rng.choice(_DETAILS)
        created = start + timedelta(minutes=rng.randrange(0, 2 * 365 * 24 * 60))
        entries.append({
            "id": f"{category}-{n:05d}",
            "triggers": [f"<{category}-{n:05d}>"],
            "subject_types": list(subjects),
            "style_tags": rng.sample(_STYLES, k=rng.choice((1, 2))),
            "description": f"A {colour} {subjects[1]} {detail}, photographed in a {place} (sample {n}, batch {n * 7919 % 997}).",
            "created_at": created.isoformat().replace("+00:00", "Z"),
            "version": versions[category],
            "environment": [place],
            "category": category,
            "base_model": rng.choice(("sd15", "sdxl")),
            "kind": rng.choice(("lora", "dreambooth", "textual_inversion")),
        })
    return entries


def _timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def bench_size(size: int, work: Path) -> dict:
    from personalq.store import RepoStore
    from personalq.store.embedder import default_embedder

    catalog = work / f"catalog-{size}.jsonl"
    catalog.write_text("".join(json.dumps(e) + "\n" for e in synthetic_catalog(size)), encoding="utf-8")
    home = work / f"home-{size}"
    embedder = default_embedder()
    embedder.embed(["warm up"])  # model loading is not part of any figure
    store = RepoStore.open(home, embedder=embedder)
    report, load_s = _timed(lambda: store.load_catalog(catalog))
    assert len(report.added) == size, report.refused[:3]
    store.close()
    store, open_s = _timed(lambda: RepoStore.open(home, embedder=embedder))
    cards, cards_s = _timed(store.cards)
    _, sparse_build_s = _timed(lambda: store.sparse_search("red bear forest", 5))
    _, reindex_s = _timed(store.reindex)
    queries = ["a plush bear in a pine forest", "blue sports car at night", "anime cat wearing a tiny hat"]
    _, dense_s = _timed(lambda: [store.dense_search(q, 10) for q in queries])
    _, sparse_s = _timed(lambda: [store.sparse_search(q, 10) for q in queries])
    store.close()
    return {
        "entries": len(cards),
        "load_catalog_s": round(load_s, 2),
        "reopen_s": round(open_s, 2),
        "cards_s": round(cards_s, 3),
        "bm25_build_s": round(sparse_build_s, 3),
        "reindex_s": round(reindex_s, 2),
        "dense_query_ms": round(1000 * dense_s / len(queries), 1),
        "sparse_query_ms": round(1000 * sparse_s / len(queries), 1),
    }


def run_store_bench(sizes: list[int], as_json: bool = False) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="pq-bench-store-") as tmp:
        for size in sizes:
            rows.append(bench_size(size, Path(tmp)))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())  # shared machines: say how busy it was
    machine = f"{platform.machine()}, {os.cpu_count()} CPU cores, Python {platform.python_version()}, load average {load}"
    if as_json:
        print(json.dumps({"machine": machine, "results": rows}, indent=1))
        return rows
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"personalq bench store ({machine})")
    for key in rows[0] if rows else []:
        table.add_column(key, justify="right")
    for row in rows:
        table.add_row(*(str(v) for v in row.values()))
    Console().print(table)
    print(
        "load_catalog_s: validate + embed (all-MiniLM-L6-v2, CPU) + SQL + Chroma; reopen_s: open with index check; "
        "reindex_s: rebuild Chroma and BM25 from the catalog (embeddings from the store's cache)."
    )
    return rows
