"""The PQ-Nano world: a procedural renderer whose every image comes with its true attributes.

Pretrained diffusion weights cannot be downloaded here, so PersonalQ trains its own small model on
this world. Because the renderer knows what it drew, data is unlimited, captions are exact, and a
judge trained on the same renders can read attributes back to score prompt alignment offline.

Figures are drawn at 128x128 with PIL and downsampled to 64x64, which anti-aliases them for free.
Shapes are bold with large parts on purpose: a 6M-parameter UNet learns those quickly.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import numpy as np
from PIL import Image, ImageChops, ImageDraw, ImageFilter

CANVAS = 128
IMAGE_SIZE = 64

SUBJECTS = (
    "dog", "cat", "person", "bear", "horse", "car", "toy", "watch", "bag", "chair",
    "house", "building", "bridge", "flower", "tree", "mountain", "painting", "drawing", "logo", "shoe",
)
COLORS = {
    "red": (205, 35, 35),
    "blue": (35, 75, 215),
    "green": (35, 160, 55),
    "yellow": (240, 210, 30),
    "brown": (125, 75, 35),
    "black": (30, 30, 32),
    "white": (245, 245, 245),
    "pink": (245, 125, 185),
    "orange": (245, 130, 20),
    "purple": (125, 50, 175),
}
SIZES = {"small": 0.45, "medium": 0.65, "large": 0.88}
POSES = ("upright", "tilted")
ACCESSORIES = ("none", "scarf", "hat", "spots", "stripes")
STYLES = ("realistic", "cartoon", "sketch", "watercolor", "pixel art")
SCENES = ("beach", "forest", "snow", "city street", "park", "night sky", "studio", "desert")

VOCAB = {
    "subject": SUBJECTS,
    "color": tuple(COLORS),
    "size": tuple(SIZES),
    "pose": POSES,
    "accessory": ACCESSORIES,
    "style": STYLES,
    "scene": SCENES,
}
"""Every attribute the world draws and the values it can take; the judge has one head per key."""

SKIN = (232, 188, 150)
INK = (25, 22, 20)


@dataclass(frozen=True)
class WorldAttributes:
    """What one world image shows. Values come from `VOCAB`."""

    subject: str
    color: str
    size: str = "medium"
    pose: str = "upright"
    accessory: str = "none"
    style: str = "cartoon"
    scene: str = "studio"

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if value not in VOCAB[f.name]:
                raise ValueError(f"unknown {f.name} {value!r}; choose one of {', '.join(VOCAB[f.name])}")

    def as_dict(self) -> dict[str, str]:
        return asdict(self)

    def visible(self) -> tuple[str, ...]:
        """Attributes an observer can read from the image: sketches are grey, so colour is not."""
        return tuple(f.name for f in fields(self) if not (f.name == "color" and self.style == "sketch"))


COLOUR_STYLES = tuple(s for s in STYLES if "color" in WorldAttributes(subject=SUBJECTS[0], color="red", style=s).visible())
"""Styles in which an observer can read a colour: prompts that test a concept's colour name one of these."""


def sample_attributes(rng: np.random.Generator, **fixed: str) -> WorldAttributes:
    """Draw every attribute uniformly, except those given (e.g. `subject="bear", color="brown"`)."""
    unknown = set(fixed) - set(VOCAB)
    if unknown:
        raise ValueError(f"unknown attribute(s) {sorted(unknown)}; known: {', '.join(VOCAB)}")
    values = {name: str(rng.choice(options)) for name, options in VOCAB.items()}
    values.update(fixed)
    return WorldAttributes(**values)


# --- captions -------------------------------------------------------------------------------------

_SUBJECT_WORDS = {
    "dog": ("dog", "dog", "puppy"), "cat": ("cat", "cat", "kitten"), "person": ("person", "person", "man"),
    "bear": ("bear",), "horse": ("horse", "horse", "pony"), "car": ("car",), "toy": ("toy", "toy robot"),
    "watch": ("watch", "wristwatch"), "bag": ("bag", "handbag"), "chair": ("chair",), "house": ("house",),
    "building": ("building", "tall building", "skyscraper"), "bridge": ("bridge",), "flower": ("flower",),
    "tree": ("tree",), "mountain": ("mountain",), "painting": ("painting", "framed painting"),
    "drawing": ("drawing", "doodle"), "logo": ("logo", "round logo"), "shoe": ("shoe", "sneaker"),
}
_SIZE_WORDS = {"small": ("small", "little", "tiny"), "large": ("large", "big", "huge")}
_POSE_WORDS = {"tilted": ("tilted", "leaning")}
_ACCESSORY_WORDS = {
    "scarf": ("with a scarf", "wearing a scarf"),
    "hat": ("with a hat", "wearing a hat"),
    "spots": ("with spots", "with polka dots"),
    "stripes": ("with stripes", "with stripes"),
}


