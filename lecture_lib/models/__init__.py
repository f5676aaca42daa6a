"""The models: nn.Modules and their configs; each family converts to and from its transformers class (hf.py)."""
