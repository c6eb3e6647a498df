"""`personalq bench serve`: replay a Zipf workload of LoRA requests through the serving layer and a naive server.

The naive server is what serving without this layer looks like: every request reads its
checkpoint from disk, attaches it as a new adapter, generates, and detaches it again. Both run on
the same base weights and setting, sequentially, so the figures compare switching strategies only.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from personalq.eval.route_bench import zipf_probabilities
from personalq.serving.cache import resident_bytes
from personalq.serving.config import ServingConfig
from personalq.serving.manager import PipelineManager
from personalq.serving.requests import GenerationRequest

LORA_TARGETS = ["to_q", "to_k", "to_v", "to_out.0"]
PROMPT_TEMPLATES = ("a photo of {t} in the snow", "a watercolor painting of {t}", "{t} sitting on a chair in a park", "a cartoon of {t} at night")


def write_random_loras(pipe, directory: Path, count: int, base_model: str, rank: int = 4, seed: int = 0) -> list[tuple[Path, str]]:
    """Personalized-LoRA files with random weights and trigger embeddings for `pipe`'s architecture.

    Memory and switching cost do not depend on weight values, so benchmarks and tests make
    repositories of any size this way. Returns (path, trigger) pairs.
    """
    from diffusers.utils import convert_state_dict_to_diffusers
    from peft import LoraConfig, get_peft_model_state_dict

    from personalq.personalize.lora_file import ModelSpec, save_personalized_lora

    directory.mkdir(parents=True, exist_ok=True)
    config = {"r": rank, "lora_alpha": rank, "target_modules": LORA_TARGETS}
    unet = pipe.unet
    unet.add_adapter(LoraConfig(init_lora_weights=False, **config), adapter_name="random")
    hidden = pipe.text_encoder.get_input_embeddings().weight.shape[1]
    generator = torch.Generator().manual_seed(seed)
    made = []
    try:
        for i in range(count):
            with torch.no_grad():
                for name, param in unet.named_parameters():
                    if ".random." in name or name.endswith(".random.weight"):
                        param.copy_(torch.randn(param.shape, generator=generator) * (0.5 / param.shape[-1] ** 0.5))
            state = convert_state_dict_to_diffusers(get_peft_model_state_dict(unet, adapter_name="random"))
            trigger = f"<subject{i}-v1>"
            spec = ModelSpec(title=f"subject {i}", triggers=[trigger], architecture=base_model, resolution="512x512", base_model=base_model)
            path = save_personalized_lora(
                directory / f"subject{i}.safetensors", state, {trigger: torch.randn(1, hidden, generator=generator) * 0.02}, spec, lora_config=config
            )
            made.append((path, trigger))
    finally:
        unet.unload_lora()
    return made


def repo_loras(directory: Path, count: int) -> list[tuple[Path, str]]:
    """The first `count` LoRA checkpoints of a folder of built checkpoints (`id.safetensors` + `id.yaml`,
    the demo repository's layout), as (path, trigger) pairs: real personalized files to replay."""
    from personalq.store.intake import load_sidecar

    made = []
    for sidecar in sorted(Path(directory).glob("*.yaml")):
        meta = load_sidecar(sidecar)
        path = sidecar.with_suffix(".safetensors")
        if meta.get("kind", "lora") == "lora" and meta.get("triggers") and path.exists():
            made.append((path, meta["triggers"][0]))
    if len(made) < count:
        raise ValueError(f"{directory} holds {len(made)} built LoRA checkpoints, fewer than the {count} asked for")
    return made[:count]


def zipf_workload(n_requests: int, n_checkpoints: int, exponent: float, seed: int = 0) -> list[int]:
    """Checkpoint indices drawn with P(rank k) proportional to 1/k^exponent (a few popular, a long tail)."""
    rng = np.random.default_rng(seed)
    return rng.choice(n_checkpoints, size=n_requests, p=zipf_probabilities(n_checkpoints, exponent)).tolist()


@dataclass
class ServeFigures:
    server: str
    requests: int
    throughput_rps: float
    p50_s: float
    p95_s: float
    switch_p50_s: float
    switch_mean_s: float
    generation_mean_s: float
    peak_resident_bytes: int

    @property
    def switch_share(self) -> float:
        """Mean switch time as a share of the mean generation time (denoising and decoding)."""
        return self.switch_mean_s / self.generation_mean_s if self.generation_mean_s else float("nan")


def _figures(server: str, latencies: list[float], switches: list[float], wall: float, peak: int) -> ServeFigures:
    generation = [lat - sw for lat, sw in zip(latencies, switches)]
    return ServeFigures(
        server=server,
        requests=len(latencies),
        throughput_rps=len(latencies) / wall,
        p50_s=float(np.percentile(latencies, 50)),
        p95_s=float(np.percentile(latencies, 95)),
        switch_p50_s=float(np.percentile(switches, 50)),
        switch_mean_s=statistics.fmean(switches),
        generation_mean_s=statistics.fmean(generation),
        peak_resident_bytes=peak,
    )


def run_managed(manager: PipelineManager, requests: list[GenerationRequest], progress=None) -> ServeFigures:
    latencies, switches = [], []
    start = time.perf_counter()
    for i, request in enumerate(requests):
        result = manager.generate(request)
        latencies.append(result.seconds)
        switches.append(result.switch_seconds)
        if progress:
            progress(i)
    return _figures("PersonalQ serving", latencies, switches, time.perf_counter() - start, manager.cache.peak_bytes)


def run_naive(pipe, requests: list[GenerationRequest], files: dict[str, Path], guidance: float, progress=None) -> ServeFigures:
    """Load from disk, attach, generate, detach: per request, with no cache and no hot-swap."""
    from personalq.personalize.lora_file import attach_personalized_lora

    latencies, switches = [], []
    peak = resident_bytes(pipe)
    start = time.perf_counter()
    for i, request in enumerate(requests):
        began = time.perf_counter()
        triggers = attach_personalized_lora(pipe, files[request.checkpoint_id], adapter_name="request")
        peak = max(peak, resident_bytes(pipe))
        attached = time.perf_counter()
        with torch.inference_mode():
            pipe(request.prompt, num_inference_steps=request.steps, guidance_scale=guidance, height=request.height, width=request.width,
                 generator=torch.Generator("cpu").manual_seed(request.seed))
        generated = time.perf_counter()
        pipe.delete_adapters("request")
        pipe.unload_textual_inversion(triggers)
        done = time.perf_counter()
        latencies.append(done - began)
        switches.append((attached - began) + (done - generated))
        if progress:
            progress(i)
    return _figures("naive (load from disk per request)", latencies, switches, time.perf_counter() - start, peak)


def build_base(model: str, seed: int = 0):
    """(pipeline, family, base_model name written into the LoRA files) for a benchmark model name."""
    if model in ("sd15-random", "sd15-tiny"):
        from personalq.random_pipelines import sd15_pipeline_random, tiny_sd15_pipeline

        return (sd15_pipeline_random if model == "sd15-random" else tiny_sd15_pipeline)(seed), "sd15", "sd15"
    from personalq.serving.base import load_base_pipeline

    pipe, family = load_base_pipeline(model, torch.float32)
    return pipe, family, family


def bench_serve(
    model: str = "sd15-random",
    n_requests: int = 200,
    n_checkpoints: int = 20,
    zipf: float = 1.1,
    setting: str = "W8A8",
    steps: int = 2,
    memory_budget_bytes: int | None = None,
    size: int | None = None,
    device: str | None = None,
    seed: int = 0,
    naive: bool = True,
    workdir: Path | None = None,
    repo: Path | None = None,
    log=print,
) -> list[ServeFigures]:
    """Replay the workload through both servers over `n_checkpoints` LoRAs: the first ones of `repo`
    (built checkpoints for this base model), or random-weight LoRAs written for the base when no repo is given."""
    workdir = Path(workdir or tempfile.mkdtemp(prefix="pq-bench-serve-"))
    pipe, family, base_name = build_base(model, seed)
    files = {}
    loras = repo_loras(repo, n_checkpoints) if repo else write_random_loras(pipe, workdir / "loras", n_checkpoints, base_name, seed=seed)
    cards = {}
    from types import SimpleNamespace

    for i, (path, trigger) in enumerate(loras):
        cards[f"subject{i}"] = SimpleNamespace(id=f"subject{i}", triggers=[trigger], trigger=trigger, kind="lora", base_model=base_name, file_path=path)
        files[f"subject{i}"] = path
    store = CardIndex(cards)
    order = zipf_workload(n_requests, n_checkpoints, zipf, seed)
    settings = [name.strip().upper() for name in setting.split(",") if name.strip()]  # several: requests take them in turn
    requests = [
        GenerationRequest(PROMPT_TEMPLATES[i % len(PROMPT_TEMPLATES)].format(t=loras[k][1]), checkpoint_id=f"subject{k}",
                          setting=settings[i % len(settings)], steps=steps, seed=seed + i, height=size, width=size)
        for i, k in enumerate(order)
    ]
    config = ServingConfig(base_model=model, device=device, memory_budget_bytes=memory_budget_bytes, quantized_dir=workdir / "quantized",
                           calibration_prompts=4, calibration_steps=max(2, steps))
    manager = PipelineManager.from_pipeline(pipe, family, config, store=store)
    log(f"{model}: {n_checkpoints} LoRA checkpoints, {n_requests} requests, Zipf {zipf}, {setting}, {steps} steps; warming up")
    for name in settings:  # quantize + calibrate each setting once
        manager.generate(GenerationRequest("a photo", setting=name, steps=steps, height=size, width=size))
    def every_tenth(server):
        return lambda i: log(f"{server}: {i + 1}/{len(requests)} requests") if (i + 1) % max(1, len(requests) // 10) == 0 else None

    results = [run_managed(manager, requests, every_tenth("PersonalQ serving"))]
    if naive:
        guidance = manager.default_guidance()
        manager._detach_all()  # hand the same base weights, at the same setting, to the naive server
        unet = manager.cache.get(f"quantized:base:{settings[0]}:trigger") or manager.unets.full()
        if getattr(unet, "peft_config", None):
            unet.unload_lora()  # the naive server makes its own adapter per request, no slot
        naive_pipe = manager.pipe
        naive_pipe.register_modules(unet=unet)
        results.append(run_naive(naive_pipe, requests, files, guidance, every_tenth("naive")))
    return results


class CardIndex(dict):
    """A repository held in memory: cards by id, for benchmarks and tests that need no catalog or search."""

    def get(self, checkpoint_id: str):
        return self[checkpoint_id]

    def mark_used(self, checkpoint_id: str) -> None:
        pass


def figures_table(results: list[ServeFigures]) -> str:
    """Markdown table of the figures (what the README shows)."""
    lines = [
        "| server | requests | throughput (req/s) | p50 latency (s) | p95 latency (s) | switch p50 (ms) | switch / generation | peak resident (MiB) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.server} | {r.requests} | {r.throughput_rps:.3f} | {r.p50_s:.3f} | {r.p95_s:.3f} | {r.switch_p50_s * 1000:.1f} | "
            f"{r.switch_share:.1%} | {r.peak_resident_bytes / 2**20:.1f} |"
        )
    return "\n".join(lines)


def figures_json(results: list[ServeFigures]) -> list[dict]:
    return [asdict(r) | {"switch_share": r.switch_share} for r in results]