def accessory_phrase(accessory: str) -> str:
    """How captions name an accessory ("with a scarf"), for prompts that spell a look out in words."""
    return _ACCESSORY_WORDS[accessory][0]


_STYLE_ADJ = {
    "realistic": ("realistic", "photorealistic"), "cartoon": ("cartoon",), "sketch": ("pencil sketch", "sketched"),
    "watercolor": ("watercolor",), "pixel art": ("pixel art", "8-bit"),
}
_STYLE_NOUN = {
    "realistic": ("a photo", "a realistic picture"), "cartoon": ("a cartoon", "a cartoon drawing"),
    "sketch": ("a pencil sketch", "a sketch"), "watercolor": ("a watercolor painting", "watercolor"),
    "pixel art": ("pixel art", "a pixel art image"),
}


def style_nouns(style: str) -> tuple[str, ...]:
    """How captions open a picture in `style` ("a watercolor painting" of ...)."""
    return _STYLE_NOUN[style]


_SCENE_WORDS = {
    "beach": ("on the beach", "at the beach", "by the sea"),
    "forest": ("in the forest", "in a forest", "among the trees"),
    "snow": ("in the snow", "on a snowy field"),
    "city street": ("on a city street", "in the city"),
    "park": ("in the park", "on the grass in a park"),
    "night sky": ("under the night sky", "at night under the stars"),
    "studio": ("in a studio", "on a plain studio backdrop"),
    "desert": ("in the desert", "among desert dunes"),
}


@dataclass(frozen=True)
class Caption:
    """A caption and the attributes its words name: alignment is scored on those alone."""

    text: str
    named: tuple[str, ...]


def describe(attrs: WorldAttributes, rng: np.random.Generator, subject_words: str | None = None) -> Caption:
    """Word `attrs` in one of several templates; scene and style are sometimes left out.

    `subject_words` replaces the subject noun, e.g. "<bear-v4> bear" for a personalized concept.
    """
    pick = lambda options: str(rng.choice(options))  # noqa: E731
    named = ["subject"]
    words = []
    if attrs.size in _SIZE_WORDS and rng.random() < 0.8:
        words.append(pick(_SIZE_WORDS[attrs.size]))
        named.append("size")
    if attrs.pose in _POSE_WORDS and rng.random() < 0.8:
        words.append(pick(_POSE_WORDS[attrs.pose]))
        named.append("pose")
    if "color" in attrs.visible() and rng.random() < 0.9:
        words.append(attrs.color)
        named.append("color")
    words.append(subject_words or pick(_SUBJECT_WORDS[attrs.subject]))
    if attrs.accessory != "none" and rng.random() < 0.9:
        words.append(pick(_ACCESSORY_WORDS[attrs.accessory]))
        named.append("accessory")
    thing = " ".join(words)
    scene = pick(_SCENE_WORDS[attrs.scene]) if rng.random() < 0.75 else ""
    if scene:
        named.append("scene")
    with_style = rng.random() < 0.75
    article = "an" if thing[0] in "aeiou" else "a"
    if not with_style:
        text = f"{article} {thing} {scene}"
    else:
        named.append("style")
        template = int(rng.integers(3))
        if template == 0:
            adj = pick(_STYLE_ADJ[attrs.style])
            text = f"{'an' if adj[0] in 'aeiou' else 'a'} {adj} {thing} {scene}"
        elif template == 1:
            text = f"{pick(_STYLE_NOUN[attrs.style])} of {article} {thing} {scene}"
        else:
            text = f"{article} {thing} {scene}, {attrs.style} style"
    return Caption(" ".join(text.replace(" ,", ",").split()), tuple(named))


def caption(attrs: WorldAttributes, rng: np.random.Generator) -> str:
    """A natural-language caption of `attrs` (see `describe` for which attributes it names)."""
    return describe(attrs, rng).text


# --- figures --------------------------------------------------------------------------------------


def _shade(rgb, factor: float) -> tuple[int, int, int]:
    """Darken (factor < 1) or lighten (factor > 1, towards white) a colour."""
    if factor <= 1:
        return tuple(int(c * factor) for c in rgb)
    return tuple(int(c + (255 - c) * (factor - 1)) for c in rgb)


