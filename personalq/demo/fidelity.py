"""Does a trigger bring its concept, and only when it is asked for?

For each checkpoint, N prompts name the trigger and the same N prompts (same seeds) name the bare
class noun instead; the judge checks the concept's distinctive looks (colour and accessory) in each
image. A good personalized LoRA shows them with the trigger and not without it. Prior preservation
is checked on the bare-noun images: the judge must still find the class as often as on the base model.

Two references say what PQ-Nano can show at all. The concept's own instance images, encoded and
decoded by PQ-Nano's autoencoder, bound what any generation can keep of small looks (spots, a scarf).
The same prompts with the looks spelled out in words instead of the trigger ("a watercolor green bear
with spots in the snow") are rendered by the base model: how often PQ-Nano draws the looks when told
them outright is the reference a trigger can be held to.

Every prompt names a style the world draws in colour, cycling through all of them: PQ-Nano learned
from captions that leave the style out a quarter of the time, so a prompt naming none gets a pencil
sketch one time in five, and a sketch is grey, so no colour can be found in it.

The demo build checks each checkpoint it trains the same way (`held_out_check`), on renders the bench
never makes: the style-place pairs after the bench's first 8, other seeds, and the looks the judge
reads off the instance images rather than the concept's spec, as a user checking a fine-tune would.

Measuring all 60 takes about 20 minutes on a CPU, so with a results folder each checkpoint's row and
samples are kept as they are measured and a later run reuses them (the same file, prompts and seeds
give the same images): a stopped run resumes, and a run started while the demo build is still going
measures what it has finished and, run again, only what it finished since.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageDraw

from personalq.atomic_write import atomic_write
from personalq.demo.concepts import SCENE_PHRASES, DemoConcept
from personalq.demo.instances import instance_examples, pipeline_with
from personalq.nano.world import COLOUR_STYLES, accessory_phrase
from personalq.personalize.train import encode_images, pipeline_resolution

EVAL_PHRASES = ("", *SCENE_PHRASES.values())


def eval_prompts(subject_word: str, n: int) -> list[str]:
    """The same N prompts for trigger and class noun: only the subject word differs. Styles and places
    cycle independently (4 styles x 9 places), so every concept is tried in styles it was not trained in."""
    return [
        " ".join(f"a {COLOUR_STYLES[i % len(COLOUR_STYLES)]} {subject_word} {EVAL_PHRASES[i % len(EVAL_PHRASES)]}".split())
        for i in range(n)
    ]


def held_out_check(pipe, judge, trigger: str, class_noun: str, looks: dict[str, str], n: int = 16, seed: int = 1, sampling: dict | None = None) -> dict[str, float]:
    """Shares of N renders with the trigger, and N with the bare noun, that show every one of `looks`.

    The prompts are the bench's forms after its first 8 (other style-place pairs; the pairs repeat
    every 36), rendered from another seed: a check the build may select on without choosing for the
    bench's own images.
    """
    sampling = sampling or {}
    shares = {}
    for side, word in (("with_trigger", trigger), ("without_trigger", class_noun)):
        readings = judge.predict(_render(pipe, eval_prompts(word, 8 + n)[8:], seed, sampling))
        shares[side] = float(np.mean([looks_present(r, looks) for r in readings]))
    return shares


def described_subject(concept: DemoConcept) -> str:
    """The concept's looks in words, as PQ-Nano's captions name them: "green bear with spots"."""
    return f"{concept.color} {concept.category} {accessory_phrase(concept.accessory)}"


def looks_present(reading: dict[str, str], looks: dict[str, str]) -> bool:
    return all(reading[name] == value for name, value in looks.items())


@dataclass
class CheckpointFidelity:
    id: str
    with_trigger: float
    """Share of trigger images in which the judge finds every distinctive look."""
    without_trigger: float
    """The same share on the bare-class-noun images, the LoRA attached."""
    class_subject_accuracy: float
    """Share of bare-class-noun images the judge reads as the class, the LoRA attached."""
    base_subject_accuracy: float
    """The same on the base model, same prompts and seeds."""
    with_trigger_by_look: dict[str, float]
    """Each look on its own (colour, accessory) in the trigger images: which one a checkpoint misses."""
    described_on_base: float
    """The share with every look when the base model is told them in words instead of the trigger."""
    instances_through_vae: float
    """The share of the concept's instance images with every look after the autoencoder's round trip."""

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class FidelityRun:
    rows: list[CheckpointFidelity]
    samples: dict[str, tuple[list[Image.Image], list[Image.Image]]]
    """Checkpoint id -> (trigger images, bare-noun images), for the grid."""

    def averages(self) -> dict[str, float]:
        keys = ("with_trigger", "without_trigger", "class_subject_accuracy", "base_subject_accuracy", "described_on_base", "instances_through_vae")
        averages = {k: float(np.mean([getattr(r, k) for r in self.rows])) for k in keys}
        for look in self.rows[0].with_trigger_by_look if self.rows else ():
            averages[f"with_trigger_{look}"] = float(np.mean([r.with_trigger_by_look[look] for r in self.rows]))
        return averages


@torch.no_grad()
def vae_round_trip(pipe, images: list[Image.Image]) -> list[Image.Image]:
    """The images as the pipeline's autoencoder gives them back: what its latents can hold."""
    latents = encode_images(pipe.vae, images, pipeline_resolution(pipe), pipe.vae.device) / pipe.vae.config.scaling_factor
    return pipe.image_processor.postprocess(pipe.vae.decode(latents).sample, output_type="pil")


