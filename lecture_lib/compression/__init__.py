"""Making a trained BERT smaller and faster: distillation, quantization, pruning.

Taught in: 12_compression ("Distillation from first principles", "Quantization from scratch", "Pruning").
"""
