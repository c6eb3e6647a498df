"""Turn a training run's exported weights into the shipped folders: `python -m personalq.nano.assemble OUT`.

Training exports only what it learns (UNet, VAE, judge) so a run on a remote GPU sends back small
files; the frozen text encoder is cut from the installed MiniLM again here.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import typer

from personalq.diffusers_import import DIFFUSERS_IMPORT
from personalq.nano import JUDGE_PATH, NANO_PATH


def assemble(weights: Path, target: Path = NANO_PATH, judge_target: Path = JUDGE_PATH, text_encoder: Path | None = None) -> Path:
    """Write a loadable diffusers folder at `target` and copy the judge to `judge_target`.

    `text_encoder` is a folder with text_encoder/ and tokenizer/ (default: cut from MiniLM again).
    """
    with DIFFUSERS_IMPORT:
        from diffusers import AutoencoderKL, UNet2DConditionModel

    from personalq.nano.model import assemble_pipeline, build_text_encoder, load_text_encoder, save_pipeline

    for part in ("unet", "vae", "judge"):
        if not (weights / part / "config.json").exists():
            raise FileNotFoundError(f"{weights / part} is missing: pass the --out folder of a finished training run")
    encoder, tokenizer = load_text_encoder(text_encoder) if text_encoder else build_text_encoder()
    unet = UNet2DConditionModel.from_pretrained(str(weights / "unet"))
    vae = AutoencoderKL.from_pretrained(str(weights / "vae"))
    if target.exists():
        shutil.rmtree(target)
    save_pipeline(assemble_pipeline(unet, vae, encoder, tokenizer), target)
    if judge_target.exists():
        shutil.rmtree(judge_target)
    shutil.copytree(weights / "judge", judge_target)
    return target


def main(
    weights: Path = typer.Argument(..., help="The --out folder of `python -m personalq.nano.train`."),
    text_encoder: Path = typer.Option(None, help="Folder with text_encoder/ and tokenizer/ (default: from MiniLM)."),
):
    print(f"wrote {assemble(weights, text_encoder=text_encoder)} and {JUDGE_PATH}")


if __name__ == "__main__":
    typer.run(main)
