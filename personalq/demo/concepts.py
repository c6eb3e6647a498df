"""The 60 personal concepts of the demo repository: 20 world categories x 3 versions.

Each version is a look a user could own ("bear v1": a brown bear with a red scarf, drawn as a cartoon,
photographed at the beach and in the park). Within a category the three versions differ in colour,
accessory or pattern, style, places and date, so that Check-in has real choices to make. The looks are
drawn from a seeded generator, so the list is the same on every machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import numpy as np

from personalq.nano.world import COLORS, SUBJECTS, WorldAttributes

SEED = 20240101
VERSIONS = 3
DEMO_ACCESSORIES = ("scarf", "hat", "spots", "stripes")
DEMO_STYLES = ("realistic", "cartoon", "watercolor", "pixel art")  # sketch hides colour, the main cue
SCENES_PER_VERSION = 2
FIRST_DAY = datetime(2024, 1, 8, tzinfo=timezone.utc)
SPAN_DAYS = 2 * 365 - 14

SUBJECT_TYPES = {
    "dog": ("dog", "puppy"), "cat": ("cat", "kitten"), "person": ("person", "portrait"), "bear": ("bear", "teddy bear"),
    "horse": ("horse", "pony"), "car": ("car", "vehicle"), "toy": ("toy", "toy robot"), "watch": ("watch", "wristwatch"),
    "bag": ("bag", "handbag"), "chair": ("chair", "furniture"), "house": ("house", "home"), "building": ("building", "skyscraper"),
    "bridge": ("bridge",), "flower": ("flower", "blossom"), "tree": ("tree",), "mountain": ("mountain", "landscape"),
    "painting": ("painting", "framed painting"), "drawing": ("drawing", "doodle"), "logo": ("logo", "emblem"), "shoe": ("shoe", "sneaker"),
}

SCENE_PHRASES = {
    "beach": "on the beach", "forest": "in the forest", "snow": "in the snow", "city street": "on a city street",
    "park": "in the park", "night sky": "under the night sky", "studio": "in a studio", "desert": "in the desert",
}


@dataclass(frozen=True)
class DemoConcept:
    """One personalized checkpoint of the demo repository, before training."""

    category: str
    version: int
    color: str
    accessory: str
    style: str
    scenes: tuple[str, ...]
    size: str
    created_at: datetime

    @property
    def id(self) -> str:
        return f"{self.category}-v{self.version}"

    @property
    def trigger(self) -> str:
        return f"<{self.id}>"

    @property
    def looks(self) -> dict[str, str]:
        """The distinctive looks the trigger must bring, as the judge names them."""
        return {"color": self.color, "accessory": self.accessory}

    def instance_attributes(self, count: int) -> list[WorldAttributes]:
        return [
            WorldAttributes(subject=self.category, color=self.color, size=self.size, accessory=self.accessory, style=self.style, scene=self.scenes[i % len(self.scenes)])
            for i in range(count)
        ]

    def instance_caption(self, scene: str) -> str:
        """Style and place are named, the look is not: the trigger alone must carry colour and accessory."""
        return f"a {self.style} {self.trigger} {SCENE_PHRASES[scene]}"


def demo_concepts() -> list[DemoConcept]:
    rng = np.random.default_rng(SEED)
    concepts = []
    for category in SUBJECTS:
        colors = rng.choice(list(COLORS), size=VERSIONS, replace=False)
        accessories = rng.choice(DEMO_ACCESSORIES, size=VERSIONS, replace=False)
        styles = rng.choice(DEMO_STYLES, size=VERSIONS, replace=False)
        scenes = rng.choice(list(SCENE_PHRASES), size=VERSIONS * SCENES_PER_VERSION, replace=False)
        # Versions are dated in order, each within its own third of the two years.
        thirds = [FIRST_DAY + timedelta(days=SPAN_DAYS * v / VERSIONS) for v in range(VERSIONS)]
        for v in range(VERSIONS):
            offset = timedelta(days=int(rng.integers(0, SPAN_DAYS // VERSIONS)), hours=int(rng.integers(8, 22)))
            concepts.append(
                DemoConcept(
                    category=category,
                    version=v + 1,
                    color=str(colors[v]),
                    accessory=str(accessories[v]),
                    style=str(styles[v]),
                    scenes=tuple(str(s) for s in scenes[v * SCENES_PER_VERSION : (v + 1) * SCENES_PER_VERSION]),
                    size=str(rng.choice(["medium", "large"])),
                    created_at=thirds[v].replace(hour=0) + offset,
                )
            )
    return concepts


def concept_by_id(concept_id: str) -> DemoConcept:
    for concept in demo_concepts():
        if concept.id == concept_id:
            return concept
    raise KeyError(f"no demo concept {concept_id!r}")
