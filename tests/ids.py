"""The catalog ids the issues fix exactly (shared by tests)."""

MODEL_IDS = [
    "llama-2-7b",
    "llama-2-13b",
    "llama-2-70b",
    "llama-3-8b",
    "llama-3-70b",
    "llama-3.3-70b",
    "qwen3-32b",
    "qwen3-235b-a22b",
    "phi-4",
    "gpt-oss-20b",
    "gpt-oss-120b",
    "mixtral-8x7b",
]
GPU_IDS = [
    "H100",
    "H200",
    "A100-80G",
    "A100-40G",
    "L40S",
    "L40",
    "L4",
    "A10G",
    "A40",
    "A6000",
    "RTX4090",
    "T4",
    "V100",
]
