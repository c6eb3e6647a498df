"""A checkpoint that breaks while attaching or rendering fails its own request only (issue 21 item 5).

Checkpoints are uploaded whole and valid, then their stored files are replaced behind the
store's back (as a disk error or an older, unvalidated store would leave them): one LoRA whose
up-projections are wider than the base's layers, one whose weights are all NaN, and one whose finite
weights overflow while rendering (dog-v1, rewritten in place). Each fails its render
with one line; the shared base is then exactly as it was before any checkpoint touched it (parameters,
buffers, attention processors, hooks, no adapter config); the catalog marks both broken, the app shows
it, a second try is refused without loading; and 10 renders of the other checkpoints, at every
bit-width the app offers, succeed in the same process.
"""

from __future__ import annotations

import shutil

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from test_app_service import TINY_STEPS, app_assets  # noqa: F401

pytestmark = pytest.mark.slow


def _rewrite(path, change) -> None:
    """Replace every LoRA tensor of the file by `change(key, tensor)`, keeping its header metadata."""
    with safe_open(str(path), "pt") as handle:
        metadata = handle.metadata()
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}
    tensors = {key: change(key, tensor) if "lora" in key and tensor.ndim == 2 else tensor for key, tensor in tensors.items()}
    save_file(tensors, str(path), metadata=metadata)


def _wider(key, tensor):
    return torch.randn(tensor.shape[0] + 8, tensor.shape[1]) if ("lora.up" in key or "lora_B" in key) else tensor


def _nan(key, tensor):
    return torch.full_like(tensor, float("nan"))


def _huge(key, tensor):
    return torch.full_like(tensor, 1e30) if "unet." in key else tensor  # finite, but overflows while rendering


def _base_state(pipe) -> dict:
    """What a failed checkpoint could leave on the shared base: every tensor, processor, hook and adapter."""
    state = {}
    for name in ("unet", "text_encoder"):
        module = getattr(pipe, name)
        state[name] = {k: v.detach().clone() for k, v in module.state_dict().items()}
        state[f"{name} hooks"] = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in module.modules())
        state[f"{name} peft"] = bool(getattr(module, "peft_config", None))
    state["processors"] = {k: type(v).__name__ for k, v in pipe.unet.attn_processors.items()}
    state["tokens"] = len(pipe.tokenizer)
    return state


def _assert_same(before: dict, after: dict) -> None:
    assert before.keys() == after.keys()
    for name, value in before.items():
        if isinstance(value, dict) and value and isinstance(next(iter(value.values())), torch.Tensor):
            assert value.keys() == after[name].keys(), (name, sorted(set(value) ^ set(after[name]))[:4])
            changed = [k for k in value if not torch.equal(value[k], after[name][k])]
            assert not changed, f"{name}: {len(changed)} tensors changed, e.g. {changed[:3]}"
        else:
            assert value == after[name], name


def test_a_broken_checkpoint_fails_alone_and_leaves_the_base_clean(app_assets, personalq_home, monkeypatch):  # noqa: F811
    from app import render
    from personalq.service import AppError, PersonalQService
    from personalq.service.access import AccessPolicy

    monkeypatch.setenv("PERSONALQ_BASE_MODEL", str(app_assets["base"]))
    shutil.copytree(app_assets["home"], personalq_home, dirs_exist_ok=True)
    service = PersonalQService(home=personalq_home, demo_repo=None, access=AccessPolicy())
    wide = service.upload(app_assets["cat"], {"category": "cat"})
    nan = service.upload(app_assets["horse"], {"category": "horse"})
    _rewrite(wide.file_path, _wider)
    _rewrite(nan.file_path, _nan)
    huge = service.store.get("dog-v1")
    _rewrite(huge.file_path, _huge)

    service._request_queue()  # the base model loads; nothing has touched it yet
    pipe = service._manager.pipe
    pristine = _base_state(pipe)
    widths = service.bit_widths()
    for card, setting, reason in ((wide, widths[0], r"size mismatch|shape|Error"), (nan, widths[1], "holds NaN or infinite values"),
                                  (huge, widths[0], "the image became NaN or infinite at step 1")):
        with pytest.raises(AppError, match=reason) as refusal:
            service.generate(f"a {card.trigger}", card.id, setting=setting, steps=TINY_STEPS)
        assert "\n" not in str(refusal.value) and "marked broken" in str(refusal.value)
        _assert_same(pristine, _base_state(pipe))

    broken = service.broken()
    assert set(broken) == {wide.id, nan.id, huge.id}
    assert "BROKEN" in render.caption(wide, broken[wide.id])
    assert "**Broken:**" in render.detail_markdown(nan, broken[nan.id])
    with pytest.raises(AppError, match=f"checkpoint {wide.id} is marked broken"):  # not tried again
        service.generate(f"a {wide.trigger}", wide.id, setting=widths[0], steps=TINY_STEPS)

    renders = [(checkpoint_id, setting) for setting in widths for checkpoint_id in ("bear-v1", "bear-v2")]
    assert len(renders) >= 10
    for checkpoint_id, setting in renders:
        card = service.store.get(checkpoint_id)
        drawn = service.generate(f"a {card.trigger} in the park", checkpoint_id, setting=setting, steps=TINY_STEPS, seed=1)
        assert drawn.result.setting == setting and drawn.result.checkpoint_id == checkpoint_id
        assert drawn.image.getextrema() != ((0, 0), (0, 0), (0, 0))  # not the black image of a NaN render

    # Removing a broken checkpoint drops the mark; a fixed file under the same id renders again.
    service.remove(nan.id)
    assert nan.id not in service.broken()
    service.upload(app_assets["horse"], {"category": "horse"})
    assert service.generate("a <horse-v1>", nan.id, setting=widths[0], steps=TINY_STEPS).result.checkpoint_id == nan.id
    service.close()
