"""Issue 21 items 8 and 5 (the upload half): tensors are checked against the base they name before
anything is written; the first mismatch is named in a one-line refusal. An accepted LoRA attaches.
"""

from __future__ import annotations

import numpy as np
import pytest

from personalq.store import RepoStore, StoreError
from personalq.store.errors import WeightsRefused
from personalq.store.weights import FolderShapes, base_shapes, served_bases
from tests.test_store import (
    _tensor,
    dreambooth_pq_nano,
    dreambooth_sd15,
    kohya_lora_sd15,
    modelspec_header,
    pq_nano_lora,
    snapshot,
    write_checkpoint,
)

NANO_LORA = modelspec_header("pq-nano/lora", "<cat>", "Cat")
NANO_TI = modelspec_header("pq-nano/textual-inversion", "<cat>", "Cat")
ATTN2 = "unet.down_blocks.0.attentions.0.transformer_blocks.0.attn2"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from personalq.store.embedder import default_embedder

    opened = RepoStore.open(tmp_path_factory.mktemp("weights") / "home", embedder=default_embedder())
    yield opened
    opened.close()


def with_nan(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    name = next(iter(tensors))
    broken = tensors[name].astype(np.float32)
    broken.flat[0] = np.nan
    return {**tensors, name: broken}


def nano_db_with_wrong_conv_in() -> dict[str, np.ndarray]:
    tensors = dreambooth_pq_nano()
    tensors["conv_in.weight"] = _tensor(64, 8, 3, 3)
    return tensors


REFUSED = {
    # item 8: empty or arbitrary tensors as a textual inversion
    "ti-empty": ({"emb_params": np.zeros((0, 384), np.float16)}, NANO_TI, "expected 1-75 vectors"),
    "ti-arbitrary-tensors": ({"a": _tensor(3, 3), "b": _tensor(5)}, NANO_TI, "holds 2 tensors"),
    "ti-wrong-width": ({"emb_params": _tensor(2, 768)}, NANO_TI, "is 768 wide but the base pq-nano's is 384"),
    "ti-sdxl-half": ({"clip_l": _tensor(1, 768)}, modelspec_header("stable-diffusion-xl-v1-base/textual-inversion", "<c>", "C"), "both clip_l and clip_g"),
    "ti-nan": (with_nan({"emb_params": _tensor(1, 384)}), NANO_TI, "NaN or infinite"),
    # item 8: a LoRA full of NaN (or infinity)
    "lora-nan": (with_nan(pq_nano_lora()), NANO_LORA, "'unet.down_blocks.0.attentions.0.transformer_blocks.0.attn2.to_k.lora_A.weight' holds NaN"),
    "lora-inf": ({k: np.full(v.shape, np.inf, np.float16) for k, v in pq_nano_lora().items()}, NANO_LORA, "NaN or infinite"),
    # item 5: a LoRA whose shapes do not fit the base it names
    "lora-sd15-shapes-on-pq-nano": (kohya_lora_sd15(), NANO_LORA, "maps 768 -> 320 but the base pq-nano's module maps 384 -> 64"),
    "lora-unknown-module": ({f"unet.down_blocks.9.attn.lora_A.weight": _tensor(4, 64), "unet.down_blocks.9.attn.lora_B.weight": _tensor(64, 4)}, NANO_LORA, "which the base pq-nano does not have"),
    "lora-half-pair": ({f"{ATTN2}.to_k.lora_A.weight": _tensor(4, 384)}, NANO_LORA, "without its pair"),
    "lora-rank-mismatch": ({f"{ATTN2}.to_k.lora_A.weight": _tensor(4, 384), f"{ATTN2}.to_k.lora_B.weight": _tensor(64, 8)}, NANO_LORA, "mismatched ranks"),
    "lora-text-encoder": ({"lora_te_text_model_encoder_layers_0_mlp_fc1.lora_down.weight": _tensor(4, 768),
                           "lora_te_text_model_encoder_layers_0_mlp_fc1.lora_up.weight": _tensor(3072, 4)},
                          modelspec_header("stable-diffusion-v1/lora", "<c>", "C"), "serving attaches UNet LoRAs only"),
    "lora-trigger-wrong-width": (pq_nano_lora() | {"lora_trigger_embedding.<cat>": _tensor(1, 768)}, NANO_LORA, "is 768 wide but the text encoder of the base pq-nano is 384"),
    # a DreamBooth UNet must load into the base
    "dreambooth-partial-sd15": (dreambooth_sd15(), None, "does not load into the base sd15"),
    "dreambooth-wrong-shape": (nano_db_with_wrong_conv_in(), {"modelspec.architecture": "pq-nano"}, "'conv_in.weight' is (64, 8, 3, 3) but the base pq-nano's is (64, 4, 3, 3)"),
}


@pytest.mark.parametrize("tensors,metadata,reason", list(REFUSED.values()), ids=list(REFUSED))
def test_weights_that_do_not_fit_are_refused_in_one_line_and_change_nothing(store, tmp_path, tensors, metadata, reason):
    before = snapshot(store)
    source = write_checkpoint(tmp_path / "up.safetensors", tensors, metadata)
    with pytest.raises(StoreError) as refused:
        store.add(source, meta={"subject_types": ["cat"], "description": "an upload"})
    assert isinstance(refused.value, WeightsRefused) and reason in str(refused.value), str(refused.value)
    assert "\n" not in str(refused.value)
    assert snapshot(store) == before


def test_an_accepted_pq_nano_lora_attaches_the_way_serving_attaches_it(store, tmp_path, one_torch_thread):
    from personalq.nano import load_pipeline

    card = store.add(write_checkpoint(tmp_path / "ok.safetensors", pq_nano_lora(), NANO_LORA),
                     meta={"id": "nano-ok", "subject_types": ["cat"], "description": "fits"})
    pipe = load_pipeline()
    pipe.load_lora_weights(str(card.file_path), adapter_name="nano_ok")
    assert "nano_ok" in pipe.unet.peft_config
    store.remove(card.id)


def test_base_shapes_come_from_the_shipped_folder_and_a_served_folder(tmp_path):
    nano = base_shapes("pq-nano")
    assert nano.text_widths() == {"text_encoder": 384}
    assert nano.unet_shapes()["down_blocks.0.attentions.0.transformer_blocks.0.attn2.to_k.weight"] == (64, 384)
    assert base_shapes("sd15").unet_shapes()["down_blocks.0.attentions.0.transformer_blocks.0.attn2.to_k.weight"] == (320, 768)
    assert base_shapes("sdxl").unet_shapes()["down_blocks.1.attentions.0.transformer_blocks.0.attn2.to_k.weight"] == (640, 2048)
    assert served_bases("pq-nano") == {} and served_bases(tmp_path) == {}
    from personalq.nano import NANO_PATH

    assert served_bases(NANO_PATH) == {"sd15": FolderShapes("sd15", NANO_PATH)}  # a StableDiffusionPipeline folder