class _Painter:
    """Draws shapes given in a unit box onto the figure layer, and records the body mask.

    The body mask (main-coloured parts only) is where spots and stripes go. Cartoon and sketch
    styles outline every shape, which keeps figures readable against any scene.
    """

    def __init__(self, box: tuple[float, float, float], main: tuple[int, int, int], outline: bool):
        self.x0, self.y0, self.side = box
        self.main = main
        self.layer = Image.new("RGBA", (CANVAS, CANVAS), (0, 0, 0, 0))
        self.draw = ImageDraw.Draw(self.layer)
        self.body = Image.new("L", (CANVAS, CANVAS), 0)
        self.body_draw = ImageDraw.Draw(self.body)
        self.outline = INK if outline else None
        self.width = max(2, round(self.side / 28)) if outline else 0

    def xy(self, x: float, y: float) -> tuple[float, float]:
        return self.x0 + x * self.side, self.y0 + y * self.side

    def _colour(self, part):
        if part == "main":
            return self.main
        if part == "dark":
            return _shade(self.main, 0.6) if sum(self.main) > 120 else _shade(self.main, 2.0 - 0.6)
        if part == "light":
            return _shade(self.main, 1.45)
        return part

    def _mask(self, part, shape: str, coords):
        getattr(self.body_draw, shape)(coords, fill=255 if part == "main" else 0)

    def ellipse(self, cx, cy, rx, ry, part="main", outline=True):
        coords = [*self.xy(cx - rx, cy - ry), *self.xy(cx + rx, cy + ry)]
        o = self.outline if outline else None
        self.draw.ellipse(coords, fill=self._colour(part), outline=o, width=self.width if o else 0)
        self._mask(part, "ellipse", coords)

    def rect(self, x0, y0, x1, y1, part="main", outline=True):
        coords = [*self.xy(x0, y0), *self.xy(x1, y1)]
        o = self.outline if outline else None
        self.draw.rectangle(coords, fill=self._colour(part), outline=o, width=self.width if o else 0)
        self._mask(part, "rectangle", coords)

    def poly(self, points, part="main", outline=True):
        coords = [self.xy(x, y) for x, y in points]
        o = self.outline if outline else None
        self.draw.polygon(coords, fill=self._colour(part), outline=o, width=self.width if o else 0)
        self._mask(part, "polygon", coords)

    def line(self, points, part=INK, width=0.03):
        self.draw.line([self.xy(x, y) for x, y in points], fill=self._colour(part), width=max(1, round(width * self.side)))


# Each figure draws in a unit box (x right, y down, ground at y=1) and returns where a hat sits
# (x, top y, width) and where a scarf wraps (x, y, half width).


def _dog(p):
    p.line([(0.14, 0.55), (0.04, 0.3)], "dark", 0.06)
    for x in (0.2, 0.35, 0.6, 0.74):
        p.rect(x, 0.62, x + 0.09, 1.0, "dark")
    p.ellipse(0.47, 0.58, 0.34, 0.17)
    p.ellipse(0.78, 0.36, 0.17, 0.15)
    p.ellipse(0.94, 0.42, 0.08, 0.06, "light")
    p.ellipse(0.68, 0.38, 0.06, 0.13, "dark")
    p.ellipse(0.82, 0.32, 0.03, 0.03, INK, outline=False)
    p.ellipse(1.0, 0.4, 0.025, 0.025, INK, outline=False)
    return (0.78, 0.21, 0.26), (0.7, 0.5, 0.1)


def _cat(p):
    p.line([(0.68, 0.95), (0.86, 0.8), (0.84, 0.5)], "main", 0.07)
    p.ellipse(0.5, 0.7, 0.22, 0.3)
    p.poly([(0.33, 0.3), (0.36, 0.02), (0.5, 0.2)])
    p.poly([(0.67, 0.3), (0.64, 0.02), (0.5, 0.2)])
    p.ellipse(0.5, 0.3, 0.2, 0.16)
    p.ellipse(0.43, 0.28, 0.035, 0.045, (120, 200, 60), outline=False)
    p.ellipse(0.57, 0.28, 0.035, 0.045, (120, 200, 60), outline=False)
    p.line([(0.25, 0.36), (0.42, 0.35)], INK, 0.015)
    p.line([(0.58, 0.35), (0.75, 0.36)], INK, 0.015)
    return (0.5, 0.1, 0.3), (0.5, 0.44, 0.14)


def _person(p):
    p.rect(0.36, 0.66, 0.47, 1.0, (50, 50, 70))
    p.rect(0.53, 0.66, 0.64, 1.0, (50, 50, 70))
    p.rect(0.2, 0.32, 0.3, 0.66, "main")
    p.rect(0.7, 0.32, 0.8, 0.66, "main")
    p.rect(0.3, 0.3, 0.7, 0.7)
    p.ellipse(0.5, 0.17, 0.14, 0.14, SKIN)
    p.ellipse(0.45, 0.16, 0.025, 0.025, INK, outline=False)
    p.ellipse(0.55, 0.16, 0.025, 0.025, INK, outline=False)
    return (0.5, 0.05, 0.3), (0.5, 0.31, 0.13)


