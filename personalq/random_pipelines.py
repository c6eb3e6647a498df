"""Random-weight Stable Diffusion pipelines in the real SD 1.5 and SDXL architectures.

No pretrained SD, CLIP or VAE weights can be downloaded here, yet the SD 1.5 / SDXL code paths of
serving, LoRA training and TAQ must run for real. Memory and latency do not depend on weight values,
and correctness tests only need *a* model of the right shape, so tests and benchmarks build these
pipelines locally: a tiny one for fast tests, or the full SD 1.5 UNet config for benchmarks.

The CLIP tokenizer is a real byte-level BPE with a small vocabulary, in CLIP's vocab/merges layout,
loaded with `CLIPTokenizer.from_pretrained(dir)`, so that triggers like `<teddybear>` split into
several sub-tokens as they do with the real CLIP vocabulary.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import torch

from personalq.config import ASSETS_DIR

TINY_CLIP_TOKENIZER_DIR = ASSETS_DIR / "tiny_clip_tokenizer"

SD15_UNET_CONFIG = dict(
    sample_size=64,
    in_channels=4,
    out_channels=4,
    down_block_types=("CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"),
    up_block_types=("UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"),
    block_out_channels=(320, 640, 1280, 1280),
    layers_per_block=2,
    cross_attention_dim=768,
    attention_head_dim=8,
)
"""The UNet config of runwayml/stable-diffusion-v1-5 (860M parameters), for random-weight benchmarks."""


def build_clip_tokenizer(directory: Path | None = None):
    """Load the tiny CLIP-format BPE tokenizer through `CLIPTokenizer.from_pretrained`.

    Its vocab/merges were trained once with HF `tokenizers` on a small word list and ship in
    `assets/tiny_clip_tokenizer`: the BPE trainer breaks ties in hash order, so training at run time
    gave a different vocabulary on every call and two "identical" pipelines disagreed.
    """
    from transformers import CLIPTokenizer

    directory = Path(directory or tempfile.mkdtemp(prefix="pq-clip-tok-"))
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("vocab.json", "merges.txt"):
        shutil.copyfile(TINY_CLIP_TOKENIZER_DIR / name, directory / name)
    return CLIPTokenizer.from_pretrained(str(directory), model_max_length=77)


def _clip_text_encoder(tokenizer, hidden: int, projection: bool, seed: int):
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    torch.manual_seed(seed)
    config = CLIPTextConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=2,
        num_attention_heads=2,
        max_position_embeddings=77,
        projection_dim=hidden,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    cls = CLIPTextModelWithProjection if projection else CLIPTextModel
    return cls(config).eval()


def _tiny_vae(seed: int):
    from diffusers import AutoencoderKL

    torch.manual_seed(seed)
    return AutoencoderKL(
        block_out_channels=(8, 16),
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
        latent_channels=4,
        norm_num_groups=4,
        sample_size=32,
    ).eval()


def tiny_sd15_pipeline(seed: int = 0, unet_config: dict | None = None):
    """A StableDiffusionPipeline with the SD 1.5 layout and tiny random weights (32x32 images)."""
    from diffusers import DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel

    tokenizer = build_clip_tokenizer()
    text_encoder = _clip_text_encoder(tokenizer, 32, projection=False, seed=seed)
    torch.manual_seed(seed)
    unet = UNet2DConditionModel(
        **(
            unet_config
            or dict(
                sample_size=16,
                block_out_channels=(32, 64),
                layers_per_block=1,
                down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
                cross_attention_dim=32,
                attention_head_dim=8,
                norm_num_groups=8,
            )
        )
    ).eval()
    pipe = StableDiffusionPipeline(
        vae=_tiny_vae(seed),
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        unet=unet,
        scheduler=DDIMScheduler(beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012, clip_sample=False, steps_offset=1),
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe


def sd15_pipeline_random(seed: int = 0):
    """SD 1.5's real UNet (random weights) inside a tiny text encoder and VAE, for UNet benchmarks."""
    config = dict(SD15_UNET_CONFIG)
    config["cross_attention_dim"] = 32  # matches the tiny text encoder; the UNet's own shapes are SD 1.5's
    return tiny_sd15_pipeline(seed, unet_config=config)


def tiny_sdxl_pipeline(seed: int = 0):
    """A StableDiffusionXLPipeline with SDXL's layout (two text encoders, added conditioning), tiny weights."""
    from diffusers import EulerDiscreteScheduler, StableDiffusionXLPipeline, UNet2DConditionModel

    tokenizer = build_clip_tokenizer()
    tokenizer_2 = build_clip_tokenizer()
    text_encoder = _clip_text_encoder(tokenizer, 32, projection=False, seed=seed)
    # Two widths, as in SDXL (768 and 1280): diffusers' single-file loader tells the encoders apart by width.
    text_encoder_2 = _clip_text_encoder(tokenizer_2, 48, projection=True, seed=seed + 1)
    torch.manual_seed(seed)
    unet = UNet2DConditionModel(
        sample_size=16,
        block_out_channels=(32, 64),
        layers_per_block=1,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=32 + 48,  # concatenation of both encoders' hidden states
        attention_head_dim=(2, 4),
        use_linear_projection=True,
        addition_embed_type="text_time",
        addition_time_embed_dim=8,
        transformer_layers_per_block=(1, 2),
        projection_class_embeddings_input_dim=48 + 6 * 8,  # pooled projection of encoder 2, six time ids
        norm_num_groups=8,
    ).eval()
    pipe = StableDiffusionXLPipeline(
        vae=_tiny_vae(seed),
        text_encoder=text_encoder,
        text_encoder_2=text_encoder_2,
        tokenizer=tokenizer,
        tokenizer_2=tokenizer_2,
        unet=unet,
        scheduler=EulerDiscreteScheduler(beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012, timestep_spacing="leading", steps_offset=1),
    )
    pipe.set_progress_bar_config(disable=True)
    return pipe
