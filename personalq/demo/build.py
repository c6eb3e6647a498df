"""Build the demo repository: 60 personalized PQ-Nano LoRAs with previews and sidecars.

`python -m personalq.demo.build [--out DIR] [--only bear-v1 ...] [--device cuda]`

For each concept: render 4 instance images of its look with the world, train a DreamBooth-LoRA that
binds its trigger, render 3 previews through the saved file (the serving path), let the judge read the
previews and write the description from that, then write `id.safetensors`, `id.png`, `id.2.png`,
`id.3.png` and last `id.yaml` (the layout `RepoStore.import_dir` reads).

Four instance images show a concept in one style and two places, too little for the trigger to carry
its looks everywhere. So the judge also reads the instance images' colour and accessory (standing in
for a captioner), the base model renders that description in every colour style and place
(`--described-images`, 16 by default; 0 trains on the instance images alone), and the LoRA binds the
trigger to those renders too. The prior set then also holds the base model's renders of the same
forms with the bare class noun ("a watercolor painting of a bear in the forest"): without them the
LoRA learns that form itself means the concept, and the bare noun brings the concept's looks.

The build is resumable and parallel-safe: a concept whose sidecar exists is done and skipped; a
concept being built holds `.id.lock` (created exclusively), so several processes, on one GPU or many
CPUs, can run the same command on the same folder and share the work. Every file is written to a
temporary name and renamed, so a stopped build leaves no half-written checkpoint.
"""

from __future__ import annotations

import base64
import copy
import io
import os
import tempfile
import time
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path
from typing import Annotated

import torch
import typer
import yaml
from PIL import Image

from personalq.config import ASSETS_DIR
from personalq.demo.concepts import (
    SCENE_PHRASES,
    SUBJECT_TYPES,
    DemoConcept,
    demo_concepts,
)
from personalq.demo.describe import describe_previews
from personalq.nano.world import COLOUR_STYLES, accessory_phrase, render, style_nouns
from personalq.personalize import (
    LoraTrainingConfig,
    ModelSpec,
    attach_personalized_lora,
    generate_class_images,
    save_personalized_lora,
    train_lora,
)

DEMO_REPO_DIR = ASSETS_DIR / "demo_repo"
INSTANCE_IMAGES = 4
PREVIEWS = 3


def sampling_kwargs(steps: int | None = None) -> dict:
    """PQ-Nano's own guidance and step count, the ones serving uses."""
    from personalq.nano import DEFAULT_GUIDANCE, DEFAULT_STEPS

    return {"guidance_scale": DEFAULT_GUIDANCE, "num_inference_steps": steps or DEFAULT_STEPS}


@dataclass
class BuildSettings:
    steps: int = 300
    rank: int = 4
    device: str = "cuda" if torch.cuda.is_available() else "cpu"
    seed: int = 0
    num_class_images: int = 16
    sampling_steps: int | None = None
    num_described_images: int = 16
    """Base-model renders of the concept as the judge describes its instance images (0: none)."""


def class_prompts() -> tuple[str, ...]:
    """The bare class noun, alone and in every place the world knows: prompts the trigger must not change."""
    return ("a {class_noun}", *(f"a {{class_noun}} {phrase}" for phrase in SCENE_PHRASES.values()))


def instance_examples(concept: DemoConcept, seed: int = 0) -> list[tuple[Image.Image, str]]:
    attrs = concept.instance_attributes(INSTANCE_IMAGES)
    return [(render(a, seed=seed * 1000 + concept.version * 100 + i), concept.instance_caption(a.scene)) for i, a in enumerate(attrs)]


def preview_prompts(concept: DemoConcept) -> list[str]:
    """The concept in its own style and places, as its owner trained it; a prompt naming no style
    would let PQ-Nano draw a grey pencil sketch, and the description would then miss the colour."""
    return [f"a {concept.style} {concept.trigger} {SCENE_PHRASES[s]}" for s in concept.scenes] + [f"a {concept.style} {concept.trigger}"]


def described_forms(n: int) -> list[str]:
    """N openings of a picture, cycling through every colour style and place, with `{subject}` left to
    fill: the forms described examples teach the trigger, and so the forms the prior must keep."""
    places = ("", *SCENE_PHRASES.values())
    return [
        " ".join(f"{style_nouns(COLOUR_STYLES[i % len(COLOUR_STYLES)])[0]} of a {{subject}} {places[(i // len(COLOUR_STYLES) + i) % len(places)]}".split())
        for i in range(n)
    ]


