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

Then the judge checks the written checkpoint on 16 renders with the trigger and 16 with the bare noun
that the fidelity bench never makes (`--check-images`; 0: no check). Where fewer than 80% of the
trigger renders show the looks the judge read off the instance images, the concept is trained again
with a stronger recipe (`--retry-described-images` 32 at `--retry-look-weight` 2), checked the same
way, and the one whose trigger shows more and whose bare noun leaks less is kept; if the kept one
still falls short, a third training takes the retry's recipe twice as long (`--longer-steps` 600;
0: none), and a fourth the first recipe with the described examples' target guided away from the
bare noun (`--guided-look-guidance` 1; 0: none), each weighed against the kept one the same way. The
sidecar records every check under `trigger_check`.

The build is resumable and parallel-safe: a concept whose sidecar records a finished check (met,
or every recipe tried) is done and skipped, one built but not fully checked goes on from the checks
its sidecar records, and a concept being worked on holds `.id.lock` (created exclusively), so
several processes, on one GPU or many CPUs, can run the same command on the same folder and share
the work. Every file is written to a temporary name and renamed, and each later training is staged
in its own folder, so a stopped build leaves no half-written checkpoint.
"""

from __future__ import annotations

import base64
import io
import os
import shutil
import time
from collections import Counter
from dataclasses import dataclass, replace
from itertools import zip_longest
from pathlib import Path
from typing import Annotated

import torch
import typer
import yaml
from PIL import Image

from personalq.atomic_write import atomic_write
from personalq.config import ASSETS_DIR
from personalq.demo.concepts import (
    SCENE_PHRASES,
    SUBJECT_TYPES,
    DemoConcept,
    demo_concepts,
)
from personalq.demo.describe import describe_previews
from personalq.demo.fidelity import held_out_check
from personalq.demo.instances import instance_examples, pipeline_with
from personalq.nano.world import COLOUR_STYLES, accessory_phrase, style_nouns
from personalq.personalize import (
    LoraTrainingConfig,
    ModelSpec,
    generate_class_images,
    save_personalized_lora,
    train_lora,
)

DEMO_REPO_DIR = ASSETS_DIR / "demo_repo"
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
    look_loss_weight: float = 1.0
    look_guidance: float = 0.0
    """How far the described examples' teacher target is pushed from the bare noun's (see `LoraTrainingConfig`)."""
    check_images: int = 16
    """Held-out renders with the trigger, and as many with the bare noun, the judge checks (0: no check)."""
    check_target: float = 0.8
    """Below this share of trigger renders with the looks, the concept is trained again with the next recipe."""
    retry_described_images: int = 32
    retry_look_loss_weight: float = 2.0
    longer_steps: int = 600
    """Steps of the third recipe, the retry's trained longer, for a concept still short after the retry (0: none)."""
    guided_look_guidance: float = 1.0
    """Look guidance of the fourth recipe, the first one with its described target guided (0: none)."""

    def recipes(self) -> dict[str, BuildSettings]:
        """The trainings a concept may get, in order, each tried only while the kept one falls short:
        the first; the retry, with more described images weighed more; the retry trained longer; the
        first with its described examples' target guided away from the bare noun."""
        retry = replace(self, num_described_images=self.retry_described_images, look_loss_weight=self.retry_look_loss_weight)
        recipes = {"first": self, "retry": retry}
        if self.longer_steps:
            recipes["longer"] = replace(retry, steps=self.longer_steps)
        if self.guided_look_guidance:
            recipes["guided"] = replace(self, look_guidance=self.guided_look_guidance)
        return recipes


def class_prompts() -> tuple[str, ...]:
    """The bare class noun, alone and in every place the world knows: prompts the trigger must not change."""
    return ("a {class_noun}", *(f"a {{class_noun}} {phrase}" for phrase in SCENE_PHRASES.values()))


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


def instance_looks(judge, instances) -> dict[str, str]:
    """The colour and accessory the judge reads most often off the instance images: the concept's
    looks as a captioner would give them, never taken from its spec."""
    readings = judge.predict([image for image, _ in instances])
    return {look: Counter(r[look] for r in readings).most_common(1)[0][0] for look in ("color", "accessory")}


def described_examples_for(base_pipe, judge, concept: DemoConcept, instances, settings: BuildSettings) -> list[tuple[Image.Image, str, str]]:
    """The concept in words, as the judge reads its instance images, rendered by the base model in
    every colour style and place, beside the same prompt with the trigger. Phrased "a watercolor
    painting of ...", a form the fidelity prompts never use."""
    looks = instance_looks(judge, instances)
    words = f"{looks['color']} {concept.category}" + (f" {accessory_phrase(looks['accessory'])}" if looks["accessory"] != "none" else "")
    pairs = [(form.format(subject=words), form.format(subject=concept.trigger)) for form in described_forms(settings.num_described_images)]
    generator_seed = settings.seed * 1000 + sum(map(ord, concept.id))
    images = generate_class_images(base_pipe, [w for w, _ in pairs], len(pairs), seed=generator_seed, **sampling_kwargs(settings.sampling_steps))
    return [(image, w, t) for (image, _), (w, t) in zip(images, pairs)]


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


