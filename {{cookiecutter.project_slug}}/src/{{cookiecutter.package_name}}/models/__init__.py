"""LightningModules (what is trained and how) and the plain nn.Modules they wrap."""
