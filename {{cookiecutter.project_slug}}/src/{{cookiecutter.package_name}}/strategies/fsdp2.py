"""FSDP2: Lightning's ModelParallelStrategy used for data parallelism only.

Its "auto" sizes mean tensor parallelism within a node and data parallelism across nodes.
Here every process shards the model (`fully_shard` in the model's `configure_model`), so
the data-parallel size is the world size, known only once the processes exist.
"""

from pytorch_lightning.strategies import ModelParallelStrategy


class FSDP2Strategy(ModelParallelStrategy):
    def __init__(self, **kwargs):
        super().__init__(data_parallel_size="auto", tensor_parallel_size=1, **kwargs)

    def setup_environment(self) -> None:
        self._data_parallel_size = self.num_nodes * self.num_processes  # before the device mesh is built
        super().setup_environment()
