"""What is done with a pretrained encoder for a task: the tasks and their encoding, the fine-tuning loop,
feature-based taggers, and cheap fine-tuning (frozen encoder, BitFit, adapters, prompt tuning).
"""
