"""LightningDataModules. Images are held in memory as uint8 tensors and batched by index."""