def _render(pipe, prompts: list[str], seed: int, sampling: dict) -> list[Image.Image]:
    return pipe(prompts, generator=torch.Generator("cpu").manual_seed(seed), **sampling).images


def _measurement_key(path: Path, n: int, seed: int, sampling: dict) -> dict:
    """What a kept result must match to be reused: the checkpoint's bytes and how it was sampled."""
    return {"file_sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "n": n, "seed": seed, "sampling": sampling}


def _load_kept(results_dir: Path, checkpoint_id: str, key: dict) -> tuple[CheckpointFidelity, tuple[list[Image.Image], list[Image.Image]]] | None:
    path = results_dir / f"{checkpoint_id}.json"
    if not path.exists():
        return None
    kept = json.loads(path.read_text())
    if kept["key"] != key:
        return None
    samples = tuple([Image.open(results_dir / name).convert("RGB") for name in kept[side]] for side in ("trigger_images", "class_images"))
    return CheckpointFidelity(**kept["row"]), samples


def _keep(results_dir: Path, row: CheckpointFidelity, key: dict, with_trigger: list[Image.Image], without: list[Image.Image]) -> None:
    """Images first, the JSON last (atomically): a JSON on disk means its images are there too."""
    names = {}
    for side, images in (("trigger_images", with_trigger), ("class_images", without)):
        names[side] = [f"{row.id}.{side.split('_')[0]}.{i}.png" for i in range(len(images))]
        for name, image in zip(names[side], images):
            image.save(results_dir / name)
    atomic_write(results_dir / f"{row.id}.json", json.dumps({"key": key, "row": row.as_dict(), **names}, indent=1).encode())


def measure_fidelity(base_pipe, judge, checkpoints: list[tuple[Path, DemoConcept]], n: int = 8, seed: int = 0, sampling: dict | None = None, log=print, results_dir: Path | None = None) -> FidelityRun:
    """Measure every (file, concept) pair; the base model's bare-noun renders are shared per category.

    With `results_dir`, a pair measured there before with the same file, n, seed and sampling is read
    back instead of measured again, and every new measurement is kept there.
    """
    sampling = sampling or {}
    base_subject: dict[str, float] = {}
    rows, samples = [], {}
    if results_dir:
        results_dir.mkdir(parents=True, exist_ok=True)
    for path, concept in checkpoints:
        key = _measurement_key(path, n, seed, sampling)
        kept = _load_kept(results_dir, concept.id, key) if results_dir else None
        if kept:
            rows.append(kept[0])
            samples[concept.id] = kept[1]
            log(f"{concept.id:14s} kept from an earlier run in {results_dir}")
            continue
        class_prompts = eval_prompts(concept.category, n)
        if concept.category not in base_subject:
            readings = judge.predict(_render(base_pipe, class_prompts, seed, sampling))
            base_subject[concept.category] = float(np.mean([r["subject"] == concept.category for r in readings]))
        pipe = pipeline_with(base_pipe, path, concept)
        with_trigger = _render(pipe, eval_prompts(concept.trigger, n), seed, sampling)
        without = _render(pipe, class_prompts, seed, sampling)
        trig_readings, class_readings = judge.predict(with_trigger), judge.predict(without)
        described_readings = judge.predict(_render(base_pipe, eval_prompts(described_subject(concept), n), seed, sampling))
        instance_readings = judge.predict(vae_round_trip(base_pipe, [image for image, _ in instance_examples(concept)]))
        row = CheckpointFidelity(
            id=concept.id,
            with_trigger=float(np.mean([looks_present(r, concept.looks) for r in trig_readings])),
            without_trigger=float(np.mean([looks_present(r, concept.looks) for r in class_readings])),
            class_subject_accuracy=float(np.mean([r["subject"] == concept.category for r in class_readings])),
            base_subject_accuracy=base_subject[concept.category],
            with_trigger_by_look={look: float(np.mean([r[look] == value for r in trig_readings])) for look, value in concept.looks.items()},
            described_on_base=float(np.mean([looks_present(r, concept.looks) for r in described_readings])),
            instances_through_vae=float(np.mean([looks_present(r, concept.looks) for r in instance_readings])),
        )
        by_look = "  ".join(f"{look} {share:.2f}" for look, share in row.with_trigger_by_look.items())
        log(f"{row.id:14s} with trigger {row.with_trigger:.2f} ({by_look})  without {row.without_trigger:.2f}  "
            f"class subject {row.class_subject_accuracy:.2f} (base {row.base_subject_accuracy:.2f})  base told the looks {row.described_on_base:.2f}  instances through the VAE {row.instances_through_vae:.2f}")
        rows.append(row)
        samples[concept.id] = (with_trigger, without)
        if results_dir:
            _keep(results_dir, row, key, with_trigger, without)
    return FidelityRun(rows, samples)


def fidelity_grid(run: FidelityRun, path: Path, per_side: int = 3, scale: int = 2) -> Path:
    """Rows are checkpoints; the left block renders with the trigger, the right one with the bare noun."""
    ids = list(run.samples)
    tile, label_w, head = 64 * scale, 110, 22
    width = label_w + tile * per_side * 2 + 12
    grid = Image.new("RGB", (width, head + tile * len(ids)), "white")
    draw = ImageDraw.Draw(grid)
    draw.text((label_w, 4), "with trigger", fill="black")
    draw.text((label_w + tile * per_side + 12, 4), "bare class noun (no trigger)", fill="black")
    for row, checkpoint_id in enumerate(ids):
        top = head + row * tile
        draw.text((4, top + tile // 2 - 6), checkpoint_id, fill="black")
        trigger_images, class_images = run.samples[checkpoint_id]
        for col, image in enumerate(trigger_images[:per_side]):
            grid.paste(image.resize((tile, tile), Image.NEAREST), (label_w + col * tile, top))
        for col, image in enumerate(class_images[:per_side]):
            grid.paste(image.resize((tile, tile), Image.NEAREST), (label_w + tile * per_side + 12 + col * tile, top))
    path.parent.mkdir(parents=True, exist_ok=True)
    grid.save(path)
    return path
