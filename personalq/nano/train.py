"""Train PQ-Nano and its judge from nothing but the world renderer: `python -m personalq.nano.train`.

Stages run in order: render a dataset, fit the VAE (judged on colour: an undertrained one greys
subjects out), fit the judge, then the UNet for whatever time is left. The same script runs on CPU
and CUDA; every choice that depends on the budget lives in a preset. Each step draws its batch
from a generator seeded by (seed, step), so a run resumed from its checkpoint sees the same data it
would have seen, and a checkpoint plus half-precision weights are written every few minutes so
that a stopped run loses at most those minutes.
"""

from __future__ import annotations

import json
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch
import typer

from personalq.nano.world import WorldAttributes, describe, render_batch, sample_attributes


@dataclass
class Recipe:
    """Budget-dependent settings; `PRESETS` holds the measured ones."""

    images: int
    vae_steps: int
    vae_batch: int
    judge_steps: int
    judge_batch: int
    unet_steps: int
    unet_batch: int
    unet_lr: float
    ema_decay: float


PRESETS = {
    "gpu": Recipe(images=120_000, vae_steps=3000, vae_batch=128, judge_steps=3000, judge_batch=256,
                  unet_steps=200_000, unet_batch=512, unet_lr=6e-4, ema_decay=0.999),
    "cpu": Recipe(images=24_000, vae_steps=900, vae_batch=32, judge_steps=2500, judge_batch=64,
                  unet_steps=200_000, unet_batch=32, unet_lr=3e-4, ema_decay=0.998),
    "smoke": Recipe(images=256, vae_steps=3, vae_batch=8, judge_steps=3, judge_batch=8,
                    unet_steps=3, unet_batch=8, unet_lr=1e-4, ema_decay=0.9),
}
UNCONDITIONAL_P = 0.1
"""Share of empty captions, so classifier-free guidance has an unconditional model to push against."""


CAPTIONS_PER_IMAGE = 4


def _render_chunk(args):
    seed, chunk, count = args
    rng = np.random.default_rng([seed, chunk])
    attrs = [sample_attributes(rng) for _ in range(count)]
    captions = [[describe(a, rng).text for _ in range(CAPTIONS_PER_IMAGE)] for a in attrs]
    seeds = [seed * 100_000_000 + chunk * 100_000 + i for i in range(count)]
    return render_batch(attrs, seeds), attrs, captions


def render_dataset(n: int, seed: int, workers: int) -> tuple[np.ndarray, list[WorldAttributes], list[list[str]]]:
    """n renders with uniformly drawn attributes and several wordings each; the same for (n, seed) anywhere."""
    chunk = 1000
    jobs = [(seed, i, min(chunk, n - i * chunk)) for i in range(math.ceil(n / chunk))]
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            parts = list(pool.map(_render_chunk, jobs))
    else:
        parts = [_render_chunk(job) for job in jobs]
    return np.concatenate([p[0] for p in parts]), [a for p in parts for a in p[1]], [c for p in parts for c in p[2]]


def _to_unit(batch_uint8: torch.Tensor) -> torch.Tensor:
    return batch_uint8.permute(0, 3, 1, 2).float().div(127.5).sub(1.0)


