"""Lightning callbacks of this project."""
