"""`personalq bench nano`: does the shipped PQ-Nano follow its prompts, how real do its images look, how fast is it?

Figures: judge alignment on held-out world captions (per attribute and mean), FD-EffNet of
generated images against real renders, beside the same figure for a random-weight model of the
same shape (the ceiling) and for real renders against other real renders (the floor), the judge's
own accuracy on held-out renders, CPU seconds per image, and CLIP score when a real CLIP is given.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch
from PIL import Image, ImageDraw

from personalq.eval.alignment import PromptCase, alignment_scores, generate, held_out_cases
from personalq.eval.fd_effnet import effnet_features, frechet_distance
from personalq.nano.world import render


def random_weight_twin(pipe, seed: int = 0):
    """A pipeline of PQ-Nano's exact shape with untrained UNet and VAE (same text encoder)."""
    from personalq.nano.model import assemble_pipeline, build_unet, build_vae

    torch.manual_seed(seed)
    return assemble_pipeline(build_unet().eval(), build_vae().eval(), pipe.text_encoder, pipe.tokenizer)


def seconds_per_image(pipe, steps: int = 20, repeats: int = 3) -> float:
    """Median wall time of one 64x64 image at `steps` steps, batch 1, after one warm-up."""
    times = []
    for i in range(repeats + 1):
        start = time.perf_counter()
        pipe("a cartoon brown bear in the snow", num_inference_steps=steps, guidance_scale=4.0, height=64, width=64,
             generator=torch.Generator().manual_seed(i))
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def caption_grid(images, captions: list[str], columns: int = 4, scale: int = 2, path: Path | None = None) -> Image.Image:
    """Images in a grid with each caption wrapped underneath, for the model card and README."""
    cell, text_h = 64 * scale, 52
    rows = (len(images) + columns - 1) // columns
    grid = Image.new("RGB", (columns * (cell + 8) + 8, rows * (cell + text_h + 8) + 8), "white")
    draw = ImageDraw.Draw(grid)
    for k, (image, text) in enumerate(zip(images, captions)):
        x, y = 8 + (k % columns) * (cell + 8), 8 + (k // columns) * (cell + text_h + 8)
        grid.paste(image.resize((cell, cell), Image.NEAREST), (x, y))
        lines, line = [], ""
        for word in text.split():
            if draw.textlength(f"{line} {word}".strip()) > cell and line:
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}".strip()
        lines.append(line)
        for i, part in enumerate(lines[:4]):
            draw.text((x, y + cell + 2 + 12 * i), part, fill="black")
    if path:
        grid.save(path, optimize=True)
    return grid


def run_nano_bench(n: int = 500, seed: int = 2024, clip_model: Path | None = None, grid_path: Path | None = None,
                   device: str = "cpu", log=print) -> dict:
    """All figures; images are generated on `device`, seconds per image are always measured on CPU."""
    from personalq.nano import DEFAULT_GUIDANCE, load_pipeline
    from personalq.nano.judge import Judge

    cpu_pipe = load_pipeline("cpu")
    pipe = load_pipeline(device) if device != "cpu" else cpu_pipe
    judge = Judge.load()
    cases: list[PromptCase] = held_out_cases(n, seed)
    prompts = [c.caption.text for c in cases]
    report: dict = {"n": n, "device": device, "guidance": DEFAULT_GUIDANCE, "steps": 20, "torch_threads": torch.get_num_threads()}

    report["seconds_per_image_cpu"] = seconds_per_image(cpu_pipe)
    log(f"seconds per image: {report['seconds_per_image_cpu']:.2f}")
    start = time.perf_counter()
    generated = generate(pipe, prompts, seed=seed, guidance=DEFAULT_GUIDANCE)
    log(f"generated {n} images in {time.perf_counter() - start:.0f}s")
    report["pq_nano"] = alignment_scores(judge, generated, cases)

    real = [render(c.attrs, seed=10_000_000 + i) for i, c in enumerate(cases)]
    other_real = [render(c.attrs, seed=20_000_000 + i) for i, c in enumerate(cases)]
    report["judge_accuracy_held_out_renders"] = judge.accuracy(other_real, [c.attrs for c in cases])

    twin = random_weight_twin(pipe).to(device)
    random_images = generate(twin, prompts, seed=seed, guidance=DEFAULT_GUIDANCE)
    report["random_weights"] = alignment_scores(judge, random_images, cases)

    real_f = effnet_features(real)
    report["fd_effnet"] = {
        "pq_nano_vs_real": frechet_distance(effnet_features(generated), real_f),
        "random_weights_vs_real": frechet_distance(effnet_features(random_images), real_f),
        "real_vs_real": frechet_distance(effnet_features(other_real), real_f),
    }
    if clip_model:
        from personalq.eval.clip_score import clip_score

        report["clip_score"] = {"pq_nano": clip_score(generated, prompts, clip_model),
                                "random_weights": clip_score(random_images, prompts, clip_model),
                                "real_renders": clip_score(real, prompts, clip_model)}
    if grid_path:
        caption_grid(generated[:16], prompts[:16], path=grid_path)
        report["grid"] = str(grid_path)
    return report


def format_report(report: dict) -> str:
    nano, rand = report["pq_nano"], report["random_weights"]
    names = [k.removeprefix("alignment_") for k in nano if k.startswith("alignment_") and k not in
             ("alignment_mean_over_attributes", "alignment_per_image")]
    lines = [f"PQ-Nano on {report['n']} held-out world captions ({report['steps']} steps, guidance {report['guidance']})",
             "", f"{'alignment (judge)':<28}{'PQ-Nano':>10}{'random weights':>16}"]
    for name in ["mean_over_attributes", "per_image", *names]:
        key = f"alignment_{name}"
        lines.append(f"  {name:<26}{nano[key]:>10.3f}{rand.get(key, float('nan')):>16.3f}")
    fd = report["fd_effnet"]
    lines += ["", "FD-EffNet (EfficientNet-Lite0 features; lower is closer to real renders)",
              f"  PQ-Nano vs real renders      {fd['pq_nano_vs_real']:10.2f}",
              f"  random weights vs real       {fd['random_weights_vs_real']:10.2f}",
              f"  real vs other real renders   {fd['real_vs_real']:10.2f}"]
    if "clip_score" in report:
        lines += ["", "CLIP score: " + ", ".join(f"{k} {v:.2f}" for k, v in report["clip_score"].items())]
    lines += ["", "judge accuracy on held-out renders: " + ", ".join(
        f"{k} {v:.3f}" for k, v in report["judge_accuracy_held_out_renders"].items()),
        f"CPU seconds per image (batch 1, {report['torch_threads']} threads): {report['seconds_per_image_cpu']:.2f}"]
    if "grid" in report:
        lines.append(f"sample grid: {report['grid']}")
    return "\n".join(lines)
