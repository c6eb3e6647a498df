"""Serving on tiny random-weight SD 1.5 / SDXL pipelines: every checkpoint kind, the cache, the queue."""

from __future__ import annotations

import copy
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from personalq.personalize.lora_file import read_trigger_embeddings
from personalq.random_pipelines import tiny_sd15_pipeline, tiny_sdxl_pipeline
from personalq.serving import (
    GenerationRequest,
    PipelineManager,
    RequestCancelled,
    RequestQueue,
    ServingConfig,
    ServingError,
)
from personalq.eval.serve_bench import CardIndex, bench_serve, repo_loras, write_random_loras

PROMPT = "a photo of {t} in the snow"


def card(cid, path, trigger, kind="lora", base="sd15"):
    return SimpleNamespace(id=cid, triggers=[trigger], trigger=trigger, kind=kind, base_model=base, file_path=Path(path))


# One pipeline, built once and copied per manager.
TEMPLATE = tiny_sd15_pipeline(0)


@pytest.fixture(scope="module")
def lora_files(tmp_path_factory):
    """Four personalized LoRAs (rank 4) for the tiny SD 1.5 layout."""
    return write_random_loras(copy.deepcopy(TEMPLATE), tmp_path_factory.mktemp("loras"), 4, "sd15")


@pytest.fixture
def store(lora_files):
    return CardIndex({f"l{i}": card(f"l{i}", path, trigger) for i, (path, trigger) in enumerate(lora_files)})


def manager_for(store, **config):
    return PipelineManager.from_pipeline(copy.deepcopy(TEMPLATE), "sd15", ServingConfig(**config), store=store)


def image(manager, checkpoint=None, prompt="a photo of a bear", seed=1, **kwargs):
    result = manager.generate(GenerationRequest(prompt, checkpoint_id=checkpoint, steps=2, seed=seed, **kwargs))
    return np.asarray(result.image, dtype=np.int16)


def test_lora_attach_hot_swap_and_detach(store, lora_files):
    manager = manager_for(store)
    prompt = PROMPT.format(t=lora_files[1][1])
    base = image(manager, None, prompt)
    first = image(manager, "l1", prompt)
    assert np.abs(first - base).max() > 0, "an attached LoRA must change the image"
    slot = manager.slots.active[lora_files[1][1]]
    table = manager.pipe.text_encoder.get_input_embeddings().weight
    assert torch.equal(table[manager.pipe.tokenizer.convert_tokens_to_ids(slot)], read_trigger_embeddings(lora_files[1][0])[lora_files[1][1]][0])
    assert np.array_equal(image(manager, None, prompt), base), "detaching must give back the base image exactly"
    assert manager.slots.active == {}
    second = image(manager, "l2", prompt)  # hot-swapped into the slot l1 made
    assert np.abs(second - first).max() > 0
    fresh = manager_for(store)
    assert np.array_equal(image(fresh, "l2", prompt), second), "a hot-swapped LoRA must act as if loaded alone"
    assert np.array_equal(image(manager, "l1", prompt), first)
    kinds = {name: kind for name, kind, _ in manager.resident()}
    assert kinds == {"base": "base", "unet:base": "unet", "lora:l1": "lora", "lora:l2": "lora"}
    assert all(size > 0 for _, _, size in manager.resident())


def test_textual_inversion_changes_only_prompts_with_its_token(store, tmp_path):
    trigger = "<teddy-ti>"
    path = tmp_path / "teddy.safetensors"
    save_file({trigger: torch.randn(2, 32, generator=torch.Generator().manual_seed(3))}, str(path))
    store["ti"] = card("ti", path, trigger, kind="textual_inversion")
    manager = manager_for(store)
    with_token, without = PROMPT.format(t=trigger), "a photo of a bear"
    base_with, base_without = image(manager, None, with_token), image(manager, None, without)
    assert np.abs(image(manager, "ti", with_token) - base_with).max() > 0
    assert np.array_equal(image(manager, "ti", without), base_without)
    assert np.array_equal(image(manager, None, with_token), base_with)
    assert manager.slots.active == {} and trigger not in manager.pipe.tokenizer.get_vocab()


def test_dreambooth_replaces_unet_and_text_encoder_then_detaches(store, tmp_path):
    tuned = tiny_sd15_pipeline(7)
    weights = {f"unet.{k}": v for k, v in tuned.unet.state_dict().items()}
    weights |= {f"text_encoder.{k}": v for k, v in tuned.text_encoder.state_dict().items()}
    path = tmp_path / "db.safetensors"
    save_file({k: v.contiguous() for k, v in weights.items()}, str(path))
    store["db"] = card("db", path, "<db-dog>", kind="dreambooth")
    manager = manager_for(store)
    base = image(manager)
    assert np.abs(image(manager, "db") - base).max() > 0
    assert manager.pipe.unet is not manager.unets.full()
    assert torch.equal(manager.pipe.unet.conv_in.weight, tuned.unet.conv_in.weight)
    assert np.array_equal(image(manager), base)
    assert manager.pipe.unet is manager.unets.full() and manager.pipe.text_encoder is manager._shared["text_encoder"]