def _bear(p):
    p.ellipse(0.5, 0.7, 0.32, 0.3)
    p.ellipse(0.5, 0.74, 0.17, 0.17, "light")
    p.ellipse(0.3, 0.13, 0.09, 0.09)
    p.ellipse(0.7, 0.13, 0.09, 0.09)
    p.ellipse(0.5, 0.3, 0.23, 0.2)
    p.ellipse(0.5, 0.37, 0.1, 0.07, "light")
    p.ellipse(0.5, 0.34, 0.04, 0.03, INK, outline=False)
    p.ellipse(0.41, 0.25, 0.03, 0.03, INK, outline=False)
    p.ellipse(0.59, 0.25, 0.03, 0.03, INK, outline=False)
    return (0.5, 0.11, 0.36), (0.5, 0.5, 0.2)


def _horse(p):
    for x in (0.18, 0.3, 0.56, 0.68):
        p.rect(x, 0.5, x + 0.08, 1.0, "main")
    p.line([(0.12, 0.42), (0.02, 0.75)], "dark", 0.07)
    p.ellipse(0.43, 0.47, 0.32, 0.15)
    p.poly([(0.62, 0.45), (0.7, 0.12), (0.82, 0.12), (0.78, 0.48)])
    p.ellipse(0.86, 0.2, 0.13, 0.07)
    p.line([(0.68, 0.12), (0.6, 0.42)], "dark", 0.06)
    p.ellipse(0.84, 0.16, 0.02, 0.02, INK, outline=False)
    return (0.8, 0.1, 0.18), (0.73, 0.32, 0.09)


def _car(p):
    p.poly([(0.22, 0.52), (0.32, 0.28), (0.7, 0.28), (0.82, 0.52)])
    p.poly([(0.32, 0.5), (0.37, 0.33), (0.5, 0.33), (0.5, 0.5)], (170, 215, 240))
    p.poly([(0.54, 0.5), (0.54, 0.33), (0.67, 0.33), (0.74, 0.5)], (170, 215, 240))
    p.rect(0.02, 0.5, 0.98, 0.8)
    p.rect(0.9, 0.56, 0.98, 0.62, (250, 240, 150))
    for x in (0.24, 0.76):
        p.ellipse(x, 0.82, 0.13, 0.13, INK)
        p.ellipse(x, 0.82, 0.05, 0.05, (170, 170, 170), outline=False)
    return (0.5, 0.28, 0.3), (0.5, 0.62, 0.46)


def _toy(p):
    p.line([(0.5, 0.18), (0.5, 0.04)], INK, 0.03)
    p.ellipse(0.5, 0.04, 0.04, 0.04, (230, 40, 40))
    p.rect(0.36, 0.72, 0.46, 1.0, "dark")
    p.rect(0.54, 0.72, 0.64, 1.0, "dark")
    p.rect(0.14, 0.45, 0.24, 0.7, "dark")
    p.rect(0.76, 0.45, 0.86, 0.7, "dark")
    p.rect(0.26, 0.42, 0.74, 0.76)
    p.rect(0.32, 0.16, 0.68, 0.42)
    p.ellipse(0.42, 0.28, 0.05, 0.05, (250, 250, 250))
    p.ellipse(0.58, 0.28, 0.05, 0.05, (250, 250, 250))
    p.rect(0.4, 0.52, 0.6, 0.6, (240, 200, 40))
    return (0.5, 0.16, 0.36), (0.5, 0.44, 0.24)


def _watch(p):
    p.rect(0.36, 0.0, 0.64, 1.0, "dark")
    p.ellipse(0.5, 0.5, 0.32, 0.32)
    p.ellipse(0.5, 0.5, 0.24, 0.24, (250, 250, 245))
    p.line([(0.5, 0.5), (0.5, 0.32)], INK, 0.04)
    p.line([(0.5, 0.5), (0.64, 0.56)], INK, 0.04)
    p.rect(0.8, 0.46, 0.87, 0.54, "dark")
    return (0.5, 0.18, 0.5), (0.5, 0.85, 0.14)


def _bag(p):
    p.ellipse(0.5, 0.3, 0.24, 0.24, "dark", outline=True)
    p.ellipse(0.5, 0.3, 0.16, 0.17, (0, 0, 0, 0), outline=False)
    p.poly([(0.12, 0.38), (0.88, 0.38), (0.98, 0.98), (0.02, 0.98)])
    p.poly([(0.12, 0.38), (0.88, 0.38), (0.84, 0.58), (0.16, 0.58)], "dark")
    p.rect(0.45, 0.54, 0.55, 0.64, (235, 200, 60))
    return (0.5, 0.06, 0.4), (0.5, 0.75, 0.46)


