"""The judge: a small CNN that reads a world image's attributes back, PersonalQ's offline CLIP score.

No CLIP weights can be downloaded here, but the world renderer knows the truth of every image it
draws, so a classifier trained on renders can tell whether a generated image shows what its
caption asked for. "Alignment" is the fraction of a caption's named attributes the judge finds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import torch
from torch import nn

from personalq.nano import JUDGE_PATH
from personalq.nano.world import VOCAB, WorldAttributes

IGNORE = -100
"""Label for an attribute the image cannot show (colour in a grey sketch): no loss, not scored."""


class JudgeNet(nn.Module):
    """Four conv stages (64 -> 4 px) and one linear head per attribute in `vocab`."""

    def __init__(self, vocab: dict[str, Sequence[str]], width: int = 48):
        super().__init__()
        self.vocab = {k: list(v) for k, v in vocab.items()}

        def stage(cin, cout):
            return nn.Sequential(
                nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.SiLU(),
                nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.SiLU(),
                nn.MaxPool2d(2),
            )

        w = width
        self.features = nn.Sequential(stage(3, w), stage(w, 2 * w), stage(2 * w, 4 * w), stage(4 * w, 4 * w))
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Dropout(0.1))
        self.heads = nn.ModuleDict({k: nn.Linear(4 * w * 4, len(v)) for k, v in self.vocab.items()})

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        h = self.pool(self.features(x))
        return {k: head(h) for k, head in self.heads.items()}


def to_tensor(images) -> torch.Tensor:
    """PIL images or a uint8 (N, H, W, 3) array -> float tensor in [-1, 1], NCHW."""
    if not isinstance(images, np.ndarray):
        images = np.stack([np.asarray(im.convert("RGB").resize((64, 64))) for im in images])
    return torch.from_numpy(images).permute(0, 3, 1, 2).float().div(127.5).sub(1.0)


def labels_for(attrs: Iterable[WorldAttributes], vocab: dict[str, Sequence[str]]) -> dict[str, torch.Tensor]:
    """Class indices per attribute, `IGNORE` where the image cannot show it."""
    attrs = list(attrs)
    out = {}
    for name, values in vocab.items():
        index = {v: i for i, v in enumerate(values)}
        out[name] = torch.tensor([index[getattr(a, name)] if name in a.visible() else IGNORE for a in attrs])
    return out


class Judge:
    """A trained `JudgeNet` with its vocabulary; load the shipped one with `Judge.load()`."""

    def __init__(self, net: JudgeNet, device: str = "cpu"):
        self.net = net.to(device).eval()
        self.device = device

    @classmethod
    def load(cls, path: str | Path = JUDGE_PATH, device: str = "cpu") -> "Judge":
        from safetensors.torch import load_file

        path = Path(path)
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"no judge at {path}: train one with `python -m personalq.nano.train`")
        config = json.loads((path / "config.json").read_text())
        net = JudgeNet(config["vocab"], config["width"])
        state = load_file(str(path / "model.safetensors"))
        net.load_state_dict({k: v.float() for k, v in state.items()})
        return cls(net, device)

    def save(self, path: str | Path, extra: dict | None = None) -> Path:
        from safetensors.torch import save_file

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        width = self.net.heads[next(iter(self.net.heads))].in_features // 16
        (path / "config.json").write_text(json.dumps({"vocab": self.net.vocab, "width": width, **(extra or {})}, indent=2))
        state = {k: v.detach().to(torch.float16).contiguous() if v.is_floating_point() else v.contiguous() for k, v in self.net.state_dict().items()}
        save_file(state, str(path / "model.safetensors"))
        return path

    @torch.no_grad()
    def logits(self, images, batch_size: int = 256) -> dict[str, torch.Tensor]:
        x = to_tensor(images)
        parts = [self.net(x[i : i + batch_size].to(self.device)) for i in range(0, len(x), batch_size)]
        return {k: torch.cat([p[k] for p in parts]).float().cpu() for k in self.net.vocab}

    def predict(self, images) -> list[dict[str, str]]:
        """Each image's most likely value of every attribute."""
        logits = self.logits(images)
        n = len(next(iter(logits.values())))
        return [{k: self.net.vocab[k][int(logits[k][i].argmax())] for k in self.net.vocab} for i in range(n)]

    def accuracy(self, images, attrs: Sequence[WorldAttributes]) -> dict[str, float]:
        """Per-attribute accuracy against the true attributes (only where the image can show them)."""
        predicted = self.predict(images)
        report = {}
        for name in self.net.vocab:
            hits = [p[name] == getattr(a, name) for p, a in zip(predicted, attrs) if name in a.visible()]
            report[name] = float(np.mean(hits)) if hits else float("nan")
        return report


def augment(x: torch.Tensor) -> torch.Tensor:
    """Blur and noise, so the judge reads generated images (softer, noisier) as well as renders."""
    n = x.shape[0]
    blurred = nn.functional.avg_pool2d(nn.functional.pad(x, (1, 1, 1, 1), mode="replicate"), 3, stride=1)
    use_blur = (torch.rand(n, 1, 1, 1, device=x.device) < 0.3).float()
    x = use_blur * blurred + (1 - use_blur) * x
    return x + torch.randn_like(x) * torch.rand(n, 1, 1, 1, device=x.device) * 0.08


def train_judge(images: np.ndarray, attrs: Sequence[WorldAttributes], steps: int, device: str,
                batch_size: int = 256, lr: float = 2e-3, log=print) -> Judge:
    """Fit a JudgeNet on rendered images (uint8 NHWC) and their true attributes."""
    net = JudgeNet(VOCAB).to(device)
    labels = {k: v.to(device) for k, v in labels_for(attrs, VOCAB).items()}
    data = torch.from_numpy(images).to(device)
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    loss_fn = nn.CrossEntropyLoss(ignore_index=IGNORE)
    net.train()
    for step in range(steps):
        idx = torch.randint(0, len(data), (batch_size,), device=device)
        x = augment(data[idx].permute(0, 3, 1, 2).float().div(127.5).sub(1.0))
        if device.startswith("cuda"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = net(x)
        else:
            out = net(x)
        loss = sum(loss_fn(out[k].float(), labels[k][idx]) for k in VOCAB)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if step % 500 == 0 or step == steps - 1:
            log(f"judge step {step} loss {loss.item():.4f}")
    return Judge(net.eval(), device)
