"""Personalization: DreamBooth-LoRA training that binds a trigger token to a personal concept.

`train_lora` trains; `personalq.personalize.lora_file` writes and loads the one-file format that
serving and the store read.
"""

from personalq.lazy import lazy_exports

_EXPORTS = {
    "ModelSpec": "personalq.personalize.lora_file",
    "attach_personalized_lora": "personalq.personalize.lora_file",
    "read_trigger_embeddings": "personalq.personalize.lora_file",
    "save_personalized_lora": "personalq.personalize.lora_file",
    "LoraTrainingConfig": "personalq.personalize.train",
    "TrainedLora": "personalq.personalize.train",
    "generate_class_images": "personalq.personalize.train",
    "instance_examples_from_dir": "personalq.personalize.train",
    "train_lora": "personalq.personalize.train",
}
__all__ = list(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
