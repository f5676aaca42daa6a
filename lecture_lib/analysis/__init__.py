"""What is measured on a trained model: its predictions, its attention, what its layers encode."""
