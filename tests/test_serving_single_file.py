"""A base model given as ONE original-layout `.safetensors` (the file most users download), SD 1.5 and SDXL.

The tiny random pipelines are written in the original LDM layout by `single_file_layout` and loaded
back through serving's own path (`load_base_pipeline`, `ServingConfig(base_model=<file>)`). The
diffusers folder that gives the configs is saved from a pipeline of ANOTHER seed: a component that
silently came from the folder instead of the file would show up as different weights.
"""

from __future__ import annotations

import copy
import shutil

import numpy as np
import pytest
import torch
from diffusers import StableDiffusionPipeline, StableDiffusionXLPipeline
from safetensors.torch import load_file, save_file
from single_file_layout import SDXL_OPEN_CLIP_PREFIX, open_clip_to_original, to_original_state_dict, write_single_file

from personalq.random_pipelines import tiny_sd15_pipeline, tiny_sdxl_pipeline
from personalq.serving import GenerationRequest, PipelineManager, ServingConfig, ServingError
from personalq.serving.base import load_base_pipeline

FAMILIES = {"sd15": (tiny_sd15_pipeline, StableDiffusionPipeline), "sdxl": (tiny_sdxl_pipeline, StableDiffusionXLPipeline)}
COMPONENTS = ("unet", "vae", "text_encoder", "text_encoder_2")
PROMPT = "a photo of a teddy bear in the snow"

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def layout(request, tmp_path_factory):
    """(family, original pipeline, its single file, a diffusers config folder of another seed)."""
    family = request.param
    make, _ = FAMILIES[family]
    root = tmp_path_factory.mktemp(family)
    original = make(0)
    make(1).save_pretrained(root / "config")
    return family, original, write_single_file(original, root / f"{family}.safetensors"), root / "config"


def assert_same_weights(expected, actual) -> None:
    """Every UNet / VAE / text-encoder tensor: same names, loaded (not left on meta), equal."""
    for name in COMPONENTS:
        if getattr(expected, name, None) is None:
            assert getattr(actual, name, None) is None, name
            continue
        want, got = getattr(expected, name).state_dict(), getattr(actual, name).state_dict()
        assert sorted(got) == sorted(want), f"{name}: key sets differ"
        for key, tensor in want.items():
            assert got[key].device.type != "meta", f"{name}.{key} was never loaded"
            assert got[key].shape == tensor.shape and torch.equal(got[key], tensor), f"{name}.{key} differs"


def generate(pipe) -> np.ndarray:
    return pipe(PROMPT, num_inference_steps=2, generator=torch.Generator().manual_seed(3), output_type="np").images[0]


def test_single_file_base_loads_with_the_same_weights_and_image(layout):
    family, original, path, config = layout
    keys = {key: tensor.ndim for key, tensor in load_file(str(path)).items()}
    assert "model.diffusion_model.input_blocks.1.0.in_layers.0.weight" in keys
    assert keys["first_stage_model.decoder.mid.attn_1.q.weight"] == 4  # 1x1 convs, as the original VAE has them
    if family == "sdxl":
        assert "conditioner.embedders.0.transformer.text_model.final_layer_norm.weight" in keys
        assert "conditioner.embedders.1.model.transformer.resblocks.1.attn.in_proj_weight" in keys
    else:
        assert "cond_stage_model.transformer.text_model.final_layer_norm.weight" in keys
    pipe, loaded_family = load_base_pipeline(str(path), torch.float32, single_file_config=config)
    assert loaded_family == family
    assert type(pipe) is FAMILIES[family][1]
    assert_same_weights(original, pipe)
    pipe.set_progress_bar_config(disable=True)
    assert np.array_equal(generate(pipe), generate(original))