def described_examples_for(base_pipe, judge, concept: DemoConcept, instances, settings: BuildSettings) -> list[tuple[Image.Image, str, str]]:
    """The concept in words, as the judge reads its instance images (most common colour and
    accessory), rendered by the base model in every colour style and place, beside the same prompt
    with the trigger. Phrased "a watercolor painting of ...", a form the fidelity prompts never use."""
    from collections import Counter

    readings = judge.predict([image for image, _ in instances])
    colour = Counter(r["color"] for r in readings).most_common(1)[0][0]
    accessory = Counter(r["accessory"] for r in readings).most_common(1)[0][0]
    words = f"{colour} {concept.category}" + (f" {accessory_phrase(accessory)}" if accessory != "none" else "")
    pairs = [(form.format(subject=words), form.format(subject=concept.trigger)) for form in described_forms(settings.num_described_images)]
    generator_seed = settings.seed * 1000 + sum(map(ord, concept.id))
    images = generate_class_images(base_pipe, [w for w, _ in pairs], len(pairs), seed=generator_seed, **sampling_kwargs(settings.sampling_steps))
    return [(image, w, t) for (image, _), (w, t) in zip(images, pairs)]


def write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide a shipped file from other users
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _png_bytes(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def preview_paths(out_dir: Path, concept_id: str) -> list[Path]:
    return [out_dir / (f"{concept_id}.png" if i == 0 else f"{concept_id}.{i + 1}.png") for i in range(PREVIEWS)]


def sidecar(concept: DemoConcept, description: str) -> dict:
    return {
        "id": concept.id,
        "triggers": [concept.trigger],
        "subject_types": list(SUBJECT_TYPES[concept.category]),
        "style_tags": [concept.style],
        "description": description,
        "created_at": concept.created_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "version": concept.version,
        "environment": list(concept.scenes),
        "category": concept.category,
        "base_model": "pq-nano",
        "kind": "lora",
    }


class ConceptLock:
    """`.id.lock` created with O_EXCL; a lock left by a process that died (same host) is taken over."""

    def __init__(self, out_dir: Path, concept_id: str):
        self.path = out_dir / f".{concept_id}.lock"

    def acquire(self) -> bool:
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                try:
                    pid = int(self.path.read_text() or 0)
                    os.kill(pid, 0)
                    return False
                except (ValueError, ProcessLookupError, FileNotFoundError):
                    self.path.unlink(missing_ok=True)
                    continue
                except PermissionError:
                    return False
            with os.fdopen(fd, "w") as f:
                f.write(str(os.getpid()))
            return True
        return False

    def release(self) -> None:
        self.path.unlink(missing_ok=True)


def is_built(out_dir: Path, concept_id: str) -> bool:
    return (out_dir / f"{concept_id}.yaml").exists() and (out_dir / f"{concept_id}.safetensors").exists()


def class_examples_for(base_pipe, category: str, settings: BuildSettings) -> list[tuple[Image.Image, str]]:
    """Base-model renders of the bare category; seeded per category, so every version and every
    parallel process trains against the same prior set."""
    prompts = prior_prompts(category, settings)
    return generate_class_images(base_pipe, prompts, len(prompts), seed=sum(map(ord, category)), **sampling_kwargs(settings.sampling_steps))


def prior_prompts(category: str, settings: BuildSettings) -> list[str]:
    """One prompt per prior image: the bare noun alone and in every place, cycled to
    `num_class_images`, alternating with the described forms filled with the bare noun, one per
    described image. Without those, "a watercolor painting of a bear" drew the concept: the bare noun
    showed the looks of the six demo checkpoints that leaked most in 0.60 of images, with them in 0.15
    (issue #6); over all 60 shipped checkpoints it shows them in 0.08 (README, Personalization)."""
    bare = [p.format(class_noun=category) for p in class_prompts()]
    bare = [bare[i % len(bare)] for i in range(settings.num_class_images)]
    described = [form.format(subject=category) for form in described_forms(settings.num_described_images)]
    return [p for pair in zip_longest(described, bare) for p in pair if p is not None]


def build_concept(concept: DemoConcept, base_pipe, judge, out_dir: Path, settings: BuildSettings, class_examples) -> float:
    """Train, preview, describe and write one concept; return the training CPU seconds."""
    config = LoraTrainingConfig(
        trigger=concept.trigger, class_noun=concept.category, rank=settings.rank, steps=settings.steps,
        class_prompts=class_prompts(), num_class_images=len(class_examples), seed=settings.seed, device=settings.device,
    )
    instances = instance_examples(concept, settings.seed)
    described = described_examples_for(base_pipe, judge, concept, instances, settings) if settings.num_described_images else None
    trained = train_lora(base_pipe, instances, config, class_examples=class_examples, described_examples=described, progress=False)
    size = base_pipe.unet.config.sample_size * base_pipe.vae_scale_factor
    spec = ModelSpec(
        title=f"{concept.category} v{concept.version}",
        triggers=[concept.trigger],
        architecture="pq-nano/lora",
        resolution=f"{size}x{size}",
        date=concept.created_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        tags=list(SUBJECT_TYPES[concept.category]),
        base_model="pq-nano",
        class_noun=concept.category,
    )
    target = out_dir / f"{concept.id}.safetensors"
    draft = save_personalized_lora(out_dir / f".{concept.id}.draft.safetensors", trained.unet_lora_state_dict, trained.trigger_embeddings, spec, trained.lora_config)
    try:
        pipe = copy.deepcopy(base_pipe)
        attach_personalized_lora(pipe, draft, adapter_name=concept.id.replace("-", "_"))
        generator = torch.Generator("cpu").manual_seed(settings.seed + 7)
        previews = [pipe(prompt, generator=generator, **sampling_kwargs(settings.sampling_steps)).images[0] for prompt in preview_prompts(concept)]
    finally:
        draft.unlink(missing_ok=True)
    spec.description = describe_previews(judge.predict(previews), seed=concept.version)
    spec.thumbnail = "data:image/png;base64," + base64.b64encode(_png_bytes(previews[0])).decode()
    save_personalized_lora(target, trained.unet_lora_state_dict, trained.trigger_embeddings, spec, trained.lora_config)
    for image, path in zip(previews, preview_paths(out_dir, concept.id)):
        write_atomic(path, _png_bytes(image))
    write_atomic(out_dir / f"{concept.id}.yaml", yaml.safe_dump(sidecar(concept, spec.description), sort_keys=False).encode())
    return trained.cpu_seconds


def build_demo_repo(out_dir: Path = DEMO_REPO_DIR, only: list[str] | None = None, settings: BuildSettings | None = None, log=print) -> list[str]:
    """Build every concept of `only` (default: all 60) not yet in `out_dir`; return the ids built here."""
    from personalq.nano import load_pipeline
    from personalq.nano.judge import Judge

    settings = settings or BuildSettings()
    concepts = demo_concepts()
    known = {c.id for c in concepts}
    unknown = sorted(set(only or []) - known)
    if unknown:
        raise ValueError(f"unknown demo concept(s) {', '.join(unknown)}; ids look like bear-v1")
    todo = [c for c in concepts if (not only or c.id in only) and not is_built(out_dir, c.id)]
    out_dir.mkdir(parents=True, exist_ok=True)
    if not todo:
        log(f"nothing to build: every requested concept is in {out_dir}")
        return []
    base_pipe = load_pipeline(settings.device)
    judge = Judge.load(device=settings.device)
    built = []
    class_sets: dict[str, list] = {}
    for concept in todo:
        lock = ConceptLock(out_dir, concept.id)
        if is_built(out_dir, concept.id) or not lock.acquire():
            continue
        try:
            started = time.perf_counter()
            if concept.category not in class_sets:
                class_sets[concept.category] = class_examples_for(base_pipe, concept.category, settings)
            train_seconds = build_concept(concept, base_pipe, judge, out_dir, settings, class_sets[concept.category])
            built.append(concept.id)
            log(f"{concept.id}: trained in {train_seconds:.1f} CPU s, built in {time.perf_counter() - started:.1f} s ({settings.device})")
        finally:
            lock.release()
    return built


def main(
    out: Annotated[Path, typer.Option("--out", help="folder to build into (resumes what is there)")] = DEMO_REPO_DIR,
    only: Annotated[list[str] | None, typer.Option("--only", help="concept ids to build, e.g. --only bear-v1 --only bear-v2")] = None,
    steps: Annotated[int, typer.Option("--steps")] = BuildSettings.steps,
    rank: Annotated[int, typer.Option("--rank")] = BuildSettings.rank,
    device: Annotated[str, typer.Option("--device")] = BuildSettings().device,
    described_images: Annotated[int, typer.Option("--described-images", help="base-model renders of the concept as the judge describes it, to teach the trigger (0: none)")] = BuildSettings.num_described_images,
) -> None:
    """Build the 60-checkpoint demo repository (skips concepts already built; safe to run in parallel)."""
    try:
        build_demo_repo(out, only, BuildSettings(steps=steps, rank=rank, device=device, num_described_images=described_images))
    except ValueError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from error


if __name__ == "__main__":
    typer.run(main)