def test_checkpoint_for_another_base_is_refused(store, lora_files):
    store["xl"] = card("xl", lora_files[0][0], lora_files[0][1], base="sdxl-turbo")
    manager = manager_for(store)
    with pytest.raises(ServingError, match="made for base model sdxl-turbo, but sd15 is loaded"):
        image(manager, "xl")
    for bad, reason in (({"checkpoint": "nope"}, "checkpoint nope: not in the store"), ({"setting": "W3X"}, "unknown setting")):
        with pytest.raises(ServingError, match=reason):
            image(manager, **bad)
    image(manager, "l0")  # still serving


def test_budget_evicts_least_recently_used(store):
    probe = manager_for(store)
    image(probe, "l0")
    lora_bytes = {n: b for n, _, b in probe.resident()}["lora:l0"]
    base_bytes = probe.cache.total_bytes() - lora_bytes  # base with its adapter slot
    budget = base_bytes + int(2.5 * lora_bytes)
    manager = manager_for(store, memory_budget_bytes=budget)
    for checkpoint in ("l0", "l1", "l2"):
        image(manager, checkpoint)
    assert manager.cache.evictions == ["lora:l0"]
    image(manager, "l1")  # l1 becomes the most recently used
    image(manager, "l3")
    assert manager.cache.evictions == ["lora:l0", "lora:l2"]
    assert [n for n, _, _ in manager.resident()] == ["base", "lora:l1", "lora:l3", "unet:base"]
    assert manager.cache.peak_bytes <= budget
    with pytest.raises(ServingError, match="does not fit"):
        manager_for(store, memory_budget_bytes=base_bytes + lora_bytes // 2).generate(GenerationRequest("a", checkpoint_id="l0", steps=1))


def test_failing_checkpoint_fails_only_its_request(store, tmp_path):
    broken = tmp_path / "broken.safetensors"
    broken.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{\"a\":1}")
    store["broken"] = card("broken", broken, "<broken>")
    store["gone"] = card("gone", tmp_path / "missing.safetensors", "<gone>")
    with RequestQueue(manager_for(store)) as queue:
        handles = [queue.submit(GenerationRequest("a <x>", checkpoint_id=c, steps=1)) for c in ("l0", "broken", "gone", "l1")]
        assert handles[0].result(120).checkpoint_id == "l0"
        with pytest.raises(ServingError, match="checkpoint broken"):
            handles[1].result(120)
        with pytest.raises(ServingError, match="checkpoint gone: file .* is missing"):
            handles[2].result(120)
        assert handles[3].result(120).checkpoint_id == "l1"
        assert [h.status for h in handles] == ["done", "failed", "failed", "done"]


def test_concurrent_queue_gives_the_serial_images(store, lora_files):
    requests = [
        GenerationRequest(PROMPT.format(t=lora_files[k][1]), checkpoint_id=c, steps=2, seed=s, client=f"user{k}")
        for k, c, s in ((0, "l0", 5), (1, "l1", 6), (0, "l0", 7), (2, None, 8), (1, "l1", 5))
    ]
    manager = manager_for(store)
    serial = [np.asarray(manager.generate(r).image) for r in requests]
    handles: list = [None] * len(requests)

    def submit(indices):
        for i in indices:
            handles[i] = queue.submit(requests[i])

    with RequestQueue(manager_for(store), workers=2) as queue:
        threads = [threading.Thread(target=submit, args=(idx,)) for idx in ((0, 2, 4), (1, 3))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i, handle in enumerate(handles):
            assert np.array_equal(np.asarray(handle.result(300).image), serial[i]), f"request {i} differs from the serial run"


def test_queue_is_fair_reports_progress_and_cancels(store):
    started, go = threading.Event(), threading.Event()
    order, steps = [], []

    def hold(step, total, message):
        started.set()
        go.wait(60)

    def track(name):
        def progress(step, total, message):
            if message == "denoising":
                steps.append((name, step, total))
                if step == 1 and name not in order:
                    order.append(name)
        return progress

    with RequestQueue(manager_for(store), max_pending=3) as queue:
        first = queue.submit(GenerationRequest("a", steps=1, client="a"), progress=hold)
        assert started.wait(60)
        a2 = queue.submit(GenerationRequest("a", steps=2, client="a"), progress=track("a2"))
        a3 = queue.submit(GenerationRequest("a", steps=2, client="a"), progress=track("a3"))
        b1 = queue.submit(GenerationRequest("b", steps=2, client="b"), progress=track("b1"))
        with pytest.raises(ServingError, match="queue is full"):
            queue.submit(GenerationRequest("c", steps=1))
        a3.cancel()
        go.set()
        first.result(120), a2.result(120), b1.result(120)
        with pytest.raises(RequestCancelled):
            a3.result(120)
    assert order == ["a2", "b1"], "client b must not wait behind all of client a's requests"
    assert [s for s in steps if s[0] == "a2"] == [("a2", 1, 2), ("a2", 2, 2)]

    with RequestQueue(manager_for(store)) as queue:
        holder = {}
        holder["h"] = queue.submit(GenerationRequest("a", steps=5), progress=lambda s, t, m: s == 2 and holder["h"].cancel())
        with pytest.raises(RequestCancelled, match="step 3 of 5"):
            holder["h"].result(120)
        assert queue.submit(GenerationRequest("a", steps=1)).result(120).steps == 1


def test_sdxl_folder_base_serves_lora_and_two_encoder_embedding(tmp_path):
    tiny_sdxl_pipeline(0).save_pretrained(tmp_path / "sdxl")
    loras = write_random_loras(tiny_sdxl_pipeline(0), tmp_path / "loras", 1, "sdxl")
    ti = tmp_path / "ti.safetensors"
    save_file({"clip_l": torch.randn(1, 32), "clip_g": torch.randn(1, 48)}, str(ti))
    store = CardIndex({"xl": card("xl", *loras[0], base="sdxl"), "ti": card("ti", ti, "<xl-ti>", kind="textual_inversion", base="sdxl")})
    manager = PipelineManager(ServingConfig(base_model=str(tmp_path / "sdxl")), store=store)
    assert manager.family == "sdxl"
    prompt = PROMPT.format(t=loras[0][1])
    base = image(manager, None, prompt)
    assert np.abs(image(manager, "xl", prompt) - base).max() > 0
    assert np.abs(image(manager, "ti", "a <xl-ti> dog") - image(manager, None, "a <xl-ti> dog")).max() > 0
    assert np.array_equal(image(manager, None, prompt), base)


def test_bench_serve_reports_both_servers(tmp_path):
    results = bench_serve("sd15-tiny", n_requests=6, n_checkpoints=3, setting="FP32", steps=1, workdir=tmp_path, log=lambda line: None)
    assert [r.server.split()[0] for r in results] == ["PersonalQ", "naive"]
    for r in results:
        assert r.requests == 6 and r.p95_s >= r.p50_s > 0 and r.peak_resident_bytes > 0 and r.switch_mean_s > 0


def test_bench_serve_replays_a_folder_of_built_checkpoints(tmp_path, lora_files):
    import shutil

    import yaml

    for i, (path, trigger) in enumerate(lora_files[:3]):
        shutil.copy(path, tmp_path / f"pet-v{i}.safetensors")
        (tmp_path / f"pet-v{i}.yaml").write_text(yaml.safe_dump({"id": f"pet-v{i}", "triggers": [trigger], "kind": "lora"}))
    (tmp_path / "orphan.yaml").write_text(yaml.safe_dump({"id": "orphan", "triggers": ["<orphan>"]}))  # no weights file: skipped
    assert [t for _, t in repo_loras(tmp_path, 3)] == [t for _, t in lora_files[:3]]
    with pytest.raises(ValueError, match="holds 3 built LoRA checkpoints, fewer than the 4"):
        repo_loras(tmp_path, 4)
    results = bench_serve("sd15-tiny", n_requests=4, n_checkpoints=3, setting="FP32", steps=1, workdir=tmp_path / "work", repo=tmp_path, naive=False, log=lambda line: None)
    assert results[0].requests == 4 and results[0].switch_mean_s > 0


def test_quantized_variant_is_made_once_saved_and_reused(store, lora_files, tmp_path, monkeypatch):
    config = {"quantized_dir": tmp_path / "quantized", "calibration_prompts": 4, "calibration_steps": 2}
    prompt = PROMPT.format(t=lora_files[0][1])
    manager = manager_for(store, **config)
    request = GenerationRequest(prompt, checkpoint_id="l0", setting="W8A8", steps=2, seed=4)
    result = manager.generate(request)
    assert result.setting == "W8A8" and result.protected_triggers == [lora_files[0][1]]
    assert (tmp_path / "quantized" / "W8A8-trigger" / "taq.json").exists()
    kinds = {name: kind for name, kind, _ in manager.resident()}
    assert kinds["quantized:base:W8A8:trigger"] == "quantized"
    sizes = {name: size for name, _, size in manager.resident()}
    assert sizes["quantized:base:W8A8:trigger"] < manager.unets.allowance, "int8 weights must take fewer real bytes"
    assert "unet:base" not in sizes, "no full-precision UNet stays beside the quantized one without a budget"
    plain = np.asarray(manager.generate(GenerationRequest(prompt, setting="W8A8", steps=2, seed=4)).image, dtype=np.int16)
    assert np.abs(np.asarray(result.image, dtype=np.int16) - plain).max() > 0, "the LoRA must act on the quantized UNet"

    import personalq.taq.pipeline

    monkeypatch.setattr(personalq.taq.pipeline, "quantize", lambda *a, **k: pytest.fail("a saved variant must not be recalibrated"))
    again = manager_for(store, **config).generate(request)
    assert np.array_equal(np.asarray(again.image), np.asarray(result.image))