class Trainer:
    """The stages' shared state: data, text encoder, deadline, checkpoint clock and log."""

    def __init__(self, recipe: Recipe, seed: int, device: str, minutes: float, text_encoder_dir: Path | None,
                 checkpoint_minutes: float, log_path: Path):
        from personalq.nano.model import build_text_encoder, load_text_encoder

        self.recipe, self.seed, self.device = recipe, seed, device
        self.deadline = time.time() + minutes * 60
        self.checkpoint_every = checkpoint_minutes * 60
        self.last_checkpoint = time.time()
        self.log_file = open(log_path, "a")
        self.cuda = device.startswith("cuda")
        if text_encoder_dir:
            self.text_encoder, self.tokenizer = load_text_encoder(text_encoder_dir)
        else:
            self.text_encoder, self.tokenizer = build_text_encoder()
        self.text_encoder.to(device)

    def log(self, message: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {message}"
        print(line, flush=True)
        self.log_file.write(line + "\n")
        self.log_file.flush()

    def autocast(self):
        return torch.autocast("cuda", dtype=torch.bfloat16) if self.cuda else torch.autocast("cpu", enabled=False)

    # --- data ---------------------------------------------------------------------------------------
    def data(self, workers: int):
        t = time.time()
        self.images, self.attrs, captions = render_dataset(self.recipe.images, self.seed, workers)
        self.pixels = torch.from_numpy(self.images).to(self.device)
        # Tokenized once up front: per-step captioning and tokenizing would cost as much as the UNet step.
        flat = [text for per_image in captions for text in per_image] + [""]
        tokens = self.tokenizer(flat, padding="max_length", truncation=True, max_length=self.tokenizer.model_max_length, return_tensors="pt")
        self.token_ids = tokens.input_ids.to(self.device)
        self.token_mask = tokens.attention_mask.to(self.device)
        self.log(f"rendered and captioned {len(self.images)} images in {time.time() - t:.0f}s")

    # --- VAE ----------------------------------------------------------------------------------------
    def train_vae(self, vae):
        r = self.recipe
        opt = torch.optim.AdamW(vae.parameters(), lr=1e-3, weight_decay=0.0)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-3, total_steps=r.vae_steps, pct_start=0.05)
        vae.train()
        for step in range(r.vae_steps):
            g = torch.Generator(device="cpu").manual_seed(self.seed * 1_000_003 + step)
            idx = torch.randint(0, len(self.pixels), (r.vae_batch,), generator=g).to(self.device)
            x = _to_unit(self.pixels[idx])
            with self.autocast():
                posterior = vae.encode(x).latent_dist
                recon = vae.decode(posterior.sample()).sample.float()
            err = recon - x
            # L1 keeps edges crisp; the per-image colour-mean term stops the VAE from greying subjects.
            loss = err.abs().mean() + 2.0 * err.mean(dim=(2, 3)).abs().mean() + 1e-6 * posterior.kl().mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            if step % 500 == 0 or step == r.vae_steps - 1:
                self.log(f"vae step {step} loss {loss.item():.4f} colour error {err.mean(dim=(2, 3)).abs().mean().item() * 127.5:.2f}/255")
        vae.eval()
        with torch.no_grad():
            sample = _to_unit(self.pixels[: min(2048, len(self.pixels))])
            latents = torch.cat([vae.encode(sample[i : i + 256]).latent_dist.mean for i in range(0, len(sample), 256)])
        vae.register_to_config(scaling_factor=float(1.0 / latents.float().std()))
        self.log(f"vae scaling factor {vae.config.scaling_factor:.4f}")

    # --- judge --------------------------------------------------------------------------------------
    def train_judge(self):
        from personalq.nano.judge import train_judge

        split = int(len(self.images) * 0.95)
        judge = train_judge(self.images[:split], self.attrs[:split], self.recipe.judge_steps, self.device,
                            batch_size=self.recipe.judge_batch, log=self.log)
        accuracy = judge.accuracy(self.images[split:], self.attrs[split:])
        self.log("judge held-out accuracy " + json.dumps({k: round(v, 4) for k, v in accuracy.items()}))
        return judge, accuracy

    # --- UNet ---------------------------------------------------------------------------------------
    @torch.no_grad()
    def encode_captions(self, rows: torch.Tensor) -> torch.Tensor:
        """Text states of pre-tokenized captions (row -1 is the empty caption)."""
        return self.text_encoder(self.token_ids[rows], attention_mask=self.token_mask[rows])[0]

    @torch.no_grad()
    def encode_latents(self, vae) -> torch.Tensor:
        parts = [vae.encode(_to_unit(self.pixels[i : i + 512])).latent_dist.mean for i in range(0, len(self.pixels), 512)]
        return torch.cat(parts) * vae.config.scaling_factor

    def train_unet(self, unet, ema, opt, latents: torch.Tensor, start: int, save):
        from diffusers import DDPMScheduler
        from diffusers.training_utils import compute_snr

        from personalq.nano.model import SCHEDULER_CONFIG

        r = self.recipe
        noise_scheduler = DDPMScheduler(**SCHEDULER_CONFIG)
        warmup = 500
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup))
        for _ in range(start):
            sched.step()
        unet.train()
        step = start
        t0 = time.time()
        while step < r.unet_steps and time.time() < self.deadline:
            g = torch.Generator(device="cpu").manual_seed(self.seed * 7_000_003 + step)
            idx = torch.randint(0, len(latents), (r.unet_batch,), generator=g)
            wording = torch.randint(0, CAPTIONS_PER_IMAGE, (len(idx),), generator=g)
            unconditional = torch.rand(len(idx), generator=g) < UNCONDITIONAL_P
            rows = torch.where(unconditional, torch.full_like(idx, len(self.token_ids) - 1), idx * CAPTIONS_PER_IMAGE + wording)
            x0 = latents[idx.to(self.device)]
            noise = torch.randn(x0.shape, generator=g).to(self.device)
            timesteps = torch.randint(0, noise_scheduler.config.num_train_timesteps, (len(idx),), generator=g).to(self.device)
            noisy = noise_scheduler.add_noise(x0, noise, timesteps)
            context = self.encode_captions(rows.to(self.device))
            with self.autocast():
                pred = unet(noisy, timesteps, context).sample.float()
            # Min-SNR-5 weighting: the standard fix for slow convergence on easy, low-noise steps.
            snr = compute_snr(noise_scheduler, timesteps)
            weight = torch.clamp(snr, max=5.0) / snr
            loss = (weight * ((pred - noise) ** 2).mean(dim=(1, 2, 3))).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(unet.parameters(), 1.0)
            opt.step()
            sched.step()
            ema.step(unet.parameters())
            step += 1
            if step % 500 == 0:
                rate = (step - start) / (time.time() - t0)
                self.log(f"unet step {step} loss {loss.item():.4f} ({rate:.1f} steps/s)")
            if time.time() - self.last_checkpoint > self.checkpoint_every:
                save(step)
        return step