def test_serving_config_with_a_single_file_base_and_config_only_folder(layout, tmp_path):
    family, original, path, config = layout
    configs_only = shutil.copytree(config, tmp_path / "configs", ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    settings = {"device": "cpu", "dtype": "fp32"}
    manager = PipelineManager(ServingConfig(base_model=str(path), single_file_config=str(configs_only), **settings))
    assert manager.family == family
    reference = PipelineManager.from_pipeline(copy.deepcopy(original), family, ServingConfig(**settings))
    request = GenerationRequest(PROMPT, steps=2, seed=5)
    assert np.array_equal(np.asarray(manager.generate(request).image), np.asarray(reference.generate(request).image))


def test_open_clip_layout_is_what_diffusers_converter_reads():
    """SDXL's second encoder in OpenCLIP names (fused q/k/v, `text_projection` transposed), read back by
    diffusers' own converter tensor for tensor, the one `from_single_file` uses for it."""
    from diffusers.loaders.single_file_utils import convert_open_clip_checkpoint

    encoder = tiny_sdxl_pipeline(0).text_encoder_2
    checkpoint = {SDXL_OPEN_CLIP_PREFIX + key: tensor for key, tensor in open_clip_to_original(encoder.state_dict()).items()}
    assert checkpoint[SDXL_OPEN_CLIP_PREFIX + "transformer.resblocks.0.attn.in_proj_weight"].shape == (3 * 48, 48)
    converted = convert_open_clip_checkpoint(encoder, checkpoint, prefix=SDXL_OPEN_CLIP_PREFIX)
    want = encoder.state_dict()
    assert sorted(converted) == sorted(want)
    assert all(torch.equal(converted[key], tensor) for key, tensor in want.items())


def test_a_wrong_reverse_map_is_caught(tmp_path):
    """Swapping two same-shaped blocks (the mid-block resnets) loads fine yet fails the equality checks."""
    original = tiny_sd15_pipeline(0)
    tiny_sd15_pipeline(1).save_pretrained(tmp_path / "config")
    state = to_original_state_dict(original)
    swapped = {}
    for key, tensor in state.items():
        for a, b in (("middle_block.0.", "middle_block.2."), ("middle_block.2.", "middle_block.0.")):
            if key.startswith("model.diffusion_model." + a):
                key = key.replace(a, b, 1)
                break
        swapped[key] = tensor
    save_file(swapped, str(tmp_path / "swapped.safetensors"))
    pipe, _ = load_base_pipeline(str(tmp_path / "swapped.safetensors"), torch.float32, single_file_config=tmp_path / "config")
    with pytest.raises(AssertionError, match=r"unet\.mid_block\.resnets\.[01]\."):
        assert_same_weights(original, pipe)


@pytest.mark.parametrize("damage", ["truncated", "garbage", "not_sd", "garbage_ckpt"])
def test_a_broken_single_file_is_a_one_line_serving_error(layout, tmp_path, damage):
    _, _, path, config = layout
    data = path.read_bytes()
    broken = tmp_path / ("broken.ckpt" if damage == "garbage_ckpt" else "broken.safetensors")
    if damage == "truncated":
        broken.write_bytes(data[: len(data) // 2])
    elif damage == "not_sd":
        save_file({"some.other.model.weight": torch.zeros(2, 2)}, str(broken))
    else:
        broken.write_bytes(b"\x00not a checkpoint" * 64)
    with pytest.raises(ServingError) as raised:
        load_base_pipeline(str(broken), torch.float32, single_file_config=config)
    message = str(raised.value)
    assert "broken" in message and "\n" not in message and message.strip() == message
    if damage == "garbage_ckpt":  # torch's own message would advise the unsafe weights_only=False
        assert message == "broken.ckpt is not a readable PyTorch checkpoint (UnpicklingError)"
    else:
        assert message.startswith("cannot load base model")


def test_an_original_layout_dreambooth_checkpoint_replaces_the_unet_then_detaches(tmp_path):
    """Full fine-tunes are shared as original-layout single files too; serving reads them with the
    base's configs and puts their UNet and text encoder in place of the base's for one request."""
    from types import SimpleNamespace

    from personalq.eval.serve_bench import CardIndex

    tiny_sd15_pipeline(0).save_pretrained(tmp_path / "base")
    tuned = tiny_sd15_pipeline(7)
    path = write_single_file(tuned, tmp_path / "db.safetensors")
    card = SimpleNamespace(id="db", triggers=["<db-dog>"], trigger="<db-dog>", kind="dreambooth", base_model="sd15", file_path=path)

    def render(manager, checkpoint):
        result = manager.generate(GenerationRequest("a <db-dog> in the snow", checkpoint_id=checkpoint, steps=2, seed=1))
        return np.asarray(result.image, dtype=np.int16)

    without_config = PipelineManager(ServingConfig(base_model=str(tmp_path / "base")), store=CardIndex({"db": card}))
    with pytest.raises(ServingError, match="needs `single_file_config`"):
        render(without_config, "db")
    manager = PipelineManager(ServingConfig(base_model=str(tmp_path / "base"), single_file_config=tmp_path / "base"), store=CardIndex({"db": card}))
    base = render(manager, None)
    tuned_image = render(manager, "db")
    assert np.abs(tuned_image - base).max() > 0
    assert all(torch.equal(manager.pipe.unet.state_dict()[k], v) for k, v in tuned.unet.state_dict().items())
    assert all(torch.equal(manager.pipe.text_encoder.state_dict()[k], v) for k, v in tuned.text_encoder.state_dict().items())
    assert np.array_equal(render(manager, None), base)