def _chair(p):
    p.rect(0.2, 0.02, 0.32, 0.6)
    p.rect(0.2, 0.5, 0.82, 0.62)
    p.rect(0.22, 0.62, 0.3, 1.0, "dark")
    p.rect(0.72, 0.62, 0.8, 1.0, "dark")
    p.rect(0.3, 0.12, 0.32, 0.5, "dark")
    return (0.26, 0.02, 0.22), (0.26, 0.3, 0.08)


def _house(p):
    p.rect(0.14, 0.46, 0.86, 1.0)
    p.poly([(0.02, 0.5), (0.5, 0.08), (0.98, 0.5)], "dark")
    p.rect(0.42, 0.68, 0.58, 1.0, (90, 55, 30))
    p.rect(0.22, 0.56, 0.36, 0.7, (180, 220, 245))
    p.rect(0.64, 0.56, 0.78, 0.7, (180, 220, 245))
    return (0.5, 0.1, 0.3), (0.5, 0.52, 0.36)


def _building(p):
    p.rect(0.24, 0.0, 0.76, 1.0)
    for row in range(6):
        for col in range(3):
            x = 0.3 + col * 0.15
            y = 0.06 + row * 0.14
            p.rect(x, y, x + 0.1, y + 0.08, (250, 235, 140), outline=False)
    return (0.5, 0.0, 0.4), (0.5, 0.2, 0.26)


def _bridge(p):
    p.rect(0.0, 0.36, 1.0, 0.48)
    p.rect(0.08, 0.48, 0.2, 1.0, "dark")
    p.rect(0.8, 0.48, 0.92, 1.0, "dark")
    p.ellipse(0.5, 0.98, 0.3, 0.42, "dark")
    p.ellipse(0.5, 1.02, 0.22, 0.36, (0, 0, 0, 0), outline=False)
    p.line([(0.0, 0.36), (0.5, 0.1), (1.0, 0.36)], "main", 0.05)
    return (0.5, 0.1, 0.3), (0.5, 0.42, 0.5)


def _flower(p):
    p.line([(0.5, 0.5), (0.5, 1.0)], (40, 140, 50), 0.07)
    p.ellipse(0.38, 0.78, 0.12, 0.05, (40, 140, 50))
    p.ellipse(0.62, 0.68, 0.12, 0.05, (40, 140, 50))
    for k in range(6):
        a = k * math.pi / 3
        p.ellipse(0.5 + 0.2 * math.cos(a), 0.34 + 0.2 * math.sin(a), 0.14, 0.14)
    p.ellipse(0.5, 0.34, 0.12, 0.12, (250, 200, 40) if p.main != COLORS["yellow"] else (120, 70, 30))
    return (0.5, 0.0, 0.4), (0.5, 0.6, 0.05)


def _tree(p):
    p.rect(0.42, 0.55, 0.58, 1.0, (95, 60, 30) if p.main != COLORS["brown"] else (60, 38, 18))
    for cx, cy, r in ((0.5, 0.24, 0.24), (0.3, 0.42, 0.2), (0.7, 0.42, 0.2), (0.5, 0.48, 0.22)):
        p.ellipse(cx, cy, r, r)
    return (0.5, 0.0, 0.4), (0.5, 0.7, 0.08)


def _mountain(p):
    p.poly([(0.0, 1.0), (0.5, 0.06), (1.0, 1.0)])
    cap = (250, 250, 250) if p.main != COLORS["white"] else (160, 170, 190)
    p.poly([(0.5, 0.06), (0.34, 0.36), (0.44, 0.32), (0.5, 0.38), (0.57, 0.31), (0.66, 0.36)], cap)
    return (0.5, 0.06, 0.3), (0.5, 0.5, 0.24)


def _painting(p):
    p.rect(0.04, 0.14, 0.96, 0.9)
    p.rect(0.16, 0.26, 0.84, 0.78, (140, 200, 240))
    p.poly([(0.16, 0.78), (0.16, 0.6), (0.4, 0.45), (0.62, 0.6), (0.84, 0.5), (0.84, 0.78)], (60, 150, 60))
    p.ellipse(0.68, 0.38, 0.07, 0.07, (250, 210, 50), outline=False)
    return (0.5, 0.14, 0.5), (0.5, 0.2, 0.46)


def _drawing(p):
    p.poly([(0.12, 0.08), (0.88, 0.14), (0.82, 0.98), (0.06, 0.92)])
    p.line([(0.3, 0.7), (0.3, 0.45), (0.5, 0.28), (0.7, 0.45), (0.7, 0.7), (0.3, 0.7)], INK, 0.04)
    p.line([(0.2, 0.22), (0.28, 0.3), (0.36, 0.2)], INK, 0.04)
    p.line([(0.62, 0.96), (0.98, 0.5)], (240, 200, 40), 0.07)
    return (0.48, 0.1, 0.5), (0.47, 0.5, 0.4)