def check_finished(record: dict, settings: BuildSettings) -> bool:
    """The kept training meets the check, or every recipe has been tried."""
    return record[record["kept"]]["with_trigger"] >= settings.check_target or set(settings.recipes()) <= set(record)


def is_checked(out_dir: Path, concept_id: str, settings: BuildSettings) -> bool:
    if not is_built(out_dir, concept_id):
        return False
    record = yaml.safe_load((out_dir / f"{concept_id}.yaml").read_text()).get("trigger_check")
    return record is not None and check_finished(record, settings)


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
        look_loss_weight=settings.look_loss_weight, look_guidance=settings.look_guidance,
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
        pipe = pipeline_with(base_pipe, draft, concept)
        generator = torch.Generator("cpu").manual_seed(settings.seed + 7)
        previews = [pipe(prompt, generator=generator, **sampling_kwargs(settings.sampling_steps)).images[0] for prompt in preview_prompts(concept)]
    finally:
        draft.unlink(missing_ok=True)
    spec.description = describe_previews(judge.predict(previews), seed=concept.version)
    spec.thumbnail = "data:image/png;base64," + base64.b64encode(_png_bytes(previews[0])).decode()
    save_personalized_lora(target, trained.unet_lora_state_dict, trained.trigger_embeddings, spec, trained.lora_config)
    for image, path in zip(previews, preview_paths(out_dir, concept.id)):
        atomic_write(path, _png_bytes(image))
    atomic_write(out_dir / f"{concept.id}.yaml", yaml.safe_dump(sidecar(concept, spec.description), sort_keys=False).encode())
    return trained.cpu_seconds


def held_out_shares(base_pipe, judge, path: Path, concept: DemoConcept, looks: dict[str, str], settings: BuildSettings) -> dict[str, float]:
    return held_out_check(pipeline_with(base_pipe, path, concept), judge, concept.trigger, concept.category, looks, settings.check_images, sampling=sampling_kwargs(settings.sampling_steps))


def check_concept(concept: DemoConcept, base_pipe, judge, out_dir: Path, settings: BuildSettings, class_examples_for_settings, log=print) -> dict:
    """Check the written concept on held-out renders; while the kept training falls short, build the
    concept again with the next recipe in a staging folder, check that, and keep whichever shows the
    looks with the trigger more often than the bare noun does by the wider margin. The sidecar records
    each check as soon as it is made, so a stopped build resumes with the next recipe."""
    sidecar_path = out_dir / f"{concept.id}.yaml"
    record = yaml.safe_load(sidecar_path.read_text()).get("trigger_check")
    if record is None:
        looks = instance_looks(judge, instance_examples(concept, settings.seed))
        record = {"renders": settings.check_images, "looks": looks, "first": held_out_shares(base_pipe, judge, out_dir / f"{concept.id}.safetensors", concept, looks, settings), "kept": "first"}
        _write_check(sidecar_path, record)
    for name, recipe in settings.recipes().items():
        if check_finished(record, settings):
            break
        if name in record:
            continue
        staging = out_dir / f".{concept.id}.{name}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        try:
            build_concept(concept, base_pipe, judge, staging, recipe, class_examples_for_settings(recipe))
            record = {**record, name: held_out_shares(base_pipe, judge, staging / f"{concept.id}.safetensors", concept, record["looks"], settings)}
            margin = {side: record[side]["with_trigger"] - record[side]["without_trigger"] for side in (record["kept"], name)}
            if margin[name] > margin[record["kept"]]:
                record["kept"] = name
                _write_check(staging / sidecar_path.name, record)
                for path in sorted(staging.iterdir(), key=lambda p: p.suffix == ".yaml"):  # the sidecar last
                    os.replace(path, out_dir / path.name)
            else:
                _write_check(sidecar_path, record)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        log(f"{concept.id}: {name}: trigger {record[name]['with_trigger']:.2f}, bare noun {record[name]['without_trigger']:.2f}; keeping the {record['kept']}")
    return record


def _write_check(sidecar_path: Path, record: dict) -> None:
    side = yaml.safe_load(sidecar_path.read_text())
    atomic_write(sidecar_path, yaml.safe_dump({**side, "trigger_check": record}, sort_keys=False).encode())


