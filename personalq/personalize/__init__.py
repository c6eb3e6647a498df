"""Personalization: DreamBooth-LoRA training that binds a trigger token to a personal concept.

`train_lora` trains; `personalq.personalize.lora_file` writes and loads the one-file format that
serving and the store read.
"""

from personalq.personalize.lora_file import (
    ModelSpec,
    attach_personalized_lora,
    read_trigger_embeddings,
    save_personalized_lora,
)
from personalq.personalize.train import (
    LoraTrainingConfig,
    TrainedLora,
    generate_class_images,
    instance_examples_from_dir,
    train_lora,
)

__all__ = [
    "LoraTrainingConfig",
    "ModelSpec",
    "TrainedLora",
    "attach_personalized_lora",
    "generate_class_images",
    "instance_examples_from_dir",
    "read_trigger_embeddings",
    "save_personalized_lora",
    "train_lora",
]