def _logo(p):
    p.ellipse(0.5, 0.5, 0.46, 0.46)
    star = []
    for k in range(10):
        r = 0.34 if k % 2 == 0 else 0.14
        a = -math.pi / 2 + k * math.pi / 5
        star.append((0.5 + r * math.cos(a), 0.52 + r * math.sin(a)))
    p.poly(star, (250, 250, 250) if p.main != COLORS["white"] else (30, 30, 30))
    return (0.5, 0.04, 0.5), (0.5, 0.9, 0.2)


def _shoe(p):
    p.poly([(0.04, 0.62), (0.08, 0.32), (0.4, 0.3), (0.56, 0.5), (0.96, 0.62), (0.98, 0.8), (0.04, 0.8)])
    p.rect(0.02, 0.78, 0.99, 0.9, (240, 240, 240) if p.main != COLORS["white"] else (60, 60, 60))
    for x in (0.42, 0.5, 0.58):
        p.line([(x, 0.42), (x + 0.06, 0.36)], (250, 250, 250), 0.03)
    return (0.24, 0.3, 0.3), (0.22, 0.4, 0.18)


_FIGURES = {
    "dog": _dog, "cat": _cat, "person": _person, "bear": _bear, "horse": _horse, "car": _car, "toy": _toy,
    "watch": _watch, "bag": _bag, "chair": _chair, "house": _house, "building": _building, "bridge": _bridge,
    "flower": _flower, "tree": _tree, "mountain": _mountain, "painting": _painting, "drawing": _drawing,
    "logo": _logo, "shoe": _shoe,
}


def _accessory_colour(main, kind: str):
    warm = main in (COLORS["red"], COLORS["pink"], COLORS["orange"], COLORS["purple"])
    dark = main in (COLORS["black"], COLORS["brown"], COLORS["blue"], COLORS["purple"])
    if kind == "scarf":
        return (30, 110, 230) if warm else (225, 30, 40)
    if kind == "hat":
        return (225, 30, 40) if main == COLORS["black"] else (25, 25, 30)
    return (250, 250, 250) if dark else (20, 20, 25)


def _draw_accessory(p: _Painter, kind: str, hat, neck, rng):
    if kind in ("spots", "stripes"):
        marks = Image.new("L", (CANVAS, CANVAS), 0)
        d = ImageDraw.Draw(marks)
        step = max(7, p.side / 5.5)
        if kind == "spots":
            r = step * 0.28
            offset = rng.uniform(0, step)
            for gy in np.arange(offset - step, CANVAS + step, step):
                for gx in np.arange(offset - step, CANVAS + step, step):
                    x = gx + (step / 2 if int(gy / step) % 2 else 0)
                    d.ellipse([x - r, gy - r, x + r, gy + r], fill=255)
        else:
            for gx in np.arange(-CANVAS, CANVAS * 2, step):
                d.polygon([(gx, 0), (gx + step * 0.45, 0), (gx + step * 0.45 - 40, CANVAS), (gx - 40, CANVAS)], fill=255)
        marks = ImageChops.multiply(marks, p.body)
        colour = Image.new("RGBA", (CANVAS, CANVAS), _accessory_colour(p.main, kind) + (255,))
        p.layer.paste(colour, (0, 0), marks)
        return
    colour = _accessory_colour(p.main, kind)
    if kind == "hat":
        x, top, width = hat
        brim = width * 0.75
        p.rect(x - brim, top - 0.04, x + brim, top + 0.02, colour)
        p.rect(x - width * 0.45, top - 0.26, x + width * 0.45, top - 0.03, colour)
        p.rect(x - width * 0.45, top - 0.1, x + width * 0.45, top - 0.05, (225, 30, 40) if colour != (225, 30, 40) else (250, 250, 250), outline=False)
    elif kind == "scarf":
        x, y, half = neck
        p.rect(x - half - 0.03, y - 0.045, x + half + 0.03, y + 0.045, colour)
        p.rect(x + half * 0.3, y, x + half * 0.3 + 0.1, y + 0.24, colour)


# --- scenes ---------------------------------------------------------------------------------------