def build_demo_repo(out_dir: Path = DEMO_REPO_DIR, only: list[str] | None = None, settings: BuildSettings | None = None, log=print) -> list[str]:
    """Build and check every concept of `only` (default: all 60) not yet done in `out_dir`; return the ids worked on here."""
    from personalq.nano import load_pipeline
    from personalq.nano.judge import Judge

    settings = settings or BuildSettings()
    concepts = demo_concepts()
    known = {c.id for c in concepts}
    unknown = sorted(set(only or []) - known)
    if unknown:
        raise ValueError(f"unknown demo concept(s) {', '.join(unknown)}; ids look like bear-v1")

    def done(concept_id: str) -> bool:
        return is_checked(out_dir, concept_id, settings) if settings.check_images else is_built(out_dir, concept_id)

    todo = [c for c in concepts if (not only or c.id in only) and not done(c.id)]
    out_dir.mkdir(parents=True, exist_ok=True)
    if not todo:
        log(f"nothing to build: every requested concept is in {out_dir}")
        return []
    base_pipe = load_pipeline(settings.device)
    judge = Judge.load(device=settings.device)
    built = []
    class_sets: dict[tuple, list] = {}

    def class_set(category: str, recipe: BuildSettings) -> list:
        key = (category, recipe.num_class_images, recipe.num_described_images)
        if key not in class_sets:
            class_sets[key] = class_examples_for(base_pipe, category, recipe)
        return class_sets[key]

    for concept in todo:
        lock = ConceptLock(out_dir, concept.id)
        if done(concept.id) or not lock.acquire():
            continue
        try:
            started = time.perf_counter()
            if not is_built(out_dir, concept.id):
                train_seconds = build_concept(concept, base_pipe, judge, out_dir, settings, class_set(concept.category, settings))
                log(f"{concept.id}: trained in {train_seconds:.1f} CPU s, built in {time.perf_counter() - started:.1f} s ({settings.device})")
            if settings.check_images:
                record = check_concept(concept, base_pipe, judge, out_dir, settings, lambda recipe, category=concept.category: class_set(category, recipe), log=log)
                shares = "; ".join(f"{side}: trigger {record[side]['with_trigger']:.2f}, bare noun {record[side]['without_trigger']:.2f}" for side in settings.recipes() if side in record)
                log(f"{concept.id}: checked on {record['renders']} held-out renders ({shares}), kept the {record['kept']} ({time.perf_counter() - started:.1f} s)")
            built.append(concept.id)
        finally:
            lock.release()
    return built


def main(
    out: Annotated[Path, typer.Option("--out", help="folder to build into (resumes what is there)")] = DEMO_REPO_DIR,
    only: Annotated[list[str] | None, typer.Option("--only", help="concept ids to build, e.g. --only bear-v1 --only bear-v2")] = None,
    steps: Annotated[int, typer.Option("--steps")] = BuildSettings.steps,
    rank: Annotated[int, typer.Option("--rank")] = BuildSettings.rank,
    device: Annotated[str, typer.Option("--device")] = BuildSettings().device,
    seed: Annotated[int, typer.Option("--seed", help="seed of the instance images, described images and training")] = BuildSettings.seed,
    described_images: Annotated[int, typer.Option("--described-images", help="base-model renders of the concept as the judge describes it, to teach the trigger (0: none)")] = BuildSettings.num_described_images,
    look_guidance: Annotated[float, typer.Option("--look-guidance", help="guidance of the first training's described target away from the bare noun (0: none)")] = BuildSettings.look_guidance,
    check_images: Annotated[int, typer.Option("--check-images", help="held-out renders the judge checks after training, with the trigger and as many without (0: no check)")] = BuildSettings.check_images,
    retry_described_images: Annotated[int, typer.Option("--retry-described-images", help="described images of the second training, for a concept whose check fell short")] = BuildSettings.retry_described_images,
    retry_look_weight: Annotated[float, typer.Option("--retry-look-weight", help="weight of the described images' loss in that second training")] = BuildSettings.retry_look_loss_weight,
    longer_steps: Annotated[int, typer.Option("--longer-steps", help="steps of a third training, the second's recipe trained longer, for a concept still short of its check (0: none)")] = BuildSettings.longer_steps,
    guided_look_guidance: Annotated[float, typer.Option("--guided-look-guidance", help="look guidance of a fourth training, the first's recipe with the described target pushed away from the bare noun, for a concept still short of its check (0: none)")] = BuildSettings.guided_look_guidance,
) -> None:
    """Build the 60-checkpoint demo repository (skips concepts already built and checked; safe to run in parallel)."""
    try:
        build_demo_repo(out, only, BuildSettings(
            steps=steps, rank=rank, device=device, seed=seed, num_described_images=described_images, look_guidance=look_guidance, check_images=check_images,
            retry_described_images=retry_described_images, retry_look_loss_weight=retry_look_weight, longer_steps=longer_steps,
            guided_look_guidance=guided_look_guidance,
        ))
    except ValueError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from error


if __name__ == "__main__":
    typer.run(main)