def _device(name: str) -> str:
    if name != "auto":
        return name
    return "cuda" if torch.cuda.is_available() else "cpu"


def train(
    out: Path = typer.Option(Path("repo_store/nano-train/out"), help="Where half-precision weights, the judge and the log go."),
    work: Path = typer.Option(Path("repo_store/nano-train/work"), help="Where the full resumable checkpoint goes."),
    preset: str = typer.Option("auto", help="gpu, cpu or smoke; auto picks gpu on CUDA, else cpu."),
    minutes: float = typer.Option(150.0, help="Wall-clock budget for the whole run; the UNet stops when it is spent."),
    seed: int = typer.Option(0, help="Seeds the data, every batch and the initial weights (keep < 1000)."),
    device: str = typer.Option("auto"),
    threads: int = typer.Option(0, help="torch CPU threads (0: torch's default)."),
    workers: int = typer.Option(0, help="Processes rendering the dataset (0: all cores)."),
    text_encoder: Path = typer.Option(None, help="Folder holding text_encoder/ and tokenizer/ (default: cut from MiniLM)."),
    init_from: Path = typer.Option(None, help="An earlier run's --out: continue its UNet, reuse its VAE and judge."),
    checkpoint_minutes: float = typer.Option(3.0),
    eval_n: int = typer.Option(200, help="Held-out captions to score at the end (0: skip)."),
    images: int = typer.Option(0, help="Override the preset's dataset size (0: keep it)."),
    resume: bool = typer.Option(True, help="Continue from --work's checkpoint if there is one."),
):
    """Render the world, train VAE, judge and UNet, and export them under --out."""
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from diffusers.training_utils import EMAModel

    from personalq.nano.judge import Judge
    from personalq.nano.model import assemble_pipeline, build_unet, build_vae

    device = _device(device)
    if threads:
        torch.set_num_threads(threads)
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.benchmark = True
    recipe = PRESETS["gpu" if device.startswith("cuda") else "cpu"] if preset == "auto" else PRESETS[preset]
    if images:
        recipe = replace(recipe, images=images)
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    trainer = Trainer(recipe, seed, device, minutes, text_encoder, checkpoint_minutes, out / "train_log.txt")
    trainer.log(f"device {device}, recipe {asdict(recipe)}, seed {seed}")
    torch.manual_seed(seed)
    trainer.data(workers or os.cpu_count() or 1)

    checkpoint_path = work / "checkpoint.pt"
    checkpoint = torch.load(checkpoint_path, map_location=device, weights_only=False) if resume and checkpoint_path.exists() else None
    vae, unet = build_vae().to(device), build_unet().to(device)
    judge, judge_accuracy = None, None
    if checkpoint:
        trainer.log(f"resuming from {checkpoint_path} at UNet step {checkpoint['unet_step']}")
        vae.register_to_config(scaling_factor=checkpoint["scaling_factor"])
        vae.load_state_dict(checkpoint["vae"])
        judge = Judge.load(out / "judge", device)
        judge_accuracy = checkpoint["judge_accuracy"]
    elif init_from:
        trainer.log(f"continuing from weights in {init_from}")
        vae = AutoencoderKL.from_pretrained(str(init_from / "vae")).to(device)
        unet = UNet2DConditionModel.from_pretrained(str(init_from / "unet")).to(device)
        judge = Judge.load(init_from / "judge", device)
        judge_accuracy = json.loads((init_from / "judge" / "config.json").read_text()).get("held_out_accuracy")
    else:
        trainer.train_vae(vae)
        judge, judge_accuracy = trainer.train_judge()
    vae.requires_grad_(False).eval()
    judge.save(out / "judge", extra={"held_out_accuracy": judge_accuracy})
    vae.save_pretrained(str(out / "vae"))

    latents = trainer.encode_latents(vae)
    ema = EMAModel(unet.parameters(), decay=recipe.ema_decay, foreach=True, model_cls=UNet2DConditionModel, model_config=unet.config)
    ema.to(device)
    opt = torch.optim.AdamW(unet.parameters(), lr=recipe.unet_lr, weight_decay=0.01)
    start = 0
    if checkpoint:
        unet.load_state_dict(checkpoint["unet"])
        ema.load_state_dict(checkpoint["ema"])
        opt.load_state_dict(checkpoint["opt"])
        start = checkpoint["unet_step"]

    def export_unet() -> None:
        ema.store(unet.parameters())
        ema.copy_to(unet.parameters())
        half = UNet2DConditionModel.from_config(unet.config)
        half.load_state_dict(unet.state_dict())
        half.to(torch.float16).save_pretrained(str(out / "unet"))
        ema.restore(unet.parameters())

    def save(step: int) -> None:
        torch.save({"unet_step": step, "unet": unet.state_dict(), "ema": ema.state_dict(), "opt": opt.state_dict(),
                    "vae": vae.state_dict(), "scaling_factor": vae.config.scaling_factor,
                    "judge_accuracy": judge_accuracy}, checkpoint_path)
        export_unet()
        trainer.last_checkpoint = time.time()
        trainer.log(f"checkpoint at UNet step {step}")

    step = trainer.train_unet(unet, ema, opt, latents, start, save)
    save(step)
    if eval_n:
        from personalq.eval.alignment import alignment_scores, generate, held_out_cases

        ema.copy_to(unet.parameters())
        pipe = assemble_pipeline(unet.eval(), vae, trainer.text_encoder, trainer.tokenizer).to(device)
        cases = held_out_cases(eval_n)
        samples = generate(pipe, [c.caption.text for c in cases], batch_size=100)
        report = alignment_scores(judge, samples, cases)
        (out / "eval.json").write_text(json.dumps(report, indent=2))
        trainer.log("held-out alignment " + json.dumps({k: round(v, 4) for k, v in report.items()}))


if __name__ == "__main__":
    typer.run(train)