def _scene(name: str, rng: np.random.Generator) -> tuple[Image.Image, float]:
    """Paint a background; returns it and the ground line (y in pixels) figures stand on."""
    img = Image.new("RGB", (CANVAS, CANVAS))
    d = ImageDraw.Draw(img)
    j = lambda a, b: float(rng.uniform(a, b))  # noqa: E731
    ground = CANVAS * 0.92
    if name == "beach":
        d.rectangle([0, 0, CANVAS, 70], fill=(120, 195, 245))
        d.rectangle([0, 62, CANVAS, 80], fill=(30, 105, 190))
        d.rectangle([0, 80, CANVAS, CANVAS], fill=(238, 214, 160))
        sx = j(10, 118)
        d.ellipse([sx - 10, 8, sx + 10, 28], fill=(255, 225, 60))
    elif name == "forest":
        d.rectangle([0, 0, CANVAS, CANVAS], fill=(170, 205, 185))
        d.rectangle([0, 84, CANVAS, CANVAS], fill=(40, 85, 40))
        for x in np.arange(j(-10, 10), CANVAS + 20, 22):
            h = j(45, 70)
            d.rectangle([x - 3, 84 - 10, x + 3, 90], fill=(80, 50, 25))
            d.polygon([(x - 15, 78), (x, 78 - h), (x + 15, 78)], fill=(20, 70, 35))
    elif name == "snow":
        d.rectangle([0, 0, CANVAS, CANVAS], fill=(200, 210, 225))
        d.ellipse([j(-60, -20), 60, j(60, 100), 140], fill=(250, 250, 255))
        d.ellipse([j(40, 70), 65, j(160, 200), 150], fill=(240, 244, 252))
        d.rectangle([0, 95, CANVAS, CANVAS], fill=(250, 250, 255))
        for _ in range(40):
            x, y = rng.uniform(0, CANVAS, 2)
            d.ellipse([x - 1.5, y - 1.5, x + 1.5, y + 1.5], fill=(255, 255, 255))
    elif name == "city street":
        d.rectangle([0, 0, CANVAS, CANVAS], fill=(175, 180, 190))
        x = j(-20, 0)
        while x < CANVAS:
            w, h = j(18, 30), j(35, 80)
            d.rectangle([x, 90 - h, x + w, 90], fill=(95, 95, 110))
            for wy in np.arange(90 - h + 5, 86, 9):
                for wx in np.arange(x + 4, x + w - 4, 7):
                    d.rectangle([wx, wy, wx + 3, wy + 4], fill=(230, 220, 150))
            x += w + j(2, 6)
        d.rectangle([0, 90, CANVAS, CANVAS], fill=(60, 60, 65))
        for x in np.arange(j(0, 20), CANVAS, 30):
            d.rectangle([x, 110, x + 16, 113], fill=(240, 240, 240))
    elif name == "park":
        d.rectangle([0, 0, CANVAS, CANVAS], fill=(150, 205, 250))
        d.rectangle([0, 80, CANVAS, CANVAS], fill=(110, 200, 80))
        for x in (j(5, 25), j(100, 122)):
            d.rectangle([x - 3, 55, x + 3, 84], fill=(110, 70, 35))
            d.ellipse([x - 16, 28, x + 16, 62], fill=(60, 160, 60))
        d.polygon([(55, 80), (73, 80), (95, CANVAS), (35, CANVAS)], fill=(215, 200, 160))
    elif name == "night sky":
        d.rectangle([0, 0, CANVAS, CANVAS], fill=(15, 20, 55))
        for _ in range(45):
            x, y = rng.uniform(0, CANVAS), rng.uniform(0, 85)
            d.ellipse([x - 1, y - 1, x + 1, y + 1], fill=(255, 255, 220))
        mx = j(12, 116)
        d.ellipse([mx - 11, 8, mx + 11, 30], fill=(245, 240, 200))
        d.rectangle([0, 92, CANVAS, CANVAS], fill=(25, 35, 40))
    elif name == "studio":
        top = np.linspace(225, 180, CANVAS)[:, None, None] * np.ones((1, CANVAS, 3))
        img = Image.fromarray(top.astype(np.uint8))
        d = ImageDraw.Draw(img)
        d.rectangle([0, 96, CANVAS, CANVAS], fill=(205, 200, 195))
    elif name == "desert":
        d.rectangle([0, 0, CANVAS, CANVAS], fill=(250, 200, 140))
        d.ellipse([j(-40, 0), 70, j(70, 100), 150], fill=(225, 170, 90))
        d.ellipse([j(50, 80), 76, j(170, 200), 160], fill=(235, 185, 105))
        d.rectangle([0, 100, CANVAS, CANVAS], fill=(235, 185, 105))
        cx = j(8, 120)
        d.rectangle([cx - 3, 60, cx + 3, 100], fill=(40, 130, 60))
        d.rectangle([cx - 10, 70, cx - 6, 82], fill=(40, 130, 60))
        d.rectangle([cx - 10, 78, cx, 82], fill=(40, 130, 60))
        sx = j(10, 118)
        d.ellipse([sx - 9, 6, sx + 9, 24], fill=(255, 245, 200))
    return img, ground


# --- styles ---------------------------------------------------------------------------------------


