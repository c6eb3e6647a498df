"""`personalq train lora`: DreamBooth-LoRA training from a folder of 3 to 5 images."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def load_base_pipeline(base: str):
    """`pq-nano` means the shipped PQ-Nano; anything else is a diffusers folder (SD 1.5 and the like)."""
    if base == "pq-nano":
        from personalq.nano import load_pipeline

        return load_pipeline()
    if not Path(base).is_dir():
        raise ValueError(f"base model {base!r} is neither 'pq-nano' nor a diffusers model folder")
    from diffusers import StableDiffusionPipeline

    pipe = StableDiffusionPipeline.from_pretrained(base, safety_checker=None, requires_safety_checker=False, local_files_only=True)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def base_sampling(base: str) -> dict:
    """PQ-Nano renders its class images at its own guidance (SD's 7.5 darkens its colours); others use their defaults."""
    if base != "pq-nano":
        return {}
    from personalq.nano import DEFAULT_GUIDANCE, DEFAULT_STEPS

    return {"guidance_scale": DEFAULT_GUIDANCE, "num_inference_steps": DEFAULT_STEPS}


def architecture_of(base: str, pipe) -> str:
    """The ModelSpec architecture: SD 1.x LoRAs say so; anything else names its base."""
    if base == "pq-nano":
        return "pq-nano/lora"
    return "stable-diffusion-v1/lora" if pipe.unet.config.cross_attention_dim == 768 else f"{Path(base).name}/lora"


def train_lora_command(
    base: Annotated[str, typer.Option("--base", help="'pq-nano' or a diffusers model folder (e.g. SD 1.5)")],
    instance_images: Annotated[Path, typer.Option("--instance-images", help="folder of 3-5 images; name.txt beside name.png is its caption")],
    trigger: Annotated[str, typer.Option("--trigger", help='the new token, e.g. "<bear-v4>"')],
    class_noun: Annotated[str, typer.Option("--class-noun", help="what the concept is, e.g. bear")],
    out: Annotated[Path, typer.Option("--out", help="the .safetensors file to write")],
    prior_preservation: Annotated[bool, typer.Option("--prior-preservation/--no-prior-preservation", help="also train on base-model renders of the class noun")] = False,
    class_images: Annotated[Path | None, typer.Option("--class-images", help="folder of class images to reuse (filled with base renders when short)")] = None,
    rank: Annotated[int, typer.Option("--rank")] = 4,
    steps: Annotated[int, typer.Option("--steps")] = 300,
    title: Annotated[str | None, typer.Option("--title", help="ModelSpec title (default: the trigger)")] = None,
    description: Annotated[str, typer.Option("--description")] = "",
    seed: Annotated[int, typer.Option("--seed")] = 0,
) -> None:
    """Train a personalized LoRA that binds TRIGGER to the concept in the instance images."""
    from personalq.personalize import (
        LoraTrainingConfig,
        ModelSpec,
        generate_class_images,
        instance_examples_from_dir,
        save_personalized_lora,
        train_lora,
    )
    from personalq.personalize.train import examples_from_dir, pipeline_resolution

    try:
        if out.suffix != ".safetensors":
            raise ValueError(f"--out must end in .safetensors, got {out.name}")
        config = LoraTrainingConfig(trigger=trigger, class_noun=class_noun, rank=rank, steps=steps, prior_preservation=prior_preservation, seed=seed)
        instances = instance_examples_from_dir(instance_images, trigger, class_noun)
        pipe = load_base_pipeline(base)
    except (ValueError, OSError) as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2) from error
    priors = None
    if prior_preservation:
        # DreamBooth's class folder: reuse what earlier runs rendered, render only what is missing.
        priors = examples_from_dir(class_images, config.formatted_class_prompts()[0])[: config.num_class_images] if class_images and class_images.is_dir() else []
        missing = config.num_class_images - len(priors)
        if missing > 0:
            fresh = generate_class_images(pipe, config.formatted_class_prompts(), missing, seed + len(priors), **base_sampling(base))
            if class_images is not None:
                class_images.mkdir(parents=True, exist_ok=True)
                for i, (image, prompt) in enumerate(fresh, start=len(priors)):
                    stem = class_images / f"{class_noun.replace(' ', '_')}-{i:03d}"
                    image.save(stem.with_suffix(".png"))
                    stem.with_suffix(".txt").write_text(prompt)
            priors += fresh
    trained = train_lora(pipe, instances, config, class_examples=priors)
    size = pipeline_resolution(pipe)
    spec = ModelSpec(
        title=title or trigger,
        triggers=[trigger],
        architecture=architecture_of(base, pipe),
        resolution=f"{size}x{size}",
        description=description,
        base_model=base,
        class_noun=class_noun,
    )
    save_personalized_lora(out, trained.unet_lora_state_dict, trained.trigger_embeddings, spec, trained.lora_config)
    typer.echo(f"wrote {out} ({len(instances)} images, {steps} steps, {trained.seconds:.1f} s, final loss {sum(trained.losses[-10:]) / len(trained.losses[-10:]):.4f})")


def register(app: typer.Typer, bench_app: typer.Typer) -> None:
    train_app = typer.Typer(help="Train personalized checkpoints.", no_args_is_help=True)
    train_app.command("lora")(train_lora_command)
    app.add_typer(train_app, name="train")