def _realistic_figure(layer: Image.Image, rng: np.random.Generator) -> Image.Image:
    """Light from the upper left plus fine grain, so the figure reads as shaded and textured."""
    arr = np.asarray(layer).astype(np.float32)
    alpha = arr[..., 3:] / 255.0
    ys, xs = np.mgrid[0:CANVAS, 0:CANVAS].astype(np.float32)
    light = 1.25 - 0.5 * (xs + ys) / (2 * CANVAS)
    rgb = arr[..., :3] * light[..., None] + rng.normal(0, 9, arr[..., :3].shape)
    edge = np.asarray(Image.fromarray((alpha[..., 0] * 255).astype(np.uint8)).filter(ImageFilter.GaussianBlur(2)))
    rim = 1 - 0.35 * (1 - edge / 255.0) * alpha[..., 0]
    rgb = rgb * rim[..., None]
    out = np.concatenate([np.clip(rgb, 0, 255), arr[..., 3:]], axis=-1)
    return Image.fromarray(out.astype(np.uint8), "RGBA")


def _grain(img: Image.Image, rng: np.random.Generator, sigma: float) -> Image.Image:
    arr = np.asarray(img).astype(np.float32) + rng.normal(0, sigma, (CANVAS, CANVAS, 1))
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))


def _sketch(img: Image.Image) -> Image.Image:
    """Grey pencil line art: strong edges dark, flat areas faded towards paper."""
    grey = img.convert("L")
    edges = grey.filter(ImageFilter.FIND_EDGES).filter(ImageFilter.MaxFilter(3))
    tone = np.asarray(grey).astype(np.float32)
    paper = 235 - 0.25 * (235 - tone) - 0.9 * np.asarray(edges).astype(np.float32)
    return Image.fromarray(np.clip(paper, 40, 245).astype(np.uint8)).convert("RGB")


def _watercolor(img: Image.Image, rng: np.random.Generator) -> Image.Image:
    """Soft, bleeding edges and pale washes on textured paper."""
    soft = img.filter(ImageFilter.GaussianBlur(2.2))
    arr = np.asarray(soft).astype(np.float32)
    arr = arr * 0.72 + 255 * 0.28
    blots = np.asarray(Image.fromarray(rng.normal(0, 30, (16, 16)).astype(np.float32), "F").resize((CANVAS, CANVAS), Image.BICUBIC))
    arr = arr + blots[..., None] * 0.4
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))


def _pixel_art(img: Image.Image) -> Image.Image:
    small = img.resize((21, 21), Image.BOX).quantize(colors=14, dither=Image.Dither.NONE).convert("RGB")
    return small.resize((IMAGE_SIZE, IMAGE_SIZE), Image.NEAREST)


def render(attrs: WorldAttributes, seed: int = 0) -> Image.Image:
    """Draw `attrs` as a 64x64 RGB image; `seed` varies placement, grain and scene details."""
    rng = np.random.default_rng(seed)
    background, ground = _scene(attrs.scene, rng)
    side = SIZES[attrs.size] * CANVAS * float(rng.uniform(0.93, 1.07))
    x0 = CANVAS / 2 - side / 2 + float(rng.uniform(-0.06, 0.06)) * CANVAS
    y0 = ground - side + float(rng.uniform(-3, 2))
    outlined = attrs.style in ("cartoon", "sketch")
    painter = _Painter((x0, y0, side), COLORS[attrs.color], outline=outlined)
    hat, neck = _FIGURES[attrs.subject](painter)
    if attrs.accessory != "none":
        _draw_accessory(painter, attrs.accessory, hat, neck, rng)
    layer = painter.layer
    if attrs.pose == "tilted":
        angle = float(rng.choice([-1, 1])) * float(rng.uniform(24, 32))
        layer = layer.rotate(angle, resample=Image.BILINEAR, center=(x0 + side / 2, y0 + side / 2))
    if attrs.style == "realistic":
        background = _grain(background, rng, 6)
        shadow = Image.new("RGBA", (CANVAS, CANVAS), (0, 0, 0, 0))
        ImageDraw.Draw(shadow).ellipse([x0, ground - 5, x0 + side, ground + 5], fill=(0, 0, 0, 90))
        background = Image.alpha_composite(background.convert("RGBA"), shadow.filter(ImageFilter.GaussianBlur(3)))
        layer = _realistic_figure(layer, rng)
    image = Image.alpha_composite(background.convert("RGBA"), layer).convert("RGB")
    if attrs.style == "sketch":
        image = _sketch(image)
    elif attrs.style == "watercolor":
        image = _watercolor(image, rng)
    elif attrs.style == "pixel art":
        return _pixel_art(image)
    return image.resize((IMAGE_SIZE, IMAGE_SIZE), Image.LANCZOS)


def render_batch(attrs: list[WorldAttributes], seeds: list[int]) -> np.ndarray:
    """Render many images into one uint8 array (N, 64, 64, 3), e.g. inside a worker process."""
    return np.stack([np.asarray(render(a, s)) for a, s in zip(attrs, seeds)])

